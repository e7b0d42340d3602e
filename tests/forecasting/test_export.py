"""``stacklstm export``: the artifact forecasts what ``stacklstm predict`` forecasts, for any
batch size, on CPU (and CUDA where there is one); bad files and bad paths are one-line errors."""

import errno
import os
import re
import stat
import struct

import jax
import numpy as np
import pandas as pd
import pytest

from helpers import _main
from stacklstm import serving
from stacklstm.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from stacklstm.forecasting import export as export_module
from stacklstm.forecasting import predict
from stacklstm.forecasting.export import export_run
from stacklstm.forecasting.inference import load_series
from stacklstm.run import fit
from stacklstm.rundir.info import read_run_info

pytest.importorskip("flatbuffers", reason="jax.export serialisation needs flatbuffers")


@pytest.fixture(scope="module")
def artifact(trained_run, tmp_path_factory):
    """The suite's tiny CO2 run exported: (file, its bytes)."""
    path = tmp_path_factory.mktemp("export") / "co2.stacklstm"
    export_run(trained_run.out_dir, path)
    return path, path.read_bytes()


def _series_values(run_dir):
    """The run's table as ``stacklstm predict`` reads it (gaps filled): ``(time, n_columns)``."""
    return load_series(read_run_info(run_dir), None)[1].values


def _predicted(frame, forecaster):
    """``stacklstm predict``'s frame as ``(n, horizon, n_targets)``."""
    n, h, nt = len(frame), forecaster.horizon, len(forecaster.targets)
    return frame[forecaster.forecast_columns].to_numpy().reshape(n, nt, h).transpose(0, 2, 1)


def test_exported_forecasts_equal_predict_on_the_same_rows(trained_run, artifact):
    forecaster = serving.load(artifact[0])
    frame = predict(trained_run.out_dir)
    windows = forecaster.windows(_series_values(trained_run.out_dir))
    assert forecaster.input_steps == 6 and len(windows) == len(frame) == 2279
    got = forecaster.predict(windows)
    want = _predicted(frame, forecaster)
    assert got.shape == want.shape == (2279, 1, 1) and got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
    # any batch size: one window, seven, both ends of the series
    for rows in ([0], [2278], list(range(100, 107))):
        np.testing.assert_allclose(forecaster.predict(windows[rows]), want[rows], rtol=0, atol=1e-5)


def test_export_traces_the_portable_path_for_cpu_and_cuda_with_a_symbolic_batch(artifact):
    forecaster = serving.load(artifact[0])
    exported = forecaster.exported
    assert exported.platforms == ("cpu", "cuda")
    assert forecaster.metadata["platforms"] == ["cpu", "cuda"]
    assert str(exported.in_avals[0].shape[0]) == "batch"
    assert exported.in_avals[0].dtype == exported.out_avals[0].dtype == np.float64
    assert "stacklstm_lstm" not in exported.mlir_module()  # no CPU-kernel custom call


def _cuda_devices():
    try:
        return jax.devices("cuda")
    except RuntimeError:
        return []


@pytest.mark.skipif(not _cuda_devices(), reason="no CUDA device here")
def test_exported_forecaster_runs_on_cuda_like_on_cpu(trained_run, artifact):
    forecaster = serving.load(artifact[0])
    windows = forecaster.windows(_series_values(trained_run.out_dir))[:64]
    with jax.default_device(jax.devices("cpu")[0]):
        on_cpu = forecaster.predict(windows)
    with jax.default_device(_cuda_devices()[0]):
        on_cuda = forecaster.predict(windows)
    np.testing.assert_allclose(on_cuda, on_cpu, rtol=0, atol=1e-5)


