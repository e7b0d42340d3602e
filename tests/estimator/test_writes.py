"""LSTMForecaster's writes into a folder the user names (``fit(run_dir=...)``, ``save``) are all
or nothing: never inside another run's files, never mixed by two processes, nothing left
behind by an interrupted or failed fit, and a refused fit leaves the estimator as it was."""

import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

import stacklstm.estimator.core as core
from helpers import TINY, _panel
from stacklstm.estimator import LSTMForecaster
from stacklstm.estimator.staging import STAGING_SUFFIX, staged
from stacklstm.rundir.lock import RunInUseError

SETTINGS = {**TINY, "retrain": "off"}


@pytest.fixture(scope="module")
def fitted():
    return LSTMForecaster(**SETTINGS).fit(_panel())


def _entries(folder):
    return sorted(p.name for p in folder.iterdir())


def test_a_run_dir_inside_another_runs_files_is_refused(fitted, tmp_path):
    victim = fitted.save(tmp_path / "victim")
    before = _entries(victim)
    for inside in (victim / "checkpoints" / "999", victim / "checkpoints_best"):
        with pytest.raises(ValueError, match="victim"):
            LSTMForecaster(**SETTINGS, run_dir=inside).fit(_panel())
    assert _entries(victim) == before
    with pytest.raises(ValueError, match=r"load the run in it with LSTMForecaster\.load"):
        LSTMForecaster(**SETTINGS, run_dir=victim).fit(_panel())


def test_a_refused_fit_leaves_a_fitted_estimator_as_it_was(fitted, tmp_path):
    model = LSTMForecaster.load(fitted.save(tmp_path / "a"))
    model._out_dir = tmp_path / "a"  # a second fit into the folder it holds
    expected = model.predict()
    with pytest.raises(ValueError, match="not empty"):
        model.fit(_panel())
    pd.testing.assert_frame_equal(model.predict(), expected)


@pytest.mark.parametrize("error", [KeyboardInterrupt, FloatingPointError])
def test_an_interrupted_or_failed_fit_leaves_no_run_dir(monkeypatch, tmp_path, error):
    def failing_fit(cfg, run_dir, **kwargs):
        (run_dir / "config.json").write_text("{}")  # a half-made run
        raise error("stopped")

    monkeypatch.setattr(core, "fit", failing_fit)
    (tmp_path / "empty").mkdir()  # an empty folder stays as it was
    for target in (tmp_path / "new" / "run", tmp_path / "empty"):
        model = LSTMForecaster(**SETTINGS, run_dir=target)
        with pytest.raises(error):
            model.fit(_panel())
        assert _entries(tmp_path) == ["empty"]  # `new/` made for the fit is gone too
        assert _entries(tmp_path / "empty") == []
        with pytest.raises(ValueError, match="not fitted"):
            model.predict()


def test_a_fit_while_another_process_writes_the_folder_is_refused_at_once(tmp_path):
    target = tmp_path / "run"
    stage = tmp_path / f".run{STAGING_SUFFIX}"
    stage.mkdir()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import sys, time
            from stacklstm.rundir.lock import RunLock
            lock = RunLock.acquire({str(stage)!r})
            print("locked", flush=True)
            sys.stdin.read()
        """),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        busy = rf"another process is writing it now \(pid {holder.pid}\)"
        with pytest.raises(RunInUseError, match=busy):
            LSTMForecaster(**SETTINGS, run_dir=target).fit(_panel())
        assert not target.exists() and _entries(stage) == [".lock"]
    finally:
        holder.communicate("")
    # once the writer is gone (even killed), what it left is cleared by the next writer
    (stage / "work").mkdir()
    with staged(target, what="save") as work:
        work.mkdir()
        (work / "x").write_text("mine")
    assert _entries(tmp_path) == ["run"] and _entries(target) == ["x"]


def test_a_folder_filled_meanwhile_is_left_alone_and_the_work_kept_beside_it(tmp_path):
    target = tmp_path / "out"
    filled = r"another process filled it .* result is at .*out-2"
    with pytest.raises(ValueError, match=filled), staged(target, what="save") as work:
        work.mkdir()
        (work / "mine").write_text("1")
        target.mkdir()
        (target / "theirs").write_text("2")
    assert _entries(target) == ["theirs"] and _entries(tmp_path / "out-2") == ["mine"]
    assert not any(p.name.endswith(STAGING_SUFFIX) for p in tmp_path.iterdir())


def test_two_processes_saving_to_one_folder_never_mix(fitted, tmp_path):
    pickled = tmp_path / "model.pkl"
    pickled.write_bytes(pickle.dumps(fitted))
    target = tmp_path / "saved"
    code = textwrap.dedent(f"""
        import pickle, sys
        model = pickle.loads(open({str(pickled)!r}, "rb").read())
        try:
            model.save({str(target)!r})
        except ValueError as err:
            print(err, file=sys.stderr)
            sys.exit(2)
    """)
    procs = [
        subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    results = [(p.wait(), p.stderr.read()) for p in procs]
    assert sorted(code for code, _ in results) == [0, 2], results
    assert "cannot save to" in next(err for code, err in results if code == 2)
    loaded = LSTMForecaster.load(target)
    pd.testing.assert_frame_equal(loaded.predict(), fitted.predict())
    assert not any(p.name.endswith(STAGING_SUFFIX) for p in tmp_path.iterdir())


def test_a_fit_into_run_dir_forecasts_as_a_temporary_one(fitted, tmp_path):
    model = LSTMForecaster(**SETTINGS, run_dir=tmp_path / "r").fit(_panel())
    assert model.run_dir == (tmp_path / "r").absolute()
    assert "data.parquet" in _entries(model.run_dir)
    np.testing.assert_allclose(
        model.predict()["stacklstm"].to_numpy(), fitted.predict()["stacklstm"].to_numpy()
    )
    assert _entries(tmp_path) == ["r"]


def test_an_unwritable_run_dir_is_a_value_error(tmp_path):
    if os.geteuid() == 0:
        target = "/proc/stacklstm-test/run"  # even root cannot create folders there
    else:
        target = str(tmp_path / "ro" / "run")
        (tmp_path / "ro").mkdir(mode=0o500)
    with pytest.raises(ValueError, match="cannot fit to"):
        LSTMForecaster(**SETTINGS, run_dir=target).fit(_panel())
