"""Codex CLI's rollouts through the loop: the facts each scenario's ``checks.json`` states, found in the records.

The checks were written by whoever recorded the scenario, from the scripted model server and the CLI's stdout,
never from the rollout; here the real pipeline (reader → framer → the one loop) must arrive at them: one trace per
human prompt (a Codex task), the model calls of each (one per ``token_usage_record``, the compaction's included),
the tool calls with their outcomes (denied apart from failed, an interrupted one cancelled by the abort), the
main agent's tokens, the error that ended a task. Then the loop's rules this source relies on (A: the parent's
fold hands on the sub-agent's run under its ``spawn_agent`` span, the child's rollout, folded alone, hangs its
work under that span; B: a failed request gets no span; C: a trace per ``turn_id``), and live == replay: the file
fed in pieces cut anywhere, and a framer resumed from its snapshot at any line, give what the whole gives.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from copilot_otel import library
from copilot_otel.model import ids
from copilot_otel.model.activity import (
    AgentRun,
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
from copilot_otel.pipeline import FRAME_KEY, FoldSettings, Pipeline, source_for
from copilot_otel.settings.content import ContentKind, ContentPolicy
from copilot_otel.sources import Source, sniff
from copilot_otel.sources.codex import reader as cx
from copilot_otel.sources.codex.framer import CODEX, PROVIDER, CodexFramer
from copilot_otel.sources.sessions import SessionFile
from tests.conftest import FIXTURES
from tests.other_agents import _mutations

OTHER = FIXTURES / "other-agents"


@dataclass
class Sub:
    """A sub-agent: its thread (None: unknown), the parent's call that spawned it, its model calls, its tools by
    id with their outcomes, its input/output tokens (None: unknown)."""

    thread: str | None
    spawned_by: str
    calls: int
    tools: dict[str, str]
    usage: tuple[int, int] | None


@dataclass
class Expected:
    """One scenario's facts, from either form of checks.json (the shared set's or the recorder's)."""

    name: str
    root: Path
    prompts: list[str]
    per_prompt: list[int] | None  # main-agent model calls per prompt
    main_calls: int
    tools: dict[str, str]  # main-agent call id → ok / failed / denied / interrupted
    compactions: int | None
    usage: tuple[int, int] | None  # main agent's input (cache included), output tokens
    errors: list[str]  # the messages of errors that ended a task
    error_status: int | None  # the HTTP status of an error that ended a task
    subagents: list[Sub]


def _outcome(tool: dict[str, object]) -> str:
    if not tool["is_error"]:
        return "ok"
    return "denied" if "Rejected(" in str(tool["outcome"]) else "failed"


def _shared() -> list[Expected]:
    checks = json.loads((OTHER / "codex" / "checks.json").read_text(encoding="utf-8"))
    out = []
    for name, c in checks["scenarios"].items():
        rollout = c["model_calls_rollout"]
        subagents = [
            Sub(
                a["thread_id"], a["parent_call_id"], a["model_calls"],
                {t["id"]: _outcome(t) for t in c["tool_calls"] if t["agent"] == a["thread_id"]},
                (a["usage"]["input_tokens"], a["usage"]["output_tokens"]),
            )
            for a in c["subagents"]
        ]  # fmt: skip
        out.append(
            Expected(
                name, OTHER / "codex" / name, c["human_prompts"], rollout["per_turn"], rollout["main"],
                {t["id"]: _outcome(t) for t in c["tool_calls"] if t["agent"] == "main"}, c["compactions"],
                (c["usage_main"]["input_tokens"], c["usage_main"]["output_tokens"]), c["errors"], None, subagents,
            )
        )  # fmt: skip
    return out


