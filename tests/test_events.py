"""Typed events: parse is the only place that knows the log's camelCase, and its views never raise.

Every line of every fixture (real CLI captures of 1.0.102 and older public ones) is parsed and read through its
typed view; the expected values are taken from the raw JSON with plain dict access here, never by the code under
test. The views are then fed values of every wrong JSON type: a field of the wrong type reads as absent.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import re
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import copilot_otel
from copilot_otel.model.records import DropReason
from copilot_otel.pipeline import Pipeline
from copilot_otel.sources.copilot import events as ev
from copilot_otel.sources.copilot.parse import parse_line
from copilot_otel.sources.fields import Field
from copilot_otel.sources.tail import Line
from tests.conftest import FIXTURES

LOGS = sorted(p for p in FIXTURES.rglob("*.jsonl") if "_capture" not in p.parts)
VIEWS = [
    cls
    for _, cls in inspect.getmembers(ev, inspect.isclass)
    if issubclass(cls, ev.CopilotEvent) and cls is not ev.CopilotEvent
]


def _lines() -> Iterator[tuple[str, dict[str, Any], ev.CopilotEvent]]:
    for log in LOGS:
        offset = 0
        for number, raw in enumerate(log.read_bytes().splitlines(keepends=True), 1):
            line = raw.rstrip(b"\r\n")
            try:
                obj = json.loads(line)
            except ValueError:
                obj = None
            parsed = parse_line(line, offset, offset + len(raw), number, frozenset())
            offset += len(raw)
            if isinstance(obj, dict) and isinstance(parsed, ev.CopilotEvent):
                yield f"{log.name}:{number}", obj, parsed


ALL = list(_lines())


def _of(kind: str) -> list[tuple[str, dict[str, Any], Any]]:
    found = [(where, obj, e) for where, obj, e in ALL if obj["type"] == kind]
    assert found, f"no {kind} in the fixtures"
    return found


def test_the_fixtures_hold_every_event_type_the_loop_reads() -> None:
    seen = {e.__class__ for _, _, e in ALL}
    # Truncation and skill events are in no capture we have; every other view is read from real lines.
    missing = {cls.__name__ for cls in VIEWS} - {cls.__name__ for cls in seen}
    assert missing <= {"Truncation", "SkillInvoked", "ContextChanged", "SessionError"}, missing


def test_envelope_and_routing_keys_come_from_the_line() -> None:
    for where, obj, e in ALL:
        raw = obj.get("data")
        data: dict[str, Any] = raw if isinstance(raw, dict) else {}
        assert e.type == obj["type"], where
        assert e.agent_id == (obj.get("agentId") or None), where
        assert e.interaction_id == (data.get("interactionId") or None), where
        assert e.parent_tool_call_id == (data.get("parentToolCallId") or None), where


def test_tool_events() -> None:
    for where, obj, e in _of("tool.execution_start"):
        d = obj["data"]
        assert isinstance(e, ev.ToolStart)
        assert (e.call_id, e.name, e.arguments) == (d["toolCallId"], d["toolName"], d.get("arguments")), where
        assert e.mcp_server == d.get("mcpServerName"), where
    outcomes = set()
    for where, obj, e in _of("tool.execution_complete"):
        d = obj["data"]
        assert isinstance(e, ev.ToolComplete)
        assert e.call_id == d["toolCallId"] and e.success is (d.get("success") is not False), where
        error = d.get("error") or {}
        assert (e.error_code, e.error_message) == (error.get("code"), error.get("message") or None), where
        assert e.result == (d.get("result") or {}).get("content"), where
        outcomes.add((e.success, e.error_code))
    assert (False, "denied") in outcomes and (True, None) in outcomes


def _exact(value: int) -> int | None:
    return value if -(2**53) < value < 2**53 else None


def test_usage_records() -> None:
    for where, obj, e in _of("session.usage_record"):
        u = obj["data"]["usage"]
        assert isinstance(e, ev.UsageRecord)
        r = e.usage
        assert r is not None, where
        # a count beyond what a JSON number holds exactly (usage-out-of-range) reads as absent, never 0
        assert (r.input_tokens, r.output_tokens) == (_exact(u["inputTokens"]), _exact(u["outputTokens"])), (
            where
        )
        assert (r.cache_read_tokens, r.cache_write_tokens) == (u["cacheReadTokens"], u["cacheWriteTokens"])
        assert r.model == u["model"] and r.api_call_id == u.get("apiCallId"), where
        assert r.duration_ms == u.get("duration"), where
        byok = u.get("isByok")
        expected = (u.get("providerType") or "byok") if byok is True else "github" if byok is False else None
        assert r.provider == expected, where


def test_messages_and_turns() -> None:
    for where, obj, e in _of("assistant.message"):
        d = obj["data"]
        requests = [
            # CLI 0.0.x names the call "id"
            (r.get("toolCallId") or r.get("id"), r["name"], r.get("arguments"))
            for r in d.get("toolRequests", [])
        ]
        assert [(r.call_id, r.name, r.arguments) for r in e.tool_requests] == requests, where
        assert e.content == d.get("content") and e.turn_id == d.get("turnId"), where
        assert e.has_model_call_ids == any(
            d.get(k) for k in ("model", "apiCallId", "interactionId", "turnId")
        )
    cli_written = [e for _, _, e in _of("assistant.message") if not e.has_model_call_ids]
    assert cli_written, "the background captures have messages the CLI wrote itself"
    for where, obj, e in _of("user.message"):
        d = obj["data"]
        assert isinstance(e, ev.UserMessage)
        assert (e.content, e.source, e.agent_mode) == (d["content"], d.get("source"), d.get("agentMode")), (
            where
        )
        assert e.autopilot_continuation is (d.get("isAutopilotContinuation") is True), where
    for where, obj, e in _of("assistant.turn_start"):
        assert isinstance(e, ev.TurnStart) and e.turn_id == obj["data"]["turnId"], where


def test_session_events() -> None:
    for where, obj, e in _of("session.start"):
        d = obj["data"]
        assert isinstance(e, ev.SessionStart)
        assert (e.session_id, e.copilot_version) == (d["sessionId"], d.get("copilotVersion")), where
        context = d.get("context")
        if context is not None:
            assert e.context is not None and e.context.cwd == context.get("cwd"), where
    for where, obj, e in _of("session.shutdown"):
        d = obj["data"]
        assert isinstance(e, ev.Shutdown)
        metrics = d.get("modelMetrics", {})
        assert [m.model for m in e.models] == [k for k, v in metrics.items() if isinstance(v, dict)], where
        for m in e.models:
            usage, requests = metrics[m.model].get("usage"), metrics[m.model].get("requests")
            # synthetic-by-others has a shutdown whose requests is a bare number: read as absent
            assert m.input_tokens == (usage.get("inputTokens") if isinstance(usage, dict) else None), where
            assert m.requests == (requests.get("count") if isinstance(requests, dict) else None), where
        assert e.lines_added == d.get("codeChanges", {}).get("linesAdded", 0), where
    for where, obj, e in _of("session.compaction_complete"):
        if obj["data"].get("success") is False:  # a compaction that failed (usage-out-of-range) used nothing
            assert isinstance(e, ev.Compaction) and e.complete and e.call is None, where
            continue
        used = obj["data"]["compactionTokensUsed"]
        assert isinstance(e, ev.Compaction) and e.complete and e.call is not None
        assert (e.call.input_tokens, e.call.output_tokens) == (used["inputTokens"], used["outputTokens"]), (
            where
        )
    for where, _, e in _of("session.compaction_start"):
        assert isinstance(e, ev.Compaction) and not e.complete, where
    for where, obj, e in _of("permission.requested"):
        request = obj["data"]["permissionRequest"]
        assert (e.request_id, e.kind) == (obj["data"]["requestId"], request["kind"]), where
    for where, obj, e in _of("system.notification"):
        assert e.kind == obj["data"]["kind"]["type"], where
    for where, obj, e in _of("subagent.started"):
        d = obj["data"]
        assert (e.tool_call_id, e.name) == (d["toolCallId"], d["agentName"]), where
        assert e.background is (d.get("executionMode") == "background"), where


# Values of every JSON type, and JSON values Python reads as another type (a whole float, a bool).
WRONG: list[Any] = [None, True, False, 0, 7, 1.5, 2.0, "", "x", [], [1, {"a": 1}], {}, {"a": []}]


# What each kind of field may return (see copilot_otel.sources.fields).
FIELD_KINDS: dict[str, Any] = {
    "text": str | None,
    "count": int | None,
    "amount": float | None,
    "flag": bool,
    "raw": Any,
}


def _props(cls: type[ev.CopilotEvent]) -> dict[str, Any]:
    """Every field and property of a view, with the type it is declared to return."""
    hints: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        for name, value in vars(klass).items():
            if isinstance(value, Field):
                hints[name] = FIELD_KINDS[value.kind]
            elif isinstance(value, property) and value.fget is not None:
                hints[name] = typing.get_type_hints(value.fget, vars(ev))["return"]
    return hints


def _conforms(value: Any, hint: Any) -> bool:
    if hint is Any:
        return True
    if hint is bool:
        return isinstance(value, bool)
    options = (
        typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, type(int | None)) else (hint,)
    )
    for option in options:
        if option is type(None) and value is None:
            return True
        origin = typing.get_origin(option) or option
        if origin is not type(None) and isinstance(value, origin):
            if origin is int and isinstance(value, bool) and option is not bool:
                continue
            if origin is str and value == "":
                continue
            if dataclasses.is_dataclass(value):  # a nested value (usage, context): its fields too
                hints = typing.get_type_hints(type(value), vars(ev))
                return all(_conforms(getattr(value, f), hints[f]) for f in hints)
            if origin is tuple:
                (item, _) = typing.get_args(option)
                return all(_conforms(v, item) for v in value)
            return True
    return False


def _paths(obj: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield (*prefix, key)
            yield from _paths(value, (*prefix, key))


def _with(obj: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    copy: dict[str, Any] = json.loads(json.dumps(obj))
    node = copy
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return copy


@pytest.mark.parametrize("cls", VIEWS, ids=lambda c: c.__name__)
def test_a_field_of_the_wrong_type_reads_as_absent(cls: type[ev.CopilotEvent]) -> None:
    """Every property of every view, on real data with each field (nested ones too) set to each wrong type:
    it never raises, and what it returns has its declared type (no bool for a count, no empty string)."""
    samples = [obj.get("data", {}) for _, obj, e in ALL if e.__class__ is cls][:3] or [{}]
    kinds = {kind for kind, c in ev.CLASSES.items() if c is cls}
    props = _props(cls)
    checked = 0
    for data in samples:
        variants = [data, {}] + [_with(data, path, value) for path in _paths(data) for value in WRONG]
        for variant in variants:
            for kind in kinds:
                event = cls(kind, "id", 1, variant, None, 0, 1)
                for name, hint in props.items():
                    value = getattr(event, name)
                    assert _conforms(value, hint), (cls.__name__, name, value, hint)
                    checked += 1
    assert checked >= len(props) * 2


def test_only_parse_knows_the_logs_camel_case() -> None:
    """The log's field names (every camelCase string of the events module) appear in no other module of the
    package: the loop, the projections and the sinks read typed events and records only."""
    package = Path(copilot_otel.__file__).parent
    camel = re.compile(r"^[a-z]+(?:[A-Z][a-z0-9]*)+$")

    def strings(path: Path) -> set[str]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        return {
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and camel.match(node.value)
        }

    # The log modules: one package per source (sources/, Copilot's included), each the only reader of
    # its log's names; they may share words (``sessionId`` is in two logs), no other module may use any.
    log_modules = {
        *(package / "sources").rglob("*.py"),
    }
    log_names = strings(package / "sources" / "copilot" / "events.py")
    assert {"toolCallId", "interactionId", "inputTokens", "parentToolCallId"} <= log_names
    claude_names = strings(package / "sources" / "claude_code" / "reader.py")
    assert {"parentUuid", "isSidechain", "toolUseResult", "isCompactSummary", "toolUseId"} <= claude_names
    for module in sorted(package.rglob("*.py")):
        if module in log_modules:
            continue
        leaked = strings(module) & (log_names | claude_names)
        assert not leaked, f"{module.relative_to(package)} reads a log's own names: {sorted(leaked)}"


@pytest.mark.parametrize("end", ["subagent.failed", "custom_agent.failed", "subagent.completed"])
def test_a_failed_sub_agent_is_an_error_in_every_spelling(tmp_path: Path, end: str) -> None:
    """CLI 0.0.382-0 wrote ``custom_agent.*`` where later versions write ``subagent.*``: a failure is one in both.

    The real ``subagent`` capture, its sub-agent's end event renamed.
    """
    from copilot_otel import read_session
    from copilot_otel.model.activity import AgentRun, Outcome

    source = FIXTURES / "cli-generated" / "subagent" / "events.jsonl"
    log = tmp_path / "events.jsonl"
    log.write_bytes(source.read_bytes().replace(b'"type":"subagent.completed"', f'"type":"{end}"'.encode()))
    (agent,) = [r for r in read_session(log).records if isinstance(r, AgentRun)]
    assert agent.outcome is (Outcome.OK if end == "subagent.completed" else Outcome.ERROR)
    assert agent.total_tokens == 2480  # the end event's totals are read whatever its spelling


_TOO_BIG = [
    2**70,
    2**63,
    2**53,
    -(2**64),
    1e300,
    float(2**53),
]  # 2**70 reaches the field as the float 1.18e21


@pytest.mark.parametrize("value", _TOO_BIG, ids=repr)
def test_a_number_no_encoder_carries_reads_as_absent_and_is_noted_once(value: float) -> None:
    usage = next(
        obj
        for _, obj, e in ALL
        if obj.get("type") == "session.usage_record" and obj["data"]["usage"]["outputTokens"] < 2**53
    )
    line = json.dumps(_with(usage, ("data", "usage", "outputTokens"), value)).encode()
    line = line.replace(b"1e+300", b"1" + b"0" * 300)  # an integer literal of 301 digits
    step = Pipeline("s").feed(Line(0, len(line) + 1, line))
    assert [(v.reason, v.line_number) for v in step.values_dropped] == [(DropReason.OUT_OF_RANGE, 1)]
    event = parse_line(line, 0, len(line) + 1, 1)
    assert isinstance(event, ev.UsageRecord)
    assert event.usage is not None and event.usage.output_tokens is None  # absent (unknown), not 0
    assert event.usage.input_tokens == usage["data"]["usage"]["inputTokens"]  # the rest of the event is kept
    # noted on the event (each read notes it; the pipeline keeps one a line)
    assert [reason for reason, _ in dict.fromkeys(event.dropped)] == [DropReason.OUT_OF_RANGE]


def test_the_largest_number_an_encoder_carries_is_kept() -> None:
    message = next(obj for _, obj, e in ALL if obj.get("type") == "assistant.message")
    for value in (2**53 - 1, -(2**53) + 1, 0):
        line = json.dumps(_with(message, ("data", "outputTokens"), value)).encode()
        event = parse_line(line, 0, len(line) + 1, 1)
        assert isinstance(event, ev.AssistantMessage) and event.output_tokens == value
        assert event.dropped == []


@pytest.mark.parametrize(
    ("timestamp", "kept"),
    [
        ("2700-11-29T17:11:32.618Z", False),  # beyond 2**64 ns: OTLP cannot carry it
        ("2300-01-01T00:00:00Z", False),  # beyond int64 ns
        ("1969-12-31T23:59:59.999Z", False),  # before the epoch
        ("1970-01-01T00:00:00Z", False),  # 0 ns means "no time" in the fold
        ("not a time", False),
        (1764000000, False),  # a number, not an ISO-8601 string
        ("2262-04-11T00:00:00Z", True),
        ("1970-01-01T00:00:00.000001Z", True),
    ],
)
def test_a_timestamp_no_encoder_carries_is_dropped_and_the_event_kept(timestamp: object, kept: bool) -> None:
    start = next(obj for _, obj, e in ALL if obj.get("type") == "session.start")
    line = json.dumps({**start, "timestamp": timestamp}).encode()
    step = Pipeline("s").feed(Line(0, len(line) + 1, line))
    event = parse_line(line, 0, len(line) + 1, 1)
    assert isinstance(event, ev.SessionStart) and event.session_id == start["data"]["sessionId"]
    assert (event.time_ns > 0) is kept
    assert [v.reason for v in step.values_dropped] == ([] if kept else [DropReason.BAD_TIMESTAMP])
    assert [reason for reason, _ in event.dropped] == ([] if kept else [DropReason.BAD_TIMESTAMP])
