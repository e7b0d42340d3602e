"""Set-up shared by several test modules: the tiny training run and child-process settings."""

import os

import jax

from stacklstm.data import DataConfig
from stacklstm.train import ModelConfig, RunConfig, TrainConfig

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
        "--window", "6", "--hidden-size", "8", "--num-layers", "2", "--linear-layer-sizes", "8",
        "--dropout", "0.2", "--epochs", "2", "--batch-size", str(batch_size),
        "--log-every", str(log_every), "--checkpoint-every", str(checkpoint_every),
        "--baselines", "naive",
    ]  # fmt: skip
    run = RunConfig(
        DataConfig(window=6),
        ModelConfig(
            lstm_hidden_size=8, num_lstm_layers=2, linear_layer_sizes=(8,), dropout_rate=0.2
        ),
        TrainConfig(
            epochs=2,
            batch_size=batch_size,
            log_every=log_every,
            checkpoint_every=checkpoint_every,
            baselines="naive",
        ),
    )
    return flags, run