def _recorded() -> list[Expected]:
    out = []
    for path in sorted((OTHER / "recorded" / "codex").glob("*/checks.json")):
        c = json.loads(path.read_text(encoding="utf-8"))
        sub_scripts = {s["script"] for s in c["subagents"]}
        tools = {t["id"]: t["expect"] for t in c["scripted_tool_calls"] if t["script"] not in sub_scripts}
        main_calls = sum(n for script, n in c["requests_answered"].items() if script not in sub_scripts)
        subagents = [
            Sub(
                None, a["spawned_by"], c["requests_answered"][a["script"]],
                {t["id"]: t["expect"] for t in c["scripted_tool_calls"] if t["script"] == a["script"]}, None,
            )
            for a in c["subagents"]
        ]  # fmt: skip
        out.append(
            Expected(
                f"recorded-{c['scenario']}", path.parent, c["human_prompts"], None, main_calls, tools, None, None,
                [], 429 if c.get("http_errors_sent") else None, subagents,
            )
        )  # fmt: skip
    return out


SCENARIOS = {e.name: e for e in [*_shared(), *_recorded()]}


def _rollouts(root: Path) -> list[Path]:
    return sorted((root / "sessions").rglob("rollout-*.jsonl"))


def _first(path: Path) -> cx.SessionMeta:
    line = path.read_bytes().split(b"\n", 1)[0]
    meta = cx.read_line(line, 0, len(line) + 1, 1)
    assert isinstance(meta, cx.SessionMeta)
    return meta


def _main(root: Path) -> Path:
    (main,) = [p for p in _rollouts(root) if _first(p).parent_thread_id is None]
    return main


def _children(root: Path) -> list[Path]:
    return [p for p in _rollouts(root) if _first(p).parent_thread_id is not None]


def _fold(path: Path) -> list[Record]:
    fold = Pipeline.for_session(SessionFile.from_path(path), FoldSettings(), project=False)
    records = [r for step in fold.feed_file(path) for r in step.records]
    return [*records, *fold.close("file_ended").records]


def _outcomes(tools: list[ToolCall]) -> dict[str, str]:
    return {
        t.call_id: "ok" if t.success else {"denied": "denied", "cancelled": "interrupted"}.get(t.error_type or "", "failed")
        for t in tools
    }  # fmt: skip


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


def test_every_scenario_is_checked() -> None:
    assert len(SCENARIOS) == 14
    for expected in SCENARIOS.values():
        assert _main(expected.root)
        assert len(_children(expected.root)) == len(expected.subagents)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_checks_hold(name: str) -> None:
    e = SCENARIOS[name]
    records = _fold(_main(e.root))
    runs = sorted((r for r in records if isinstance(r, PromptRun)), key=lambda r: r.start_ns)
    calls = [r for r in records if isinstance(r, ModelCall)]
    tools = [r for r in records if isinstance(r, ToolCall)]
    # One trace per human prompt, in order, each a task of the rollout, with its own model calls.
    assert len(runs) == len(e.prompts)
    assert len({r.trace_id for r in runs}) == len(runs)
    assert all(r.human for r in runs)
    assert len(calls) == e.main_calls
    if e.per_prompt is not None:
        by_trace = {r.trace_id: 0 for r in runs}
        for call in calls:
            by_trace[call.trace_id] += 1
        assert list(by_trace.values()) == e.per_prompt
    assert {c.provider for c in calls} == {PROVIDER}
    # A turn span per model call, each call inside its turn.
    turns = {t.span_id: t for t in records if isinstance(t, Turn)}
    standalone = [c for c in calls if c.origin == "compaction"]
    assert len(turns) == len(calls) - len(standalone)
    for call in calls:
        if call not in standalone:
            turn = turns[call.parent_span_id]
            assert turn.start_ns <= call.start_ns <= call.end_ns <= turn.end_ns
    # Tool calls by id, with their outcomes: denied apart from failed, an interrupted one cancelled.
    assert _outcomes(tools) == e.tools
    if e.compactions is not None:
        assert sum(isinstance(r, Compaction) for r in records) == e.compactions == len(standalone)
    if e.usage is not None:
        assert (sum(r.usage.input or 0 for r in runs), sum(r.usage.output or 0 for r in runs)) == e.usage
        assert (sum(c.usage.input or 0 for c in calls), sum(c.usage.output or 0 for c in calls)) == e.usage
    errors = [r for r in records if isinstance(r, SessionError)]
    assert [r.message for r in errors] == e.errors or e.error_status is not None
    if e.errors or e.error_status is not None:
        (failed,) = [r for r in runs if r.error]
        assert failed.outcome == "error"
        assert all(c.outcome.value == "ok" for c in calls)  # rule B: the failed request has no span
    if "interrupted" in e.tools.values():
        assert [r.outcome for r in runs] == ["aborted"]
    else:  # every task ended: its prompt closed there, complete
        assert all(r.incomplete_reason is None for r in runs)


