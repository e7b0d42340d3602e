"""Set-up shared by several test modules: the tiny training runs, child-process settings,
the in-process CLI, run-folder readers, disk-full stand-ins, small data series, the toy train
step, and the benchmark scripts as modules."""

import contextlib
import dataclasses
import errno
import importlib.util
import io
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from stacklstm import StackedLSTM, kernels
from stacklstm.cli import main
from stacklstm.data import DataConfig, DataError, prepare_series
from stacklstm.forecaster import build_model
from stacklstm.intervals import OutputHead
from stacklstm.kernels import native
from stacklstm.kernels.lstm import LSTMState
from stacklstm.rundir import read_run_info
from stacklstm.rundir.files import METRICS_FILE
from stacklstm.train import ModelConfig, RunConfig, TrainConfig
from stacklstm.train.checkpoint import RunCheckpoints
from stacklstm.train.step import Batch, init_state, make_optimizer, make_train_step

# The JAX settings of the suite's compilation cache (conftest.py turns it on) and the
# environment variables that pass them to a child process.
CACHE_SETTINGS = (
    ("jax_compilation_cache_dir", "JAX_COMPILATION_CACHE_DIR"),
    ("jax_persistent_cache_min_compile_time_secs", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"),
    ("jax_persistent_cache_min_entry_size_bytes", "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"),
)


def cache_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's environment) plus the suite's compilation cache, so a
    child process compiles nothing the suite already compiled."""
    env = {**os.environ} if env is None else dict(env)
    for name, variable in CACHE_SETTINGS:
        env[variable] = str(getattr(jax.config, name))
    return env


def tiny_run(
    batch_size: int = 64, log_every: int = 10, checkpoint_every: int = 20
) -> tuple[list[str], RunConfig]:
    """The suite's tiny training run (2284 weekly rows, windows of 6: 1592 training windows;
    2 LSTM layers of 8 with dropout, so a resume must restore the RNG too; naive baselines
    only, since AutoARIMA with season 52 takes a minute on that series) as ``stacklstm
    train`` flags and as the ``RunConfig`` those flags mean. The same settings everywhere let
    the compilation cache hit."""
    flags = [
        "--window",
        "6",
        "--hidden-size",
        "8",
        "--num-layers",
        "2",
        "--linear-layer-sizes",
        "8",
        "--dropout",
        "0.2",
        "--epochs",
        "2",
        "--batch-size",
        str(batch_size),
        "--log-every",
        str(log_every),
        "--checkpoint-every",
        str(checkpoint_every),
        "--baselines",
        "naive",
        "--season",
        "52",
        "--no-deseasonalize",
        "--patience",
        "15",
        "--start-padding",
        "none",
        "--season-window",
        "none",
        "--scaler",
        "standard",
        "--retrain",
        "off",
        "--loss-weight",
        "none",
        "--target-transform",
        "none",
        "--init",
        "random",
    ]
    # every setting explicit (none "auto"): the saved config equals this one as it is
    run = RunConfig(
        DataConfig(
            window=6,
            season=52,
            deseasonalize=False,
            start_padding="none",
            season_window=None,
            scaler="standard",
            target_transform="none",
        ),
        ModelConfig(
            lstm_hidden_size=8, num_lstm_layers=2, linear_layer_sizes=(8,), dropout_rate=0.2
        ),
        TrainConfig(
            epochs=2,
            batch_size=batch_size,
            log_every=log_every,
            checkpoint_every=checkpoint_every,
            baselines="naive",
            patience=15,
            retrain="off",
            loss_weight="none",
            init="random",
        ),
    )
    return flags, run


# 2284 weekly rows -> windows of 6: 1592 training windows, 24 steps per epoch at batch 64.
# Dropout (between the two LSTM layers) on, so resuming must restore the RNG stream too.
TINY_RUN = tiny_run()[1]


def _leaves(tree):
    return [np.asarray(x) for x in jax.tree.leaves(tree)]


# Small enough to run in seconds, long enough to kill in the middle of an epoch: 1592
# training windows of 6 weeks -> 99 steps per epoch at batch 16, 198 in all; a metrics line
# every 5 steps, a checkpoint every 10. Dropout is on, so a resume must restore the RNG too.
CRASH_FLAGS, CRASH_RUN = tiny_run(batch_size=16, log_every=5, checkpoint_every=10)


STEPS_PER_EPOCH = 99

# The tiny run as a 2-member seed ensemble (seeds 3 and 4): 48 steps per member.
ENSEMBLE_RUN = dataclasses.replace(
    TINY_RUN, train=dataclasses.replace(TINY_RUN.train, ensemble=2, seed=3)
)

# Cheap search trials: the tiny model, two epochs of 99 steps (batch 16), naive baselines.
TRIAL_FLAGS = [
    "--window",
    "6",
    "--hidden-size",
    "8",
    "--num-layers",
    "1",
    "--linear-layer-sizes",
    "8",
    "--epochs",
    "2",
    "--batch-size",
    "16",
    "--season",
    "52",
    "--no-deseasonalize",
    "--baselines",
    "naive",
    "--quiet",
]


# When one array of a checkpoint cannot be read, Orbax's other reads are dropped unawaited.
ORBAX_ABANDONS_READS = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


PROPERTY = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _main(*argv):
    """``stacklstm ...`` in-process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def _metric_lines(run_dir):
    """metrics.jsonl without the wall-clock throughput (the one field allowed to differ)."""
    lines = (Path(run_dir) / METRICS_FILE).read_text().splitlines()
    return [{k: v for k, v in json.loads(s).items() if k != "steps_per_s"} for s in lines]


