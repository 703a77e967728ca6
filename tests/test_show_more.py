"""``show`` of a runaway on a real pseudo-terminal (tmux), and ``show --json`` as one JSON document.

A runaway (tests/runaway.py: real CLI lines, one prompt whose agent runs the same ``bash`` 30 times) was drawn as
30 identical rows; it is one row with a count, and the arguments that looped are shown only when tool
arguments are captured.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from copilot_otel.cli import main
from tests.conftest import CLI_GENERATED
from tests.runaway import DEFAULT_SESSION_ID, build_runaway_log
from tests.test_cli_commands import _console_script, _tmux_capture

needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


@needs_tmux
@pytest.mark.parametrize("width", [80, 200])
def test_a_runaway_is_one_row_with_a_count(tmp_path: Path, width: int) -> None:
    log = build_runaway_log(tmp_path / "ss", turns=30)
    screen, _ = _tmux_capture(tmp_path, [*_console_script(), "show", str(log)], width=width)
    lines = screen.rstrip("\n").split("\n")
    assert any("turns 0\u201329 \u00d730" in line for line in lines), screen
    bash = [line for line in lines if "bash" in line and "runaway" not in line]
    assert len(bash) == 1 and "✓ bash \u00d730" in bash[0] and "identical arguments" in bash[0], screen
    assert "ls -la" not in screen, "no tool arguments without content capture"
    assert max(len(line) for line in lines) <= width
    assert len(lines) < 20, screen  # not 30 turns of rows


@needs_tmux
def test_the_loop_is_previewed_when_tool_arguments_are_captured(tmp_path: Path) -> None:
    log = build_runaway_log(tmp_path / "ss", turns=30)
    argv = ["env", "COPILOT_OTEL_CAPTURE_TOOL_ARGUMENTS=true", *_console_script(), "show", str(log)]
    screen, _ = _tmux_capture(tmp_path, argv, width=200)
    row = next(line for line in screen.splitlines() if "✓ bash \u00d730" in line)
    assert '{"command":"ls -la"' in row, row


def _json(argv: list[str]) -> object:
    result = subprocess.run(
        [sys.executable, "-m", "json.tool"],
        input=subprocess.run([*_console_script(), *argv], capture_output=True, check=True, timeout=60).stdout,
        capture_output=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr  # `| python -m json.tool` works
    return json.loads(result.stdout)


def test_show_json_without_an_id_lists_sessions(tmp_path: Path) -> None:
    root = tmp_path / "session-state"
    build_runaway_log(root, turns=6)
    shutil.copytree(CLI_GENERATED / "failing-tool", root / "0f0f0f0f-fail")
    listing = _json(["show", "--json", "--session-state", str(root)])
    assert isinstance(listing, dict) and listing["session_state"] == str(root)
    rows = {row["session_id"]: row for row in listing["sessions"]}
    assert set(rows) == {DEFAULT_SESSION_ID, "0f0f0f0f-fail"}
    assert rows[DEFAULT_SESSION_ID]["tool_calls"] == 6 and rows["0f0f0f0f-fail"]["errors"] >= 3
    assert all("spans" not in row for row in listing["sessions"])
    # A session-state root given as the argument is listed the same way.
    assert _json(["show", "--json", str(root)])["sessions"] == listing["sessions"]  # type: ignore[index]


def test_show_json_of_a_session_is_one_document(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "--json", str(CLI_GENERATED / "resumed")]) == 0
    document = json.loads(capsys.readouterr().out)
    assert len({s["trace_id"] for s in document["spans"]}) == 2