SUBAGENT_SCENARIOS = sorted(name for name, e in SCENARIOS.items() if e.subagents)


def test_there_are_subagent_scenarios() -> None:
    assert SUBAGENT_SCENARIOS == ["recorded-subagent-tools-fail", "subagent"]


@pytest.mark.parametrize("name", SUBAGENT_SCENARIOS)
def test_rule_a_the_parent_hands_on_the_run_and_the_child_hangs_under_it(name: str) -> None:
    """Loop rule A, parent-emitted: the parent's fold hands on the sub-agent's AgentRun under its ``spawn_agent``
    tool span; the child's rollout, folded alone (no record of the parent's read), hangs its turns under that
    run's span, in the parent's trace, with its own model calls and tools, and hands on no run of its own."""
    e = SCENARIOS[name]
    parent = _fold(_main(e.root))
    (run,) = [r for r in parent if isinstance(r, PromptRun)]
    spawning = {t.call_id: t for t in parent if isinstance(t, ToolCall)}
    agents = {a.task_call_id: a for a in parent if isinstance(a, AgentRun)}
    children = _children(e.root)
    assert len(agents) == len(children) == len(e.subagents)
    for path, sub in zip(children, e.subagents, strict=True):
        thread = _first(path).thread_id
        assert sub.thread in (None, thread)
        agent = agents[sub.spawned_by]
        assert agent.trace_id == run.trace_id and agent.agent_id == thread
        assert agent.parent_span_id == spawning[sub.spawned_by].span_id
        assert agent.outcome.value == "ok" and agent.end_ns > agent.start_ns
        records = _fold(path)
        assert not any(isinstance(r, (PromptRun, AgentRun)) for r in records)
        assert all(r.trace_id == run.trace_id for r in records if hasattr(r, "trace_id"))
        turns = [r for r in records if isinstance(r, Turn)]
        assert turns and {t.parent_span_id for t in turns} == {agent.span_id}
        own_calls = [r for r in records if isinstance(r, ModelCall)]
        assert len(own_calls) == sub.calls
        assert _outcomes([r for r in records if isinstance(r, ToolCall)]) == sub.tools
        if sub.usage is not None:
            assert (
                sum(c.usage.input or 0 for c in own_calls),
                sum(c.usage.output or 0 for c in own_calls),
            ) == sub.usage


@pytest.mark.parametrize("name", ["context-too-long", "recorded-retries-exhausted"])
def test_rule_b_a_task_that_failed_without_a_call(name: str) -> None:
    """Loop rule B: ``task_complete.error`` is the prompt's error, typed by the HTTP status where the error gives
    one, else by its kind; the last turn was closed first, so the failed request (in no log) has no span."""
    e = SCENARIOS[name]
    path = _main(e.root)
    (complete,) = [v for v in _views(path) if isinstance(v, cx.TaskComplete)]
    records = _fold(path)
    (run,) = [r for r in records if isinstance(r, PromptRun)]
    (error,) = [r for r in records if isinstance(r, SessionError)]
    expected = str(e.error_status) if e.error_status is not None else complete.error_kind
    assert run.error and run.error_type == expected
    assert error.status_code == e.error_status and error.message == complete.error_message
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
    path = _main(SCENARIOS[name].root)
    session = _first(path).thread_id or ""
    turn_ids = [v.turn_id for v in _views(path) if isinstance(v, cx.TaskStarted)]
    runs = [r for r in _fold(path) if isinstance(r, PromptRun)]
    assert [r.trace_id for r in runs] == [ids.trace_id(session, t or "") for t in turn_ids]
    for child in _children(SCENARIOS[name].root):
        roots = {v.root_turn_id for v in _views(child) if isinstance(v, cx.TaskStarted)}
        assert roots <= set(turn_ids)