def _saved(run_dir):
    """Everything a run folder holds that must not depend on interruptions."""
    run_dir = Path(run_dir)
    info = read_run_info(run_dir)
    cfg = info.config
    head = OutputHead.of(cfg.train)
    model = build_model(cfg.model, head.output_size(cfg.data.horizon, len(cfg.data.target)))
    x = np.zeros((1, 1, len(info.scaler.columns)), np.float32)
    optimizer = make_optimizer(cfg.train, total_steps=1)  # the state's structure only
    target = jax.eval_shape(lambda: init_state(model, optimizer, jax.random.key(0), x))
    saved = {"metrics": _metric_lines(run_dir), "config": cfg}
    with RunCheckpoints(run_dir, read_only=True) as ckpts:
        for which in ("latest", "best"):
            step = ckpts.latest_step(which)
            state, rng, progress = ckpts.restore(which, target)
            leaves = [np.asarray(a) for a in jax.tree.leaves(state)]
            saved[which] = (step, [*leaves, np.asarray(jax.random.key_data(rng))], progress)
    report = run_dir / "report.json"
    saved["report"] = json.loads(report.read_text()) if report.exists() else None
    return saved


def _last_logged_step(run_dir):
    """The newest step of metrics.jsonl (0 without one); a half-written line is skipped."""
    path = Path(run_dir) / METRICS_FILE
    steps = [0]
    for line in path.read_text().splitlines() if path.exists() else []:
        with contextlib.suppress(json.JSONDecodeError, KeyError, TypeError):
            steps.append(json.loads(line)["step"])  # a line may be half written
    return max(steps)


def _complete_steps(run_dir):
    """Committed checkpoint steps (Orbax renames ``<step>.orbax-checkpoint-tmp`` when done)."""
    folder = Path(run_dir) / "checkpoints"
    if not folder.is_dir():
        return [-1]
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit()) or [-1]


