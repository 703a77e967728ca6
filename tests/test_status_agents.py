"""``status`` lists each agent's log folder: found, not found, or switched off by the ``agents`` setting.

Through the real entry point (``main``), with real captures as the agents' homes: Copilot CLI's session-state
holds a copy of a generated session, Claude Code's home is a recorded one (``tests/fixtures/other-agents``), and
Codex's is a folder where it never ran. The shortcut that prints without ``rich`` (no daemon, output to a pipe)
must print the characters ``rich`` prints on a terminal, once its colours are taken out.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import orjson
import pytest

from copilot_otel.cli import main
from tests.conftest import CLI_GENERATED, ROOT

CLAUDE_HOME = ROOT / "tests" / "fixtures" / "other-agents" / "claude-code" / "plain-question"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture
def homes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Each agent's log folder: Copilot's and Claude Code's there (real logs in them), Codex's missing."""
    session_state = tmp_path / "session-state"
    shutil.copytree(CLI_GENERATED / "plain-question", session_state / "plain-question")
    monkeypatch.setenv("COPILOT_OTEL_SESSION_STATE", str(session_state))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(CLAUDE_HOME))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-never-ran"))
    monkeypatch.setenv("GEMINI_CLI_HOME", str(tmp_path / "gemini-never-ran"))
    for name in ("COPILOT_OTEL_AGENTS", "FORCE_COLOR", "TTY_COMPATIBLE", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    return {
        "copilot": session_state,
        "claude-code": CLAUDE_HOME / "projects",
        "codex": tmp_path / "codex-never-ran" / "sessions",
        "gemini": tmp_path / "gemini-never-ran" / ".gemini" / "tmp",
    }


def _block(out: str) -> list[str]:
    """The agent-logs block: its heading and the lines after it."""
    lines = out.splitlines()
    start = lines.index("agent logs (the agents setting says which are read)")
    return lines[start:]


def test_without_a_daemon_each_agent_folder_is_listed(
    homes: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["status"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("No copilot-otel daemon is running (no status in ")
    assert _block(out) == [
        "agent logs (the agents setting says which are read)",
        f"  copilot      found      {homes['copilot']}",
        f"  claude-code  found      {homes['claude-code']}",
        f"  codex        not found  {homes['codex']}",
        f"  gemini       not found  {homes['gemini']}",
    ]


def test_an_agent_left_out_of_the_setting_is_switched_off(
    homes: dict[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COPILOT_OTEL_AGENTS", "copilot,codex")
    assert main(["status"]) == 1
    assert _block(capsys.readouterr().out)[1:] == [
        f"  copilot      found         {homes['copilot']}",
        f"  claude-code  switched off  {homes['claude-code']}",
        f"  codex        not found     {homes['codex']}",
        f"  gemini       switched off  {homes['gemini']}",
    ]


def test_a_running_daemon_lists_them_after_its_table(
    homes: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "status.json").write_bytes(orjson.dumps({"pid": os.getpid(), "files_tracked": 1}))
    assert main(["status", "--state-dir", str(state)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"copilot-otel daemon running (pid {os.getpid()})")
    assert out.index("files tracked") < out.index("agent logs")
    assert _block(out)[1] == f"  copilot      found      {homes['copilot']}"


def test_the_plain_shortcut_prints_what_rich_prints_on_a_terminal(
    homes: dict[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a daemon, to a pipe, ``status`` skips ``rich`` (start-up time); told the output is a terminal
    (``FORCE_COLOR``) it draws with ``rich``, in colour: the same text once the colour codes are removed."""
    assert main(["status"]) == 1
    plain = capsys.readouterr().out
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert main(["status"]) == 1
    coloured = capsys.readouterr().out
    assert "\x1b[" in coloured  # rich drew it
    assert _ANSI.sub("", coloured) == plain


@pytest.mark.parametrize("terminal", [False, True], ids=["pipe", "terminal"])
def test_a_folder_name_cannot_drive_the_terminal(
    homes: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    terminal: bool,
) -> None:
    """A setting's path is shown with its control characters visible (ESC as ␛), printed plain or by ``rich``."""
    hostile = tmp_path / "x\x1b]52;c;cHduZWQ=\x07y"
    monkeypatch.setenv("COPILOT_OTEL_SESSION_STATE", str(hostile))
    if terminal:
        monkeypatch.setenv("FORCE_COLOR", "1")
    assert main(["status"]) == 1
    out = _ANSI.sub("", capsys.readouterr().out)
    assert "\x1b" not in out and "\x07" not in out
    assert f"  copilot      not found  {tmp_path}/x␛]52;c;cHduZWQ=␇y" in out


@pytest.mark.parametrize("terminal", [False, True], ids=["pipe", "terminal"])
def test_brackets_and_colons_in_a_path_are_text(
    homes: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    terminal: bool,
) -> None:
    """``[work]`` is not a style and ``:smile:`` not an emoji, in the line and in a daemon's table."""
    state = tmp_path / "[work]" / "state :smile:"
    monkeypatch.setenv("COPILOT_OTEL_STATE_DIR", str(state))
    if terminal:
        monkeypatch.setenv("FORCE_COLOR", "1")
    assert main(["status"]) == 1
    assert f"(no status in {state / 'status.json'})" in _ANSI.sub("", capsys.readouterr().out)
    state.mkdir(parents=True)
    (state / "status.json").write_bytes(orjson.dumps({"pid": 0, "destination": "file [x] :smile:"}))
    assert main(["status"]) == 1
    out = _ANSI.sub("", capsys.readouterr().out)
    assert f"in {state / 'status.json'} is gone)" in out
    assert "file [x] :smile:" in out


def test_json_adds_the_folders_to_the_status(
    homes: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--json``: the daemon's status as it wrote it plus ``agent_logs``; without a status, an object of the
    folders alone on stdout (the "not running" line on stderr, exit 1)."""
    monkeypatch.setenv("COPILOT_OTEL_AGENTS", "copilot,claude-code")
    expected = [
        {
            "agent": "copilot",
            "folder": str(homes["copilot"]),
            "setting": "session_state",
            "enabled": True,
            "found": True,
        },
        {
            "agent": "claude-code",
            "folder": str(homes["claude-code"]),
            "setting": "claude_code_home",
            "enabled": True,
            "found": True,
        },
        {
            "agent": "codex",
            "folder": str(homes["codex"]),
            "setting": "codex_home",
            "enabled": False,
            "found": False,
        },
        {
            "agent": "gemini",
            "folder": str(homes["gemini"]),
            "setting": "gemini_home",
            "enabled": False,
            "found": False,
        },
    ]
    assert main(["status", "--json"]) == 1
    captured = capsys.readouterr()
    assert orjson.loads(captured.out) == {"agent_logs": expected}
    assert "No copilot-otel daemon is running" in captured.err
    state = tmp_path / "state"
    state.mkdir()
    written = {"pid": os.getpid(), "files_tracked": 3, "destination": "OTLP/HTTP http://collector:4318"}
    (state / "status.json").write_bytes(orjson.dumps(written))
    assert main(["status", "--json", "--state-dir", str(state)]) == 0
    captured = capsys.readouterr()
    assert orjson.loads(captured.out) == {**written, "agent_logs": expected}
    assert captured.err == ""
