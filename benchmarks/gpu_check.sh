#!/usr/bin/env bash
# The GPU checks, in one call on a machine with a CUDA GPU: the cuDNN path's self-check verdict
# first (kernels.info(): which path runs and why), then parity of the cuDNN path, then the
# side-by-side benchmark on S, M, L, G1 and G2. Runs from the source tree
# (PYTHONPATH=src, no build: the CPU kernel is not needed there) and writes each result to
# $OUT (default benchmarks/results/gpu) as soon as it has it, so a run cut short keeps what
# it measured. About 4 minutes on an H200 before the self-check tests; allow 6.
#
#   bash benchmarks/gpu_check.sh            # or: OUT=/tmp/gpu bash benchmarks/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-benchmarks/results/gpu}
mkdir -p "$OUT"
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH}
export XLA_PYTHON_CLIENT_PREALLOCATE=false  # the workers share one GPU
log() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$OUT/progress.log"; }

log "the cuDNN path's self-check (kernels.info())"
timeout 120 python - > "$OUT/self_check.txt" 2>&1 <<'PY'
from stacklstm import kernels
info = kernels.info()  # runs the self-check on a CUDA GPU
print("path:", info.path)
print("reason:", info.reason)
print("kernel info:", info)
PY
log "self-check exit code $? ($(head -n 1 "$OUT/self_check.txt"))"
cat "$OUT/self_check.txt"

log "devices and versions"
python - > "$OUT/devices.txt" 2>&1 <<'PY'
import jax
print("jax", jax.__version__, jax.devices())
try:
    import torch
except ImportError as e:
    print("torch not importable:", e)
else:
    print("torch", torch.__version__, torch.cuda.is_available() and torch.cuda.get_device_name(0))
PY
cat "$OUT/devices.txt"

log "parity: the cuDNN path against the portable path, forward and gradients"
timeout 300 python -m pytest -q -p no:cacheprovider tests/kernels/test_cudnn.py tests/kernels/test_cudnn_gpu.py \
    > "$OUT/parity.txt" 2>&1
log "parity exit code $? ($(tail -n 1 "$OUT/parity.txt"))"

# One harness run per workload, so each table lands in $OUT as soon as it is measured.
PEERS=stacklstm,jax_rnn_cudnn,torch,flax_rnn,flax_scan_seed
for workload in S M L G1 G2; do
    log "benchmark $workload"
    timeout 120 python benchmarks/run.py --workloads "$workload" --peers "$PEERS" \
        --repeats 3 --iters 5 --out "$OUT/$workload" > "$OUT/bench-$workload.txt" 2>&1
    log "benchmark $workload exit code $?"
done
log "done"
