"""The run folder: config.json, Orbax checkpoints (latest and best), atomic writes."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stacklstm.data import Scaler
from stacklstm.train import LAYOUT_VERSION, RunConfig, TrainConfig
from stacklstm.train.checkpoint import Progress, RunCheckpoints
from stacklstm.train.rundir import (
    CONFIG_FILE,
    RunInfo,
    atomic_write,
    atomic_write_text,
    check_new_run_dir,
    read_run_info,
    write_run_info,
)
from stacklstm.train.step import TrainState, make_optimizer


def _state(scale=1.0):
    """A TrainState with AdamW's nested NamedTuple state, as the loop saves it."""
    params = {"lstm": {"bias": jnp.arange(4.0) * scale}, "head": {"kernel": jnp.ones((2, 3))}}
    optimizer = make_optimizer(TrainConfig(), total_steps=10)
    opt_state = optimizer.init(params)
    _, opt_state = optimizer.update(params, opt_state, params)  # non-trivial moments
    return TrainState(jnp.asarray(3, jnp.int32), params, opt_state)


def test_checkpoint_round_trip_restores_tree_rng_and_progress(tmp_path):
    state, rng = _state(), jax.random.key(42)
    progress = Progress(epoch=2, step_in_epoch=5, best_val_loss=0.125, best_step=3, bad_epochs=1)
    progress.interval.loss_sum = 0.1 + 0.2  # not a "round" float: must come back exactly
    with RunCheckpoints(tmp_path) as ckpts:
        assert ckpts.save("latest", 3, state, rng, progress)
    with RunCheckpoints(tmp_path) as ckpts:
        target = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), _state(0.0))
        restored, restored_rng, restored_progress = ckpts.restore("latest", target)
    assert jax.tree.structure(restored) == jax.tree.structure(state)  # NamedTuples included
    assert isinstance(restored, TrainState)
    for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(restored), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        assert np.asarray(a).dtype == np.asarray(b).dtype
    np.testing.assert_array_equal(jax.random.key_data(rng), jax.random.key_data(restored_rng))
    assert restored_progress == progress
    assert restored_progress.interval.loss_sum == 0.30000000000000004


def test_latest_keeps_two_steps_and_best_keeps_one(tmp_path):
    state, rng = _state(), jax.random.key(0)
    with RunCheckpoints(tmp_path) as ckpts:
        for step in (0, 10, 20):
            ckpts.save("latest", step, state, rng, Progress())
            ckpts.save("best", step, state, rng, Progress())
        assert ckpts._managers["latest"].all_steps() == [10, 20]
        assert ckpts._managers["best"].all_steps() == [20]
        assert not ckpts.save("latest", 20, _state(5.0), rng, Progress())  # already there
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["10", "20"]
    with RunCheckpoints(tmp_path) as ckpts:
        restored, _, _ = ckpts.restore("latest", _state(0.0))
    np.testing.assert_array_equal(restored.params["lstm"]["bias"], [0.0, 1.0, 2.0, 3.0])


def test_best_checkpoint_refuses_nonfinite_params(tmp_path, caplog):
    bad = _state()._replace(params={"lstm": {"bias": jnp.array([0.0, jnp.nan, 1.0, 2.0])},
                                    "head": {"kernel": jnp.ones((2, 3))}})  # fmt: skip
    with RunCheckpoints(tmp_path) as ckpts:
        assert not ckpts.save("best", 5, bad, jax.random.key(0), Progress())
        assert ckpts.latest_step("best") is None
    assert "parameters hold NaN/Inf" in caplog.text


def test_restore_errors_are_one_line_value_errors(tmp_path):
    with RunCheckpoints(tmp_path) as ckpts:
        with pytest.raises(ValueError, match="no checkpoint in"):
            ckpts.restore("latest", _state())
        ckpts.save("latest", 1, _state(), jax.random.key(0), Progress())
        wrong = {"params": {"other": jnp.zeros(3)}}
        with pytest.raises(ValueError, match="cannot restore step 1 from") as info:
            ckpts.restore("latest", wrong)
    assert "\n" not in str(info.value)


def _info():
    scaler = Scaler.fit(np.array([[1.0], [3.0]]), "standard", ("co2",), 1)
    return RunInfo(RunConfig().replace({"train": {"epochs": 3}}), None, scaler)


def test_run_info_round_trips_and_checks_the_layout_version(tmp_path):
    write_run_info(tmp_path, _info())
    raw = json.loads((tmp_path / CONFIG_FILE).read_text())
    assert raw["layout_version"] == LAYOUT_VERSION
    assert raw["config"]["train"]["epochs"] == 3 and raw["scaler"]["center"] == [2.0]
    info = read_run_info(tmp_path)
    assert info.config == _info().config and info.data_path is None
    assert info.scaler.to_dict() == _info().scaler.to_dict()
    raw["layout_version"] = LAYOUT_VERSION + 1
    (tmp_path / CONFIG_FILE).write_text(json.dumps(raw))
    with pytest.raises(ValueError, match=f"has layout version {LAYOUT_VERSION + 1} but this"):
        read_run_info(tmp_path)
    with pytest.raises(ValueError, match="run folder not found"):
        read_run_info(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"is not a run folder: it has no config\.json"):
        read_run_info(tmp_path / "empty")


def test_check_new_run_dir(tmp_path):
    check_new_run_dir(tmp_path / "a" / "b")  # absent: fine, and nothing is created
    assert not (tmp_path / "a").exists()
    check_new_run_dir(tmp_path)  # empty folder: fine
    write_run_info(tmp_path / "", _info())
    with pytest.raises(ValueError, match="already holds a run; pass `resume=True`"):
        check_new_run_dir(tmp_path)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="is a file"):
        check_new_run_dir(tmp_path / "file")
    with pytest.raises(ValueError, match=r"cannot create the run folder .*file is not writable"):
        check_new_run_dir(tmp_path / "file" / "run")  # under a file: nothing can be created


def test_atomic_write_replaces_whole_files_only(tmp_path):
    path = tmp_path / "report.json"
    atomic_write_text(path, "old")

    class Boom(Exception):
        pass

    def fail(handle):
        handle.write(b"half")
        raise Boom

    with pytest.raises(Boom):
        atomic_write(path, fail)
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]  # no temporary left over
    atomic_write_text(path, "new")
    assert path.read_text() == "new"
