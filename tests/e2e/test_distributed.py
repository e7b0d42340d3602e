"""Data parallelism end to end: several (virtual CPU) devices and several processes train the
numbers one device trains, a 2-process run resumes, and the sharded train step equals the
one-device step.

The runs go through ``python -m stacklstm`` (or a short script) in subprocesses, because the
device count and ``jax.distributed`` are fixed once JAX has started.
"""

import json
import os
import socket
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest

from helpers import _leaves, cache_env, make_toy, tiny_run
from stacklstm.forecasting import load_run
from stacklstm.rundir.files import METRICS_FILE
from stacklstm.train.checkpoint import RunCheckpoints

# The tiny run of test_train.py / cli/test_cli.py: 24 steps per epoch, dropout on (so the
# processes must also draw the same dropout masks as one device does).
TINY_FLAGS = [*tiny_run()[0], "--quiet"]


# The same settings for fit(), to stop a 2-process run part-way (the CLI has no such flag).
STOP_SCRIPT = """
from stacklstm import distributed
assert distributed.initialize()  # from the STACKLSTM_* variables
import os, platform
if platform.machine() in ("x86_64", "aarch64"):  # gloo's busy event loop: idle class, alone
    def policy(tid):
        try:
            return os.sched_getscheduler(int(tid))
        except OSError:  # the thread ended
            return None
    idle = [t for t in os.listdir("/proc/self/task") if policy(t) == os.SCHED_IDLE]
    assert len(idle) == 1, idle
from stacklstm.train import RunConfig
from stacklstm.run import fit
cfg = RunConfig().replace({
    "data": {"window": 6, "season": 52, "deseasonalize": False},
    "model": {"hidden_size": 8, "num_layers": 2, "linear_layer_sizes": (8,), "dropout": 0.2},
    "train": {"epochs": 2, "batch_size": 64, "log_every": 10, "checkpoint_every": 20,
              "baselines": "naive", "patience": 15, "retrain": "off"},
})
result = fit(cfg, OUT, quiet=True, stop_after_steps=30)
assert (result.step, result.report) == (30, None)
"""


TIMEOUT = 150


