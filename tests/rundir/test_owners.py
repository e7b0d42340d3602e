"""Who owns a path: run, backtest and search folders, recognised by their files only."""

import os

from stacklstm.rundir.owners import owned_words, run_folder_owner


def test_a_run_folders_entries_are_owned_and_the_users_own_files_are_not(tmp_path):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.json").write_text("{}")
    assert run_folder_owner(run / "config.json") == (run, "run folder", "config.json")
    assert run_folder_owner(run / "checkpoints" / "20" / "x") == (run, "run folder", "checkpoints")
    assert run_folder_owner(run / "forecasts.csv") is None  # a new file of the user's own
    assert owned_words(run / "report.json") == (
        f"it is the run folder {run}'s report.json, which stacklstm writes"
    )
    assert owned_words(run / "checkpoints" / "20") == (
        f"it is under the run folder {run}'s checkpoints, which stacklstm writes"
    )
    assert owned_words(run / "forecasts.csv") is None
    # config.json without a checkpoint folder (nor a lock) is not a run folder
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "config.json").write_text("{}")
    assert run_folder_owner(tmp_path / "other" / "config.json") is None
    # a lock file is owned wherever it is
    assert run_folder_owner(tmp_path / "other" / ".lock") == (
        tmp_path / "other",
        "run folder",
        ".lock",
    )


def test_backtest_and_search_folders_own_their_files_and_folds(tmp_path):
    bt = tmp_path / "bt"
    (bt / "fold_00").mkdir(parents=True)
    (bt / "plan.json").write_text("{}")
    assert run_folder_owner(bt / "fold_07" / "config.json") == (bt, "backtest folder", "fold_07")
    assert run_folder_owner(bt / "backtest.png") == (bt, "backtest folder", "backtest.png")
    assert run_folder_owner(bt / "fold_7") is None  # not a fold's name
    search = tmp_path / "search"
    search.mkdir()
    (search / "study.db").write_text("")
    assert run_folder_owner(search / "best.toml") == (search, "search folder", "best.toml")
    assert run_folder_owner(search / "notes.txt") is None
    # symlinks are followed: a link to a run's entry is owned by that run
    os.symlink(bt / "plan.json", tmp_path / "link.json")
    assert run_folder_owner(tmp_path / "link.json") == (bt, "backtest folder", "plan.json")
