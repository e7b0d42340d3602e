"""The report's text table: every forecaster's point metrics by split, ``*`` on each
split's best value of every metric, then the interval scores and notes on undefined values.

Example:
    >>> data = {"test": {"model": {"mae": 1.0, "rmse": 1.0, "mape": 2.0, "mase": 0.5}},
    ...         "val": {}, "n_test": 4, "n_val": 0, "season": 1, "horizon": 1}
    >>> print(format_table(data).splitlines()[1])
    test  model                1.0000*     1.0000*     2.0000*     0.5000*
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import baselines, combine
from ..forecasting.ensemble import table_lines

#: Every forecaster a report can hold, in the table's order.
FORECASTERS = ("model", *baselines.NAIVE, *baselines.STATISTICAL, combine.NAME)
#: The table's columns: ``(report key, heading)``.
COLUMNS = (("mae", "MAE"), ("rmse", "RMSE"), ("mape", "MAPE %"), ("mase", "MASE"))


def _best(scores: dict[str, Any], key: str) -> str | None:
    scored = [
        name
        for name, m in scores.items()
        if m is not None and m.get(key) is not None and np.isfinite(m[key])
    ]
    return min(scored, key=lambda name: scores[name][key]) if scored else None


def format_table(data: dict[str, Any]) -> str:
    """The report's metrics as a small text table; ``*`` marks each split's best (lowest)
    value of every metric."""
    head = "".join(f"{title:>12}" for _, title in COLUMNS)
    lines = [f"{'split':<6}{'forecaster':<16}{head}"]
    for split in ("test", "val"):
        scores = data.get(split) or {}
        if not scores:
            lines.append(f"{split:<6}(no windows)")
            continue
        best = {key: _best(scores, key) for key, _ in COLUMNS}
        for name in FORECASTERS:
            if name not in scores:
                continue
            m = scores[name]
            if m is None:
                lines.append(f"{split:<6}{name:<16}{'n/a (no finite forecasts)':>36}")
                continue
            cells = []
            for key, _ in COLUMNS:
                value = m.get(key)
                text = "n/a" if value is None else f"{value:.4f}"
                cells.append(f"{text + ('*' if best[key] == name else ' '):>12}")
            lines.append(f"{split:<6}{name:<16}{''.join(cells)}".rstrip())
        if split == "test":  # a seed ensemble: its best and worst member
            lines += table_lines(data, COLUMNS)
    lines += _interval_table(data)
    lines += undefined_notes(data)
    lines.append(
        f"n_test={data['n_test']} n_val={data['n_val']} scored targets (every origin, "
        f"horizon {data['horizon']}); season={data['season']}"
    )
    lines += _retrain_lines(data.get("retrain"))
    if "n_series" in data:
        lines.append(
            f"{data['n_series']} series scored together; MASE is the mean of each series' "
            "MASE; per_series in report.json"
        )
    return "\n".join(lines)


def _retrain_lines(retrain: dict[str, Any] | None) -> list[str]:
    """What the report's model is, for a retrained run: the saved model trained again on
    every row (``rows="all"``; the scores are its selection's) or on the training and
    validation rows (``"train+val"``)."""
    if not retrain:
        return []
    every = retrain.get("rows", "train+val") == "all"
    if isinstance(retrain["epochs"], list):  # a seed ensemble's members
        epochs = ", ".join(str(e) for e in retrain["epochs"])
        if every:
            return [
                f"members: each then trained again on every row for the epochs chosen on "
                f"validation ({epochs}); test and val score the median of their selection "
                f"runs ({retrain['selection']}/)"
            ]
        return [
            f"members: each retrained for the epochs chosen on validation ({epochs}) on the "
            "training and validation windows; val scores the median of their selection runs "
            f"({retrain['selection']}/)"
        ]
    if every:
        return [
            f"the saved model was then trained again on every row for "
            f"{_epochs(retrain['epochs'])} (chosen on validation); test and val score the model of "
            f"{retrain['selection']}/, which did not train on them"
        ]
    return [
        f"model: retrained for {_epochs(retrain['epochs'])} (chosen on validation) on the "
        f"training and validation windows; val scores the model of {retrain['selection']}/"
    ]


def _epochs(n: int) -> str:
    """``"1 epoch"``, ``"11 epochs"``."""
    return f"{n} epoch" if n == 1 else f"{n} epochs"


#: Why a metric can be undefined (None in ``report.json``, ``n/a`` in the table).
UNDEFINED = {
    "mape": "every target is 0, where a percentage error is undefined",
    "mase": "the in-sample seasonal naive error is 0 (a constant history), which scales it",
}


def undefined_notes(data: dict[str, Any]) -> list[str]:
    """One note line per metric that some forecaster of a split could not be given (None,
    printed ``n/a``), saying why; forecasters without finite forecasts are not counted."""
    lines = []
    for key, why in UNDEFINED.items():
        splits = [
            split
            for split in ("test", "val")
            if any(
                m is not None and m.get(key, 0.0) is None for m in (data.get(split) or {}).values()
            )
        ]
        if splits:
            title = dict(COLUMNS).get(key, key).split()[0]
            lines.append(f"{title} n/a ({' and '.join(splits)}): {why}")
    return lines


def _interval_table(data: dict[str, Any]) -> list[str]:
    """The test intervals' lines: coverage and mean width per nominal level, and the weighted
    quantile loss (``*``: the lowest)."""
    levels = data.get("interval_levels")
    scores = data.get("test") or {}
    if not levels or not scores:
        return []
    titles = [f"cover {k}" for k in levels] + [f"width {k}" for k in levels] + ["wQL"]
    lines = [f"{'test intervals':<22}" + "".join(f"{t:>12}" for t in titles)]
    best = _best(scores, "wql")
    if data.get("conformal"):
        how = "the model's intervals are calibrated on the validation windows"
    elif (scores.get("model") or {}).get("coverage") is None:
        how = "the model gives point forecasts (an interval loss or conformal gives intervals)"
    else:
        how = "the model's intervals are its own (uncalibrated)"
    for name in FORECASTERS:
        m = scores.get(name)
        if name not in scores or m is None:
            continue
        if m.get("coverage") is None:
            lines.append(f"{'':<6}{name:<16}{'n/a (point forecasts only)':>36}")
            continue
        cells = [f"{m['coverage'][k]:.3f}" for k in levels]
        cells += [f"{m['width'][k]:.4g}" for k in levels]
        wql = "n/a" if m["wql"] is None else f"{m['wql']:.4g}"
        cells.append(wql + ("*" if best == name else " "))
        lines.append(f"{'':<6}{name:<16}" + "".join(f"{c:>12}" for c in cells).rstrip())
    lines.append(f"{how}; the baselines' come from their validation residuals")
    return lines
