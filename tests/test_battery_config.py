"""Settings that contradict or overreach, config files in their own syntax, the table a
search's best.toml names, and signals that reach a search or a long statistical baseline (in
child processes: tests/e2e/test_signals.py)."""

import logging
import os
import re
import signal
import threading
import time
import tomllib

import numpy as np
import pandas as pd
import pytest
import yaml

from helpers import TRIAL_FLAGS, _long_series, _main, raises_one_line
from stacklstm import baselines, tune
from stacklstm.checks import SettingError
from stacklstm.config import MAX_ENSEMBLE, RunConfig, TrainConfig
from stacklstm.configfile import load_config, read_config
from stacklstm.run import fit
from stacklstm.rundir import read_run_info
from stacklstm.signals import Interrupted, handling_signals


def _one_error_line(code, out, err):
    assert code == 2 and out == "" and len(err.splitlines()) == 1, (code, out, err)
    return err.strip()


# ----------------------------------------------------------------- ensemble: a bounded count


def test_an_ensemble_larger_than_the_bound_is_refused_in_one_line(tmp_path):
    assert TrainConfig(ensemble=MAX_ENSEMBLE).ensemble == 1000
    err = raises_one_line(
        "ensemble must be at most 1000 members", TrainConfig, ensemble=1001, error=SettingError
    )
    assert "one after another" in str(err) and str(err).endswith("got 1001")
    out = tmp_path / "run"
    err = _one_error_line(*_main("train", "--ensemble", "1000000000", "--out", out, "--quiet"))
    assert err == (
        "stacklstm: error: --ensemble must be at most 1000 members (they are trained one after "
        "another, each a run folder of its own), got 1000000000"
    )
    assert not out.exists()  # refused before anything was written


# ------------------------------------------------------- an alias and its field, given both


def test_an_alias_and_its_field_given_both_name_both_spellings(tmp_path):
    config = tmp_path / "run.toml"
    config.write_text("[model]\nlstm_hidden_size = 16\nhidden_size = 8\n")
    err = _one_error_line(*_main("train", "--config", config, "--out", tmp_path / "run"))
    assert err == (
        f"stacklstm: error: {config}: hidden_size and lstm_hidden_size are the same setting; "
        "give one"
    )
    raises_one_line(
        r"^\[train\] season and \[data\] season are the same setting; give one$",
        RunConfig.from_dict,
        {"train": {"season": 12}, "data": {"season": 7}},
        error=SettingError,
    )
    # one spelling alone is fine, whichever it is
    assert RunConfig.from_dict({"model": {"hidden_size": 8}}).model.lstm_hidden_size == 8


# --------------------------------------------- quantiles that lack the asked interval levels


def test_interval_levels_that_the_quantiles_lack_are_refused_naming_both():
    err = raises_one_line(
        "interval_levels 0.8 cannot be read off `quantiles` 0.2: the interval at level 0.8 "
        "spans the quantiles 0.1 and 0.9",
        TrainConfig,
        loss="quantile",
        quantiles=(0.2,),
        interval_levels=(0.8,),
        error=SettingError,
    )
    assert err.field == "interval_levels"
    raises_one_line(
        "the interval at level 0.95 spans the quantiles 0.025 and 0.975",
        TrainConfig,
        loss="quantile",
        quantiles=(0.1, 0.9),
        interval_levels=(0.8, 0.95, 0.99),
        error=SettingError,
    )
    # the quantiles hold each level's pair: the levels stand as given
    cfg = TrainConfig(loss="quantile", quantiles=(0.05, 0.1, 0.9, 0.95), interval_levels=(0.9,))
    assert cfg.interval_levels == (0.9,)
    # not given (the default), or none asked: nothing to contradict
    assert TrainConfig(loss="quantile", quantiles=(0.2,)).interval_levels == (0.8, 0.95)
    assert TrainConfig(loss="quantile", quantiles=(0.2,), interval_levels=()).quantiles == (0.2,)
    # without explicit quantiles the levels choose them
    assert TrainConfig(loss="quantile", interval_levels=(0.5,)).interval_levels == (0.5,)


