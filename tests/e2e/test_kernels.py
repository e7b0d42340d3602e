"""The recurrence kernels in child processes with several virtual CPU devices: each device
runs the one-call cuDNN path (with jax.experimental.rnn's reference standing in for cuDNN) or
the compiled CPU kernel on its own rows; and the CPU kernel adds no threads of its own."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from helpers import cache_env
from stacklstm.kernels import native

needs_kernel = pytest.mark.skipif(
    not native.available(), reason="the compiled CPU kernel is not built on this platform"
)


CUDNN_SHARDED_SCRIPT = r"""
import json, re
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from stacklstm import StackedLSTM
from stacklstm.kernels import cudnn
cudnn.platform = lambda: "cuda"
cudnn._IMPLEMENTATIONS["cudnn"] = cudnn._IMPLEMENTATIONS["reference"]
lstm = StackedLSTM(16, 1)
x = jnp.asarray(np.random.default_rng(0).normal(size=(8, 5, 3)), jnp.float32)
params = lstm.init(jax.random.key(0), x)
loss = lambda p, x: jnp.sum(lstm.apply(p, x)[0] ** 2)
want = jax.jit(jax.grad(loss))(params, x)
mesh = Mesh(np.array(jax.devices()[:2]), ("data",))
xs = jax.device_put(x, NamedSharding(mesh, P("data")))
step = jax.jit(jax.grad(loss))
hlo = step.lower(params, xs).compile().as_text()
got = step(params, xs)
pairs = zip(jax.tree.leaves(got), jax.tree.leaves(want))
err = max(float(jnp.max(jnp.abs(a - b))) for a, b in pairs)
report = {"all_gather": "all-gather" in hlo, "per_shard": "f32[4,5,3]" in hlo, "err": err}
print(json.dumps(report))
"""


@pytest.mark.slow
def test_one_call_runs_per_shard_under_a_batch_sharded_mesh():
    env = cache_env({k: v for k, v in os.environ.items() if k != "XLA_FLAGS"})
    env.update(JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=2")
    done = subprocess.run(
        [sys.executable, "-c", CUDNN_SHARDED_SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["per_shard"] and not report["all_gather"], report
    assert report["err"] < 1e-5, report


# The sharded run: a jitted gradient with x (and the lengths) split over the batch on n virtual
# CPU devices, against the same on one device. Prints the kernel's custom calls of the compiled
# program, whether it gathers anything, and the largest difference.
NATIVE_SHARDED_SCRIPT = r"""
import json, re, sys
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from stacklstm.kernels import LSTMState, lstm_layer

rng = np.random.default_rng(0)
features, hidden, batch, time = 3, 16, 8, 5
p = [{"kernel_ih": rng.normal(0, .5, (f, 4 * hidden)).astype(np.float32),
      "kernel_hh": rng.normal(0, .5, (hidden, 4 * hidden)).astype(np.float32),
      "bias": rng.normal(0, .5, (4 * hidden,)).astype(np.float32)} for f in (features, hidden)]
x = rng.normal(size=(batch, time, features)).astype(np.float32)

def loss(p, x, lengths):  # two layers, the second reversed and starting from the first's state
    s0 = LSTMState(jnp.zeros((x.shape[0], hidden)), jnp.ones((x.shape[0], hidden)))
    y, s = lstm_layer(p[0], x, s0, lengths)
    y, s = lstm_layer(p[1], y, s, lengths, reverse=True)
    return jnp.sum(jnp.sin(y)) + jnp.sum(s.c * s.h)

step = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
report = []
for n in (2, 4):
    for lengths in (None, rng.integers(1, time + 1, batch)):
        mesh = Mesh(np.array(jax.devices()[:n]), ("data",))
        rows = NamedSharding(mesh, P("data"))
        args = (jax.device_put(p, NamedSharding(mesh, P())), jax.device_put(x, rows),
                None if lengths is None else jax.device_put(lengths, rows))
        hlo = step.lower(*args).compile().as_text()
        calls = [re.search(r"= \((f32\[[0-9,]*\])", line).group(1)
                 for line in hlo.splitlines() if 'custom_call_target="stacklstm' in line]
        expected = step(p, x, lengths)
        got = step(*args)
        err = [float(np.max(np.abs(np.asarray(a) - np.asarray(b)) / (1 + np.abs(np.asarray(b)))))
               for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(expected))]
        report.append({"devices": n, "masked": lengths is not None, "calls": calls,
                       "all_gather": "all-gather" in hlo, "err": max(err)})
print(json.dumps(report))
"""


@needs_kernel
@pytest.mark.slow
def test_kernel_runs_per_shard_under_a_batch_sharded_mesh():
    """On 2 and 4 devices each runs the kernel's calls on its own rows (batch 8 / devices),
    gathers nothing, and the value and gradients equal one device's within 1e-5."""
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "STACKLSTM_KERNEL")}
    env = cache_env({**env, "JAX_PLATFORMS": "cpu"})
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(NATIVE_SHARDED_SCRIPT)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(report) == 4
    for run in report:
        rows = 8 // run["devices"]
        # per layer: forward (training) and backward; first results ys (time, rows, hidden)
        # and dh0 (rows, hidden)
        assert sorted(run["calls"]) == sorted(2 * [f"f32[5,{rows},16]", f"f32[{rows},16]"]), run
        assert not run["all_gather"], run
        assert run["err"] < 1e-5, run


THREADS_SCRIPT = r"""
import os, threading
import jax, jax.numpy as jnp, numpy as np
from stacklstm.kernels import LSTMState, lstm_layer, use

rng = np.random.default_rng(0)
batch, time, features, hidden = 16, 20, 4, 64  # big enough for the kernel to split the rows
p = {"kernel_ih": rng.normal(0, .3, (features, 4 * hidden)).astype(np.float32),
     "kernel_hh": rng.normal(0, .3, (hidden, 4 * hidden)).astype(np.float32),
     "bias": np.zeros(4 * hidden, np.float32)}
x = rng.normal(size=(batch, time, features)).astype(np.float32)
s0 = LSTMState(jnp.zeros((batch, hidden)), jnp.zeros((batch, hidden)))
loss = lambda p, x: jnp.sum(lstm_layer(p, x, s0)[0] ** 2)

def threads_added_by_three_callers(path):
    # The most threads the process had while three threads called the step, less before.
    with use(path):
        step = jax.jit(jax.grad(loss)).lower(p, x).compile()
    jax.block_until_ready(step(p, x))
    count = lambda: len(os.listdir("/proc/self/task"))
    before, peak, running = count(), [0], [True]
    def watch():
        while running[0]:
            peak[0] = max(peak[0], count())
    def call():
        for _ in range(20):
            jax.block_until_ready(step(p, x))
    watcher = threading.Thread(target=watch)
    watcher.start()
    callers = [threading.Thread(target=call) for _ in range(3)]
    for c in callers:
        c.start()
    for c in callers:
        c.join()
    running[0] = False
    watcher.join()
    return peak[0] - before

print(threads_added_by_three_callers("xla"), threads_added_by_three_callers("native"))
"""


@needs_kernel
@pytest.mark.slow
def test_concurrent_callers_add_no_threads():
    """The kernel runs on XLA's own thread pool: three threads calling it at once add no more
    threads to the process (counted in /proc/self/task) than the same calls on the pure-JAX
    path do. (With a thread team per caller, as OpenMP makes, each caller added one.)"""
    if not os.path.isdir("/proc/self/task"):
        pytest.skip("needs /proc")
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "STACKLSTM_KERNEL")}
    done = subprocess.run(
        [sys.executable, "-c", THREADS_SCRIPT],
        env=cache_env({**env, "JAX_PLATFORMS": "cpu"}),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    added_xla, added_native = map(int, done.stdout.split()[-2:])
    assert added_native <= max(0, added_xla), (added_xla, added_native)
