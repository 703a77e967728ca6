"""Codex CLI's own loop rules, with the rollout's own words: what no other source does.

The facts every source shares (a trace per human prompt (a Codex task), the model calls in their turns, the tools
with their outcomes, the tokens, the error that ended a task, how each prompt ended, sub-agents under their
``spawn_agent`` call, live == replay) are checked over Codex's scenarios with the other sources' in
``tests/test_loop_facts.py``. Here: rule B (``task_complete.error`` is the prompt's error, the failed request has no
span), rule C (a trace per ``turn_id``), the abort and the late command, the compaction's own call, the tokens'
meaning, a framer resumed from its snapshot at any line, runaway detection, a parallel call's tools, a task left
open, mutated records.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from copilot_otel.model import ids
from copilot_otel.model.activity import (
    Compaction,
    Detection,
    ModelCall,
    PromptRun,
    Record,
    SessionError,
    ToolCall,
    Turn,
)
from copilot_otel.model.inputs import Event
from copilot_otel.pipeline import FRAME_KEY, FoldSettings, Pipeline
from copilot_otel.settings.content import ContentKind, ContentPolicy
from copilot_otel.sources.codex import reader as cx
from copilot_otel.sources.codex.framer import CodexFramer
from copilot_otel.sources.sessions import SessionFile
from tests.loop_scenarios import ALL, codex_first, fold, scenario
from tests.other_agents import _mutations


def _main(name: str) -> Path:
    return scenario("codex", name).main


def _children(name: str) -> list[Path]:
    """The sub-agents' rollouts, in the order their facts list them."""
    return [sub.path for sub in scenario("codex", name).subagents if sub.path]


def _fold(path: Path) -> list[Record]:
    return fold(path).records


def _lines(path: Path) -> list[tuple[int, bytes]]:
    out, start = [], 0
    for line in path.read_bytes().split(b"\n"):
        if line:
            out.append((start, line))
        start += len(line) + 1
    return out


def _views(path: Path) -> list[Event]:
    views = []
    for number, (start, line) in enumerate(_lines(path), 1):
        view = cx.read_line(line, start, start + len(line) + 1, number)
        assert isinstance(view, Event)
        views.append(view)
    return views


@pytest.mark.parametrize("name", ["context-too-long", "recorded-retries-exhausted"])
def test_rule_b_a_task_that_failed_without_a_call(name: str) -> None:
    """Loop rule B: ``task_complete.error`` is the prompt's error, typed by the HTTP status where the error gives
    one, else by its kind; the last turn was closed first, so the failed request (in no log) has no span."""
    e = scenario("codex", name)
    path = e.main
    (complete,) = [v for v in _views(path) if isinstance(v, cx.TaskComplete)]
    records = _fold(path)
    (run,) = [r for r in records if isinstance(r, PromptRun)]
    (error,) = [r for r in records if isinstance(r, SessionError)]
    status = int(e.error_type) if e.error_type is not None else None  # the HTTP status the server sent
    assert run.error and run.error_type == (e.error_type or complete.error_kind)
    assert error.status_code == status and error.message == complete.error_message
    assert {"context-too-long": "context_window_exceeded"}.get(name, "response_too_many_failed_attempts") == (
        complete.error_kind
    )
    calls = [r for r in records if isinstance(r, ModelCall)]
    assert len(calls) == e.main_calls and all(c.outcome.value == "ok" for c in calls)
    assert all(c.end_ns <= error.time_ns for c in calls)


@pytest.mark.parametrize("name", ["recorded-resumed", "subagent"])
def test_rule_c_a_trace_per_turn_id(name: str) -> None:
    """Loop rule C: each prompt's trace is ``trace_id(session, turn_id)`` of its ``task_started`` (a resumed
    thread's second task is a second trace), which a sub-agent's rollout names by its ``root_turn_id``."""
    path = _main(name)
    session = codex_first(path).thread_id or ""
    turn_ids = [v.turn_id for v in _views(path) if isinstance(v, cx.TaskStarted)]
    runs = [r for r in _fold(path) if isinstance(r, PromptRun)]
    assert [r.trace_id for r in runs] == [ids.trace_id(session, t or "") for t in turn_ids]
    for child in _children(name):
        roots = {v.root_turn_id for v in _views(child) if isinstance(v, cx.TaskStarted)}
        assert roots <= set(turn_ids)


