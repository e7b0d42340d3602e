"""The workloads' FLOP counts, by hand."""

from __future__ import annotations

from stacklstm.bench.workloads import (
    WORKLOADS,
    forward_flops,
    gemm_flops,
    head_forward_flops,
    lstm_forward_flops,
    train_flops,
)


def test_flops_workload_m_matches_hand_count():
    # M: batch 64, time 100, features 8, hidden 256, 2 layers; 4 * hidden = 1024.
    layer0 = 2 * 64 * 100 * (8 + 256) * 1024  # 3_460_300_800
    layer1 = 2 * 64 * 100 * (256 + 256) * 1024  # 6_710_886_400
    head = 2 * 64 * (256 * 32 + 32 * 16 + 16 * 1)  # 1_116_160
    assert lstm_forward_flops(WORKLOADS["M"]) == 10_171_187_200 == layer0 + layer1
    assert head_forward_flops(WORKLOADS["M"]) == head
    assert forward_flops(WORKLOADS["M"]) == 10_172_303_360
    assert train_flops(WORKLOADS["M"]) == 30_516_910_080
    assert gemm_flops() == 2 * 2048 * 1024 * 1024