def _truncate(path, keep=0.5):
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def _no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def _full_disk_at_commit(monkeypatch, step):
    """Orbax's commit of checkpoint ``step`` (writing its commit file, then the rename) fails
    as on a full disk. (Failing an item's write instead races with Orbax's clean-up of the
    other items, which may then report its own error first.)"""
    from orbax.checkpoint._src.path import atomicity

    commit = atomicity.AtomicRenameTemporaryPath.finalize

    async def full(self):
        if self.get_final().name == str(step) and self.get_final().parent.name == "checkpoints":
            _no_space()
        return await commit(self)

    monkeypatch.setattr(atomicity.AtomicRenameTemporaryPath, "finalize", full)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)


# readable numbers: no scaling, no window normalisation, row order as time (so no season)
RAW = {"target": ("v",), "time_column": None, "scaler": "none", "normalize": "none", "season": 1}


def series_of(values, **overrides):
    """Prepared series and config of one column ``v`` (and optional feature columns)."""
    values = np.asarray(values, dtype=np.float64)
    columns = {"v": values} if values.ndim == 1 else {"v": values[:, 0]}
    if values.ndim == 2:
        columns.update({f"f{j}": values[:, j] for j in range(1, values.shape[1])})
        overrides.setdefault("features", tuple(f"f{j}" for j in range(1, values.shape[1])))
    cfg = DataConfig(**{**RAW, **overrides})
    return prepare_series(pd.DataFrame(columns), cfg), cfg


def raises_one_line(match, fn, *args, error=DataError, **kwargs):
    with pytest.raises(error, match=match) as info:
        fn(*args, **kwargs)
    assert "\n" not in str(info.value)
    return info.value


DATES = ["2000-01-01", "2000-01-02", "2000-01-03", "2000-01-04", "2000-01-05"]


def _assert_same_run(got, expected):
    """Bit-identical params, optimizer state, RNG and bookkeeping, metrics and report."""
    assert got["config"] == expected["config"]
    for which in ("latest", "best"):
        (step, leaves, progress), (e_step, e_leaves, e_progress) = got[which], expected[which]
        assert step == e_step and progress == e_progress, which
        assert len(leaves) == len(e_leaves)
        for a, b in zip(leaves, e_leaves, strict=True):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)
    assert got["metrics"] == expected["metrics"]
    assert got["report"] == expected["report"]


def _long_series(n=100_000):
    """``(n,)`` a random walk plus a period-52 sine: long enough for seconds of AutoARIMA."""
    t = np.arange(n)
    rng = np.random.default_rng(0)
    return np.cumsum(rng.normal(size=n)) + 10 * np.sin(2 * np.pi * t / 52)


def monthly(values, start="2000-01-01"):
    """A ``date, y`` table of monthly rows (month starts) from ``start``."""
    return pd.DataFrame({"date": pd.date_range(start, periods=len(values), freq="MS"), "y": values})


# --------------------------------------------------------------------------- the toy step

TOY_MODEL = ModelConfig(lstm_hidden_size=8, num_lstm_layers=2, linear_layer_sizes=(8,))
TOY_CFG = TrainConfig(lr=3e-2, warmup_fraction=0.0)


class Toy(NamedTuple):
    model: Any
    optimizer: Any
    step: Any  # the plain jitted train step, compiled once per toy
    batch: Batch

    def state(self, seed=0):
        return init_state(self.model, self.optimizer, jax.random.key(seed), self.batch.x)


def make_toy() -> Toy:
    """A 2-layer model with horizon 2, its optimizer and train step, and a random batch of 16
    windows of 6 steps (x ``(16, 6, 1)``, y ``(16, 2, 1)``)."""
    rng = np.random.default_rng(0)
    model = build_model(TOY_MODEL, output_size=2)
    optimizer = make_optimizer(TOY_CFG, total_steps=100)
    x = rng.normal(size=(16, 6, 1)).astype(np.float32)  # (batch, time, features)
    y = rng.normal(size=(16, 2, 1)).astype(np.float32)  # (batch, horizon, n_targets)
    batch = Batch(x, y, np.ones(16, np.float32))
    return Toy(model, optimizer, make_train_step(model, optimizer, TOY_CFG), batch)


