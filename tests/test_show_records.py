"""``show`` draws the agent loop's records: what the new session shapes hold reaches the terminal.

Expectations come from the raw logs (plain json): permission waits, the CLI's own tool calls after a
background notification, background sub-agents, denied tools, task completion and mode changes, and the
prompt heading's tokens summed over every model call of the prompt (sub-agents' included, as its turn count).
"""

from __future__ import annotations

import pytest

from copilot_otel.cli import main
from tests.conftest import CLI_GENERATED, FIXTURES, read_events

SHAPES = FIXTURES / "cli-shapes"


def _show(capsys: pytest.CaptureFixture[str], name: str, folder: str = "cli-shapes") -> str:
    assert main(["show", str(FIXTURES / folder / name)]) == 0
    return capsys.readouterr().out


def test_permission_waits_and_denials(capsys: pytest.CaptureFixture[str]) -> None:
    out = _show(capsys, "permissions")
    events = read_events(SHAPES / "permissions" / "events.jsonl")
    results = [e["data"]["result"]["kind"] for e in events if e["type"] == "permission.completed"]
    assert out.count("waited for permission") == len(results) == 3
    for result in results:
        assert result in out
    assert "denied:" in out


def test_the_clis_own_tool_calls_and_background_agents(capsys: pytest.CaptureFixture[str]) -> None:
    out = _show(capsys, "fleet")
    events = read_events(SHAPES / "fleet" / "events.jsonl")
    notes = [e for e in events if e["type"] == "system.notification"]
    assert out.count("(by the CLI)") == len(notes) == 2
    assert out.count("background agent idle") == 2
    assert out.count("in the background") == 2


def test_task_completion_and_mode_changes(capsys: pytest.CaptureFixture[str]) -> None:
    out = _show(capsys, "plan-to-autopilot")
    assert "mode plan → autopilot" in out
    assert "task complete" in out


def test_the_heading_counts_every_agents_tokens(capsys: pytest.CaptureFixture[str]) -> None:
    out = _show(capsys, "subagent", folder="cli-generated")
    usage = [
        e["data"]["usage"]
        for e in read_events(CLI_GENERATED / "subagent" / "events.jsonl")
        if e["type"] == "session.usage_record"
    ]
    assert any("agentId" in e for e in read_events(CLI_GENERATED / "subagent" / "events.jsonl"))
    total_in = sum(u["inputTokens"] for u in usage)
    total_out = sum(u["outputTokens"] for u in usage)
    assert f"{total_in:,} in / {total_out:,} out tokens · " in out
