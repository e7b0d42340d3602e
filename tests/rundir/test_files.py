"""The names of what stacklstm writes into its folders: one place, each name once."""

from stacklstm.rundir import files, owners


def test_every_folder_entry_has_one_distinct_name():
    names = {k: v for k, v in vars(files).items() if k.isupper() and isinstance(v, str)}
    assert names["CONFIG_FILE"] == "config.json" and names["METRICS_FILE"] == "metrics.jsonl"
    assert (names["LATEST_DIR"], names["BEST_DIR"]) == ("checkpoints", "checkpoints_best")
    assert (names["PLAN_FILE"], names["STUDY_FILE"], names["LOCK_FILE"]) == (
        "plan.json",
        "study.db",
        ".lock",
    )
    assert len(set(names.values())) == len(names)  # no two entries share a name
    # every name but the user's predictions is an entry some folder owns
    owned = owners._RUN_ENTRIES | owners._BACKTEST_ENTRIES | owners._SEARCH_ENTRIES
    assert set(names.values()) - owned == {"predictions.csv"}


def test_fold_dir_name_pads_to_two_digits():
    assert [files.fold_dir_name(k) for k in (0, 7, 12, 123)] == [
        "fold_00",
        "fold_07",
        "fold_12",
        "fold_123",
    ]
