"""Training: configs, losses, the jitted steps, sharding, and the loop (resume, NaN guard,
early stopping, report and predictions)."""

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import replace
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

from helpers import tiny_run
from stacklstm.data import (
    DataConfig,
    DataError,
    bundled_dataset_path,
    make_splits,
    prepare_series,
    read_table,
)
from stacklstm.distributed import check_batch_size, make_mesh, replicate, shard_batch
from stacklstm.train import (
    FitResult,
    ModelConfig,
    NonFiniteError,
    RunConfig,
    TrainConfig,
    evaluate_run,
    fit,
    load_config,
    load_run,
    predict,
)
from stacklstm.train.checkpoint import BEST_DIR, RunCheckpoints
from stacklstm.train.rundir import METRICS_FILE
from stacklstm.train.step import (
    Batch,
    forecast_loss,
    init_state,
    make_optimizer,
    make_schedule,
    make_train_step,
    padded_batches,
)

TINY = ModelConfig(lstm_hidden_size=8, num_lstm_layers=2, linear_layer_sizes=(8,))
# 2284 weekly rows -> windows of 6: 1592 training windows, 24 steps per epoch at batch 64.
# Dropout (between the two LSTM layers) on, so resuming must restore the RNG stream too.
TINY_RUN = tiny_run()[1]


def _leaves(tree):
    return [np.asarray(x) for x in jax.tree.leaves(tree)]


class Toy(NamedTuple):
    model: Any
    optimizer: Any
    step: Any  # the plain jitted train step, compiled once for the module
    batch: Batch

    def state(self, seed=0):
        return init_state(self.model, self.optimizer, jax.random.key(seed), self.batch.x)


TOY_CFG = TrainConfig(lr=3e-2, warmup_fraction=0.0)


@pytest.fixture(scope="module")
def toy():
    """A 2-layer model with horizon 2, its optimizer and train step, and a random batch."""
    rng = np.random.default_rng(0)
    model = TINY.build(output_size=2)
    optimizer = make_optimizer(TOY_CFG, total_steps=100)
    x = rng.normal(size=(16, 6, 1)).astype(np.float32)  # (batch, time, features)
    y = rng.normal(size=(16, 2, 1)).astype(np.float32)  # (batch, horizon, n_targets)
    batch = Batch(x, y, np.ones(16, np.float32))
    return Toy(model, optimizer, make_train_step(model, optimizer, TOY_CFG), batch)


# --------------------------------------------------------------------------- config


def test_config_round_trip_and_defaults():
    cfg = RunConfig.from_dict({"model": {"linear_layer_sizes": [4]}, "train": {"lr": 1}})
    assert cfg.model.linear_layer_sizes == (4,)
    assert cfg.train.lr == 1.0 and isinstance(cfg.train.lr, float)
    assert RunConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    assert RunConfig().model == ModelConfig(64, 2, (32, 16), False, False, 0.0)
    assert (RunConfig().train.batch_size, RunConfig().train.seed) == (32, 0)
    assert RunConfig().data.season == 52 and RunConfig().train.skip_nonfinite is False


def test_config_diff_names_fields():
    a = RunConfig()
    b = a.replace({"train": {"epochs": 7}, "data": {"window": 3}})
    assert a.diff(b) == ["data.window: 10 != 3", "train.epochs: 60 != 7"]
    assert a.diff(a) == []


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"modle": {}}, "unknown config section(s) 'modle'"),
        ({"train": {"epoch": 3}}, "unknown [train] key(s) 'epoch'; expected some of: epochs"),
        ({"model": {"hidden_size": 0}}, "lstm_hidden_size must be an integer >= 1, got 0"),
        ({"model": {"linear_layer_sizes": [3, "x"]}}, "linear_layer_sizes must hold integers >= 1"),
        ({"model": {"dropout": 1.0}}, "dropout_rate must be a number in [0.0, 1.0), got 1.0"),
        ({"train": {"lr": 0}}, "lr must be a number in (0.0, inf), got 0.0"),
        ({"train": {"loss": "l2"}}, "loss must be one of 'mse', 'mae', 'huber', got 'l2'"),
        ({"train": {"batch_size": True}}, "batch_size must be an integer >= 1, got True"),
        ({"data": {"window": 0}}, "window must be an integer >= 1, got 0"),
    ],
)
def test_config_rejects_bad_settings_in_one_line(raw, message):
    with pytest.raises(ValueError) as info:
        RunConfig.from_dict(raw)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_load_config_reads_toml_and_yaml(tmp_path):
    toml = tmp_path / "run.toml"
    toml.write_text('[data]\ntarget = ["co2"]\nwindow = 12\n[train]\nepochs = 4\n')
    yaml = tmp_path / "run.yaml"
    yaml.write_text("data:\n  window: 12\ntrain:\n  epochs: 4\n")
    expected = RunConfig().replace({"data": {"window": 12}, "train": {"epochs": 4}})
    assert load_config(toml) == expected
    assert load_config(yaml) == expected
    bad = tmp_path / "bad.toml"
    bad.write_text("[train\nepochs = 4\n")
    with pytest.raises(ValueError, match=r"cannot parse .*bad\.toml"):
        load_config(bad)
    with pytest.raises(ValueError, match="config file not found"):
        load_config(tmp_path / "missing.toml")
    (tmp_path / "run.json").write_text("{}")
    with pytest.raises(ValueError, match=r"must end in \.toml, \.yaml or \.yml"):
        load_config(tmp_path / "run.json")
    yaml.write_text("train:\n  epochs: [\n")
    with pytest.raises(ValueError, match=r"cannot parse .*run\.yaml"):
        load_config(yaml)


