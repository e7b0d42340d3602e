"""The shipped weights: one small file pair per frequency family, read into a run for
inference without a run folder.

A family's weights are ``weights/<family>.npz`` (the parameters, float32, one array per
leaf named by its path, ``lstm/layer_0/...``) and ``weights/<family>.json``: the run's
``config.json`` content (its settings and the scaler of one training series, a template:
every series forecast is scaled on its own rows), the time step it was trained on, the
SHA-256 of the ``.npz``, the interval quantiles fitted at training time
(:mod:`stacklstm.forecasting.zeroshot_intervals`), the forecast of a check series recorded at
training time (the tests compare it), and how it was trained. A family shipped as a seed
ensemble has more members, each trained with the same settings and another seed:
``weights/<family>-<k>.npz`` (k = 1, 2, ...), listed with their seeds and SHA-256 under the
``.json``'s ``members`` (:func:`read_members`); its forecast is the median of every member's,
as a seed ensemble's run (:class:`stacklstm.forecasting.inference.EnsembleRun`).

Example:
    >>> sorted(FAMILIES)
    ['daily', 'hourly', 'monthly', 'quarterly', 'weekly', 'yearly']
    >>> FAMILIES["monthly"].season, FAMILIES["monthly"].freq
    (12, 'MS')
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"
#: The environment variable naming another folder of weights (:func:`weights_dir`).
WEIGHTS_ENV = "STACKLSTM_WEIGHTS_DIR"
FORMAT = 1


@dataclass(frozen=True)
class Family:
    """A frequency family: the time step its model was trained on (a pandas alias), its
    season in steps, and the most steps it forecasts at once (its horizon)."""

    name: str
    freq: str
    season: int
    horizon: int


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("yearly", "YS", 1, 6),
        Family("quarterly", "QS", 4, 8),
        Family("monthly", "MS", 12, 18),
        Family("weekly", "W", 52, 13),
        Family("daily", "D", 7, 14),
        Family("hourly", "h", 24, 48),
    )
}


def family_of(freq: str) -> str:
    """The family of a pandas time step: ``"MS"``, ``"ME"`` -> ``"monthly"``, ``"W-SUN"`` ->
    ``"weekly"``, ``"B"`` -> ``"daily"``, ...

    Raises:
        ValueError: A step no shipped model covers (15 minutes, two months, ...).

    Example:
        >>> family_of("ME"), family_of("QS-OCT"), family_of("W-SAT"), family_of("7D")
        ('monthly', 'quarterly', 'weekly', 'weekly')
    """
    try:
        offset = pd.tseries.frequencies.to_offset(freq)
    except (ValueError, TypeError) as err:
        raise ValueError(f"{freq!r} is not a pandas time step") from err
    kind = type(offset).__name__
    families = {
        "yearly": ("YearBegin", "YearEnd", "BYearBegin", "BYearEnd"),
        "quarterly": ("QuarterBegin", "QuarterEnd", "BQuarterBegin", "BQuarterEnd"),
        "monthly": ("MonthBegin", "MonthEnd", "BusinessMonthBegin", "BusinessMonthEnd"),
        "weekly": ("Week",),
        "daily": ("Day", "BusinessDay"),
        "hourly": ("Hour",),
    }
    if kind == "Day" and offset.n == 7:  # a run's weekly step (Series.freq, "7D")
        return "weekly"
    for name, kinds in families.items():
        if kind in kinds and offset.n == 1:
            return name
    raise ValueError(
        f"no pretrained model for a time step of {freq!r}: the shipped models are "
        f"{', '.join(FAMILIES)} (one step each); fine-tune or train a model on it instead"
    )


def infer_freq(times: pd.Series, ids: pd.Series | None) -> str | None:
    """The time step of the first series with three or more rows whose step pandas can tell
    (:func:`pandas.infer_freq`), or None."""
    stamps = pd.to_datetime(times)
    groups = [stamps] if ids is None else [g for _, g in stamps.groupby(ids.to_numpy(), sort=False)]
    for group in groups:
        if len(group) >= 3:
            freq = pd.infer_freq(pd.DatetimeIndex(group.sort_values().to_numpy()))
            if freq is not None:
                return freq
    return None


def check_frame(family: str) -> pd.DataFrame:
    """The check series of ``family`` (``unique_id, ds, y``), whose forecast the weights'
    ``.json`` records at training time: the bundled weekly CO2 record resampled to the
    family's step (means; weeks without a record interpolated), or two synthetic series
    (daily, hourly: :func:`~stacklstm.datasets.synthetic.synthetic_panel`, seed 12345)."""
    from ..data import bundled_dataset_path
    from ..datasets.synthetic import synthetic_panel

    if family in ("daily", "hourly"):
        return synthetic_panel(2, 200, freq=FAMILIES[family].freq, seed=12345)
    co2 = pd.read_csv(bundled_dataset_path(), parse_dates=["date"]).set_index("date")["co2"]
    step = {"yearly": "YS", "quarterly": "QS", "monthly": "MS", "weekly": "W-SAT"}[family]
    series = co2.resample(step).mean().interpolate()
    return pd.DataFrame({"unique_id": "co2", "ds": series.index, "y": series.to_numpy()})


def flat_params(params: Any) -> dict[str, np.ndarray]:
    """``{"a/b/kernel": float32 array}`` of a parameter tree (nested mappings)."""
    from flax import traverse_util

    flat = traverse_util.flatten_dict(plain_tree(params), sep="/")
    return {key: np.asarray(value, np.float32) for key, value in sorted(flat.items())}


def plain_tree(tree: Any) -> Any:
    """A parameter tree (a ``FrozenDict`` or nested mappings) as nested plain dicts."""
    if hasattr(tree, "items"):
        return {str(k): plain_tree(v) for k, v in tree.items()}
    return tree


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """The compressed ``.npz`` of ``arrays``, byte-identical for identical arrays."""
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()


def weights_dir() -> Path:
    """The folder weights are read from: ``$STACKLSTM_WEIGHTS_DIR`` (weights trained by
    ``benchmarks/pretrain.py`` on other data, as the leave-one-out benchmark does), else the
    shipped ones."""
    return Path(os.environ.get(WEIGHTS_ENV) or WEIGHTS_DIR)


def weights_paths(family: str, folder: str | Path | None = None) -> tuple[Path, Path]:
    """``(<family>.npz, <family>.json)`` in ``folder`` (:func:`weights_dir` by default)."""
    folder = weights_dir() if folder is None else Path(folder)
    return folder / f"{family}.npz", folder / f"{family}.json"


def save_weights(folder: Path, family: str, params: Any, meta: dict[str, Any]) -> tuple[Path, Path]:
    """Write ``family``'s ``.npz`` (``params``) and ``.json`` (``meta`` plus the format and
    the ``.npz``'s SHA-256) into ``folder``; returns both paths."""
    folder.mkdir(parents=True, exist_ok=True)
    npz, meta_path = weights_paths(family, folder)
    data = npz_bytes(flat_params(params))
    npz.write_bytes(data)
    content = {"format": FORMAT, "family": family, **meta}
    content["sha256"] = hashlib.sha256(data).hexdigest()
    meta_path.write_text(json.dumps(content, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    return npz, meta_path


def member_path(family: str, k: int, folder: str | Path | None = None) -> Path:
    """The ``.npz`` of member ``k >= 1`` of ``family``'s ensemble in ``folder``
    (:func:`weights_dir` by default); member 0 is ``<family>.npz``."""
    folder = weights_dir() if folder is None else Path(folder)
    return folder / f"{family}-{k}.npz"


def add_member(folder: Path, family: str, params: Any, seed: int) -> Path:
    """Write ``params`` as the next member of ``family``'s ensemble in ``folder`` (beside its
    ``.npz`` and ``.json``, :func:`save_weights`) and list it, with ``seed`` and its
    SHA-256, under the ``.json``'s ``members``; returns the member's ``.npz``."""
    meta_path = weights_paths(family, folder)[1]
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    members = meta.setdefault("members", [])
    path = member_path(family, len(members) + 1, folder)
    data = npz_bytes(flat_params(params))
    path.write_bytes(data)
    members.append({"file": path.name, "seed": seed, "sha256": hashlib.sha256(data).hexdigest()})
    meta_path.write_text(json.dumps(meta, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    return path


def available() -> list[str]:
    """The families whose weights are in :func:`weights_dir` (both files present)."""
    return [name for name in FAMILIES if all(p.is_file() for p in weights_paths(name))]


def read_weights(family: str, folder: str | Path | None = None) -> tuple[dict[str, Any], dict]:
    """``(meta, nested params)`` of ``family`` in ``folder`` (:func:`weights_dir` by
    default), read once per process.

    Raises:
        ValueError: No weights for ``family``, or a ``.npz`` that differs from the SHA-256
            recorded beside it (a damaged file).
    """
    folder = weights_dir() if folder is None else Path(folder)
    return _read_weights(family, str(folder.resolve()))


@functools.cache
def _read_weights(family: str, folder: str) -> tuple[dict[str, Any], dict]:
    npz, meta_path = weights_paths(family, folder)
    if not npz.is_file() or not meta_path.is_file():
        raise ValueError(
            f"no pretrained weights for the {family} family (looked for {npz.name} in "
            f"{npz.parent}); shipped: {', '.join(available()) or 'none'}"
        )
    data = npz.read_bytes()
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    if meta.get("format") != FORMAT:
        raise ValueError(f"{meta_path} has format {meta.get('format')!r}, expected {FORMAT}")
    if hashlib.sha256(data).hexdigest() != meta.get("sha256"):
        raise ValueError(f"{npz} differs from the SHA-256 recorded in {meta_path.name}: damaged")
    return meta, _params(data)


def _params(data: bytes) -> dict:
    """The nested parameters of a ``.npz``'s bytes."""
    from flax import traverse_util

    with np.load(io.BytesIO(data)) as arrays:
        flat = {key: arrays[key] for key in arrays.files}
    return traverse_util.unflatten_dict(flat, sep="/")


def read_members(family: str, folder: str | Path | None = None) -> list[dict]:
    """The nested parameters of every member of ``family``'s ensemble after the first (none
    for a single model), in the order of the ``.json``'s ``members``.

    Raises:
        ValueError: The weights of ``family`` are missing or damaged (:func:`read_weights`),
            or a member's ``.npz`` is missing or differs from its recorded SHA-256.
    """
    folder = weights_dir() if folder is None else Path(folder)
    meta, _ = read_weights(family, folder)
    out = []
    for entry in meta.get("members", []):
        path = folder / entry["file"]
        if not path.is_file():
            raise ValueError(f"member {path.name} of the {family} weights is missing from {folder}")
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() != entry["sha256"]:
            raise ValueError(f"{path} differs from the SHA-256 recorded for it: damaged")
        out.append(_params(data))
    return out