def _env(devices: int = 1, **extra: str) -> dict[str, str]:
    """The subprocess environment: CPU only, ``devices`` virtual devices, the suite's cache."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("STACKLSTM_", "SLURM_", "OMPI_")) and k != "XLA_FLAGS"
    }
    env["JAX_PLATFORMS"] = "cpu"
    env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    return {**cache_env(env), **extra}


def _train(out, *flags, env) -> subprocess.Popen:
    command = [sys.executable, "-m", "stacklstm", "train", "--out", str(out), *TINY_FLAGS, *flags]
    return subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _finish(*procs: subprocess.Popen) -> list[tuple[int, str, str]]:
    """Wait for all; on a timeout kill them all (one hung process blocks the others)."""
    try:
        outputs = [p.communicate(timeout=TIMEOUT) for p in procs]
        return [(p.returncode, *output) for p, output in zip(procs, outputs, strict=True)]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _two_processes(start) -> list[tuple[int, str, str]]:
    """``start(env)`` for process 0 and 1 of a run on 127.0.0.1, settings in the environment."""
    port = _free_port()
    procs = [
        start(
            _env(
                STACKLSTM_COORDINATOR=f"127.0.0.1:{port}",
                STACKLSTM_NUM_PROCESSES="2",
                STACKLSTM_PROCESS_ID=str(i),
            )
        )
        for i in range(2)
    ]
    return _finish(*procs)


def _ours(stdout: str) -> list[str]:
    """stdout without the lines gloo prints itself when its processes connect."""
    return [line for line in stdout.splitlines() if not line.startswith("[Gloo]")]


def _params(run_dir) -> list[np.ndarray]:
    run = load_run(run_dir)
    assert run.checkpoint["kind"] == "best"
    return [np.asarray(leaf) for leaf in jax.tree.leaves(run.params)]


def _assert_same_params(run_a, run_b, atol):
    a, b = _params(run_a), _params(run_b)
    assert len(a) == len(b) == 10
    for x, y in zip(a, b, strict=True):
        np.testing.assert_allclose(x, y, rtol=0, atol=atol)


def _metric_lines(run_dir):
    lines = (run_dir / METRICS_FILE).read_text().splitlines()
    return [{k: v for k, v in json.loads(s).items() if k != "steps_per_s"} for s in lines]


def _assert_same_metrics(run_a, run_b):
    a, b = _metric_lines(run_a), _metric_lines(run_b)
    assert [(r["kind"], r["step"]) for r in a] == [(r["kind"], r["step"]) for r in b]
    for x, y in zip(a, b, strict=True):
        for key in ("train_loss", "val_loss"):
            assert (x[key] is None) == (y[key] is None)
            assert x[key] is None or x[key] == pytest.approx(y[key], rel=1e-5)


@pytest.fixture(scope="module")
def one_device_run(tmp_path_factory):
    """The tiny run on one CPU device: the numbers every other layout must reproduce."""
    out = tmp_path_factory.mktemp("one") / "run"
    [(code, _, err)] = _finish(_train(out, env=_env(devices=1)))
    assert code == 0, err[-3000:]
    return out


@pytest.fixture(scope="module")
def two_process_run(tmp_path_factory):
    """The tiny run as two processes on 127.0.0.1 (one CPU device each), with the flags."""
    # One retry on a fresh port: the free port is found, then released before the
    # coordinator binds it, so another program on the machine can take it in between.
    for attempt in range(2):
        out = tmp_path_factory.mktemp("two") / "run"
        port = _free_port()
        flags = ["--coordinator", f"127.0.0.1:{port}", "--num-processes", "2"]
        procs = [_train(out, *flags, "--process-id", str(i), env=_env()) for i in range(2)]
        try:
            return out, _finish(*procs)
        except subprocess.TimeoutExpired:
            if attempt:
                raise


@pytest.mark.slow
def test_four_cpu_devices_train_the_one_device_numbers(one_device_run, tmp_path):
    env = _env(devices=4)
    [(code, out, err)] = _finish(_train(tmp_path / "bad", "--batch-size", "66", env=env))
    assert code == 2 and out == "", err[-3000:]
    assert err.strip().splitlines() == [
        "stacklstm: error: --batch-size (66) must be a multiple of the device count (4); "
        "use e.g. --batch-size 64 or --batch-size 68"
    ]
    assert not (tmp_path / "bad").exists()  # refused before the run folder was made

    [(code, out, err)] = _finish(_train(tmp_path / "run", env=env))
    assert code == 0, err[-3000:]
    assert "48 steps, stopped by epochs" in out
    _assert_same_params(tmp_path / "run", one_device_run, atol=1e-5)
    _assert_same_metrics(tmp_path / "run", one_device_run)


@pytest.mark.slow
def test_two_processes_train_the_one_process_numbers(one_device_run, two_process_run):
    out, [(code0, out0, err0), (code1, out1, err1)] = two_process_run
    assert code0 == 0, err0[-3000:]
    assert code1 == 0, err1[-3000:]
    # Process 0 alone reports and logs: one table, one metrics line per interval.
    assert out0.count("test  model") == 1 and "48 steps, stopped by epochs" in out0
    assert _ours(out1) == []
    assert (out / "report.json").is_file() and (out / "loss.png").is_file()
    report = json.loads((out / "report.json").read_text())
    assert report["checkpoint"] == {"kind": "best", "step": 48}
    _assert_same_metrics(out, one_device_run)  # also: no line written twice
    _assert_same_params(out, one_device_run, atol=1e-5)


@pytest.mark.slow
def test_two_process_run_stopped_and_resumed_equals_the_uninterrupted_one(
    two_process_run, tmp_path
):
    whole, _ = two_process_run
    out = tmp_path / "run"
    script = f"OUT = {str(out)!r}\n" + textwrap.dedent(STOP_SCRIPT)
    stopped = _two_processes(
        lambda env: subprocess.Popen(
            [sys.executable, "-c", script],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    )
    for code, _, err in stopped:
        assert code == 0, err[-3000:]
    with RunCheckpoints(out, read_only=True) as ckpts:
        assert ckpts.latest_step("latest") == 30
    assert not (out / "report.json").exists()

    resumed = _two_processes(lambda env: _train(out, "--resume", env=env))
    for code, _, err in resumed:
        assert code == 0, err[-3000:]
    assert "48 steps, stopped by epochs" in resumed[0][1] and _ours(resumed[1][1]) == []
    _assert_same_params(out, whole, atol=0.0)  # the same processes: the same bits
    assert _metric_lines(out) == _metric_lines(whole)


@pytest.fixture(scope="module")
def toy():
    """The toy model, optimizer, train step and batch (helpers.make_toy)."""
    return make_toy()


@pytest.mark.slow
def test_sharded_step_on_two_cpu_devices_matches_one_device(toy, tmp_path):
    """Data parallelism over two (simulated) CPU devices gives the one-device numbers."""
    state = toy.state()
    np.savez(tmp_path / "state.npz", *_leaves(state))
    expected, metrics = toy.step(state, toy.batch, jax.random.key(1))
    np.savez(tmp_path / "expected.npz", *_leaves(expected), float(metrics.loss))
    np.savez(tmp_path / "batch.npz", *toy.batch)
    script = textwrap.dedent(
        f"""
        import jax, numpy as np
        from stacklstm.distributed import check_batch_size, make_mesh, replicate, shard_batch
        from stacklstm.forecaster import build_model
        from stacklstm.train import ModelConfig, TrainConfig
        from stacklstm.train.step import Batch, init_state, make_optimizer, make_train_step
        mesh = make_mesh()
        assert mesh.devices.size == 2
        load = lambda name: list(np.load(r"{tmp_path}/" + name).values())
        batch = Batch(*load("batch.npz"))
        model = build_model(
            ModelConfig(lstm_hidden_size=8, num_lstm_layers=2, linear_layer_sizes=(8,)), 2
        )
        cfg = TrainConfig(lr=3e-2, warmup_fraction=0.0)
        opt = make_optimizer(cfg, 100)
        shapes = jax.eval_shape(lambda: init_state(model, opt, jax.random.key(0), batch.x))
        state = jax.tree.unflatten(jax.tree.structure(shapes), load("state.npz"))
        step = make_train_step(model, opt, cfg, mesh=mesh)
        new, m = step(replicate(state, mesh), shard_batch(mesh, batch), jax.random.key(1))
        assert new.params["head"]["output"]["bias"].sharding.is_fully_replicated
        assert batch.x.shape[0] == 16 and shard_batch(mesh, batch).x.sharding.spec[0] == "data"
        got = [np.asarray(a) for a in jax.tree.leaves(new)] + [float(m.loss)]
        for a, b in zip(got, load("expected.npz"), strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
        try:
            check_batch_size(3, mesh)
        except ValueError as err:
            print("ERR", err)
        """
    )
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "ERR `batch_size` (3) must be a multiple of the device count (2)" in done.stdout