def test_abort_cancels_the_tool_and_the_late_command_is_ignored() -> None:
    """[recorded/abort-mid-tool]: the output ``aborted by user`` and ``turn_aborted`` are one abort, which cancels
    the running command; the ``CommandExecution`` Codex writes after ``turn_aborted`` adds nothing."""
    path = _main(SCENARIOS["recorded-abort-mid-tool"].root)
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
    path = _main(SCENARIOS["compaction"].root)
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
    path = _main(SCENARIOS["plain-question"].root)
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
    assert (call.usage.input, call.usage.output) == SCENARIOS["plain-question"].usage
    assert (call.usage.cache_read, call.usage.cache_write, call.usage.reasoning) == (4000, 120, 17)


ALL_ROLLOUTS = [(name, p) for name, e in sorted(SCENARIOS.items()) for p in _rollouts(e.root)]


@pytest.mark.parametrize(
    ("name", "path"), ALL_ROLLOUTS, ids=[f"{n}-{p.name[-17:-6]}" for n, p in ALL_ROLLOUTS]
)
def test_live_equals_replay(name: str, path: Path) -> None:
    """The file fed in pieces of 1, 7 and 4096 bytes (as a tail reads a file being written) gives what the whole
    gives, for each rollout (a sub-agent's too)."""
    whole = _fold(path)
    blob = path.read_bytes()
    for size in (1, 7, 4096):
        fold = Pipeline.for_session(SessionFile.from_path(path), FoldSettings(), project=False)
        pieces = (blob[i : i + size] for i in range(0, len(blob), size))
        live = [r for step in fold.feed_chunks(pieces) for r in step.records]
        live += fold.close("file_ended").records
        assert live == whole, (name, size)


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


def test_sniff_and_the_pipeline_read_rollouts_with_this_framer() -> None:
    for _, path in ALL_ROLLOUTS:
        assert sniff(path) is Source.CODEX
        assert source_for(SessionFile.from_path(path)) is CODEX
    path = _main(SCENARIOS["compaction"].root)
    fold = Pipeline.for_session(SessionFile.from_path(path), FoldSettings(), project=False)
    assert fold.context_snapshot()[FRAME_KEY] == CodexFramer().snapshot()


def test_library_reads_a_rollout() -> None:
    """``library.read_session`` of a rollout gives the records replay folds (the same pipeline)."""
    path = _main(SCENARIOS["multi-tool"].root)
    records = library.read_session(path).records
    assert records == _fold(path)
    assert sum(isinstance(r, ModelCall) for r in records) == SCENARIOS["multi-tool"].main_calls


def test_runaway_is_detected_in_a_rollout() -> None:
    """[recorded/runaway]: the same command 25 times is seen by the loop's runaway rules as Copilot's is."""
    records = _fold(_main(SCENARIOS["recorded-runaway"].root))
    detections = [r for r in records if isinstance(r, Detection)]
    (run,) = [r for r in records if isinstance(r, PromptRun)]
    assert "identical_tool_calls" in {d.reason for d in detections}
    assert all(d.trace_id == run.trace_id for d in detections)


def test_a_parallel_calls_tool_requests_and_sibling_tools() -> None:
    """[parallel-tools]: three ``function_call`` items before one ``token_usage_record`` are that call's tool
    requests, in order; their tools are siblings under its turn, started when the call ended."""
    path = _main(SCENARIOS["parallel-tools"].root)
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
    path = _main(SCENARIOS["recorded-resumed"].root)
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
    for path in _rollouts(SCENARIOS[name].root):
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