@pytest.mark.slow
def test_export_with_differences_features_and_two_targets_equals_predict(tmp_path):
    """The CLI's export and predict on a run that differences, scales min-max, normalises by
    window and forecasts 3 steps of 2 targets from 3 columns; the input is window + 1 rows."""
    rng = np.random.default_rng(0)
    t = np.arange(240.0)
    table = pd.DataFrame(
        {
            "a": 1000 + 0.5 * t + 3 * np.sin(t / 5) + rng.normal(0, 0.3, t.size),
            "b": -40 + 2 * np.cos(t / 7) + rng.normal(0, 0.2, t.size),
            "f": rng.normal(5, 1, t.size),
        }
    )
    table.to_csv(tmp_path / "table.csv", index=False)
    cfg = RunConfig(
        DataConfig(
            target=("a", "b"),
            features=("f",),
            time_column=None,
            window=5,
            horizon=3,
            difference=True,
            scaler="minmax",
        ),
        ModelConfig(lstm_hidden_size=4, num_lstm_layers=1, linear_layer_sizes=()),
        TrainConfig(epochs=1, batch_size=32, baselines="naive"),
    )
    run = tmp_path / "run"
    fit(cfg, run, quiet=True, data_path=tmp_path / "table.csv")
    code, out, err = _main("export", run, "--output", tmp_path / "m.stacklstm", "--quiet")
    assert code == 0, err
    assert "windows (batch, 6, 3) of a, b, f -> forecasts (batch, 3, 2)" in out
    umask = os.umask(0)
    os.umask(umask)  # the file gets open()'s permissions, not a temporary file's 0o600
    assert stat.S_IMODE((tmp_path / "m.stacklstm").stat().st_mode) == 0o666 & ~umask
    code, _, err = _main("predict", run, "--output", tmp_path / "p.csv", "--quiet", "--history")
    assert code == 0, err

    forecaster = serving.load(tmp_path / "m.stacklstm")
    assert (forecaster.input_steps, forecaster.horizon, forecaster.targets) == (6, 3, ("a", "b"))
    frame = pd.read_csv(tmp_path / "p.csv")
    windows = forecaster.windows(table.to_numpy())
    assert len(windows) == len(frame) == 235  # origins 5 .. 239
    want = _predicted(frame, forecaster)
    got = forecaster.predict(windows)
    assert np.abs(want[:, :, 0] - 1000).min() > 1  # the levels, not the scaled steps
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match=r"\(batch, 6 \(5 steps plus the row before them"):
        forecaster.predict(windows[:, 1:])  # a window without the row before it


# --- deseasonalised runs -----------------------------------------------------------------------

SEASON = np.array([4.0, -2.0, 1.0, 3.0, -5.0, 0.5, 2.5, -1.5, -3.0, 1.5, 0.0, -0.5])  # sums to 0


