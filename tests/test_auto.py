"""Every "auto" rule (stacklstm.config.auto), each against hand-computed values, and the
rule that they are applied in one place: the resolve pass (stacklstm.train.resolve)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from stacklstm.config import DataConfig, TrainConfig
from stacklstm.config.auto import (
    fold_retrain_of,
    loss_weight_of,
    padding_of,
    resolve_data_config,
    resolve_train_config,
    retrain_of,
    scaler_of,
    season_window_of,
    transform_of,
)

SRC = Path(__file__).resolve().parents[1] / "src" / "stacklstm"


def test_training_budget_follows_the_windows():
    t = resolve_train_config(TrainConfig(min_steps=1000), 100)
    assert (t.batch_size, t.epochs, t.patience) == (12, 125, 32)  # 8 steps an epoch
    t = resolve_train_config(TrainConfig(min_steps=1000, patience=4), 100)
    assert (t.epochs, t.patience) == (125, 4)
    t = resolve_train_config(TrainConfig(epochs=3), 5)
    assert (t.batch_size, t.epochs, t.patience) == (5, 3, 15)
    assert resolve_train_config(TrainConfig(batch_size=7), 5, multiple=2).batch_size == 7
    assert resolve_train_config(TrainConfig(), 100, multiple=8).batch_size == 16


@pytest.mark.parametrize(
    ("id_column", "season", "scaler", "padded", "transform"),
    [
        (None, 12, "standard", False, "none"),
        (None, 1, "standard", False, "none"),
        ("id", 1, "naive", True, "none"),
        ("id", 4, "seasonal_naive", True, "per_series"),
        ("id", 12, "standard", True, "per_series"),
    ],
)
def test_data_rules(id_column, season, scaler, padded, transform):
    cfg = DataConfig(id_column=id_column, season=season)
    assert (scaler_of(cfg), padding_of(cfg), transform_of(cfg)) == (scaler, padded, transform)
    given = DataConfig(
        id_column=id_column,
        season=season,
        scaler="robust",
        start_padding="none",
        target_transform="log1p",
    )
    assert (scaler_of(given), padding_of(given), transform_of(given)) == ("robust", False, "log1p")
    resolved = resolve_data_config(cfg, None)
    assert (resolved.scaler, resolved.start_padding, resolved.target_transform) == (
        scaler,
        "repeat" if padded else "none",
        transform,
    )
    # the seasonal pattern: a panel's last 10 seasons, one series' every row
    window = 10 if id_column else None
    assert (season_window_of(cfg), resolved.season_window) == (window, window)
    assert season_window_of(DataConfig(id_column=id_column, season_window=None)) is None
    assert season_window_of(DataConfig(id_column=id_column, season_window=3)) == 3


def test_retrain_and_loss_weight_rules():
    assert [retrain_of("auto", n) for n in (0, 3)] == ["off", "all"]
    assert retrain_of("on", 0) == "on"  # refusing it is the resolve pass's (it names the table)
    assert [
        fold_retrain_of(r, p, n)
        for r, p, n in [
            ("all", False, 0),
            ("auto", True, 6),
            ("auto", True, 0),
            ("auto", False, 6),
            ("on", False, 6),
        ]
    ] == ["on", "on", "off", "off", "on"]
    panel = DataConfig(id_column="id", season=12)  # standard scaler: not MASE's own
    assert loss_weight_of(TrainConfig(), panel, 2) == "mase"
    assert loss_weight_of(TrainConfig(), panel, 1) == "none"  # one series: nothing to weigh
    assert loss_weight_of(TrainConfig(loss="mae"), panel, 2) == "none"
    quarterly = DataConfig(id_column="id", season=4)  # seasonal_naive: every weight 1
    assert loss_weight_of(TrainConfig(), quarterly, 2) == "none"
    assert loss_weight_of(TrainConfig(loss_weight="none"), panel, 2) == "none"


#: The settings whose "auto" a run resolves, and the modules allowed to compare them with
#: "auto": the rules, the resolve pass, and the checks that skip a value not known yet.
RESOLVED = (
    "season",
    "window",
    "scaler",
    "start_padding",
    "season_window",
    "target_transform",
    "batch_size",
    "epochs",
    "patience",
    "retrain",
    "loss_weight",
)
ALLOWED = {
    "config/auto.py",
    "train/resolve.py",
    "config/data.py",
    "config/training.py",
    "data/season.py",
    "data/rows.py",
}


def test_auto_is_resolved_in_one_place():
    names = "|".join(RESOLVED)
    compared = re.compile(rf"\.({names})\s*(==|!=)\s*(AUTO|\"auto\"|\"seasonal_panel\")")
    found = [
        f"{path.relative_to(SRC)}:{i}"
        for path in SRC.rglob("*.py")
        if str(path.relative_to(SRC)) not in ALLOWED
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if compared.search(line)
    ]
    assert found == []
    # the checks that are allowed to see "auto" only skip it; they never pick a value
    for rel in ("config/data.py", "config/training.py", "data/rows.py", "data/season.py"):
        text = (SRC / rel).read_text()
        assert "season_of_freq" not in text and "window_for_season" not in text, rel
