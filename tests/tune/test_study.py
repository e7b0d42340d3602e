"""A study is one search: a worker with another table, other base settings or another space
is refused before it runs a trial."""

import pytest

from stacklstm.checks import SettingError
from stacklstm.config import RunConfig
from stacklstm.tune import SearchSpace, check_same_search

optuna = pytest.importorskip("optuna")


def test_a_worker_on_another_table_or_search_is_refused(tmp_path):
    first, other = tmp_path / "a.csv", tmp_path / "b.csv"
    first.write_text("y\n1\n2\n")
    other.write_text("y\n1\n3\n")
    study = optuna.create_study(study_name="s")
    space = SearchSpace.from_dict({"train": {"lr": {"low": 1e-4, "high": 1e-2}}}, RunConfig())
    check_same_search(study, "memory", RunConfig(), space, first)  # records the search
    check_same_search(study, "memory", RunConfig(), space, first)  # the same: joins
    with pytest.raises(SettingError, match="search in the table's contents"):
        check_same_search(study, "memory", RunConfig(), space, other)
    epochs = RunConfig().replace({"train": {"epochs": 3}})
    with pytest.raises(SettingError, match="in the base settings, so"):
        check_same_search(study, "memory", epochs, space, first)
    window = SearchSpace.from_dict({"data": {"window": [4, 8]}}, RunConfig())
    with pytest.raises(SettingError, match="in the searched settings"):
        check_same_search(study, "memory", RunConfig(), window, first)


def test_a_search_on_one_monthly_series_trains_every_trial_from_random_parameters(tmp_path):
    """init="auto" would fine-tune one monthly series, in the weights' scaling; a search
    compares its trials' validation losses, so every trial starts from random parameters."""
    import numpy as np
    import pandas as pd

    from stacklstm.rundir import read_run_info
    from stacklstm.tune import tune

    t = np.arange(72)
    path = tmp_path / "m.csv"
    pd.DataFrame(
        {"ds": pd.date_range("2000-01-01", periods=72, freq="MS"), "y": 10 + np.sin(t)}
    ).to_csv(path, index=False)
    base = RunConfig().replace(
        {
            "data": {"target": ("y",), "time_column": "ds"},
            "train": {"epochs": 1, "min_steps": 0},
        }
    )
    assert base.train.init == "auto"
    space = {"train": {"lr": {"low": 1e-3, "high": 2e-3}}}
    tune(base, tmp_path / "s", trials=1, space=space, data_path=path)
    (trial,) = (tmp_path / "s" / "trials").iterdir()
    assert read_run_info(trial).config.train.init == "random"
