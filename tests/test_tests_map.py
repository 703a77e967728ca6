"""``tests/README.md`` stays a true map: every test file is in it, and every file and package it names exists.

A newcomer finds the test of a module by its name or by the map; a test file added without a row, or renamed or
merged away while its row stays, would make the map quietly wrong.
"""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
PACKAGE = TESTS.parent / "copilot_otel"
MAP = (TESTS / "README.md").read_text(encoding="utf-8")

# Every code-formatted name in the map (`test_x.py`, `daemon/`, `realcli/`, `conftest.py`, ...).
NAMED = set(re.findall(r"`([^`\s]+)`", MAP))


def test_every_test_file_is_in_the_map() -> None:
    # By its own name: a pattern such as `test_*_loop.py` groups files in the map but finds none.
    missing = {p.name for p in TESTS.glob("test_*.py")} - NAMED
    assert not missing, f"add to tests/README.md: {sorted(missing)}"


def test_every_test_file_the_map_names_exists() -> None:
    named = {name for name in NAMED if name.startswith("test_") and name.endswith(".py") and "*" not in name}
    assert named, "the map names no test file"
    gone = {name for name in named if not (TESTS / name).is_file()}
    assert not gone, f"tests/README.md names files that are gone: {sorted(gone)}"


def test_every_helper_is_in_the_map() -> None:
    helpers = {
        p.name for p in TESTS.glob("*.py") if not p.name.startswith("test_") and p.name != "__init__.py"
    }
    helpers |= {f"{p.name}/" for p in TESTS.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))}
    missing = helpers - NAMED
    assert not missing, f"add to tests/README.md's helpers: {sorted(missing)}"


def test_every_package_is_in_the_map() -> None:
    packages = {f"{p.parent.name}/" for p in PACKAGE.glob("*/__init__.py")}
    missing = packages - NAMED
    assert not missing, f"add to tests/README.md's packages: {sorted(missing)}"
