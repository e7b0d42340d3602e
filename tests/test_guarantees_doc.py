"""docs/guarantees.md names the tests behind each promise: every one of them must exist."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_test_the_guarantees_name_exists():
    text = (ROOT / "docs" / "guarantees.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`((?:\w+/)?test_\w+\.py)::(\w+)", text))
    assert len(named) > 100  # the document names its tests
    missing = [
        f"{file}::{name}"
        for file, name in sorted(named)
        if not (ROOT / "tests" / file).is_file()
        or not re.search(rf"^\s*def {name}\b", (ROOT / "tests" / file).read_text(), re.M)
    ]
    assert not missing, f"docs/guarantees.md names tests that do not exist: {missing}"
