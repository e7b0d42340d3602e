"""The benchmark's results as figures: medians, ratios to stacklstm, the GEMM roofline's share, the
markdown table, and the machine they were measured on."""

from __future__ import annotations

import os
import platform
import statistics
from importlib import metadata
from pathlib import Path
from typing import Any

from .workloads import WORKLOADS, forward_flops, gemm_flops, train_flops

ROWS: tuple[tuple[str, str], ...] = (
    ("train", "train step (ms)"),
    ("forward", "forward (ms)"),
    ("stream", "streaming step, batch 1 (ms)"),
    ("compile", "compile train step (ms)"),
    ("first_train_call", "first train call, incl. compile (ms)"),
)
REFERENCE = "stacklstm"
BASELINE = "stacklstm@baseline"


def gemm_rate(run: dict[str, Any]) -> dict[str, Any] | None:
    """FLOP/s of the roofline GEMM: per backend the median over all workloads, the faster wins."""
    pooled: dict[str, list[float]] = {}
    for wl in run["workloads"].values():
        samples = wl["peers"].get("gemm", {}).get("samples", {})
        for name in ("gemm_xla", "gemm_torch"):
            pooled.setdefault(name, []).extend(samples.get(name, []))
    rates = {k: gemm_flops() / statistics.median(v) for k, v in pooled.items() if v}
    if not rates:
        return None
    best = max(rates, key=rates.__getitem__)
    return {"flops_per_s": rates[best], "backend": best, "by_backend": rates}


def summarize(run: dict[str, Any]) -> dict[str, Any]:
    """Medians (ms), ratios ``peer / stacklstm`` (>1: stacklstm is faster) and roofline shares."""
    roof = gemm_rate(run)
    out: dict[str, Any] = {"gemm": roof, "workloads": {}}
    for name, wl in run["workloads"].items():
        w = WORKLOADS[name]
        medians = {
            peer: {m: 1e3 * statistics.median(s) for m, s in r["samples"].items() if s}
            for peer, r in wl["peers"].items()
            if r["status"] == "ok" and peer != "gemm"
        }
        for peer, r in wl["peers"].items():
            if peer in medians and "memory" in r:
                medians[peer]["rss_mb"] = r["memory"]["rss_peak_growth_bytes"] / 2**20
                if r["memory"].get("device_peak_bytes"):
                    medians[peer]["device_mb"] = r["memory"]["device_peak_bytes"] / 2**20
        ref = medians.get(REFERENCE, {})
        ratios = {
            peer: {m: v / ref[m] for m, v in meds.items() if ref.get(m)}
            for peer, meds in medians.items()
        }
        entry: dict[str, Any] = {
            "train_flops": train_flops(w),
            "forward_flops": forward_flops(w),
            "median_ms": medians,
            "ratio_to_stacklstm": ratios,
        }
        if roof is not None:
            roof_ms = 1e3 * train_flops(w) / roof["flops_per_s"]
            entry["train_roofline_ms"] = roof_ms
            entry["train_pct_of_roofline"] = {
                peer: 100 * roof_ms / meds["train"]
                for peer, meds in medians.items()
                if "train" in meds
            }
        out["workloads"][name] = entry
    return out


def _fmt(value: float) -> str:
    return f"{value:.3g}" if value < 1000 else f"{value:.0f}"


def render_markdown(run: dict[str, Any], summary: dict[str, Any]) -> str:
    """The report: one table per workload, peers as columns, ``ms (ratio x)`` in each cell."""
    m = run["machine"]
    lines = [
        "# stacklstm benchmark",
        "",
        f"`{run['command']}`  ",
        f"{m['cpu_model']}, {m['cores']} cores; jax {m['versions'].get('jax')}, "
        f"flax {m['versions'].get('flax')}, torch {m['versions'].get('torch')}, "
        f"keras {m['versions'].get('keras')}; {run['settings']['threads']} threads per worker; "
        f"{run['settings']['repeats']} repetitions x "
        f"{run['settings']['iters']} calls, interleaved; medians.",
        "",
        "Cells: median `ms (peer / stacklstm)`; a ratio > 1 means stacklstm is faster (smaller).",
    ]
    if run["settings"].get("baseline"):
        lines.append(
            f"`{BASELINE}`: the `stacklstm` peer of the package in `{run['settings']['baseline']}`."
        )
    roof = summary["gemm"]
    if roof is not None:
        rates = ", ".join(f"{k[5:]} {v / 1e9:.1f}" for k, v in roof["by_backend"].items())
        lines.append(
            f"Roofline: float32 GEMM at {roof['flops_per_s'] / 1e9:.1f} GFLOP/s ({rates}); "
            "% of roofline = (training matmul FLOPs / GEMM rate) / measured time."
        )
    for name, wl in run["workloads"].items():
        s = summary["workloads"][name]
        peers = [p for p in s["median_ms"]]
        lines += ["", f"## {name}: {WORKLOADS[name].describe()}", ""]
        if not peers:
            lines.append("No peer ran.")
        else:
            lines += ["| measure | " + " | ".join(peers) + " |", "|---" * (len(peers) + 1) + "|"]
            rows = [*ROWS, ("rss_mb", "peak RSS growth (MB)"), ("device_mb", "device peak (MB)")]
            for key, label in rows:
                if not any(key in s["median_ms"][p] for p in peers):
                    continue
                cells = []
                for p in peers:
                    v = s["median_ms"][p].get(key)
                    r = s["ratio_to_stacklstm"][p].get(key)
                    cell = "n/a" if v is None else _fmt(v)
                    if v is not None and r is not None and p != REFERENCE:
                        cell += f" ({r:.2f}x)"
                    cells.append(cell)
                lines.append(f"| {label} | " + " | ".join(cells) + " |")
                if key == "train" and "train_pct_of_roofline" in s:
                    pct = s["train_pct_of_roofline"]
                    cells = [f"{pct[p]:.1f}%" if p in pct else "n/a" for p in peers]
                    lines.append(
                        f"| train, % of roofline ({_fmt(s['train_roofline_ms'])} ms) | "
                        + " | ".join(cells)
                        + " |"
                    )
        for peer, r in wl["peers"].items():
            if r["status"] != "ok":
                lines.append(f"- **{peer}** {r['status']}: {r['reason'].splitlines()[0]}")
        lines.append("")
        lines += [f"- {p}: {r['notes']}" for p, r in wl["peers"].items() if r["status"] == "ok"]
    return "\n".join(lines) + "\n"


def machine_info() -> dict[str, Any]:
    """CPU model, cores, platform and the versions of the libraries (without importing them)."""
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = {}
    for dist in ("stacklstm", "jax", "jaxlib", "flax", "optax", "numpy", "torch", "keras"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    return {
        "cpu_model": cpu,
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": versions,
    }
