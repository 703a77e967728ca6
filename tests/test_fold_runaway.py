"""Live runaway detection in the fold: pure, no network, no clock.

The logs are built from real CLI 1.0.102 lines by :mod:`tests.runaway`. Where each detection must fire is
computed from the raw JSON lines (plain ``json``, not our parser), so a wrong fold cannot agree with itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from copilot_otel.loop.agentloop import LiveStats
from copilot_otel.model.records import BadLine, Emission, LogRecord, Measurement, Severity, SpanRecord
from copilot_otel.pipeline import FoldSettings, Pipeline, RunawayThresholds
from copilot_otel.sources.copilot.events import CopilotEvent as Event
from copilot_otel.sources.copilot.parse import parse_line
from tests.runaway import RUNAWAY_ARGUMENTS, RUNAWAY_TOOL, iter_runaway_lines, iter_tool_error_lines

DETECTED = "copilot_otel.runaway.detected"
REASON = "copilot_otel.runaway.reason"
DEFAULT = RunawayThresholds()
OFF = RunawayThresholds(turns=0, identical_tool_calls=0, tool_errors=0, tokens_per_minute=0)


@dataclass
class Step:
    """One line fed to the fold: its raw JSON, the parsed event and what the fold emitted for it."""

    index: int
    raw: dict[str, Any]
    event: Event
    out: list[Emission]


def _events(lines: Iterable[str]) -> Iterator[tuple[dict[str, Any], Event]]:
    offset = 0
    for number, text in enumerate(lines, 1):
        data = text.encode()
        event = parse_line(data.rstrip(b"\n"), offset, offset + len(data), number)
        assert not isinstance(event, BadLine), event
        offset += len(data)
        if event is not None:  # None: a line the fold never reads (the system prompt)
            yield json.loads(text), event


def _fold(
    lines: Iterable[str], thresholds: RunawayThresholds = DEFAULT
) -> tuple[Pipeline, list[Step], list[Emission]]:
    fold = Pipeline("hint", FoldSettings(runaway=thresholds))
    steps = [
        Step(i, raw, event, list(fold.feed_event(event).emissions))
        for i, (raw, event) in enumerate(_events(lines))
    ]
    closing = list(fold.close("file_ended").emissions)
    return fold, steps, closing


def _all(steps: list[Step], closing: Iterable[Emission] = ()) -> list[Emission]:
    return [r for s in steps for r in s.out] + list(closing)


def _detections(records: Iterable[Emission], reason: str | None = None) -> list[LogRecord]:
    return [
        r
        for r in records
        if isinstance(r, LogRecord)
        and r.event_name == DETECTED
        and (reason is None or r.attributes[REASON] == reason)
    ]


def _steps_detecting(steps: list[Step], reason: str) -> list[Step]:
    return [s for s in steps if _detections(s.out, reason)]


def _root(records: Iterable[Emission]) -> SpanRecord:
    roots = [r for r in records if isinstance(r, SpanRecord) and r.parent_span_id is None]
    assert len(roots) == 1, roots
    return roots[0]


def _main_turn_starts(steps: list[Step]) -> list[Step]:
    return [
        s
        for s in steps
        if s.raw["type"] == "assistant.turn_start"
        and "agentId" not in s.raw
        and "parentToolCallId" not in s.raw["data"]
    ]


def _index_of(steps: list[Step], kind: str) -> int:
    return next(s.index for s in steps if s.raw["type"] == kind)


# --------------------------------------------------------------------------------------------- the builder
def test_runaway_log_is_real_cli_lines_with_identical_bash_calls() -> None:
    lines = list(iter_runaway_lines(40))
    raw = [json.loads(line) for line in lines]
    assert all(line.endswith("\n") and line.count("\n") == 1 for line in lines)
    kinds = [e["type"] for e in raw]
    assert kinds[:3] == ["session.start", "user.message", "system.message"]
    assert kinds[-1] == "session.shutdown"
    assert kinds.count("assistant.turn_start") == 41  # 40 bash turns + the final answer
    starts = [e["data"] for e in raw if e["type"] == "tool.execution_start"]
    assert len(starts) == 40
    assert {(s["toolName"], json.dumps(s["arguments"], sort_keys=True)) for s in starts} == {
        (RUNAWAY_TOOL, json.dumps(RUNAWAY_ARGUMENTS, sort_keys=True))
    }
    # fresh ids everywhere, parents chained, time moving forward
    assert len({e["id"] for e in raw}) == len(raw)
    assert len({s["toolCallId"] for s in starts}) == 40
    usage = [e["data"]["usage"] for e in raw if e["type"] == "session.usage_record"]
    assert len({u["apiCallId"] for u in usage}) == len(usage) == 41
    assert [e["data"]["turnId"] for e in raw if e["type"] == "assistant.turn_start"] == [
        str(i) for i in range(41)
    ]
    assert [e["parentId"] for e in raw[1:]] == [e["id"] for e in raw[:-1]]
    stamps = [e["timestamp"] for e in raw]
    assert stamps == sorted(stamps)
    # every turn's tool call completes successfully, and the session id was rewritten everywhere
    assert all(e["data"]["success"] for e in raw if e["type"] == "tool.execution_complete")
    assert "0a000002-0000-4000-8000-000000000002" not in "".join(lines)
    assert list(iter_runaway_lines(40)) == lines  # deterministic


# --------------------------------------------------------------------------------------------- turns
@pytest.mark.parametrize("limit", [25, 10])
def test_turns_fires_once_at_the_threshold_turn_start_long_before_the_prompt_ends(limit: int) -> None:
    _, steps, closing = _fold(iter_runaway_lines(40), RunawayThresholds(turns=limit))
    hits = _steps_detecting(steps, "turns")
    assert len(hits) == 1
    assert len(_detections(_all(steps, closing), "turns")) == 1
    hit = hits[0]
    # The limit-th main-agent turn_start, counted from the raw lines.
    assert hit is _main_turn_starts(steps)[limit - 1]
    assert hit.index < _index_of(steps, "session.shutdown") - 50
    assert not any(
        isinstance(r, SpanRecord) and r.parent_span_id is None for s in steps[: hit.index + 1] for r in s.out
    )
    assert not any(
        isinstance(r, LogRecord) and r.event_name == "copilot_otel.prompt.ended"
        for s in steps[: hit.index + 1]
        for r in s.out
    )
    (log,) = _detections(hit.out, "turns")
    assert log.time_ns == hit.event.time_ns
    assert log.source_offset == hit.event.end_offset
    assert log.attributes["copilot_otel.runaway.threshold"] == limit
    assert log.attributes["copilot_otel.prompt.turns_total"] == limit
    counters = [
        m for m in hit.out if isinstance(m, Measurement) and m.name == "copilot_otel.runaway.detections"
    ]
    assert [(m.value, dict(m.attributes)) for m in counters] == [
        (1, {REASON: "turns", "copilot_otel.agent": "copilot"})
    ]


@pytest.mark.parametrize(("bash_turns", "fires"), [(23, False), (24, True)])
def test_turns_boundary_counts_the_final_answer_turn(bash_turns: int, fires: bool) -> None:
    """24 or 25 main-agent turns in total (the final answer is a turn too) against the default of 25."""
    _, steps, closing = _fold(iter_runaway_lines(bash_turns))
    assert len(_main_turn_starts(steps)) == bash_turns + 1
    assert len(_detections(_all(steps, closing), "turns")) == (1 if fires else 0)
    if fires:
        assert _steps_detecting(steps, "turns")[0] is _main_turn_starts(steps)[-1]


# ------------------------------------------------------------------------------------------ identical calls
@pytest.mark.parametrize("limit", [5, 3])
def test_identical_tool_calls_fire_once_when_the_nth_identical_call_starts(limit: int) -> None:
    _, steps, closing = _fold(iter_runaway_lines(40), RunawayThresholds(identical_tool_calls=limit))
    tool_starts = [s for s in steps if s.raw["type"] == "tool.execution_start"]
    assert len({json.dumps(s.raw["data"]["arguments"], sort_keys=True) for s in tool_starts}) == 1
    hits = _steps_detecting(steps, "identical_tool_calls")
    assert hits == [tool_starts[limit - 1]]
    assert len(_detections(_all(steps, closing), "identical_tool_calls")) == 1
    (log,) = _detections(hits[0].out)
    assert log.attributes["gen_ai.tool.name"] == RUNAWAY_TOOL
    assert log.attributes["copilot_otel.runaway.threshold"] == limit
    assert log.attributes["copilot_otel.prompt.tool_calls"] == limit
    # the hash is the one on the tool spans of the same calls
    tool_spans = [
        r
        for r in _all(steps, closing)
        if isinstance(r, SpanRecord) and r.name == f"execute_tool {RUNAWAY_TOOL}"
    ]
    assert {r.attributes["copilot_otel.tool.arguments_hash"] for r in tool_spans} == {
        log.attributes["copilot_otel.tool.arguments_hash"]
    }


# --------------------------------------------------------------------------------------------- tool errors
@pytest.mark.parametrize("limit", [5, 3])
def test_tool_error_streak_fires_at_k(limit: int) -> None:
    _, steps, closing = _fold(iter_tool_error_lines(8), RunawayThresholds(tool_errors=limit))
    failed = [
        s for s in steps if s.raw["type"] == "tool.execution_complete" and s.raw["data"]["success"] is False
    ]
    assert len(failed) == 8
    assert _steps_detecting(steps, "tool_errors") == [failed[limit - 1]]
    assert [r.attributes[REASON] for r in _detections(_all(steps, closing))] == ["tool_errors"]
    (log,) = _detections(failed[limit - 1].out)
    assert log.time_ns == failed[limit - 1].event.time_ns
    assert log.attributes["copilot_otel.runaway.threshold"] == limit


def test_tool_error_streak_below_k_does_not_fire() -> None:
    _, steps, closing = _fold(iter_tool_error_lines(4), RunawayThresholds(tool_errors=5))
    assert _detections(_all(steps, closing)) == []


# --------------------------------------------------------------------------------------------- burn rate
def _expected_burn(steps: list[Step], limit: int) -> tuple[int, int]:
    """(step index, tokens in the last minute) where the sliding 60 s token sum first reaches ``limit``."""
    window: list[tuple[int, int]] = []
    for s in steps:
        if s.raw["type"] != "session.usage_record":
            continue
        usage = s.raw["data"]["usage"]
        window.append((s.event.time_ns, usage["inputTokens"] + usage["outputTokens"]))
        window = [(t, n) for t, n in window if t >= s.event.time_ns - 60_000_000_000]
        total = sum(n for _, n in window)
        if total >= limit:
            return s.index, total
    raise AssertionError("never reached")


@pytest.mark.parametrize("limit", [5_000, 30_000])
def test_burn_rate_fires_once_with_a_low_threshold(limit: int) -> None:
    _, steps, closing = _fold(iter_runaway_lines(40), RunawayThresholds(tokens_per_minute=limit))
    index, tokens = _expected_burn(steps, limit)
    hits = _steps_detecting(steps, "burn_rate")
    assert [s.index for s in hits] == [index]
    assert len(_detections(_all(steps, closing), "burn_rate")) == 1
    (log,) = _detections(hits[0].out, "burn_rate")
    assert log.attributes["copilot_otel.runaway.tokens_last_minute"] == tokens
    assert log.attributes["copilot_otel.runaway.threshold"] == limit


def test_default_burn_rate_does_not_fire_on_a_slow_loop() -> None:
    _, steps, closing = _fold(iter_runaway_lines(40))
    assert _detections(_all(steps, closing), "burn_rate") == []


# --------------------------------------------------------------------------------------------- disabling
@pytest.mark.parametrize(
    "lines",
    [lambda: iter_runaway_lines(40), lambda: iter_tool_error_lines(8)],
    ids=["runaway", "tool-errors"],
)
def test_zero_thresholds_disable_every_check(lines: Any) -> None:
    _, steps, closing = _fold(lines(), OFF)
    records = _all(steps, closing)
    assert _detections(records) == []
    assert not [
        m for m in records if isinstance(m, Measurement) and m.name == "copilot_otel.runaway.detections"
    ]
    assert not [e for e in _root(records).events if e.name == DETECTED]


def test_zero_token_threshold_disables_only_the_burn_rate() -> None:
    thresholds = RunawayThresholds(tokens_per_minute=0)
    _, steps, closing = _fold(iter_runaway_lines(40), thresholds)
    reasons = sorted(r.attributes[REASON] for r in _detections(_all(steps, closing)))
    assert reasons == ["identical_tool_calls", "turns"]
    # 1 token/minute would fire at the first model call: 0 must not mean "always"
    _, steps, closing = _fold(iter_runaway_lines(40), RunawayThresholds(tokens_per_minute=1))
    assert [s.raw["type"] for s in _steps_detecting(steps, "burn_rate")] == ["session.usage_record"]


# --------------------------------------------------------------------------------------------- determinism
def test_refolding_the_same_log_gives_identical_records() -> None:
    thresholds = RunawayThresholds(tokens_per_minute=20_000)
    _, first, first_close = _fold(iter_runaway_lines(40), thresholds)
    _, second, second_close = _fold(iter_runaway_lines(40), thresholds)
    assert _all(first, first_close) == _all(second, second_close)
    detections = _detections(_all(first, first_close))
    assert sorted(r.attributes[REASON] for r in detections) == ["burn_rate", "identical_tool_calls", "turns"]
    assert [s.index for s in first if _detections(s.out)] == [s.index for s in second if _detections(s.out)]


# --------------------------------------------------------------------------------------------- correlation
def test_each_detection_is_a_warn_log_on_the_root_span_and_a_root_span_event() -> None:
    _, steps, closing = _fold(iter_runaway_lines(40), RunawayThresholds(tokens_per_minute=20_000))
    records = _all(steps, closing)
    root = _root(records)
    assert root.name == "invoke_agent"
    logs = _detections(records)
    assert len(logs) == 3
    span_events = [e for e in root.events if e.name == DETECTED]
    assert [(e.time_ns, e.attributes[REASON]) for e in span_events] == [
        (r.time_ns, r.attributes[REASON]) for r in logs
    ]
    for log, span_event in zip(logs, span_events, strict=True):
        assert log.severity is Severity.WARN
        assert (log.trace_id, log.span_id) == (root.trace_id, root.span_id)
        assert log.body.endswith(str(log.attributes[REASON]))
        assert dict(span_event.attributes).items() <= dict(log.attributes).items()
    # every other span of the prompt is in the same trace
    assert {r.trace_id for r in records if isinstance(r, SpanRecord)} == {root.trace_id}


def test_tool_error_detection_is_correlated_with_its_root_span() -> None:
    _, steps, closing = _fold(iter_tool_error_lines(6))
    records = _all(steps, closing)
    root = _root(records)
    (log,) = _detections(records)
    assert (log.severity, log.trace_id, log.span_id) == (Severity.WARN, root.trace_id, root.span_id)
    assert [e.attributes[REASON] for e in root.events if e.name == DETECTED] == ["tool_errors"]


# --------------------------------------------------------------------------------------------- live stats
def test_live_stats_grow_while_the_prompt_runs() -> None:
    fold = Pipeline("hint", FoldSettings())
    seen: list[LiveStats] = []
    prompt_start = None
    for raw, event in _events(iter_runaway_lines(30)):
        out = fold.feed_event(event).emissions
        if raw["type"] == "user.message":
            prompt_start = event.time_ns
        if raw["type"] == "tool.execution_start":
            (stats,) = fold.live_stats()
            assert stats.last_event_ns == event.time_ns
            assert stats.started_ns == prompt_start
            seen.append(stats)
        if raw["type"] == "session.shutdown":
            root = _root(out)
            assert fold.live_stats() == []
    n = len(seen)
    assert n == 30
    assert [s.turns for s in seen] == list(range(1, n + 1))
    assert [s.tool_calls for s in seen] == list(range(1, n + 1))
    assert [s.identical_streak for s in seen] == list(range(1, n + 1))
    assert {s.error_streak for s in seen} == {0}
    assert {(s.trace_id, s.span_id) for s in seen} == {(root.trace_id, root.span_id)}


def test_live_error_streak_grows_and_identical_streak_resets() -> None:
    fold = Pipeline("hint", FoldSettings(runaway=OFF))
    streaks = []
    for raw, event in _events(iter_tool_error_lines(6)):
        fold.feed_event(event)
        if raw["type"] == "tool.execution_complete":
            (stats,) = fold.live_stats()
            streaks.append((stats.error_streak, stats.identical_streak))
    assert streaks == [(k, 1) for k in range(1, 7)]
