"""The step loop and its epoch ends: early stopping, the NaN/Inf guard and skipped updates."""

import jax
import numpy as np
import pytest

import stacklstm.train.plan as plan
import stacklstm.train.trainer as trainer
from helpers import CRASH_RUN, TINY_RUN, _leaves, _metric_lines
from stacklstm.data import bundled_dataset_path, make_splits, prepare_series, read_table
from stacklstm.forecasting import load_run
from stacklstm.run import fit
from stacklstm.train import NonFiniteError
from stacklstm.train.checkpoint import RunCheckpoints
from stacklstm.train.step import StepMetrics


@pytest.fixture(scope="module")
def overflowing(tmp_path_factory):
    """The CO2 table with one training value beyond float32 (1e39): the windows holding it
    turn to Inf/NaN in the model. Unscaled (so it stays huge); same shapes as TINY_RUN."""
    frame = read_table(bundled_dataset_path())
    frame.loc[100, "co2"] = 1e39
    path = tmp_path_factory.mktemp("data") / "overflow.csv"
    frame.to_csv(path, index=False)
    cfg = TINY_RUN.replace({"data": {"scaler": "none"}})
    with np.errstate(over="ignore"):  # float32 windows of 1e39: Inf, on purpose
        splits, _ = make_splits(prepare_series(read_table(path), cfg.data), cfg.data)
    train = splits.train
    bad = ~np.isfinite(train.x).all(axis=(1, 2)) | ~np.isfinite(train.y).all(axis=(1, 2))
    # per epoch (24 steps of 64), whether each step's batch holds a bad window
    bad_steps = [
        bad[np.random.default_rng([0, epoch]).permutation(len(train))[: 24 * 64]]
        .reshape(24, 64)
        .any(axis=1)
        for epoch in range(2)
    ]
    return path, cfg, np.asarray(bad_steps)  # (epoch, step)


OVERFLOW = pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")


def _no_check(*args):
    """Stands in for the data check, which refuses the overflowing table before training:
    here it stands for any data that turns some steps non-finite."""


@OVERFLOW
def test_nonfinite_loss_stops_naming_the_steps_and_last_good_checkpoint(
    tmp_path, overflowing, monkeypatch
):
    path, cfg, bad_steps = overflowing
    monkeypatch.setattr(plan, "check_fits_float32", _no_check)  # let the Inf reach training
    first = int(np.argmax(bad_steps[0])) + 1  # the first step whose batch holds Inf
    checked = (first - 1) // 10 * 10 + 1, min((first - 1) // 10 * 10 + 10, 24)
    with pytest.raises(NonFiniteError) as info:
        fit(cfg, tmp_path / "run", data_path=path, quiet=True)
    message = str(info.value)
    assert f"became NaN/Inf at step {first} (steps {checked[0]}-{checked[1]} checked" in message
    last_good = 20 if first > 20 else 0  # TINY_RUN checkpoints every 20 steps
    assert f"the last good checkpoint is step {last_good} in" in message
    with RunCheckpoints(tmp_path / "run") as ckpts:
        assert ckpts.latest_step("latest") == last_good
        assert ckpts.latest_step("best") is None


@OVERFLOW
def test_skip_nonfinite_counts_skipped_updates_and_keeps_checkpoints_finite(
    tmp_path, overflowing, monkeypatch
):
    path, cfg, bad_steps = overflowing
    monkeypatch.setattr(plan, "check_fits_float32", _no_check)  # let the Inf reach training
    cfg = cfg.replace({"train": {"skip_nonfinite": True}})
    result = fit(cfg, tmp_path / "run", data_path=path, quiet=True)
    lines = _metric_lines(tmp_path / "run")
    assert result.step == 48 and result.skipped == int(bad_steps.sum()) > 0
    assert [r["skipped"] for r in lines if r["kind"] == "epoch"] == bad_steps.sum(1).tolist()
    assert sum(r["skipped"] for r in lines if r["kind"] == "train") == result.skipped
    # skipped steps are left out of the mean; an interval of skipped steps only has none
    assert all(r["train_loss"] < 1 for r in lines if r["train_loss"] is not None)
    assert all(r["train_loss"] is not None for r in lines if r["skipped"] == 0)
    with RunCheckpoints(tmp_path / "run") as ckpts:
        assert ckpts.latest_step("best") == result.best_step
    assert all(np.isfinite(leaf).all() for leaf in _leaves(load_run(result.out_dir).params))
    assert result.report.data["test"]["model"]["rmse"] > 0


def test_early_stopping_follows_the_validation_losses(tmp_path):
    cfg = TINY_RUN.replace(
        {"model": {"num_layers": 1}, "train": {"epochs": 8, "patience": 1, "lr": 0.05}}
    )
    result = fit(cfg, tmp_path / "run", quiet=True)
    val = [r["val_loss"] for r in _metric_lines(tmp_path / "run") if r["kind"] == "epoch"]
    best, expected_epochs = np.inf, 8
    for epoch, loss in enumerate(val, start=1):
        if loss >= best:  # patience 1: the first epoch without improvement stops the run
            expected_epochs = epoch
            break
        best = loss
    assert len(val) == result.epochs == expected_epochs
    assert result.stop_reason == ("early_stopping" if expected_epochs < 8 else "epochs")
    assert result.best_val_loss == min(val)
    assert result.best_step == 24 * (int(np.argmin(val)) + 1)


def test_nonfinite_guard_reads_the_host_once_per_log_interval(monkeypatch, tmp_path):
    """The NaN/Inf check costs no per-step sync: step results are read in blocks."""
    reads, steps = [], []
    device_get = jax.device_get

    def counting_get(tree):
        if isinstance(tree, list) and tree and all(isinstance(m, StepMetrics) for m in tree):
            reads.append(len(tree))
        return device_get(tree)

    make_train_step = trainer.make_train_step

    def counted_step(*args, **kwargs):
        step = make_train_step(*args, **kwargs)
        return lambda *a: steps.append(1) or step(*a)

    monkeypatch.setattr(jax, "device_get", counting_get)
    monkeypatch.setattr(trainer, "make_train_step", counted_step)
    fit(CRASH_RUN, tmp_path / "run", quiet=True, stop_after_steps=30)
    assert len(steps) == 30
    assert reads == [5] * 6  # log_every=5 (checkpoints every 10 fall on log steps)
