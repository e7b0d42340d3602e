"""The README and docs/**/*.md run as written: every shell and Python block in them is executed.

Each file's fenced blocks are parsed (the language tag kept); ```python blocks run in one
namespace and ```bash / ```sh / ```console blocks in bash, in document order, inside a fresh
temporary folder holding a copy of ``examples/``, ``benchmarks/`` and ``docs/`` (so the
relative paths the documents name resolve, and ``runs/...`` folders land there), with this
environment's ``stacklstm`` and ``python`` first on ``PATH``. Blocks without a tag or tagged
``text`` (or ``toml``, ...) show output or files, and are not run.

Blocks that depend on one another run together, as one test: a Python block and the earlier
Python block that defines a name it reads, a block and the earlier block that made a run
folder (``--out DIR``, ``.save("DIR")``) it names, or a file (``--output FILE``) it reads. Each
such group has its own folder and namespace, so the groups are independent tests (and
pytest-xdist may run them anywhere); one that trains, tunes, backtests or benchmarks is marked
slow.

A block that cannot run on one machine by nature (several hosts, a SLURM cluster, a CUDA GPU),
or that regenerates a benchmark's page over hours, is skipped only where the markdown says so
right before it, with the reason::

    <!-- docs-test: skip (needs several machines) -->

and the skip is reported with that reason.
"""

import ast
import builtins
import dataclasses
import os
import re
import shutil
import signal
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

from helpers import cache_env

ROOT = Path(__file__).resolve().parents[1]
# The pages of docs/ and of its subfolders (docs/reference/: the API reference, no blocks yet).
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
# What the documents' relative paths name, copied into each group's folder.
COPIED = ("examples", "benchmarks", "docs")

SHELL = {"bash", "sh", "shell", "console"}
PYTHON = {"python", "py", "python3"}
# Tags of blocks that show output, files or settings: not run.
SHOWN = {"", "text", "toml", "yaml", "yml", "json", "csv", "ini", "diff", "markdown", "md"}

FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[^`\s]*)[^`]*$")
SKIP_MARKER = re.compile(r"^\s*<!--\s*docs-test:\s*skip\s*\((?P<reason>.+)\)\s*-->\s*$")
ANY_MARKER = re.compile(r"<!--\s*docs-test\b")

# Lines that set up the environment or run the test suite are not run: CI installs the
# package and runs the suite itself, and a test that reinstalled it or ran the suite from
# inside the suite would test nothing more. A line is left out when every `&&` part of it is
# one of these.
SETUP = re.compile(
    r"^(python3?\s+-m\s+venv\b"  # python3 -m venv .venv
    r"|(\.|source)\s+\S*activate$"  # . .venv/bin/activate
    r"|(python3?\s+-m\s+)?pip\s+install\b"  # pip install -e ".[test]"
    r"|python3?\s+-m\s+pytest\b)"  # python -m pytest -q -n 2 ...
)
# What makes a group slow: training, tuning, backtesting or benchmarking (seconds to minutes
# each on 2 cores), and the example scripts, which train.
SLOW_SHELL = re.compile(
    r"\bstacklstm\s+(train|tune|backtest|bench)\b|\bpython3?\s+(benchmarks|examples)/"
)
SLOW_PYTHON = re.compile(r"\.(fit|cross_validation)\(")
# Paths a block makes: a run folder (named again later: the same run) and an output file
# (read later; writing it again is fine).
OUT_DIR = re.compile(r"--out[ =](?P<path>\S+)")
OUT_FILE = re.compile(r"--output[ =](?P<path>\S+)")
SAVED = re.compile(r"""\.save\(\s*["'](?P<path>[^"']+)["']""")

BLOCK_TIMEOUT = 3600  # seconds; the longest blocks train for several minutes