# --------------------------------------------------------------------------- loss, schedule


def test_forecast_loss_matches_numpy_and_refuses_broadcasting():
    rng = np.random.default_rng(0)
    y = rng.normal(size=(4, 3, 2)).astype(np.float32) * 2  # (batch, horizon, n_targets)
    pred = rng.normal(size=(4, 6)).astype(np.float32) * 2
    err = pred - y.reshape(4, 6)  # horizon-major flattening
    huber = np.where(np.abs(err) <= 1, 0.5 * err**2, np.abs(err) - 0.5)
    for kind, expected in (("mse", err**2), ("mae", np.abs(err)), ("huber", huber)):
        got = forecast_loss(kind, jnp.asarray(pred), jnp.asarray(y))
        np.testing.assert_allclose(got, expected.mean(axis=1), rtol=1e-6)
    with pytest.raises(ValueError, match=r"\(batch, horizon \* n_targets\) = \(4, 6\)"):
        forecast_loss("mse", jnp.zeros((4, 1)), jnp.asarray(y))
    with pytest.raises(ValueError, match="targets must be"):
        forecast_loss("mse", jnp.zeros((4, 1)), jnp.zeros((4,)))


def test_schedule_warms_up_then_decays_as_cosine():
    cfg = TrainConfig(lr=0.1, warmup_fraction=0.2)
    schedule = make_schedule(cfg, total_steps=50)  # 10 warm-up steps, then 40 of cosine
    for step in (0, 5, 10, 30, 50):
        warm = step <= 10
        expected = 0.1 * step / 10 if warm else 0.05 * (1 + np.cos(np.pi * (step - 10) / 40))
        assert float(schedule(step)) == pytest.approx(expected, abs=1e-7)


def test_padded_batches_pad_with_zero_weight():
    x = np.arange(5, dtype=np.float32).reshape(5, 1, 1)
    batches = list(padded_batches(x, None, 2))
    assert [n for _, n in batches] == [2, 2, 1]
    last, _ = batches[-1]
    assert last.x[:, 0, 0].tolist() == [4.0, 0.0] and last.weight.tolist() == [1.0, 0.0]


# --------------------------------------------------------------------------- steps


def test_train_step_changes_every_parameter(toy):
    state = toy.state()
    before = _leaves(state.params)
    state, metrics = toy.step(state, toy.batch, jax.random.key(1))
    after = _leaves(state.params)
    assert int(state.step) == 1 and bool(metrics.finite)
    assert len(before) == len(after) == 10  # 2 LSTM layers x 3, head dense_0 and output x 2
    for old, new in zip(before, after, strict=True):
        assert old.shape == new.shape
        assert np.all(old != new), "every entry of every parameter must move after one step"


def test_train_step_compiles_once_and_donates_the_state(toy):
    state = toy.state()
    rng = jax.random.key(1)
    old_leaf = jax.tree.leaves(state.params)[0]
    state, _ = toy.step(state, toy.batch, rng)
    assert old_leaf.is_deleted()  # donated: the buffer was reused for the new state
    losses = []
    for _ in range(3):
        state, metrics = toy.step(state, toy.batch, rng)
        losses.append(float(metrics.loss))
    assert toy.step._cache_size() == 1  # one compilation for all calls in this module
    assert losses[0] > losses[1] > losses[2]  # and the steps did change something


