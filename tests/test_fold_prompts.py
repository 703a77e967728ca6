"""Prompt boundaries in the fold, on real CLI 1.0.102 lines with injected messages added where the CLI puts them.

No fixture contains autopilot continuations, steering, queued or skill messages, or a model call outside any
turn (compaction), so these logs take a real session (multi-tool) and insert ``user.message`` /
``session.usage_record`` lines shaped as copilot-events.md §5.1 and §6 describe them.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from copilot_otel.model.records import BadLine, SpanRecord
from copilot_otel.pipeline import FoldSettings, Pipeline
from copilot_otel.sources.copilot.parse import parse_line
from tests.conftest import CLI_GENERATED

LINES = (CLI_GENERATED / "multi-tool" / "events.jsonl").read_text().splitlines()
EVENTS = [json.loads(line) for line in LINES]


def _message(after: dict[str, Any], event_id: str, **data: Any) -> dict[str, Any]:
    return {
        "type": "user.message",
        "data": {"content": f"injected {event_id}", **data},
        "id": event_id,
        "timestamp": after["timestamp"],
        "parentId": after["id"],
    }


def _fold(events: list[dict[str, Any]]) -> list[SpanRecord]:
    fold = Pipeline("hint", FoldSettings())
    out: list[Any] = []
    offset = 0
    for number, event in enumerate(events, 1):
        raw = json.dumps(event).encode()
        parsed = parse_line(raw, offset, offset + len(raw) + 1, number)
        offset += len(raw) + 1
        assert not isinstance(parsed, BadLine), parsed
        if parsed is not None:
            out += fold.feed_event(parsed).emissions
    out += fold.close("file_ended").emissions
    return [r for r in out if isinstance(r, SpanRecord)]


def _after_first(kind: str) -> int:
    return next(i for i, e in enumerate(EVENTS) if e["type"] == kind) + 1


def test_injected_messages_join_the_open_prompt() -> None:
    events = list(EVENTS)
    at = _after_first("assistant.turn_end")
    events[at:at] = [
        _message(events[at - 1], "autopilot-1", isAutopilotContinuation=True),
        _message(events[at - 1], "steer-1", delivery="steering"),
        _message(events[at - 1], "skill-1", source="skill-pdf"),
    ]
    spans = _fold(events)
    roots = [s for s in spans if s.parent_span_id is None]
    assert len(roots) == 1, "injected messages do not start prompts"
    sources = [
        e.attributes["github.copilot.user.message.source"]
        for e in roots[0].events
        if e.name == "github.copilot.user.message"
    ]
    assert sources == ["user", "autopilot", "steering", "skill-pdf"]
    assert roots[0].attributes["github.copilot.turn_count"] == sum(
        1 for e in EVENTS if e["type"] == "assistant.turn_start"
    )


def test_queued_message_is_a_new_prompt_and_injected_with_none_open_starts_one() -> None:
    first_turn_end = _after_first("assistant.turn_end")
    events = [
        *EVENTS[:first_turn_end],
        _message(EVENTS[first_turn_end - 1], "queued-1", delivery="queued"),
        *EVENTS[first_turn_end:],
    ]
    assert len([s for s in _fold(events) if s.parent_span_id is None]) == 2
    # after the shutdown nothing is open: an autopilot continuation then starts a prompt of its own
    tail = [_message(EVENTS[-1], "autopilot-late", isAutopilotContinuation=True)]
    roots = [s for s in _fold([*EVENTS, *tail]) if s.parent_span_id is None]
    assert len(roots) == 2


def test_a_usage_record_outside_any_turn_is_a_chat_span_under_the_prompt() -> None:
    usage = next(e for e in EVENTS if e["type"] == "session.usage_record")
    compaction = {
        **usage,
        "id": "compaction-usage",
        "data": {"usage": {**usage["data"]["usage"], "inputTokens": 777, "initiator": "agent"}},
    }
    at = _after_first("assistant.turn_end")
    compaction["timestamp"] = EVENTS[at - 1]["timestamp"]
    spans = _fold([*EVENTS[:at], compaction, *EVENTS[at:]])
    by_id = {s.span_id: s for s in spans}

    def parent(span: SpanRecord) -> SpanRecord:
        assert span.parent_span_id is not None
        return by_id[span.parent_span_id]

    def input_tokens(span: SpanRecord) -> int:
        value = span.attributes["gen_ai.usage.input_tokens"]
        assert isinstance(value, int)
        return value

    extra = [s for s in spans if s.name.startswith("chat ") and input_tokens(s) == 777]
    assert len(extra) == 1
    assert parent(extra[0]).name == "invoke_agent"
    chats = [s for s in spans if s.name.startswith("chat ")]
    usage_sum = (
        sum(e["data"]["usage"]["inputTokens"] for e in EVENTS if e["type"] == "session.usage_record") + 777
    )
    assert sum(input_tokens(s) for s in chats) == usage_sum
    turns = Counter(parent(s).name.split()[0] for s in chats)
    assert turns == {"turn": sum(1 for e in EVENTS if e["type"] == "assistant.turn_start"), "invoke_agent": 1}