def test_the_command_line_names_both_flags_of_the_conflict(tmp_path):
    out = tmp_path / "run"
    err = _one_error_line(
        *_main(
            "train",
            "--loss",
            "quantile",
            "--quantiles",
            "0.2",
            "--interval-levels",
            "0.8",
            "--out",
            out,
            "--quiet",
        )
    )
    assert err == (
        "stacklstm: error: --interval-levels 0.8 cannot be read off --quantiles 0.2: the "
        "interval at level 0.8 spans the quantiles 0.1 and 0.9; add them to --quantiles, or "
        "leave --quantiles empty to learn those of --interval-levels"
    )
    assert not out.exists()


# ------------------------------------------- list settings suggested in the file's own syntax


@pytest.mark.parametrize(
    ("suffix", "text", "suggestion", "fixed"),
    [
        (".toml", '[data]\ntarget = "y"\n', 'write target = ["y"]', '[data]\ntarget = ["y"]\n'),
        (".yaml", "data:\n  target: y\n", "write target: [y]", "data:\n  target: [y]\n"),
        (".toml", '[data]\ntarget = "a, b"\n', 'write target = ["a", "b"]', None),
        (".yml", "train:\n  interval_levels: 0.8\n", "write interval_levels: [0.8]", None),
        (".toml", "[model]\nlinear_layer_sizes = 32\n", "write linear_layer_sizes = [32]", None),
        (".yaml", "model:\n  hidden_size: 8\n  linear_layer_sizes: '32,16'\n",
         "write linear_layer_sizes: [32, 16]", None),
    ],
)  # fmt: skip
def test_a_list_setting_given_one_value_is_suggested_in_the_files_syntax(
    tmp_path, suffix, text, suggestion, fixed
):
    config = tmp_path / f"run{suffix}"
    config.write_text(text)
    err = raises_one_line(re.escape(suggestion), load_config, config, error=SettingError)
    message = str(err)
    assert message.startswith(f"{config}: [") and message.endswith(suggestion)
    assert "(" not in message  # no Python tuple
    # what it suggests is the list in that syntax: written back, the file reads
    written = suggestion.removeprefix("write ")
    key = written.split(" ")[0].rstrip(":")
    parsed = tomllib.loads(written) if suffix == ".toml" else yaml.safe_load(written)
    assert isinstance(parsed[key], list)
    code, out, err_text = _main("train", "--config", config, "--out", tmp_path / "run")
    assert _one_error_line(code, out, err_text) == f"stacklstm: error: {message}"
    if fixed is not None:
        config.write_text(fixed)
        assert load_config(config).data.target == ("y",)


def test_python_callers_keep_the_python_suggestion():
    raises_one_line(
        r"write \('y',\)", RunConfig.from_dict, {"data": {"target": "y"}}, error=SettingError
    )


# ---------------------------------------------------- the table of a search, kept in best.toml


def _series_csv(path, n=400):
    t = np.arange(n)
    values = 10 + 0.02 * t + 2 * np.sin(2 * np.pi * t / 12)
    values += np.random.default_rng(0).normal(scale=0.2, size=n)
    days = pd.date_range("2020-01-01", periods=n, freq="D").strftime("%Y-%m-%d")
    pd.DataFrame({"day": days, "y": values}).to_csv(path, index=False)
    return path


def test_best_toml_names_the_searched_table_and_trains_on_it(tmp_path):
    data = _series_csv(tmp_path / "sales.csv")
    base = RunConfig().replace(
        {
            "data": {"target": ["y"], "time_column": "day", "window": 6, "season": 7},
            "model": {"lstm_hidden_size": 4, "num_lstm_layers": 1, "linear_layer_sizes": []},
            "train": {"epochs": 1, "min_steps": 0, "batch_size": 32, "baselines": "naive"},
        }
    )
    space = {"model": {"lstm_hidden_size": [4]}}
    result = tune.tune(base, tmp_path / "search", trials=1, space=space, data_path=data)
    best = tmp_path / "search" / "best.toml"
    assert tomllib.loads(best.read_text())["data"]["file"] == str(data.absolute())
    loaded = read_config(best)
    assert loaded.data_path == data.absolute()
    assert loaded.config == result.best_config  # the settings, the key aside
    assert load_config(best) == result.best_config
    assert loaded.config.data.target == ("y",)
    run = fit(loaded.config, tmp_path / "best-run", quiet=True, data_path=loaded.data_path)
    assert run.step > 0 and read_run_info(tmp_path / "best-run").data_path == data.absolute()