def test_train_step_loss_falls_on_a_sine(toy):
    t = np.arange(400)
    frame = pd.DataFrame({"v": np.sin(2 * np.pi * t / 25) + 0.5 * np.sin(2 * np.pi * t / 9)})
    cfg = DataConfig(target=("v",), time_column=None, window=6, horizon=2, normalize="none")
    splits, _ = make_splits(prepare_series(frame, cfg), cfg)
    train = splits.train  # x (n, 6, 1), y (n, 2, 1): the toy's shapes, so no new compile
    state, rng, losses = toy.state(), jax.random.key(0), []
    for i in range(100):  # the toy optimizer's whole schedule
        rows = np.random.default_rng(i).choice(len(train), 16, replace=False)
        state, metrics = toy.step(state, Batch(train.x[rows], train.y[rows], np.ones(16)), rng)
        losses.append(metrics.loss)
    losses = np.asarray(jax.device_get(losses))
    variance = float(np.mean(np.square(train.y - train.y.mean())))
    assert losses[:5].mean() > 0.5 * variance  # starts near predicting the mean
    assert losses[-10:].mean() < 0.1 * losses[:5].mean()


def test_skip_nonfinite_keeps_the_state_and_flags_the_step(toy):
    state = toy.state()
    bad = toy.batch._replace(x=np.where(np.arange(6)[None, :, None] == 3, np.nan, toy.batch.x))
    before = _leaves(state.params)
    skipping = make_train_step(toy.model, toy.optimizer, replace(TOY_CFG, skip_nonfinite=True))
    state, metrics = skipping(state, bad, jax.random.key(0))
    assert not bool(metrics.finite) and not np.isfinite(float(metrics.loss))
    assert int(state.step) == 1
    for old, new in zip(before, _leaves(state.params), strict=True):
        np.testing.assert_array_equal(old, new)
    state, metrics = toy.step(state, bad, jax.random.key(0))  # without skipping
    assert not bool(metrics.finite)
    assert not all(np.isfinite(leaf).all() for leaf in _leaves(state.params))