# --------------------------------------------------------------------------- benchmarks

ROOT = Path(__file__).resolve().parents[1]


def load_benchmark(name, module):
    """``benchmarks/<name>.py`` imported as the module ``module``, once per process (the
    test modules that use it share it)."""
    if module in sys.modules:
        return sys.modules[module]
    spec = importlib.util.spec_from_file_location(module, ROOT / "benchmarks" / f"{name}.py")
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[module] = loaded  # dataclasses look their module up
    spec.loader.exec_module(loaded)
    return loaded


SEASON = 4


def seasonal_values(n: int, seed: int = 0) -> np.ndarray:
    """``(n,)`` trend + season-4 wave + noise: every statistical model has something to fit."""
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    return 10 + 0.05 * t + 2 * np.sin(2 * np.pi * t / SEASON) + rng.normal(scale=0.3, size=n)


def _cfg(baselines: str = "all") -> RunConfig:
    return RunConfig(
        DataConfig(target=("y",), time_column=None, window=6, horizon=3, season=SEASON),
        ModelConfig(lstm_hidden_size=8, num_lstm_layers=1, linear_layer_sizes=(8,)),
        TrainConfig(epochs=3, batch_size=16, log_every=5, checkpoint_every=5, baselines=baselines),
    )


def _panel_table(path, lengths=(60, 50)):
    """Two series ``a`` (60 rows) and ``b`` (50 rows, another level and noise), no time."""
    parts = [
        pd.DataFrame({"id": name, "y": seasonal_values(n, seed=i) * (1 + i) + 5 * i})
        for i, (name, n) in enumerate(zip("ab", lengths, strict=True))
    ]
    pd.concat(parts).to_csv(path, index=False)
    return path


# tiny and fully explicit settings (nothing "auto" to resolve from the data), naive baselines
TINY = dict(
    horizon=3,
    window=8,
    season=7,
    deseasonalize=False,
    lstm_hidden_size=8,
    epochs=2,
    batch_size=16,
    patience=0,
    min_steps=0,
    baselines="naive",
    test_size=6,
    val_size=6,
    seed=0,
)


def _panel(ids=("a", "b", "c"), n=60, start="2020-01-01", seed=0):
    """A daily panel of weekly sines with noise: ``unique_id, ds, y``."""
    rng = np.random.default_rng(seed)
    parts = []
    for i, name in enumerate(ids):
        t = np.arange(n)
        y = 10 + i + np.sin(2 * np.pi * t / 7) + 0.1 * rng.standard_normal(n)
        ds = pd.date_range(start, periods=n, freq="D")
        parts.append(pd.DataFrame({"unique_id": name, "ds": ds, "y": y}))
    return pd.concat(parts, ignore_index=True)


# --- the compiled CPU kernel's tests (tests/kernels/)

ON_KERNEL_PLATFORM = sys.platform == "linux" and platform.machine() == "x86_64"


needs_kernel = pytest.mark.skipif(
    not native.available(), reason="the compiled CPU kernel is not built on this platform"
)


TARGET = "stacklstm_lstm_forward"


def _params(rng, features, hidden, scale=0.5):
    return {
        "kernel_ih": rng.normal(0, scale, (features, 4 * hidden)).astype(np.float32),
        "kernel_hh": rng.normal(0, scale, (hidden, 4 * hidden)).astype(np.float32),
        "bias": rng.normal(0, scale, (4 * hidden,)).astype(np.float32),
    }


def _case(seed, batch, time, features, hidden):
    rng = np.random.default_rng(seed)
    p = _params(rng, features, hidden)
    x = rng.normal(size=(batch, time, features)).astype(np.float32)
    s0 = LSTMState(*(rng.normal(size=(batch, hidden)).astype(np.float32) for _ in "hc"))
    return p, x, s0


def _both_paths(fn):
    out = {}
    for path in ("native", "xla"):
        with kernels.use(path):
            out[path] = fn()
    return out