@dataclasses.dataclass(frozen=True)
class Block:
    """One fenced block: its file (relative to the repository), the line of its opening fence
    (1-based), its language tag, its text (the fence's indentation removed) and, when the
    markdown says so, why it is skipped."""

    file: str
    line: int
    lang: str
    text: str
    skip: str | None = None

    @property
    def name(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def runs(self) -> bool:
        return self.lang in SHELL or self.lang in PYTHON


def parse_blocks(text: str, file: str) -> list[Block]:
    """The fenced blocks of a markdown text, in order, each with the skip marker on the last
    non-blank line before it (a marker anywhere else is an error: it would skip nothing).

    Example:
        >>> [(b.line, b.lang, b.text) for b in parse_blocks("a\\n```py\\nx = 1\\n```\\n", "f")]
        [(2, 'py', 'x = 1')]
    """
    lines = text.splitlines()
    blocks, i = [], 0
    used_markers: set[int] = set()
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, fence = opening["indent"], opening["fence"]
        body, j = [], i + 1
        while j < len(lines) and not (
            lines[j].strip().startswith(fence[0] * len(fence)) and not lines[j].strip("`~ \t")
        ):
            line = lines[j]
            body.append(line[len(indent) :] if line.startswith(indent) else line.lstrip())
            j += 1
        if j == len(lines):
            raise ValueError(f"{file}:{i + 1}: a fence that is never closed")
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        marker = SKIP_MARKER.match(lines[k]) if k >= 0 else None
        if marker:
            used_markers.add(k)
        skip = marker["reason"].strip() if marker else None
        blocks.append(Block(file, i + 1, opening["lang"].lower(), "\n".join(body), skip))
        i = j + 1
    stray = [n + 1 for n, line in enumerate(lines) if ANY_MARKER.search(line)]
    stray = [n for n in stray if n - 1 not in used_markers]
    if stray:
        raise ValueError(f"{file}: docs-test markers not right before a block, lines {stray}")
    return blocks


def _strip_comment(line: str) -> str:
    """``line`` without its shell comment (a ``#`` at the start or after a blank, outside
    quotes)."""
    quote = None
    for k, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (k == 0 or line[k - 1].isspace()):
            return line[:k].rstrip()
    return line.rstrip()


def shell_commands(block: Block) -> list[tuple[int, str]]:
    """The commands of a shell block as (markdown line, command): ``\\`` continuations
    joined, comments and blank lines dropped, set-up and test-suite lines (``SETUP``) left out;
    in a ``console`` block only the lines after a ``$`` prompt.

    Example:
        >>> b = Block("f", 1, "bash", "pip install x\\nstacklstm a \\\\\\n  --b  # c\\n")
        >>> shell_commands(b)
        [(3, 'stacklstm a --b')]
    """
    commands, pending, start = [], "", 0
    for offset, raw in enumerate(block.text.splitlines()):
        if block.lang == "console" and not pending:
            if not raw.lstrip().startswith("$ "):
                continue
            raw = raw.lstrip()[2:]
        if not pending:
            start = block.line + 1 + offset
        line = _strip_comment(raw) if not raw.rstrip().endswith("\\") else raw.rstrip()
        if line.endswith("\\"):
            pending += line[:-1].strip() + " "
            continue
        command = (pending + line.strip()).strip()
        pending = ""
        parts = [part.strip() for part in command.split("&&")]
        if command and not all(SETUP.match(part) for part in parts):
            commands.append((start, command))
    return commands


def _python_names(text: str) -> tuple[set[str], set[str]]:
    """(names a Python block binds, names it reads without binding them itself)."""
    tree = ast.parse(text)
    bound: set[str] = set()
    read: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (bound if isinstance(node.ctx, ast.Store | ast.Del) else read).add(node.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return bound, read - bound - set(dir(builtins))


def _mentions(text: str, path: str) -> bool:
    """Whether ``text`` names ``path`` or something inside it."""
    return re.search(rf"(?<![\w./-]){re.escape(path)}(?![\w.-])", text) is not None


def group_blocks(blocks: list[Block]) -> list[list[Block]]:
    """The runnable, unskipped blocks of one file in groups that must run together (see the
    module's docstring), each in document order; groups ordered by their first block."""
    runnable = [b for b in blocks if b.runs and not b.skip]
    parent = list(range(len(runnable)))

    def root(k: int) -> int:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    def join(a: int, b: int) -> None:
        parent[root(b)] = root(a)

    definer: dict[str, int] = {}  # Python name -> the latest block binding it
    folders: dict[str, int] = {}  # run folder -> the block that made it
    files: dict[str, int] = {}  # output file -> the latest block writing it
    for k, block in enumerate(runnable):
        text = block.text
        if block.lang in PYTHON:
            bound, read = _python_names(text)
            for name in read & definer.keys():
                join(definer[name], k)
            made_dirs = {m["path"] for m in SAVED.finditer(text)}
            made_files: set[str] = set()
            text_read = text
        else:
            text = "\n".join(command for _, command in shell_commands(block))
            made_dirs = {m["path"].strip("'\"") for m in OUT_DIR.finditer(text)}
            made_files = {m["path"].strip("'\"") for m in OUT_FILE.finditer(text)} - {"-"}
            text_read = OUT_FILE.sub("", text)
            bound = set()
        for path, maker in folders.items():
            if _mentions(text, path):
                join(maker, k)
        for path, maker in files.items():
            if _mentions(text_read, path):
                join(maker, k)
        for path in made_dirs:
            folders.setdefault(path, k)
        files.update(dict.fromkeys(made_files, k))
        definer.update(dict.fromkeys(bound, k))
    groups: dict[int, list[Block]] = {}
    for k, block in enumerate(runnable):
        groups.setdefault(root(k), []).append(block)
    return sorted(groups.values(), key=lambda group: group[0].line)


def _is_slow(group: list[Block]) -> bool:
    for block in group:
        if block.lang in PYTHON and SLOW_PYTHON.search(block.text):
            return True
        if block.lang in SHELL and any(SLOW_SHELL.search(c) for _, c in shell_commands(block)):
            return True
    return False


def _collect() -> tuple[list, list]:
    groups, skipped = [], []
    for path in DOCUMENTS:
        file = path.relative_to(ROOT).as_posix()
        blocks = parse_blocks(path.read_text(encoding="utf-8"), file)
        skipped += [pytest.param(b, id=b.name) for b in blocks if b.runs and b.skip]
        for group in group_blocks(blocks):
            name = f"{file}:{group[0].line}" + (f"-{group[-1].line}" if len(group) > 1 else "")
            marks = [pytest.mark.slow] if _is_slow(group) else []
            groups.append(pytest.param(group, id=name, marks=marks))
    return groups, skipped


GROUPS, SKIPPED = _collect()


def _workspace(tmp_path: Path) -> Path:
    """A fresh folder holding what the documents' relative paths name."""
    work = tmp_path / "work"
    work.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "results", "*.pyc")
    for name in COPIED:
        shutil.copytree(ROOT / name, work / name, ignore=ignore)
    return work


def _environment(work: Path) -> dict[str, str]:
    env = cache_env()
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["MPLBACKEND"] = "Agg"
    env["PWD"] = str(work)
    return env


# Run before a shell block's commands: stop at the first failing command, name its markdown
# line, and make a plain `wait` fail when a background command it waits for failed (bash's own
# returns 0 whatever they returned).
PRELUDE = """\
set -e
DOCS_JOBS=$(mktemp)
wait() {
  local s=0 p
  if [ $# -gt 0 ]; then builtin wait "$@"; return; fi
  jobs -p >"$DOCS_JOBS"
  while read -r p; do builtin wait "$p" || s=$?; done <"$DOCS_JOBS"
  return $s
}
trap 'echo "docs-test: line $DOCS_LINE failed (exit $?)" >&2' ERR
"""


def run_shell(block: Block, work: Path, env: dict[str, str]) -> None:
    commands = shell_commands(block)
    script = PRELUDE + "".join(f"DOCS_LINE={n}; {command}\n" for n, command in commands)
    script += "DOCS_LINE=end; wait\n"  # a background command left running still counts
    process = subprocess.Popen(
        ["bash", "-c", script],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # so a timeout ends the background commands too
    )
    try:
        output, _ = process.communicate(timeout=BLOCK_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        pytest.fail(f"{block.name}: still running after {BLOCK_TIMEOUT} s\n{output[-3000:]}")
    if process.returncode < 0:  # bash itself was killed: by something outside this test
        name = signal.Signals(-process.returncode).name
        pytest.fail(
            f"{block.file}, block at line {block.line}: bash was killed by {name} (not by this "
            f"test)\n--- output (last 3000 characters) ---\n{output[-3000:]}",
            pytrace=False,
        )
    if process.returncode != 0:
        failed = re.findall(r"docs-test: line (\d+|end) failed", output)
        where = failed[-1] if failed else "?"
        command = dict((str(n), c) for n, c in commands).get(where, "(a background command)")
        pytest.fail(
            f"{block.file}, block at line {block.line}, line {where} exited "
            f"{process.returncode}:\n  {command}\n--- output (last 3000 characters) ---\n"
            f"{output[-3000:]}",
            pytrace=False,
        )


def run_python(block: Block, namespace: dict) -> None:
    # padded so that a traceback names the markdown file's own line numbers
    code = compile("\n" * block.line + block.text, block.file, "exec")
    try:
        exec(code, namespace)
    except Exception:
        pytest.fail(
            f"{block.file}, Python block at line {block.line} raised:\n"
            f"{traceback.format_exc(limit=-3)}",
            pytrace=False,
        )


@pytest.mark.parametrize("group", GROUPS)
def test_docs_block_group_runs(group, tmp_path, monkeypatch):
    work = _workspace(tmp_path)
    env = _environment(work)
    monkeypatch.chdir(work)
    for name in ("MPLBACKEND", "PATH"):
        monkeypatch.setenv(name, env[name])
    namespace: dict = {"__name__": "__docs__"}
    for block in group:
        if block.lang in PYTHON:
            run_python(block, namespace)
        else:
            run_shell(block, work, env)


@pytest.mark.parametrize("block", SKIPPED)
def test_docs_block_skipped(block):
    pytest.skip(f"{block.name} ({block.lang}): {block.skip}")


def test_docs_are_parsed():
    """Every block is run, skipped by its marker or shown (a tag this test does not know, such
    as ``zsh``, would otherwise leave a block silently unrun), and the README has both kinds."""
    blocks = [
        b for path in DOCUMENTS for b in parse_blocks(path.read_text(encoding="utf-8"), path.name)
    ]
    unknown = [f"{b.name} ({b.lang})" for b in blocks if not b.runs and b.lang not in SHOWN]
    assert not unknown, f"blocks with a language tag this test neither runs nor shows: {unknown}"
    counted = sum(len(param.values[0]) for param in GROUPS) + len(SKIPPED)
    assert counted == sum(b.runs for b in blocks)
    readme = parse_blocks((ROOT / "README.md").read_text(encoding="utf-8"), "README.md")
    assert {"python", "bash"} <= {b.lang for b in readme if b.runs and not b.skip}
