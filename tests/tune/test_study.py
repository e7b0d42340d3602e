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
