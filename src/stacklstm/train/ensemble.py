"""Seed ensembles: ``ensemble=N`` models that differ only in their seed, forecasting together.

An ensemble's run folder holds ``config.json`` (the run's settings with ``ensemble=N``) and
one ordinary run folder per member::

    RUN_DIR/config.json           the settings (ensemble=N, the base seed), data path, scaler
    RUN_DIR/members/<k>/          member k = 0..N-1: a complete run folder, seed = seed + k,
                                  ensemble = 1, baselines = "naive"
    RUN_DIR/report.json           the ensemble's report (written once every member finished),
                                  with each member's metrics

The ensemble's forecast is the **median over the members**, per origin, horizon step and
target (``numpy.median`` over the member axis: for an even N the mean of the two middle
values). A model with quantiles (``loss=quantile``, ``normal``, ``student_t``) gets the median
of the members' quantiles at each level; since every member's quantiles ascend with the level,
so do the medians (no crossing is introduced). With ``conformal=True`` the ensemble's median
forecast is calibrated on the validation windows, as a single model's is.

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

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..config import RunConfig
from ..intervals import Forecast
from . import inference
from .files import MEMBERS_DIR
from .inference import TrainedRun
from .rundir import RunInfo, read_run_info


def member_dir(run_dir: str | Path, k: int) -> Path:
    """The run folder of member ``k`` of the ensemble in ``run_dir``."""
    return Path(run_dir) / MEMBERS_DIR / str(k)


def member_config(cfg: RunConfig, k: int) -> RunConfig:
    """The settings of member ``k``: ``cfg`` with ``seed + k``, ``ensemble=1`` and the naive
    baselines only (the ensemble's own report scores every baseline once)."""
    train = dataclasses.replace(cfg.train, seed=cfg.train.seed + k, ensemble=1, baselines="naive")
    return dataclasses.replace(cfg, train=train)


def median_forecast(forecasts: Sequence[Forecast]) -> Forecast:
    """The median over members of the point forecasts and of the quantiles, level by level.

    Args:
        forecasts: The members' forecasts of the same windows: points ``(n, horizon,
            n_targets)``, quantiles ``(n, horizon, n_targets, Q)`` at the same levels.

    Returns:
        ``numpy.median`` over the member axis of each (for an even count, the mean of the two
        middle values).
    """
    if not forecasts:
        raise ValueError("an ensemble forecast needs at least one member's forecast")
    levels = forecasts[0].levels
    if any(f.levels != levels for f in forecasts):
        raise ValueError(f"the members' quantile levels differ: {[f.levels for f in forecasts]}")
    point = np.median(np.stack([f.point for f in forecasts]), axis=0)
    if forecasts[0].quantiles is None:
        return Forecast(point)
    quantiles = np.median(np.stack([f.quantiles for f in forecasts]), axis=0)
    return Forecast(point, quantiles, levels)


@dataclass(frozen=True)
class EnsembleRun:
    """A seed ensemble's run folder loaded for inference (see :func:`load_model`).

    Attributes:
        run_dir: The ensemble's folder.
        info: Its ``config.json`` (``info.config.train.ensemble`` members).
        members: The members, loaded as :class:`~stacklstm.train.inference.TrainedRun`.
    """

    run_dir: Path
    info: RunInfo
    members: tuple[TrainedRun, ...]

    @property
    def checkpoint(self) -> dict[str, Any]:
        """``{"members": [each member's checkpoint]}``."""
        return {"members": [m.checkpoint for m in self.members]}

    @property
    def freq(self) -> str | None:
        return self.members[0].freq

    @property
    def model(self) -> Any:
        return self.members[0].model  # the same module for every member

    @property
    def mesh(self) -> Any:
        return self.members[0].mesh

    @property
    def batch_size(self) -> int:
        return self.members[0].batch_size

    def member_forecasts(self, windows: Any, predict_step: Any = None) -> list[Forecast]:
        """Each member's forecasts of ``windows`` (uncalibrated, original units)."""
        return [m.forecast_quantiles(windows, predict_step) for m in self.members]

    def forecasts(self, windows: Any, predict_step: Any = None) -> tuple[Forecast, list[Forecast]]:
        """``(the median forecast, each member's)`` of ``windows``, the members forecast once."""
        members = self.member_forecasts(windows, predict_step)
        return median_forecast(members), members

    def forecast_quantiles(self, windows: Any, predict_step: Any = None) -> Forecast:
        """The median of the members' forecasts of ``windows`` (:func:`median_forecast`)."""
        return median_forecast(self.member_forecasts(windows, predict_step))


def load_model(run_dir: str | Path) -> TrainedRun | EnsembleRun:
    """Load a run folder for inference: a single model's
    (:func:`~stacklstm.train.inference.load_run`), or an ensemble's with every member (each
    restored from its best checkpoint).

    Raises:
        ValueError: Not a run folder; an ensemble member missing or not matching the
            ensemble's settings or scaler.
    """
    run_dir = Path(run_dir)
    info = read_run_info(run_dir)
    n = info.config.train.ensemble
    if n == 1:
        return inference.load_run(run_dir)
    members = []
    for k in range(n):
        folder = member_dir(run_dir, k)
        if not (folder / "config.json").is_file():
            raise ValueError(
                f"{run_dir} is an ensemble of {n} members but member {k} ({folder}) has not "
                "been trained yet; continue the training with `resume=True`"
            )
        member = inference.load_run(folder)
        expected = member_config(info.config, k)
        differences = member.info.config.diff(expected)
        if differences or member.info.scaler.to_dict() != info.scaler.to_dict():
            shown = "; ".join(differences) or "the fitted scaler"
            raise ValueError(
                f"member {k} ({folder}) does not belong to the ensemble in {run_dir}: {shown}"
            )
        members.append(member)
    return EnsembleRun(run_dir, info, tuple(members))


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
    "median_forecast",
    "member_config",
    "member_dir",
    "rank_members",
]
