"""Orbax checkpoints (latest and best): round trips, retention, and damaged checkpoints."""

import shutil
import tempfile
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import ORBAX_ABANDONS_READS, PROPERTY, _truncate
from stacklstm.train import TrainConfig
from stacklstm.train.checkpoint import RunCheckpoints
from stacklstm.train.progress import Meter, Progress
from stacklstm.train.step import TrainState, make_optimizer


@pytest.fixture(scope="module")
def big_checkpoints(tmp_path_factory):
    """Checkpoints at steps 10 and 20 of a state with arrays large enough to be stored in
    data files of their own (small ones are inlined in Orbax's index)."""
    folder = tmp_path_factory.mktemp("ckpts")
    rng = np.random.default_rng(0)
    states = {}
    for step in (10, 20):
        params = {
            "w": jnp.asarray(rng.normal(size=(64, 256)), jnp.float32),
            "b": jnp.asarray(rng.normal(size=(256,)), jnp.float32),
        }
        states[step] = (
            TrainState(jnp.asarray(step, jnp.int32), params, {"m": params["b"] * 2}),
            Progress(epoch=step, interval=Meter(loss_sum=0.1 + step)),
        )
        with RunCheckpoints(folder) as ckpts:
            ckpts.save("latest", step, states[step][0], jax.random.key(step), states[step][1])
    return folder, states


def _copy(folder, base):
    copy = Path(tempfile.mkdtemp(dir=base)) / "run"
    shutil.copytree(folder, copy)
    return copy


def _assert_restored(restored, expected):
    state, _, progress = restored
    assert progress == expected[1]
    for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(expected[0]), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@ORBAX_ABANDONS_READS
@PROPERTY
@given(data=st.data())
def test_a_damaged_checkpoint_is_reported_never_read_as_other_numbers(
    big_checkpoints, tmp_path_factory, data
):
    """Flip a byte or cut short any file of the newest checkpoint: it restores exactly what was
    saved or fails with a ValueError naming the step, and the fallback takes the older one."""
    folder, states = big_checkpoints
    run = _copy(folder, tmp_path_factory.getbasetemp())
    files = sorted(p for p in (run / "checkpoints" / "20").rglob("*") if p.is_file())
    path = data.draw(st.sampled_from(files), label="file")
    content = bytearray(path.read_bytes())
    if data.draw(st.booleans(), label="truncate") or not content:
        path.write_bytes(content[: data.draw(st.integers(0, max(len(content) - 1, 0)))])
    else:
        at = data.draw(st.integers(0, len(content) - 1), label="offset")
        content[at] ^= data.draw(st.integers(1, 255), label="xor")
        path.write_bytes(bytes(content))
    target = states[20][0]
    with RunCheckpoints(run) as ckpts:
        try:
            restored = ckpts.restore("latest", target, 20)
        except ValueError as err:
            assert str(err).startswith(f"cannot restore step 20 from {run / 'checkpoints'}")
            _assert_restored(ckpts.restore_intact("latest", target), states[10])
            assert ckpts._managers["latest"].all_steps() == [10]  # the damaged one is gone
        else:
            _assert_restored(restored, states[20])