def test_sharded_step_on_one_device_equals_plain_step(toy):
    mesh = make_mesh(jax.devices()[:1])
    sharded = make_train_step(toy.model, toy.optimizer, TOY_CFG, mesh=mesh)
    rng = jax.random.key(3)
    plain_state, plain_metrics = toy.step(toy.state(), toy.batch, rng)
    placed = replicate(toy.state(), mesh)
    sharded_state, sharded_metrics = sharded(placed, shard_batch(mesh, toy.batch), rng)
    assert sharded_state.params["head"]["output"]["kernel"].sharding.is_fully_replicated
    assert float(plain_metrics.loss) == float(sharded_metrics.loss)
    for a, b in zip(_leaves(plain_state), _leaves(sharded_state), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_sharded_step_on_two_cpu_devices_matches_one_device(toy, tmp_path):
    """Data parallelism over two (simulated) CPU devices gives the one-device numbers."""
    state = toy.state()
    np.savez(tmp_path / "state.npz", *_leaves(state))
    expected, metrics = toy.step(state, toy.batch, jax.random.key(1))
    np.savez(tmp_path / "expected.npz", *_leaves(expected), float(metrics.loss))
    np.savez(tmp_path / "batch.npz", *toy.batch)
    script = textwrap.dedent(
        f"""
        import jax, numpy as np
        from stacklstm.distributed import check_batch_size, make_mesh, replicate, shard_batch
        from stacklstm.train import ModelConfig, TrainConfig
        from stacklstm.train.step import Batch, init_state, make_optimizer, make_train_step
        mesh = make_mesh()
        assert mesh.devices.size == 2
        load = lambda name: list(np.load(r"{tmp_path}/" + name).values())
        batch = Batch(*load("batch.npz"))
        model = ModelConfig(lstm_hidden_size=8, num_lstm_layers=2, linear_layer_sizes=(8,)).build(2)
        cfg = TrainConfig(lr=3e-2, warmup_fraction=0.0)
        opt = make_optimizer(cfg, 100)
        shapes = jax.eval_shape(lambda: init_state(model, opt, jax.random.key(0), batch.x))
        state = jax.tree.unflatten(jax.tree.structure(shapes), load("state.npz"))
        step = make_train_step(model, opt, cfg, mesh=mesh)
        new, m = step(replicate(state, mesh), shard_batch(mesh, batch), jax.random.key(1))
        assert new.params["head"]["output"]["bias"].sharding.is_fully_replicated
        assert batch.x.shape[0] == 16 and shard_batch(mesh, batch).x.sharding.spec[0] == "data"
        got = [np.asarray(a) for a in jax.tree.leaves(new)] + [float(m.loss)]
        for a, b in zip(got, load("expected.npz"), strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
        try:
            check_batch_size(3, mesh)
        except ValueError as err:
            print("ERR", err)
        """
    )
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "ERR `batch_size` (3) must be a multiple of the device count (2)" in done.stdout


def test_batch_placement_checks_divisibility():
    mesh = make_mesh()
    check_batch_size(4 * mesh.devices.size, mesh)
    x, y = shard_batch(mesh, np.zeros((2 * mesh.devices.size, 3)), np.ones(2 * mesh.devices.size))
    assert x.shape == (2 * mesh.devices.size, 3) and float(y.sum()) == 2 * mesh.devices.size


# --------------------------------------------------------------------------- fit


def _metric_lines(run_dir):
    """metrics.jsonl without the wall-clock throughput (the one field allowed to differ)."""
    lines = (run_dir / METRICS_FILE).read_text().splitlines()
    return [{k: v for k, v in json.loads(s).items() if k != "steps_per_s"} for s in lines]


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """One finished tiny run on the bundled data (2 epochs of 24 steps)."""
    out = tmp_path_factory.mktemp("fit") / "run"
    return fit(TINY_RUN, out, quiet=True)


def test_fit_writes_the_run_folder(trained_run):
    out = trained_run.out_dir
    assert isinstance(trained_run, FitResult)
    assert (trained_run.step, trained_run.epochs, trained_run.stop_reason) == (48, 2, "epochs")
    names = {"config.json", "checkpoints", BEST_DIR, METRICS_FILE, "report.json"}
    assert names | {"forecast.png", "loss.png"} <= {p.name for p in out.iterdir()}
    lines = _metric_lines(out)
    # log every 10 steps within each 24-step epoch, plus the epoch lines
    assert [(r["kind"], r["step"]) for r in lines] == [
        ("train", 10), ("train", 20), ("train", 24), ("epoch", 24),
        ("train", 34), ("train", 44), ("train", 48), ("epoch", 48),
    ]  # fmt: skip
    assert all(r["val_loss"] > 0 for r in lines if r["kind"] == "epoch")
    schedule = make_schedule(TINY_RUN.train, total_steps=48)
    assert lines[0]["lr"] == pytest.approx(float(schedule(9)))
    with RunCheckpoints(out) as ckpts:
        assert ckpts.latest_step("latest") == 48  # 0 and 20 saved before; two are kept
        assert ckpts.latest_step("best") == trained_run.best_step
    report = json.loads((out / "report.json").read_text())
    assert set(report["test"]) == {"model", "last_value", "seasonal_naive"}
    assert set(report["test"]["model"]) >= {"mae", "rmse", "mape"}
    assert report["n_test"] == 343 and report["checkpoint"]["kind"] == "best"


def test_report_baselines_match_a_hand_computation(trained_run):
    """The report's numbers against numpy on the raw series and the predictions CSV."""
    out = trained_run.out_dir
    report = json.loads((out / "report.json").read_text())
    cfg = TINY_RUN.data
    series = prepare_series(read_table(bundled_dataset_path()), cfg)
    splits, _ = make_splits(series, cfg)
    origins = splits.test.origin
    values = series.values[:, 0]
    actual, last = values[origins + 1], values[origins]
    seasonal = values[origins + 1 - 52]
    rmse = lambda a, b: float(np.sqrt(np.mean((a - b) ** 2)))  # noqa: E731
    assert report["test"]["last_value"]["rmse"] == pytest.approx(rmse(actual, last), rel=1e-12)
    assert report["test"]["seasonal_naive"]["rmse"] == pytest.approx(
        rmse(actual, seasonal), rel=1e-12
    )
    frame = predict(out)
    by_origin = frame.set_index("origin")["co2_h1"]
    model = by_origin.loc[series.times[origins]].to_numpy()
    assert report["test"]["model"]["rmse"] == pytest.approx(rmse(actual, model), rel=1e-9)
    assert report["test"]["model"]["mae"] == pytest.approx(np.mean(np.abs(actual - model)))


def test_predict_csv_reproduces_the_evaluation_forecasts(trained_run, tmp_path):
    out = trained_run.out_dir
    report = evaluate_run(out)
    csv = tmp_path / "forecasts.csv"
    frame = predict(out, output=csv)
    read = pd.read_csv(csv, parse_dates=["origin"])
    assert list(read.columns) == ["origin", "co2_h1"]
    assert len(read) == len(frame) == 2284 - 6 + 1  # every origin with a full window
    np.testing.assert_array_equal(read["co2_h1"].to_numpy(), frame["co2_h1"].to_numpy())
    series = prepare_series(read_table(bundled_dataset_path()), TINY_RUN.data)
    test_times = series.times[report.test_origin]
    rows = read.set_index("origin").loc[test_times, "co2_h1"].to_numpy()
    np.testing.assert_array_equal(rows, report.test_forecast[:, 0, 0])


def test_resume_is_bit_identical_to_an_uninterrupted_run(trained_run, tmp_path):
    whole = trained_run
    # stopped mid-epoch 2 (step 30, a checkpoint), then resumed
    stopped = fit(TINY_RUN, tmp_path / "split", quiet=True, stop_after_steps=30)
    assert (stopped.step, stopped.stop_reason, stopped.report) == (30, "stop_after_steps", None)
    resumed = fit(TINY_RUN, tmp_path / "split", quiet=True, resume=True)
    # a crash at step 45: metrics lines up to step 44 were written, the last checkpoint is 40
    crashed = fit(TINY_RUN, tmp_path / "crash", quiet=True, stop_after_steps=45)
    assert crashed.step == 45
    with RunCheckpoints(tmp_path / "crash") as ckpts:
        ckpts._managers["latest"].delete(45)  # as if killed before that save
        assert ckpts.latest_step("latest") == 40
    assert max(r["step"] for r in _metric_lines(tmp_path / "crash")) == 44
    recovered = fit(TINY_RUN, tmp_path / "crash", quiet=True, resume=True)

    expected = _leaves(load_run(whole.out_dir).params)
    for result in (resumed, recovered):
        assert result.step == whole.step == 48
        assert result.best_val_loss == whole.best_val_loss
        for a, b in zip(expected, _leaves(load_run(result.out_dir).params), strict=True):
            np.testing.assert_array_equal(a, b)
        assert _metric_lines(result.out_dir) == _metric_lines(whole.out_dir)  # no duplicates
        report = {**result.report.data, "data_path": whole.report.data["data_path"]}
        assert report == whole.report.data


def test_resume_refuses_another_config(trained_run):
    other = TINY_RUN.replace({"train": {"epochs": 3}, "model": {"lstm_hidden_size": 9}})
    with pytest.raises(ValueError, match=r"model\.lstm_hidden_size: 9 != 8; train\.epochs: 3 != 2"):
        fit(other, trained_run.out_dir, resume=True, quiet=True)
    with pytest.raises(ValueError, match="already holds a run; pass `resume=True`"):
        fit(TINY_RUN, trained_run.out_dir, quiet=True)


def test_resume_of_a_finished_run_only_rewrites_the_report(trained_run):
    before = _metric_lines(trained_run.out_dir)
    again = fit(TINY_RUN, trained_run.out_dir, resume=True, quiet=True)
    assert again.step == trained_run.step and again.stop_reason == "epochs"
    assert _metric_lines(trained_run.out_dir) == before


def test_fit_validates_before_creating_the_run_folder(tmp_path):
    short = tmp_path / "short.csv"
    frame = pd.DataFrame({"date": pd.date_range("2000-01-01", periods=8, freq="D"), "co2": 1.0})
    frame.to_csv(short, index=False)
    out = tmp_path / "run"
    with pytest.raises(DataError, match="training split has 6 of 8 rows"):
        fit(TINY_RUN, out, data_path=short, quiet=True)
    with pytest.raises(DataError, match="not found"):
        fit(TINY_RUN, out, data_path=tmp_path / "missing.csv", quiet=True)
    big_batch = TINY_RUN.replace({"train": {"batch_size": 5000}})
    with pytest.raises(DataError, match=r"`batch_size` \(5000\) is larger than the 1592"):
        fit(big_batch, out, quiet=True)
    assert not out.exists()


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


@OVERFLOW
def test_nonfinite_loss_stops_naming_the_steps_and_last_good_checkpoint(tmp_path, overflowing):
    path, cfg, bad_steps = overflowing
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
def test_skip_nonfinite_counts_skipped_updates_and_keeps_checkpoints_finite(tmp_path, overflowing):
    path, cfg, bad_steps = overflowing
    cfg = cfg.replace({"train": {"skip_nonfinite": True}})
    result = fit(cfg, tmp_path / "run", data_path=path, quiet=True)
    lines = _metric_lines(tmp_path / "run")
    assert result.step == 48 and result.skipped == int(bad_steps.sum()) > 0
    assert [r["skipped"] for r in lines if r["kind"] == "epoch"] == bad_steps.sum(1).tolist()
    assert sum(r["skipped"] for r in lines if r["kind"] == "train") == result.skipped
    assert all(r["train_loss"] < 1 for r in lines)  # skipped steps are left out of the mean
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