def _seasonal_table(kind, n=84):
    """Monthly series with a 12-month season and a feature ``f``: ``"additive"`` levels near
    100 with a date column, or ``"multiplicative"`` positive values without a time column."""
    rng = np.random.default_rng(3)
    t = np.arange(n)
    season = np.tile(SEASON, n // 12 + 1)[:n]
    if kind == "additive":
        y = 100 + 0.4 * t + season + rng.normal(0, 0.3, n)
        date = {"date": pd.date_range("2001-01-01", periods=n, freq="MS")}
    else:
        y, date = (20 + 0.2 * t) * np.exp(0.1 * season) + rng.gamma(2, 0.1, n), {}
    return pd.DataFrame({**date, "y": y, "f": rng.normal(0, 1, n)})


# the same network shapes (window 8, 2 columns, 3 steps ahead): the second run's compilations
# come from the cache
SEASONAL_RUNS = {
    # deseasonalised differences of a target with a feature, date stamps
    "additive": DataConfig(
        target=("y",), features=("f",), window=8, horizon=3, season=12, difference=True
    ),
    # log1p then deseasonalised, levels; no time column: phases count rows
    "log1p": DataConfig(
        target=("y",),
        features=("f",),
        time_column=None,
        window=8,
        horizon=3,
        season=12,
        target_transform="log1p",
    ),
}


@pytest.fixture(scope="module", params=sorted(SEASONAL_RUNS))
def seasonal_run(request, tmp_path_factory):
    """A tiny deseasonalised run (2 epochs), exported: (kind, run folder, table, artifact)."""
    kind = request.param
    folder = tmp_path_factory.mktemp(f"seasonal_{kind}")
    table = _seasonal_table(kind)
    table.to_csv(folder / "table.csv", index=False)
    cfg = RunConfig(
        SEASONAL_RUNS[kind],
        ModelConfig(lstm_hidden_size=4, num_lstm_layers=1, linear_layer_sizes=()),
        TrainConfig(epochs=2, batch_size=16, baselines="naive"),
    )
    fit(cfg, folder / "run", quiet=True, data_path=folder / "table.csv")
    assert read_run_info(folder / "run").scaler.seasonal is not None
    code, out, err = _main("export", folder / "run", "--output", folder / "m.stacklstm")
    assert code == 0, err  # and the command line says what the program takes besides windows
    assert "and the phase of each window's last row (season 12): predict(windows, phase=" in out
    return kind, folder / "run", table, folder / "m.stacklstm"


@pytest.mark.slow
def test_a_deseasonalised_run_exports_and_equals_predict(seasonal_run):
    _, run, table, path = seasonal_run
    forecaster = serving.from_bytes(path.read_bytes())  # serialised and read back
    frame = predict(run)
    windows = forecaster.windows(table[["y", "f"]].to_numpy())
    assert len(windows) == len(frame) == 84 - forecaster.input_steps + 1
    want = _predicted(frame, forecaster)
    # the phase of each window's last row: the rows count from the table's first (phase 0)
    origin_rows = np.arange(forecaster.input_steps - 1, 84)
    phases = forecaster.phases(frame["origin"].to_numpy())
    np.testing.assert_array_equal(phases, origin_rows % 12)
    got = forecaster.predict(windows, phases)
    assert got.shape == want.shape and got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)
    np.testing.assert_allclose(
        forecaster.predict(windows, last_time=frame["origin"].to_numpy()), want, rtol=1e-6, atol=0
    )
    # phases are taken modulo the season; any batch size
    np.testing.assert_allclose(
        forecaster.predict(windows[5:12], phases[5:12] + 24), want[5:12], rtol=1e-6, atol=0
    )
    np.testing.assert_allclose(
        forecaster.predict(windows[:1], int(phases[0])), want[:1], rtol=1e-6, atol=0
    )
    # a wrong phase puts the pattern in the wrong months: forecasts off by its size
    wrong = forecaster.predict(windows, phases + 1)
    assert np.abs(wrong - want).max() > 1.0
    missing = r"deseasonalised \(season 12\): pass each window's phase \(phase=.*\(last_time="
    with pytest.raises(ValueError, match=missing):
        forecaster.predict(windows)
    with pytest.raises(ValueError, match=r"got 3 phases for \d+ windows"):
        forecaster.predict(windows, phases[:3])
    with pytest.raises(ValueError, match=r"got 2 time stamps for \d+ windows"):
        forecaster.predict(windows, last_time=frame["origin"].to_numpy()[:2])
    with pytest.raises(ValueError, match=r"phase must be integers"):
        forecaster.predict(windows, phases + 0.5)
    with pytest.raises(ValueError, match="not both"):
        forecaster.predict(windows, phases, last_time=frame["origin"].to_numpy())


@pytest.mark.slow
def test_a_deseasonalised_artifact_records_its_season_and_takes_phases(seasonal_run):
    kind, _, _, path = seasonal_run
    forecaster = serving.load(path)
    reference, step = (
        ("2001-01-01T00:00:00.000000000", {"kind": "months", "every": 1, "anchor": "start"})
        if kind == "additive"
        else (None, {"kind": "rows"})
    )
    assert forecaster.metadata["seasonal"] == {
        "season": 12,
        "phase_of": "origin",
        "reference": reference,
        "freq": "MS" if kind == "additive" else None,
        "step": step,
    }
    assert forecaster.season == 12
    x, phase = forecaster.exported.in_avals
    assert str(x.shape[0]) == str(phase.shape[0]) == "batch" and phase.dtype == np.int32
    assert "stacklstm_lstm" not in forecaster.exported.mlir_module()


@pytest.mark.slow
def test_predict_on_a_later_table_takes_the_phase_of_its_stamps(seasonal_run):
    """``predict`` on the table less its first 17 months: the phases of the date stamps count
    from the run's phase 0; without time stamps, row numbers count from the new first row, as
    ``predict`` counts them."""
    kind, run, table, path = seasonal_run
    later = table.iloc[17:].reset_index(drop=True)
    later.to_csv(run.parent / "later.csv", index=False)
    frame = predict(run, run.parent / "later.csv")
    forecaster = serving.load(path)
    windows = forecaster.windows(later[["y", "f"]].to_numpy())
    origins = frame["origin"].to_numpy()
    skipped = 17 if kind == "additive" else 0
    np.testing.assert_array_equal(
        forecaster.phases(origins), (skipped + np.arange(forecaster.input_steps - 1, 67)) % 12
    )
    got = forecaster.predict(windows, last_time=origins)
    np.testing.assert_allclose(got, _predicted(frame, forecaster), rtol=1e-6, atol=0)
    if kind == "additive":
        with pytest.raises(ValueError, match="is not on the MS grid of 2001-01-01"):
            forecaster.predict(windows[:1], last_time="2004-03-15")