def test_a_config_files_table_is_read_from_the_files_folder(tmp_path):
    folder = tmp_path / "configs"
    folder.mkdir()
    (folder / "run.yaml").write_text("data:\n  file: ../sales.csv\n  target: [y]\n")
    loaded = read_config(folder / "run.yaml")
    assert loaded.data_path == (folder / ".." / "sales.csv").absolute()
    assert loaded.config.data.target == ("y",) and loaded.space is None
    (folder / "bad.toml").write_text("[data]\nfile = 3\n")
    raises_one_line(
        r"\[data\] file must be the path of a CSV/Parquet table, got 3",
        read_config,
        folder / "bad.toml",
        error=SettingError,
    )
    # without the key nothing changes
    (folder / "plain.toml").write_text("[train]\nepochs = 3\n")
    assert read_config(folder / "plain.toml").data_path is None


# ------------------------------------------------------------------ a signal during a search


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records = []

    def emit(self, record):
        self.records.append(record)


def test_an_interrupted_trial_is_not_reported_by_optuna(tmp_path, monkeypatch):
    optuna = pytest.importorskip("optuna")
    seen = _Records()
    logger = logging.getLogger("optuna.study._optimize")
    logger.addHandler(seen)
    monkeypatch.setenv("STACKLSTM_TEST_HOOK", "epoch=SIGINT")  # mid-epoch, after step 30
    try:
        code, out, err = _main("tune", "--trials", "2", "--out", tmp_path / "s", *TRIAL_FLAGS)
    finally:
        logger.removeHandler(seen)
    assert (code, out, err) == (130, "", "stacklstm: interrupted\n")
    assert [r.getMessage() for r in seen.records] == []  # no "Trial 0 failed" + traceback
    study = optuna.load_study(study_name="stacklstm", storage=f"sqlite:///{tmp_path}/s/study.db")
    assert [t.state.name for t in study.trials] == ["FAIL"]  # stopped at the first trial
    # Optuna still reports the failures that are not an interruption
    assert logger.filters == []


# -------------------------------------------- a signal during a long statistical baseline


@pytest.mark.slow
@pytest.mark.serial  # a bound in seconds: not beside another worker's training
def test_a_signal_stops_the_statistical_baselines_within_a_second():
    pytest.importorskip("statsforecast")
    history = _long_series()[:, None]
    origins = np.arange(85_000, 85_050)  # a fit on 85,001 rows: seconds of native code
    sent = []

    def send():
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGTERM)

    with handling_signals(lambda signum: "terminated"):
        timer = threading.Timer(4.0, send)  # inside the first fit, on 85,001 rows
        timer.start()
        with pytest.raises(Interrupted) as info:
            baselines.statistical_forecasts(history, origins, 4, 52)
        taken = time.monotonic() - sent[0]
    assert info.value.signum == signal.SIGTERM
    assert taken < 1.0, f"the signal waited {taken:.1f} s"


def test_train_config_best_toml_trains_on_the_searched_table(tmp_path):
    data = _series_csv(tmp_path / "sales.csv")
    space = tmp_path / "space.toml"
    space.write_text("[tune.model]\nlstm_hidden_size = [4]\n")
    search = tmp_path / "search"
    flags = [
        "--target",
        "y",
        "--time-column",
        "day",
        "--season",
        "7",
        "--window",
        "6",
        "--num-layers",
        "1",
        "--linear-layer-sizes",
        "",
        "--epochs",
        "1",
        "--min-steps",
        "0",
        "--batch-size",
        "32",
        "--baselines",
        "naive",
        "--quiet",
    ]
    code, _, err = _main(
        "tune", "--data", data, "--config", space, "--trials", "1", "--out", search, *flags
    )
    assert code == 0, err
    code, _, err = _main(
        "train", "--config", search / "best.toml", "--out", tmp_path / "best", "--quiet"
    )
    assert code == 0, err  # the documented command of docs/tune.md
    info = read_run_info(tmp_path / "best")
    assert info.data_path == data.absolute() and info.config.data.target == ("y",)
