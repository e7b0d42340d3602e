"""Seed ensembles: ``ensemble=N`` models that differ only in their seed, forecasting together.

An ensemble's run folder holds ``config.json`` (the run's settings with ``ensemble=N``) and
one ordinary run folder per member::

    RUN_DIR/config.json           the settings (ensemble=N, the base seed), data path, scaler
    RUN_DIR/members/<k>/          member k = 0..N-1: a complete run folder, seed = seed + k,
                                  ensemble = 1, baselines = "naive"; with retrain = "on"
                                  (a panel's default) a retrained run, with its selection/
    RUN_DIR/report.json           the ensemble's report (written once every member finished),
                                  with each member's metrics

The ensemble's forecast is the **median over the members**, per origin, horizon step and
target (``numpy.median`` over the member axis: for an even N the mean of the two middle
values). A model with quantiles (``loss=quantile``, ``normal``, ``student_t``) gets the median
of the members' quantiles at each level; since every member's quantiles ascend with the level,
so do the medians (no crossing is introduced). With ``conformal=True`` the ensemble's median
forecast is calibrated on the validation windows, as a single model's is (for retrained
members, the median of their selection runs' forecasts, which did not train on them:
:func:`stacklstm.forecasting.inference.load_selection`).

:func:`stacklstm.forecasting.inference.load_run` loads an ensemble's folder (as an
:class:`EnsembleRun`) as it loads a single run's; the loaded ensemble, the median and the
members' folders and settings are defined there, beside the single run, and re-exported here
with the report's helpers below. ``load_model`` is the former name of ``load_run``.

Example:
    >>> a = Forecast(np.array([[[1.0]], [[5.0]]]))
    >>> b = Forecast(np.array([[[3.0]], [[4.0]]]))
    >>> median_forecast([a, b]).point[:, 0, 0]
    array([2. , 4.5])
    >>> from stacklstm.config import TrainConfig
    >>> member_config(RunConfig(train=TrainConfig(seed=7, ensemble=3)), 2).train.seed
    9
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..config import RunConfig as RunConfig
from ..intervals import Forecast as Forecast
from ..rundir.files import MEMBERS_DIR as MEMBERS_DIR
from .inference import EnsembleRun as EnsembleRun
from .inference import load_run as load_run
from .inference import median_forecast as median_forecast
from .inference import member_config as member_config
from .inference import member_dir as member_dir

#: The former name of :func:`stacklstm.forecasting.inference.load_run` (which loads a single run or
#: an ensemble and returns the loaded run, not a model); kept so older code keeps working.
load_model = load_run


def rank_members(scores: Sequence[dict[str, Any] | None]) -> dict[str, int | str | None]:
    """The best and worst member by their test MASE (MAE where some member has no MASE).

    Args:
        scores: Each member's test metrics (None for a member without finite forecasts,
            which counts as the worst).

    Returns:
        ``{"ranked_by": "mase" | "mae", "best": k, "worst": k}`` (None without any scores).

    Example:
        >>> rank_members([{"mae": 2.0, "mase": 0.5}, {"mae": 1.0, "mase": 0.4}, None])
        {'ranked_by': 'mase', 'best': 1, 'worst': 2}
    """

    def value(metrics: dict[str, Any] | None, key: str) -> float:
        v = None if metrics is None else metrics.get(key)
        return math.inf if v is None or not np.isfinite(v) else float(v)

    scored = [m for m in scores if m is not None]
    if not scored:
        return {"ranked_by": None, "best": None, "worst": None}
    key = "mase" if all(m.get("mase") is not None for m in scored) else "mae"
    order = sorted(range(len(scores)), key=lambda k: (value(scores[k], key), k))
    return {"ranked_by": key, "best": order[0], "worst": order[-1]}


def table_lines(data: dict[str, Any], columns: Sequence[tuple[str, str]]) -> list[str]:
    """The report table's lines for an ensemble: its best and worst member's test metrics."""
    ens = data.get("ensemble")
    if not ens:
        return []
    lines = []
    for which in ("best", "worst"):
        k = ens.get(which)
        if k is None:
            continue
        member = ens["members"][k]
        m = member["test"]
        name = f"{which} member {k}"
        if m is None:
            lines.append(f"{'test':<6}{name:<16}{'n/a (no finite forecasts)':>36}")
            continue
        cells = "".join(
            f"{('n/a' if m.get(key) is None else f'{m[key]:.4f}') + ' ':>12}" for key, _ in columns
        )
        lines.append(f"{'test':<6}{name:<16}{cells}".rstrip())
    seeds = [member["seed"] for member in ens["members"]]
    lines.append(
        f"model: the median of {ens['size']} members (seeds {seeds[0]}-{seeds[-1]}); best and "
        f"worst member by test {ens['ranked_by']}; every member in report.json"
    )
    return lines


__all__ = [
    "MEMBERS_DIR",
    "EnsembleRun",
    "load_model",
    "load_run",
    "median_forecast",
    "member_config",
    "member_dir",
    "rank_members",
]
