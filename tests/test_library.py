"""``copilot_otel.read_session``: the neutral records of a session, checked against the raw log (plain json)."""

from __future__ import annotations

from pathlib import Path

import pytest

import copilot_otel
from copilot_otel.common.errors import SourceError
from tests.conftest import CLI_GENERATED, read_events

FOLDERS = sorted(p for p in CLI_GENERATED.iterdir() if p.is_dir())


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_records_match_the_raw_log(folder: Path) -> None:
    events = read_events(folder / "events.jsonl")
    session = copilot_otel.read_session(folder)
    human = [
        e
        for e in events
        if e["type"] == "user.message" and "agentId" not in e and not e["data"].get("source")
    ]
    assert len(session.prompts) == len(human)
    assert [p.human for p in session.prompts].count(True) == len(human)
    starts = [e for e in events if e["type"] == "tool.execution_start"]
    assert sorted(t.call_id for t in session.tool_calls) == sorted(e["data"]["toolCallId"] for e in starts)
    usage = [e["data"]["usage"] for e in events if e["type"] == "session.usage_record"]
    assert sum(c.usage.input or 0 for c in session.model_calls) == sum(u.get("inputTokens", 0) for u in usage)
    assert sum(c.usage.output or 0 for c in session.model_calls) >= sum(
        u.get("outputTokens", 0) for u in usage
    )
    raw_lines = [line for line in (folder / "events.jsonl").read_bytes().splitlines() if line.strip()]
    assert session.lines == len(raw_lines)
    assert not session.drops
    assert {p.session_id for p in session.prompts} <= {session.session_id, events[0]["data"]["sessionId"]}


def test_iter_sessions_reads_a_whole_root() -> None:
    ids = [s.session_id for s in copilot_otel.iter_sessions([CLI_GENERATED])]
    assert sorted(ids) == sorted(p.name for p in FOLDERS)


def test_a_missing_session_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SourceError):
        copilot_otel.read_session(tmp_path / "nope")
