"""A first answer in a fraction of a second: ``import stacklstm``, ``stacklstm --help`` and the
command line's input errors come before jax is imported; compiled steps are kept between
processes in the user's cache folder (JAX's persistent compilation cache)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from stacklstm import compile_cache


def _python(code: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env
    )


def test_import_stacklstm_loads_no_jax():
    done = _python("""
        import sys
        import stacklstm
        assert stacklstm.__version__
        print("jax" in sys.modules, "flax" in sys.modules)
        stacklstm.LSTMState  # the names load on first use
        print("jax" in sys.modules)
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False", "True"]


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--help"], None),
        (["train", "--help"], None),
        (["train", "--data", "missing.csv"], "data file not found: missing.csv"),
        (["train", "--window", "-3"], "--window must be an integer >= 1, got -3"),
        (["train", "--data", "table.txt"], "expected a file ending in .csv"),
        (["backtest", "--horizon", "0", "--out", "b"], "--horizon must be an integer >= 1"),
        (["tune", "--lr", "-1"], "--lr must be a number"),
        (["predict", "nowhere"], "run folder not found: nowhere"),
        (["evaluate", "nowhere"], "run folder not found: nowhere"),
        (["export", "."], "is not a run folder: it has no config.json"),
    ],
)
def test_help_and_input_errors_answer_before_jax_is_imported(argv, words, tmp_path):
    (tmp_path / "table.txt").write_text("a,b\n1,2\n")
    done = _python(f"""
        import os, sys
        os.chdir({str(tmp_path)!r})
        from stacklstm.cli import main
        try:
            code = main({argv!r})
        except SystemExit as exit:  # --help
            code = exit.code
        print("JAX", "jax" in sys.modules, code)
    """)
    last = done.stdout.strip().splitlines()[-1]
    if words is None:
        assert last == "JAX False 0" and "usage: stacklstm" in done.stdout
    else:
        assert last == "JAX False 2", done.stderr
        assert done.stderr.strip() == f"stacklstm: error: {words}" or (
            done.stderr.startswith("stacklstm: error: ") and words in done.stderr
        ), done.stderr
        assert len(done.stderr.strip().splitlines()) == 1


def test_the_cache_folder_follows_the_environment(tmp_path):
    assert compile_cache.cache_dir({"STACKLSTM_CACHE_DIR": str(tmp_path)}) == tmp_path
    xdg = compile_cache.cache_dir({"XDG_CACHE_HOME": str(tmp_path)})
    assert xdg == tmp_path / "stacklstm" / "jax"
    for off in ("0", "off", "false", "no"):
        assert compile_cache.cache_dir({"STACKLSTM_COMPILE_CACHE": off}) is None


@pytest.mark.slow
def test_a_second_process_loads_the_compiled_steps_instead_of_compiling(tmp_path):
    cache = tmp_path / "cache"
    env = {**os.environ, "STACKLSTM_CACHE_DIR": str(cache)}
    code = f"""
        import json, jax
        from stacklstm.config import DataConfig, ModelConfig, RunConfig, TrainConfig
        from stacklstm.run import fit
        hits = []
        jax.monitoring.register_event_listener(
            lambda name, **kw: hits.append(name) if "cache_hits" in name else None)
        cfg = RunConfig(DataConfig(window=8, season=1, deseasonalize=False),
                        ModelConfig(lstm_hidden_size=8, num_lstm_layers=1),
                        TrainConfig(epochs=1, min_steps=0, baselines="naive", retrain="off"))
        fit(cfg, {str(tmp_path)!r} + "/run" + __import__("sys").argv[-1], quiet=True)
        print(json.dumps({{"dir": jax.config.jax_compilation_cache_dir, "hits": len(hits)}}))
    """
    first = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), "1"], capture_output=True, text=True, env=env
    )
    assert first.returncode == 0, first.stderr
    seen = json.loads(first.stdout.strip().splitlines()[-1])
    assert seen["dir"] == str(cache) and any(cache.iterdir())
    entries = {p.name for p in cache.iterdir()}
    assert any(name.startswith("jit_train_step") for name in entries)
    second = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), "2"], capture_output=True, text=True, env=env
    )
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout.strip().splitlines()[-1])["hits"] > 0
    # the steps were not compiled anew (a tiny eager op may be: its compile time varies
    # around the threshold of what is kept)
    steps = ("jit_train_step", "jit_eval_step", "jit_predict_step", "jit_init")
    new = {p.name for p in cache.iterdir()} - entries
    assert not [name for name in new if name.startswith(steps)], new
    off = {**env, "STACKLSTM_COMPILE_CACHE": "0"}
    third = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), "3"], capture_output=True, text=True, env=off
    )
    assert third.returncode == 0, third.stderr
    assert json.loads(third.stdout.strip().splitlines()[-1]) == {"dir": None, "hits": 0}


def test_repeated_stamps_suggest_the_id_column(tmp_path):
    table = tmp_path / "long.csv"
    rows = [f"{name},2000-01-{day:02d},{day}.0" for name in "ab" for day in range(1, 21)]
    table.write_text("unique_id,ds,y\n" + "\n".join(rows) + "\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "stacklstm",
            "train",
            "--data",
            str(table),
            "--target",
            "y",
            "--time-column",
            "ds",
            "--out",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "stacklstm: error: time column 'ds' repeats 2000-01-01 (rows 1 and 21); expected one "
        "row per time stamp; if the table holds several series, name the column that tells "
        "them apart with --id-column ('unique_id'?)"
    )
    assert not (tmp_path / "run").exists()
