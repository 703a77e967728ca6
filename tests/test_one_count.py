"""One count everywhere: ``show``, ``report``, ``replay`` and ``doctor`` count the same things.

A session is a session; a sub-agent's log (Claude Code's and Gemini's sub-agent files, Codex's child threads) is
part of the session that started it, as its work is part of the prompt that started it. So ``show``'s prompt line
counts the turns and tool calls drawn under it, sub-agents' included (as ``report`` does, and as its tokens did);
a sub-agent's line counts its own work, from whichever log it came; failed calls are never more than calls; and
``replay`` and ``doctor`` count sessions as ``report`` does. The truth is the recorder's: the tool calls each
scripted run made and which of them failed (``checks.json``).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from copilot_otel.cli import main
from copilot_otel.replay import Progress, replay
from copilot_otel.settings.config import load_config
from tests.conftest import FIXTURES
from tests.otlp_receiver import OtlpReceiver

OTHER = FIXTURES / "other-agents"
RECORDED = OTHER / "recorded"
# Scenarios whose sub-agent has a log of its own, by agent: the home each is replayed, shown and reported by.
WITH_SUBAGENTS = {
    "claude-code": [OTHER / "claude-code" / "subagent", RECORDED / "claude-code" / "subagent-tools-fail"],
    "codex": [OTHER / "codex" / "subagent", RECORDED / "codex" / "subagent-tools-fail"],
    "gemini": [OTHER / "gemini" / "subagent"],
}
_FACTS = re.compile(r"(\d+) turns? · (\d+) tool calls?(?: \((\d+) failed\))?")


def _checks(home: Path) -> dict[str, Any]:
    checks: dict[str, Any] = json.loads((home / "checks.json").read_text())
    return checks


def _show(capsys: pytest.CaptureFixture[str], home: Path) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The prompt's and the sub-agent's (turns, tool calls, failed) as ``show`` draws them."""
    assert main(["show", str(home)]) == 0
    lines = capsys.readouterr().out.splitlines()
    prompt = next(m for line in lines if not line.startswith("│") and (m := _FACTS.search(line)))
    agent = next(m for line in lines if "sub-agent" in line and (m := _FACTS.search(line)))
    return tuple(int(g or 0) for g in prompt.groups()), tuple(int(g or 0) for g in agent.groups())


def _report(capsys: pytest.CaptureFixture[str], home: Path) -> dict[str, Any]:
    assert main(["report", str(home), "--json"]) == 0
    totals: dict[str, Any] = json.loads(capsys.readouterr().out)["totals"]
    return totals


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_show_counts_a_subagents_work_under_it_and_in_its_prompt(
    agent: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """[recorded subagent-tools-fail]: the main agent starts a sub-agent whose two tool calls fail."""
    monkeypatch.setenv("COLUMNS", "240")  # one line per row
    home = RECORDED / agent / "subagent-tools-fail"
    calls = _checks(home)["scripted_tool_calls"]
    prompt, sub = _show(capsys, home)
    failed = sum(1 for c in calls if c["expect"] == "failed")
    assert prompt[1:] == (len(calls), failed)
    assert sub[1:] == (sum(1 for c in calls if c["script"] == "subfail"), failed)
    assert sub[0] > 0  # its turns: drawn under it, counted on its line
    totals = _report(capsys, home)
    assert prompt == (totals["turns"], totals["tool_calls"], totals["failed_tool_calls"])


@pytest.mark.parametrize(
    "home", [h for homes in WITH_SUBAGENTS.values() for h in homes], ids=lambda h: f"{h.parent.name}-{h.name}"
)
def test_show_and_report_count_the_same_prompt(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "240")
    prompt, sub = _show(capsys, home)
    totals = _report(capsys, home)
    assert prompt == (totals["turns"], totals["tool_calls"], totals["failed_tool_calls"])
    assert sub[0] > 0 and sub[2] <= sub[1] and prompt[2] <= prompt[1]


@pytest.mark.parametrize("agent", sorted(WITH_SUBAGENTS))
def test_replay_counts_sessions_as_report_does(
    agent: str, receiver: OtlpReceiver, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Every scenario of ``agent`` with a sub-agent's log, in one home: one session each, not one per log."""
    home = tmp_path / agent
    for scenario in WITH_SUBAGENTS[agent]:
        for folder in ("projects", "sessions", "tmp"):
            if (scenario / folder).is_dir():
                shutil.copytree(scenario / folder, home / folder, dirs_exist_ok=True)
    sessions = _report(capsys, home)["sessions"]
    assert sessions == len(WITH_SUBAGENTS[agent])
    config = load_config({"endpoint": receiver.http_endpoint, "metrics_enabled": "false"})
    seen: list[Progress] = []
    done = replay([home], config, on_progress=seen.append)
    assert done.exit_code == 0
    assert (done.sessions, done.sessions_total) == (sessions, sessions)
    assert (seen[0].sessions_total, seen[-1].sessions_done, seen[-1].sessions_total) == (sessions,) * 3
    assert f"exported {sessions} session" in done.summary()
    assert receiver.spans()  # every log was still folded and sent: the sub-agents' work too
    names = {span["name"] for span in receiver.spans()}
    assert any(name.startswith("invoke_agent ") for name in names)


def test_doctor_counts_sessions_as_report_does(
    _isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Codex sub-agent's thread is part of its session (as report counts it), as a Claude Code sub-agent's
    file is: ``doctor`` says so instead of counting it as a session."""
    codex = _isolated_home / ".codex"
    for scenario in WITH_SUBAGENTS["codex"]:
        shutil.copytree(scenario / "sessions", codex / "sessions", dirs_exist_ok=True)
    main(["doctor", "--timeout", "1", "--endpoint", "http://127.0.0.1:9"])
    line = next(line for line in capsys.readouterr().out.splitlines() if "Codex CLI logs" in line)
    sessions = _report(capsys, codex)["sessions"]
    assert line == f"ok   Codex CLI logs: {sessions} sessions in {codex / 'sessions'} (and 2 sub-agent files)"


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_show_by_id_counts_a_subagents_work_as_show_by_folder_does(
    agent: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``show <session id>`` (what the listing offers) reads the session with its sub-agents' logs, as ``show
    <folder>`` does: on main a Codex session named by id was read without its child threads (the sub-agent drawn
    with "0 turns · 0 tool calls", the prompt short of the sub-agent's work)."""
    monkeypatch.setenv("COLUMNS", "240")
    home = RECORDED / agent / "subagent-tools-fail"
    flags = [f"--{agent}-home", str(home), "--agents", agent]
    assert main(["show", *flags, "--json"]) == 0
    (session,) = json.loads(capsys.readouterr().out)["sessions"]
    assert main(["show", *flags, session["session_id"]]) == 0
    lines = capsys.readouterr().out.splitlines()
    by_id = [tuple(int(g or 0) for g in m.groups()) for line in lines if (m := _FACTS.search(line))]
    assert by_id[:2] == list(_show(capsys, home)), lines
