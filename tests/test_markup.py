"""A path or a title is text in every command's output: rich must not read ``[work]`` as a style (it vanished) or
``:smile:`` as an emoji code. ``status`` has its own test (tests/test_status_agents.py); here ``show``, ``report``
and ``doctor`` over a session-state folder whose name holds both, piped and on a forced terminal."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from copilot_otel.cli import main
from tests.conftest import CLI_GENERATED

NAME = "lab[work]:smile:"


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COPILOT_OTEL_AGENTS", "copilot")
    monkeypatch.setenv("COPILOT_OTEL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("COLUMNS", raising=False)
    state = tmp_path / NAME / "session-state"
    source = CLI_GENERATED / "multi-tool"
    folder = state / "0a000009-0000-4000-8000-000000000009"
    shutil.copytree(source, folder, ignore=shutil.ignore_patterns("_*"))
    # report shows where the session ran (its log's cwd), show and doctor the folders read
    for name in ("events.jsonl", "workspace.yaml"):
        file = folder / name
        file.write_bytes(file.read_bytes().replace(b"/home/dev/lab/", f"/home/dev/{NAME}/".encode()))
    return state


@pytest.mark.parametrize("terminal", [False, True], ids=["piped", "terminal"])
@pytest.mark.parametrize("command", [["show"], ["report", "repo", "--wide"], ["doctor"]])
def test_brackets_and_colons_in_a_path_are_printed_as_written(
    root: Path,
    command: list[str],
    terminal: bool,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if terminal:
        monkeypatch.setenv("FORCE_COLOR", "1")
        monkeypatch.setenv("COLUMNS", "400")
    main([*command, "--session-state", str(root)])
    out = capsys.readouterr().out
    assert NAME in out, out
    assert "\N{SMILING FACE WITH SMILING EYES}" not in out and "\N{GRINNING FACE}" not in out