@ORBAX_ABANDONS_READS
@pytest.mark.parametrize("damage", ["truncate", "garble"])
def test_unreadable_newest_checkpoint_is_named_and_the_previous_one_used(
    big_checkpoints, tmp_path, caplog, damage
):
    folder, states = big_checkpoints
    run = _copy(folder, tmp_path)
    biggest = max((run / "checkpoints" / "20").rglob("*"), key=lambda p: p.stat().st_size)
    if damage == "truncate":
        _truncate(biggest)
    else:  # random floats compress to nothing: flipped bytes still decode, to other numbers
        content = bytearray(biggest.read_bytes())
        content[len(content) // 2] ^= 0xFF
        biggest.write_bytes(bytes(content))
    with RunCheckpoints(run) as ckpts:
        with pytest.raises(ValueError, match=f"cannot restore step 20 from {run}") as info:
            ckpts.restore("latest", states[20][0])
        if damage == "garble":
            assert "differ from the checksum written with them" in str(info.value)
        _assert_restored(ckpts.restore_intact("latest", states[20][0]), states[10])
    assert "using step 10, the newest intact checkpoint, and deleting step 20" in caplog.text
    for path in (run / "checkpoints" / "10").rglob("*"):  # now the only one: damage it too
        if path.is_file() and path.stat().st_size > 1000:
            _truncate(path)
    with RunCheckpoints(run) as ckpts, pytest.raises(ValueError) as info:
        ckpts.restore_intact("latest", states[20][0])
    assert str(info.value).startswith(f"no checkpoint in {run / 'checkpoints'} is readable: ")
    assert "cannot restore step 10" in str(info.value)


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
    bad = _state()._replace(
        params={
            "lstm": {"bias": jnp.array([0.0, jnp.nan, 1.0, 2.0])},
            "head": {"kernel": jnp.ones((2, 3))},
        }
    )
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


def _filled(value):
    """A tiny training state: three entries equal to ``value``."""
    return {"w": jnp.full(3, float(value))}


@pytest.fixture
def writer_and_reader(tmp_path):
    """A writer and a reader of one run folder, steps 1 and 2 in ``latest``:
    ``(reader, save)``, ``save(step)`` writing ``_filled(step)`` as ``step``."""
    key = jax.random.key(0)
    with RunCheckpoints(tmp_path) as writer, RunCheckpoints(tmp_path, read_only=True) as reader:

        def save(step):
            writer.save("latest", step, _filled(step), key, Progress(epoch=step))

        for step in (1, 2):
            save(step)
        yield reader, save


@ORBAX_ABANDONS_READS
def test_a_reader_follows_a_checkpoint_replaced_while_it_reads(
    tmp_path, monkeypatch, writer_and_reader
):
    reader, save = writer_and_reader
    restore, raced = reader.restore, []

    def racing(which, target, step=None):  # the writer moves on between list and read
        if not raced:
            raced.append(step)
            for newer in (3, 4):  # keeps two: deletes the steps the reader listed
                save(newer)
        return restore(which, target, step)

    monkeypatch.setattr(reader, "restore", racing)
    (tmp_path / "checkpoints" / "5.orbax-checkpoint-tmp-0").mkdir()  # being written
    step, restored, _, progress = reader.restore_newest("latest", _filled(0))
    assert raced == [2]  # it listed step 2, which was deleted before it was read
    assert step == 4 and progress.epoch == 4 and restored["w"].tolist() == [4.0] * 3
    with pytest.raises(ValueError, match="cannot restore step 2"):
        restore("latest", _filled(0), 2)  # what readers did before: read the listed step


@ORBAX_ABANDONS_READS
def test_a_reader_follows_a_step_folder_that_vanishes_while_orbax_looks_at_it(
    tmp_path, monkeypatch, writer_and_reader
):
    """Orbax checks ``path.exists() and not path.is_dir()``: a folder deleted between the two
    raises NotADirectoryError (an OSError), while listing the steps or while reading one.
    The reader lists again and reads the newer step, as for a step deleted before it is read."""
    reader, save = writer_and_reader
    manager = reader._managers["latest"]
    reload, restore, raced = manager.reload, reader.restore, []

    def vanishing_reload():  # the first listing meets a folder being deleted
        if not raced:
            raced.append("reload")
            raise NotADirectoryError(f"Path is not a directory: {tmp_path / '1'}")
        return reload()

    def vanishing_read(which, target, step=None):  # so does the first read
        if len(raced) == 1:
            raced.append(step)
            for newer in (3, 4):  # keeps two: deletes the step being read
                save(newer)
            raise NotADirectoryError(f"Path is not a directory: {tmp_path / str(step)}")
        return restore(which, target, step)

    monkeypatch.setattr(manager, "reload", vanishing_reload)
    monkeypatch.setattr(reader, "restore", vanishing_read)
    step, restored, _, progress = reader.restore_newest("latest", _filled(0))
    assert raced == ["reload", 2]
    assert step == 4 and progress.epoch == 4 and restored["w"].tolist() == [4.0] * 3

    # a step that stays the newest is a damaged checkpoint: the error is not swallowed
    def broken(which, target, step=None):
        raise NotADirectoryError("Path is not a directory")

    monkeypatch.setattr(reader, "restore", broken)
    with pytest.raises(NotADirectoryError):
        reader.restore_newest("latest", _filled(0))