def test_abort_cancels_the_tool_and_the_late_command_is_ignored() -> None:
    """[recorded/abort-mid-tool]: the output ``aborted by user`` and ``turn_aborted`` are one abort, which cancels
    the running command; the ``CommandExecution`` Codex writes after ``turn_aborted`` adds nothing."""
    path = _main("recorded-abort-mid-tool")
    views = _views(path)
    aborted_at = next(i for i, v in enumerate(views) if isinstance(v, cx.TurnAborted))
    late = [v for v in views[aborted_at + 1 :] if isinstance(v, cx.ItemCompleted)]
    assert [v.item_type for v in late] == ["CommandExecution"]
    fold = Pipeline.for_session(SessionFile.from_path(path), FoldSettings(), project=False)
    steps = list(fold.feed_file(path))
    records = [r for step in steps for r in step.records]
    (tool,) = [r for r in records if isinstance(r, ToolCall)]
    (output,) = [v for v in views if isinstance(v, cx.FunctionCallOutput)]
    assert output.outcome.value == "interrupted"
    assert tool.error_type == "cancelled" and tool.end_ns == output.time_ns
    (run,) = [r for r in records if isinstance(r, PromptRun)]
    assert run.outcome == "aborted"
    assert run.end_ns <= views[aborted_at].time_ns < late[0].time_ns
    assert fold.close("file_ended").records == ()  # the prompt ended with the abort: nothing left open


def test_compaction_keeps_its_call() -> None:
    """[compaction]: the summarization's ``token_usage_record`` (followed by ``compacted``) is the compaction's
    model call, a span of its own in the prompt's trace; the task's four calls stay turns."""
    path = _main("compaction")
    views = _views(path)
    at = next(i for i, v in enumerate(views) if isinstance(v, cx.Compacted))
    (summary,) = [v for v in views[at - 3 : at] if isinstance(v, cx.TokenUsage)]
    records = _fold(path)
    (run,) = [r for r in records if isinstance(r, PromptRun)]
    (compaction,) = [r for r in records if isinstance(r, Compaction)]
    (call,) = [r for r in records if isinstance(r, ModelCall) and r.origin == "compaction"]
    usage = summary.usage
    assert usage is not None
    assert (call.usage.input, call.usage.output) == (usage.input_tokens, usage.output_tokens)
    assert call.trace_id == compaction.trace_id == run.trace_id and call.end_ns == summary.time_ns
    assert run.usage.calls == 5


def test_tokens_take_copilots_meaning() -> None:
    """Difference 4: OpenAI's ``input_tokens`` already includes the cached ones (kept as they are); cache read,
    cache write and reasoning come apart. The fixtures' caches are 0, so a real line is given some."""
    path = _main("plain-question")
    lines = []
    for line in path.read_bytes().splitlines():
        obj = json.loads(line)
        if obj["type"] == "token_usage_record":
            obj["payload"]["usage"].update(
                cached_input_tokens=4000, cache_write_input_tokens=120, reasoning_output_tokens=17
            )
            line = json.dumps(obj).encode()
        lines.append(line)
    fold = Pipeline.for_session(SessionFile.from_path(path), FoldSettings(), project=False)
    records = [r for step in fold.feed_chunks([b"\n".join(lines) + b"\n"]) for r in step.records]
    (call,) = [r for r in records if isinstance(r, ModelCall)]
    assert (call.usage.input, call.usage.output) == scenario("codex", "plain-question").usage
    assert (call.usage.cache_read, call.usage.cache_write, call.usage.reasoning) == (4000, 120, 17)


ALL_ROLLOUTS = [(s.name, p) for s in ALL if s.agent == "codex" for p in s.logs]


@pytest.mark.parametrize(
    ("name", "path"), ALL_ROLLOUTS, ids=[f"{n}-{p.name[-17:-6]}" for n, p in ALL_ROLLOUTS]
)
def test_a_framer_resumed_from_its_snapshot_continues_identically(name: str, path: Path) -> None:
    """After any line, a framer built from the snapshot (through JSON, as a checkpoint stores it) gives for the rest
    of the file exactly the events the first framer gives."""
    views = _views(path)
    reference = CodexFramer()
    expected = [reference.frame(v) for v in views]
    assert any(expected)
    for cut in range(len(views) + 1):
        framer = CodexFramer()
        for view in views[:cut]:
            framer.frame(view)
        state = framer.snapshot()
        resumed = CodexFramer(json.loads(json.dumps(state)))
        assert resumed.snapshot() == state
        assert [resumed.frame(v) for v in views[cut:]] == expected[cut:], (name, cut)


def test_the_pipeline_starts_a_rollout_with_this_framers_state() -> None:
    path = _main("compaction")
    fold = Pipeline.for_session(SessionFile.from_path(path), FoldSettings(), project=False)
    assert fold.context_snapshot()[FRAME_KEY] == CodexFramer().snapshot()


