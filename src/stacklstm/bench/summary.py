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


def _blas_text(blas: dict[str, Any] | None) -> str:
    if not blas:
        return "none (no compiled kernel)"
    packed = "" if blas.get("packed_gemm", True) else ", plain sgemm (STACKLSTM_PACKED_GEMM=0)"
    return f"{blas['blas']} ({blas['code_path']}{packed})"


def render_markdown(run: dict[str, Any], summary: dict[str, Any]) -> str:
    """The report: one table per workload, peers as columns, ``ms (ratio x)`` in each cell."""
    m = run["machine"]
    lines = [
        "# stacklstm benchmark",
        "",
        f"`{run['command']}`  ",
        f"{m['cpu_model']}, {m['cores']} cores ({' '.join(m.get('vector_extensions', []))}); "
        f"LSTM path {m.get('kernel_path')}; BLAS {_blas_text(m.get('blas'))}; "
        f"jax {m['versions'].get('jax')}, "
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


#: The vector extensions that decide the kernel's and the BLAS's speed, as Linux names them
#: in ``/proc/cpuinfo`` (x86: AVX2/FMA, AVX-512, AMX; ARM: NEON as ``asimd``, SVE).
VECTOR_FLAGS = (
    "avx2",
    "fma",
    "avx512f",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "asimd",
    "sve",
)


def cpu_info() -> tuple[str, list[str]]:
    """``(CPU model, its vector extensions among VECTOR_FLAGS)``, read from ``/proc/cpuinfo``
    on Linux (elsewhere the platform's processor name and no extensions)."""
    cpu, flags = platform.processor() or platform.machine() or "unknown CPU", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" or (key.strip() == "Model" and not flags):
                cpu = value.strip()  # x86's model name, or an ARM board's Model line
            elif key.strip() in ("flags", "Features") and not flags:
                flags = set(value.split())
    except OSError:
        pass
    return cpu, [f for f in VECTOR_FLAGS if f in flags]


def kernel_info() -> dict[str, Any]:
    """The LSTM path for float32 here (``native`` or ``xla``) and the BLAS the compiled
    kernel uses with the code path it chose on this CPU (imports jax)."""
    from ..kernels import info
    from ..kernels.native import blas_info

    return {"kernel_path": info().path, "blas": blas_info()}


def machine_line(kernel: dict[str, Any] | None = None) -> str:
    """One line naming the machine a figure was measured on: CPU model, cores, vector
    extensions, the LSTM path and the BLAS with its code path (pass :func:`kernel_info`'s
    answer, or it is computed here, importing jax)."""
    cpu, flags = cpu_info()
    kernel = kernel_info() if kernel is None else kernel
    blas = kernel.get("blas")
    blas_text = _blas_text(blas)
    return (
        f"{cpu}, {os.cpu_count()} cores, {' '.join(flags) or 'no AVX2/AVX-512/NEON flags'}; "
        f"LSTM path {kernel.get('kernel_path')}; BLAS {blas_text}"
    )


def machine_info() -> dict[str, Any]:
    """CPU model, its vector extensions, cores, platform, the LSTM path and BLAS, and the
    versions of the libraries."""
    cpu, flags = cpu_info()
    try:
        kernel = kernel_info()
    except Exception as err:  # a description must not stop a benchmark
        kernel = {"kernel_path": f"unknown ({type(err).__name__})", "blas": None}
    versions = {}
    for dist in ("stacklstm", "jax", "jaxlib", "flax", "optax", "numpy", "torch", "keras"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    return {
        "cpu_model": cpu,
        "vector_extensions": flags,
        **kernel,
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": versions,
    }