def _stack(hidden, layers, bidirectional, features, seed=0):
    lstm = StackedLSTM(hidden, layers, bidirectional=bidirectional)
    params = lstm.init(jax.random.key(seed), jnp.ones((1, 3, features)))["params"]
    # a non-trivial bias, so that b_ih / b_hh cannot be mixed up unnoticed
    params = jax.tree.map(lambda a: a + 0.1 * jnp.arange(a.size).reshape(a.shape) / a.size, params)
    return lstm, params


def _raises_value_or_type_error(call):
    with pytest.raises((ValueError, TypeError)) as info:
        call()
    assert str(info.value).strip(), "an error must say what is wrong"


_WRONG_NDIM = st.lists(st.integers(0, 3), max_size=5).filter(lambda s: len(s) not in (2, 3))


_NOT_FLOAT = st.sampled_from([np.int8, np.int32, np.int64, np.uint8, np.bool_, np.complex64])


_NON_ARRAYS = st.sampled_from([None, "abc", object(), {"x": 1}, [[1.0], [1.0, 2.0]]])


# --- malformed inputs of the models (tests/test_model.py, tests/test_layers.py)
# (batch=2, time=5, features=3) is right; each of these is wrong in one way
BAD_X = st.one_of(
    _WRONG_NDIM.map(lambda s: np.zeros(s, np.float32)),
    _NOT_FLOAT.map(lambda d: np.zeros((2, 5, 3), d)),
    st.integers(0, 3).map(lambda b: np.zeros((b, 0, 3), np.float32)),  # no time steps
    st.integers(0, 7).filter(lambda f: f != 3).map(lambda f: np.zeros((2, 5, f), np.float32)),
    st.just(np.full((2, 5), np.nan, np.float32)),  # (batch, time): 1 feature, not 3
    _NON_ARRAYS,
)


_STATE = st.builds(
    lambda b, h: LSTMState(jnp.zeros((b, h)), jnp.zeros((b, h))),
    st.integers(0, 3),
    st.integers(0, 5),
)


_RIGHT_STATE = LSTMState(jnp.zeros((2, 4)), jnp.zeros((2, 4)))  # (batch, hidden) of MODEL


BAD_CARRY = st.one_of(
    st.integers(0, 4).filter(lambda n: n != 2).map(lambda n: (_RIGHT_STATE,) * n),
    st.tuples(_STATE, _STATE).filter(lambda c: c[0].h.shape != (2, 4) or c[1].h.shape != (2, 4)),
    _NON_ARRAYS.map(lambda v: (v, v)),
    _NON_ARRAYS.filter(lambda v: v is not None),
    st.just((LSTMState("a", "b"),) * 2),
)


BAD_LENGTHS = st.one_of(
    st.lists(st.integers(1, 5), max_size=4).filter(lambda v: len(v) != 2).map(np.array),
    st.tuples(st.integers(-3, 9), st.integers(-3, 9))
    .filter(lambda v: not all(1 <= n <= 5 for n in v))
    .map(np.array),
    st.just(np.array([np.nan, 2.0])),
    st.just(np.array([3.0, 2.0])),
    st.just(np.array([True, True])),
    _NON_ARRAYS.filter(lambda v: v is not None),
)


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _report(run_dir):
    return json.loads((Path(run_dir) / "report.json").read_text())


def check_registry_setting(section_cls, section: str, field: str, names, unknown: str) -> None:
    """A registry's ``names`` are the setting ``section.field``'s choices and each is named
    (``name (...)``) in its help; ``unknown`` is refused."""
    import pytest

    from stacklstm.config import RunConfig

    text = section_cls.__dataclass_fields__[field].metadata["help"]
    for name in names:
        assert f"{name} (" in text, name
        RunConfig().replace({section: {field: name}})  # accepted
    with pytest.raises(ValueError, match=field):
        RunConfig().replace({section: {field: unknown}})