def test_runaway_is_detected_in_a_rollout() -> None:
    """[recorded/runaway]: the same command 25 times is seen by the loop's runaway rules as Copilot's is."""
    records = _fold(_main("recorded-runaway"))
    detections = [r for r in records if isinstance(r, Detection)]
    (run,) = [r for r in records if isinstance(r, PromptRun)]
    assert "identical_tool_calls" in {d.reason for d in detections}
    assert all(d.trace_id == run.trace_id for d in detections)


def test_a_parallel_calls_tool_requests_and_sibling_tools() -> None:
    """[parallel-tools]: three ``function_call`` items before one ``token_usage_record`` are that call's tool
    requests, in order; their tools are siblings under its turn, started when the call ended."""
    path = _main("parallel-tools")
    views = _views(path)
    asked = [v.call_id for v in views[: next(i for i, v in enumerate(views) if isinstance(v, cx.TokenUsage))]
             if isinstance(v, cx.FunctionCall)]  # fmt: skip
    assert len(asked) == 3
    settings = FoldSettings(content=ContentPolicy(enabled=frozenset({ContentKind.TOOL_ARGUMENTS})))
    fold = Pipeline.for_session(SessionFile.from_path(path), settings, project=False)
    records = [r for step in fold.feed_file(path) for r in step.records]
    first = next(r for r in records if isinstance(r, ModelCall))
    assert [t.call_id for t in first.tool_requests] == asked
    # The arguments (a JSON string in the rollout) are decoded to their object, so kept as JSON once, not twice.
    assert all(isinstance(json.loads(t.arguments_json or ""), dict) for t in first.tool_requests)
    tools = [t for t in records if isinstance(t, ToolCall)]
    assert [t.call_id for t in tools] == asked
    assert {t.parent_span_id for t in tools} == {first.parent_span_id}
    assert all(t.start_ns == first.end_ns for t in tools)


def test_a_task_left_open_ends_where_the_next_begins() -> None:
    """[recorded/resumed] without its first ``task_complete`` (the first process killed before writing it): the
    resumed task still opens a trace of its own, and the first keeps its own calls and tools, its last turn closed
    where its work stopped."""
    path = _main("recorded-resumed")
    lines = path.read_bytes().splitlines(keepends=True)
    first_end = next(i for i, line in enumerate(lines) if b'"type":"task_complete"' in line)
    blob = b"".join(lines[:first_end] + lines[first_end + 1 :])
    fold = Pipeline.for_session(SessionFile.from_path(path), FoldSettings(), project=False)
    records = [r for step in fold.feed_chunks([blob]) for r in step.records]
    records += fold.close("file_ended").records
    runs = sorted((r for r in records if isinstance(r, PromptRun)), key=lambda r: r.start_ns)
    assert [r.usage.calls for r in runs] == [2, 2]
    turns = [t for t in records if isinstance(t, Turn) and t.trace_id == runs[0].trace_id]
    assert len(turns) == 2 and max(t.end_ns for t in turns) <= runs[1].start_ns
    tools = {t.call_id: t.trace_id for t in records if isinstance(t, ToolCall)}
    assert tools == {"call_resume1_0_0": runs[0].trace_id, "call_resume2_0_0": runs[1].trace_id}


@pytest.mark.parametrize(
    "name", ["subagent", "compaction", "recorded-abort-mid-tool", "recorded-retries-exhausted"]
)
def test_mutated_records_never_stop_the_fold(name: str) -> None:
    """Bad input never stops the fold: each record kind's first line (of the parent's rollout and a child's),
    with any one value replaced by any wrong JSON type, folds through the framer and the loop without raising,
    and every other line's work still comes out (here: the tools of the other lines)."""
    for path in scenario("codex", name).logs:
        lines = path.read_bytes().splitlines()
        whole_tools = {t.call_id for t in _fold(path) if isinstance(t, ToolCall)}
        seen: set[str] = set()
        folds = 0
        for index, line in enumerate(lines):
            obj = json.loads(line)
            kind = f"{obj['type']}.{(obj.get('payload') or {}).get('type')}"
            if kind in seen or (kind == "session_meta.None" and index):
                continue
            seen.add(kind)
            for mutated in _mutations(obj):
                blob = b"\n".join([*lines[:index], json.dumps(mutated).encode(), *lines[index + 1 :]]) + b"\n"
                fold = Pipeline.for_session(SessionFile.from_path(path), FoldSettings(), project=True)
                records = [r for step in fold.feed_chunks([blob]) for r in step.records]
                records += fold.close("file_ended").records
                folds += 1
                call_ids = (obj.get("payload") or {}).get("call_id")
                kept = {t.call_id for t in records if isinstance(t, ToolCall)}
                assert whole_tools - {call_ids} <= kept | {None}, (kind, mutated)
        assert folds > 100