# --- bad files ------------------------------------------------------------------------------


def _flip(data, at):
    data = bytearray(data)
    data[at] ^= 0x40
    return bytes(data)


def _other_version(data):
    return data[:16] + struct.pack("<I", serving.LAYOUT_VERSION + 1) + data[20:]


BAD_FILES = {
    "truncated_half": (lambda d: d[: len(d) // 2], r"is truncated: \d+ bytes, the header says"),
    "truncated_to_10_bytes": (lambda d: d[:10], "is truncated"),
    "truncated_header": (lambda d: d[:40], "is truncated: 40 bytes, not even a header"),
    "trailing_bytes": (lambda d: d + b"\0", "trailing bytes"),
    "flipped_program_byte": (lambda d: _flip(d, len(d) - 100), "SHA-256 checksum does not match"),
    "flipped_metadata_byte": (lambda d: _flip(d, 70), "SHA-256 checksum does not match"),
    "other_layout_version": (
        _other_version,
        f"has layout version {serving.LAYOUT_VERSION + 1} but this stacklstm reads versions 1",
    ),
    "not_an_artifact": (lambda d: b"date,co2\n1958-03-29,316.19\n", "is not a stacklstm export"),
    "empty": (lambda d: b"", "is not a stacklstm export"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_a_truncated_damaged_or_other_version_file_is_a_clear_value_error(case, artifact, tmp_path):
    damage, match = BAD_FILES[case]
    path = tmp_path / "bad.stacklstm"
    path.write_bytes(damage(artifact[1]))
    with pytest.raises(ValueError, match=match) as info:
        serving.load(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_metadata_that_disagrees_with_the_program_is_refused(artifact):
    metadata, program = serving.unpack(artifact[1])
    serving.from_bytes(serving.pack(metadata, program))  # repacked as it was: fine
    with pytest.raises(ValueError, match=r"damaged: its program maps .* but its metadata says"):
        serving.from_bytes(serving.pack({**metadata, "window": 7, "input_steps": 7}, program))
    with pytest.raises(ValueError, match=r"lacks the keys \['horizon'\]"):
        serving.from_bytes(serving.pack({k: v for k, v in metadata.items() if k != "horizon"}, b""))
    with pytest.raises(ValueError, match=r"damaged: its program cannot be read"):
        serving.from_bytes(serving.pack(metadata, program[: len(program) // 2]))


# --- the command line -------------------------------------------------------------------------


def test_cli_export_errors_are_one_line_with_exit_status_2(trained_run, tmp_path, monkeypatch):
    run = trained_run.out_dir
    cases = [
        ((tmp_path / "no_run", "--output", tmp_path / "m"), "run folder not found: "),
        ((run, "--output", tmp_path / "nowhere" / "m"), r"folder .*nowhere does not exist"),
        ((run, "--output", tmp_path), "is a folder; name a file in --output"),
    ]
    for args, match in cases:
        code, out, err = _main("export", *args)
        assert (code, out) == (2, "")
        assert err.count("\n") == 1 and err.startswith("stacklstm: error: ")
        assert re.search(match, err), err

    def no_permission(path, write):
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(export_module, "atomic_write", no_permission)
    code, out, err = _main("export", run, "--output", tmp_path / "m")
    assert (code, out) == (2, "")
    assert err == f"stacklstm: error: [Errno 13] cannot write {tmp_path / 'm'}: Permission denied\n"
    assert not (tmp_path / "m").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_cli_export_into_a_read_only_folder_is_one_line_exit_2(trained_run, tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir(mode=0o500)
    code, _, err = _main("export", trained_run.out_dir, "--output", folder / "m")
    assert code == 2 and err.count("\n") == 1 and "cannot write" in err
    assert list(folder.iterdir()) == []
