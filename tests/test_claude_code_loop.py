"""Claude Code's sessions through the loop: the facts each scenario's ``checks.json`` states, found in the records.

The checks were written by whoever recorded the scenario, from the scripted model server and the CLI's stdout,
never from the session file; here the real pipeline (reader → framer → the one loop) must arrive at them: one
trace per human prompt, the model calls of each (per ``message.id``, synthetic records none), the tool calls with
their outcomes (denied apart from failed, an interrupted one cancelled by the abort), compactions, the main
agent's tokens and the error that ended a prompt. Then the rules of the loop this source relies on (C: a trace
per ``promptId``; B: a failed request gets no span), and live == replay: the file fed line by line, in pieces cut
anywhere, gives what the whole gives. Rule A: each sub-agent's file, folded alone, is rooted under the
parent's ``Agent`` tool span in the parent's trace, with its own calls and tools.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from copilot_otel import library
from copilot_otel.model import ids, timestamps
from copilot_otel.model.activity import AgentRun, Compaction, ModelCall, PromptRun, Record, ToolCall
from copilot_otel.pipeline import FRAME_KEY, FoldSettings, Pipeline, source_for, split_lines
from copilot_otel.settings.content import ContentKind, ContentPolicy
from copilot_otel.sources import LogKind, Source, sniff, time_of
from copilot_otel.sources.claude_code import reader as cc
from copilot_otel.sources.claude_code.framer import CLAUDE_CODE, ClaudeCodeFramer
from copilot_otel.sources.sessions import SessionFile
from tests.conftest import FIXTURES, all_fixture_logs, replay_into
from tests.other_agents import _mutations
from tests.otlp_receiver import OtlpReceiver

OTHER = FIXTURES / "other-agents"


# A sub-agent: its agent id (None: unknown), the main-agent call that started it, its model calls, its tools by id
# with their outcomes, its input/output tokens (None: unknown).
Sub = tuple[str | None, str, int, dict[str, str], tuple[int, int] | None]


@dataclass
class Expected:
    """One scenario's facts, from either form of checks.json (the shared set's or the recorder's)."""

    name: str
    root: Path
    prompts: list[str]
    per_prompt: list[int] | None  # main-agent model calls per prompt
    main_calls: int
    tools: dict[str, str]  # main-agent call id → ok / failed / denied / interrupted
    compactions: list[str] | None
    usage: tuple[int, int] | None  # main agent's input (cache included), output tokens
    error_status: int | None  # the HTTP status of an error that ended a prompt
    subagents: list[Sub]


def _shared() -> list[Expected]:
    checks = json.loads((OTHER / "claude-code" / "checks.json").read_text(encoding="utf-8"))
    out = []
    for name, c in checks["scenarios"].items():
        denied = {d["tool_use_id"] for d in c["stdout"]["permission_denials"]}
        tools = {
            t["id"]: "ok" if t["outcome"] == "ok" else "denied" if t["id"] in denied else "failed"
            for t in c["tool_calls"]
            if t["agent"] == "main"
        }
        transcript = c["model_calls_transcript"]
        usage = c["usage_main"]
        subagents: list[Sub] = [
            (
                a["agent_id"], a["parent_tool_use_id"], a["model_calls"],
                {t["id"]: "ok" if t["outcome"] == "ok" else "failed" for t in c["tool_calls"] if t["agent"] == a["agent_id"]},
                (a["usage"]["input_tokens"], a["usage"]["output_tokens"]),
            )
            for a in c["subagents"]
        ]  # fmt: skip
        out.append(
            Expected(
                name, OTHER / "claude-code" / name, c["human_prompts"], transcript["per_prompt"],
                transcript["main"], tools, c["compactions"], (usage["input_tokens"], usage["output_tokens"]),
                None, subagents,
            )
        )  # fmt: skip
    return out


def _recorded() -> list[Expected]:
    out = []
    for path in sorted((OTHER / "recorded" / "claude-code").glob("*/checks.json")):
        c = json.loads(path.read_text(encoding="utf-8"))
        sub_scripts = {s["script"] for s in c["subagents"]}
        tools = {t["id"]: t["expect"] for t in c["scripted_tool_calls"] if t["script"] not in sub_scripts}
        main_calls = sum(n for script, n in c["requests_answered"].items() if script not in sub_scripts)
        errors = c.get("http_errors_sent") or {}
        subagents: list[Sub] = [
            (
                None, a["spawned_by"], c["requests_answered"][a["script"]],
                {t["id"]: t["expect"] for t in c["scripted_tool_calls"] if t["script"] == a["script"]}, None,
            )
            for a in c["subagents"]
        ]  # fmt: skip
        out.append(
            Expected(
                f"recorded-{c['scenario']}", path.parent, c["human_prompts"], None, main_calls, tools, None, None,
                429 if errors else None, subagents,
            )
        )  # fmt: skip
    return out


SCENARIOS = {e.name: e for e in [*_shared(), *_recorded()]}


def _session_logs(root: Path) -> list[Path]:
    return [log.path for log in cc.scan(root) if log.kind is LogKind.SESSION]


def _fold(path: Path) -> tuple[list[Record], Pipeline]:
    fold = Pipeline.for_session(SessionFile.from_path(path), FoldSettings(), project=False)
    records = [r for step in fold.feed_file(path) for r in step.records]
    return [*records, *fold.close("file_ended").records], fold


def _all(root: Path) -> list[Record]:
    return [r for path in _session_logs(root) for r in _fold(path)[0]]


def test_every_scenario_is_checked() -> None:
    assert len(SCENARIOS) == 14
    for expected in SCENARIOS.values():
        assert _session_logs(expected.root), expected.name


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_checks_hold(name: str) -> None:
    e = SCENARIOS[name]
    records = _all(e.root)
    runs = [r for r in records if isinstance(r, PromptRun)]
    calls = [r for r in records if isinstance(r, ModelCall)]
    tools = [r for r in records if isinstance(r, ToolCall)]
    # One trace per human prompt, in order, with the prompt's own model calls.
    assert len(runs) == len(e.prompts)
    assert len({r.trace_id for r in runs}) == len(runs)
    assert all(r.human for r in runs)
    assert len(calls) == e.main_calls
    if e.per_prompt is not None:
        by_trace = {r.trace_id: 0 for r in sorted(runs, key=lambda r: r.start_ns)}
        for call in calls:
            by_trace[call.trace_id] += 1
        assert list(by_trace.values()) == e.per_prompt
    assert {c.provider for c in calls} <= {"anthropic"}
    # Tool calls by id, with their outcomes: denied apart from failed, an interrupted one cancelled.
    assert _outcomes(tools) == e.tools
    if e.compactions is not None:
        assert [r.trigger for r in records if isinstance(r, Compaction)] == e.compactions
    if e.usage is not None:
        assert (sum(r.usage.input or 0 for r in runs), sum(r.usage.output or 0 for r in runs)) == e.usage
    if e.error_status is not None:
        (failed,) = [r for r in runs if r.error]
        assert failed.error_type == str(e.error_status)
        assert all(c.outcome.value == "ok" for c in calls)  # rule B: the failed request has no span
    if "interrupted" in e.tools.values():
        assert [r.outcome for r in runs] == ["aborted"]


SUBAGENT_SCENARIOS = sorted(name for name, e in SCENARIOS.items() if e.subagents)


def _outcomes(tools: list[ToolCall]) -> dict[str, str]:
    return {
        t.call_id: "ok" if t.success else {"denied": "denied", "cancelled": "interrupted"}.get(t.error_type or "", "failed")
        for t in tools
    }  # fmt: skip


def test_there_are_subagent_scenarios() -> None:
    assert SUBAGENT_SCENARIOS == ["recorded-subagent-tools-fail", "subagent"]


@pytest.mark.parametrize("name", SUBAGENT_SCENARIOS)
def test_rule_a_a_subagent_file_is_rooted_under_its_tool_call(name: str) -> None:
    """Loop rule A: each sub-agent file, folded alone (no record of the parent's read), hangs under the span of the
    parent's tool call that started it, in the parent's trace, with its own model calls and tools, and hands on
    its own AgentRun (no PromptRun: it is no human prompt)."""
    e = SCENARIOS[name]
    (main,) = _session_logs(e.root)
    parent = _fold(main)[0]
    (run,) = [r for r in parent if isinstance(r, PromptRun)]
    spawning = {t.call_id: t for t in parent if isinstance(t, ToolCall)}
    files = [log for log in cc.scan(e.root) if log.kind is LogKind.SUBAGENT]
    assert len(files) == len(e.subagents)
    for log, (agent_id, call_id, calls, tools, usage) in zip(files, e.subagents, strict=True):
        assert agent_id in (None, log.agent_id)
        records = _fold(log.path)[0]
        assert not any(isinstance(r, PromptRun) for r in records)
        (agent,) = [r for r in records if isinstance(r, AgentRun)]
        assert agent.trace_id == run.trace_id
        assert agent.parent_span_id == spawning[call_id].span_id
        assert agent.task_call_id == call_id and agent.outcome.value == "ok"
        own_calls = [r for r in records if isinstance(r, ModelCall)]
        assert len(own_calls) == calls == agent.usage.calls
        assert _outcomes([r for r in records if isinstance(r, ToolCall)]) == tools
        assert all(r.trace_id == run.trace_id for r in records if hasattr(r, "trace_id") and r.trace_id)
        if usage is not None:
            assert (agent.usage.input, agent.usage.output) == usage


@pytest.mark.parametrize("name", ["compaction", "recorded-resumed"])
def test_rule_c_a_trace_per_prompt_id(name: str) -> None:
    """Loop rule C: each prompt's trace is keyed by Claude Code's ``promptId`` (a sub-agent's file, which carries
    the same id, can name it), whichever record of the prompt comes first (the ``/compact`` summary, a meta
    record)."""
    (path,) = _session_logs(SCENARIOS[name].root)
    prompt_ids = list(
        dict.fromkeys(
            obj["promptId"]
            for obj in map(json.loads, path.read_bytes().splitlines())
            if obj.get("type") == "user" and obj.get("promptId")
        )
    )
    runs = [r for r in _fold(path)[0] if isinstance(r, PromptRun)]
    session = path.stem
    assert sorted(r.trace_id for r in runs) == sorted(ids.trace_id(session, p) for p in prompt_ids)


def test_synthetic_records_are_no_model_call() -> None:
    """[compaction]: the CLI's own ``<synthetic>`` reply after ``Continue from where you left off.`` is no call,
    and that meta record no prompt (3 traces, 5 calls, as the server counted)."""
    e = SCENARIOS["compaction"]
    (path,) = _session_logs(e.root)
    synthetic = [
        obj for obj in map(json.loads, path.read_bytes().splitlines()) if (obj.get("message") or {}).get("model") == cc.SYNTHETIC_MODEL
    ]  # fmt: skip
    assert synthetic
    records = _fold(path)[0]
    assert not any(
        isinstance(r, ModelCall) and r.response_id == s.get("requestId") for r in records for s in synthetic
    )
    # The /compact prompt holds the compaction, no model call.
    runs = sorted((r for r in records if isinstance(r, PromptRun)), key=lambda r: r.start_ns)
    (compaction,) = [r for r in records if isinstance(r, Compaction)]
    assert compaction.trace_id == runs[1].trace_id and runs[1].usage.calls == 0


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_live_equals_replay(name: str) -> None:
    """The file fed line by line (as the CLI writes it) and in pieces cut anywhere gives what the whole gives, for
    each session log and each sub-agent file."""
    for path in [log.path for log in cc.scan(SCENARIOS[name].root)]:
        whole, _ = _fold(path)
        blob = path.read_bytes()
        session = SessionFile.from_path(path)
        for size in (1, 7, 4096):
            fold = Pipeline.for_session(session, FoldSettings(), project=False)
            pieces = (blob[i : i + size] for i in range(0, len(blob), size))
            live = [r for step in fold.feed_chunks(pieces) for r in step.records]
            live += fold.close("file_ended").records
            assert live == whole, (name, size)


def test_sniff_tells_the_sources_apart() -> None:
    for path in _session_logs(OTHER / "claude-code"):
        assert sniff(path) is Source.CLAUDE_CODE
        assert source_for(SessionFile.from_path(path)) is CLAUDE_CODE
    for log in all_fixture_logs():
        assert source_for(SessionFile.from_path(log)) is None, log  # Copilot's, read as before
    codex = next((OTHER / "codex").rglob("rollout-*.jsonl"))
    assert sniff(codex) is Source.CODEX


def test_framer_state_round_trips() -> None:
    """The framer's state after every line survives a checkpoint (JSON) unchanged, and rides in the context."""
    (path,) = _session_logs(SCENARIOS["compaction"].root)
    fold = Pipeline.for_session(SessionFile.from_path(path), FoldSettings(), project=False)
    assert fold.context_snapshot()[FRAME_KEY] == ClaudeCodeFramer().snapshot()
    framer = ClaudeCodeFramer()
    for line_start, line in _lines(path.read_bytes()):
        view = cc.read_line(line, line_start, line_start + len(line) + 1, 0)
        framer.frame(view)  # type: ignore[arg-type]
        state = framer.snapshot()
        assert ClaudeCodeFramer(json.loads(json.dumps(state))).snapshot() == state


def _lines(blob: bytes) -> list[tuple[int, bytes]]:
    out, start = [], 0
    for line in blob.split(b"\n"):
        if line:
            out.append((start, line))
        start += len(line) + 1
    return out


def test_library_reads_a_claude_code_session() -> None:
    """``library.read_session`` of a Claude Code ``.jsonl`` gives the records replay folds (the same pipeline)."""
    (path,) = _session_logs(SCENARIOS["multi-tool"].root)
    records = library.read_session(path).records
    assert records == _fold(path)[0]
    assert sum(isinstance(r, ModelCall) for r in records) == SCENARIOS["multi-tool"].main_calls


@pytest.mark.parametrize("target", ["home", "projects", "project", "file"])
def test_replay_finds_the_session_however_pointed_at(target: str, receiver: OtlpReceiver) -> None:
    """``replay`` of Claude Code's home (the folder holding ``projects/``), its ``projects`` folder, a project folder
    or a session's ``.jsonl`` exports the session's spans (a sub-agent's only from the two roots)."""
    root = SCENARIOS["subagent"].root
    (path,) = _session_logs(root)
    where = {"home": root, "projects": root / cc.PROJECTS, "project": path.parent, "file": path}[target]
    assert replay_into(receiver, where) == 0
    names = sorted(span["name"] for span in receiver.spans())
    main = ["chat claude-opus-4-8"] * 2 + ["execute_tool Agent", "invoke_agent", "turn 0", "turn 1"]
    if target in ("home", "projects"):
        sub = ["chat claude-opus-4-8"] * 3 + [
            "execute_tool Bash",
            "execute_tool Read",
            "invoke_agent general-purpose",
        ]
        assert names == sorted([*main, *sub, "turn 0", "turn 1", "turn 2"])
    else:
        assert names == sorted(main)


def test_a_parallel_calls_tool_requests_are_all_its_blocks() -> None:
    """[parallel-tools]: one reply written as a text block and three ``tool_use`` blocks (four records, one
    ``message.id``) is one model call that asked for all three tools, in order, and lasted until its last block;
    each tool starts at its own block's time."""
    (path,) = _session_logs(SCENARIOS["parallel-tools"].root)
    blocks = [
        (b["id"], obj["timestamp"])
        for obj in map(json.loads, path.read_bytes().splitlines())
        if obj.get("type") == "assistant"
        for b in obj["message"]["content"]
        if b.get("type") == "tool_use"
    ]
    assert len(blocks) == 3
    settings = FoldSettings(content=ContentPolicy(enabled=frozenset({ContentKind.TOOL_ARGUMENTS})))
    fold = Pipeline.for_session(SessionFile.from_path(path), settings, project=False)
    records = [r for step in fold.feed_file(path) for r in step.records]
    first = next(r for r in records if isinstance(r, ModelCall))
    assert [t.call_id for t in first.tool_requests] == [call_id for call_id, _ in blocks]
    assert first.end_ns == timestamps.timestamp_ns(blocks[-1][1], [])
    tools = {t.call_id: t for t in records if isinstance(t, ToolCall)}
    assert [tools[c].start_ns for c, _ in blocks] == [timestamps.timestamp_ns(ts, []) for _, ts in blocks]
    assert all(tools[c].parent_span_id == first.parent_span_id for c, _ in blocks)


@pytest.mark.parametrize("name", ["parallel-tools", "subagent", "recorded-abort-mid-tool"])
def test_mutated_records_never_stop_the_fold(name: str) -> None:
    """Bad input never stops the fold: each record kind's first line, with any one value replaced by any wrong JSON
    type, folds through the framer, the loop and the projections without raising."""
    for path in [log.path for log in cc.scan(SCENARIOS[name].root)]:
        lines = path.read_bytes().splitlines()
        seen: set[str] = set()
        folds = 0
        for index, line in enumerate(lines):
            obj = json.loads(line)
            kind = (
                f"{obj.get('type')}.{obj.get('subtype')}.{len(obj.get('message', {}).get('content') or '')}"
            )
            if kind in seen:
                continue
            seen.add(kind)
            for mutated in _mutations(obj):
                blob = b"\n".join([*lines[:index], json.dumps(mutated).encode(), *lines[index + 1 :]]) + b"\n"
                fold = Pipeline.for_session(SessionFile.from_path(path), FoldSettings(), project=True)
                records = [r for step in fold.feed_chunks([blob]) for r in step.records]
                records += fold.close("file_ended").records
                folds += 1
                assert records, (kind, mutated)
        assert folds > 100


# ---------------------------------------------------------------------------------------------- where a prompt ends
def _cli_results(e: Expected) -> list[dict[str, object]]:
    """The CLI's own ``result`` of each prompt (its stdout), in order: the shared set's checks.json copies them,
    the recorder keeps the stdout itself."""
    shared = OTHER / "claude-code" / "checks.json"
    if e.root.parent == shared.parent:
        results: list[dict[str, object]] = json.loads(shared.read_text(encoding="utf-8"))["scenarios"][
            e.name
        ]["stdout"]["results"]
        return results
    stdout = (e.root / "_capture" / "stdout.jsonl").read_bytes().splitlines()
    return [obj for obj in map(json.loads, stdout) if obj.get("type") == "result"]


def _completed(result: dict[str, object]) -> bool:
    return result.get("terminal_reason") == "completed" and result.get("is_error") is False


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_a_prompt_the_cli_completed_ends_completed_at_its_own_lines(name: str) -> None:
    """Issue 31.1: where the CLI's own result says ``completed``, the prompt's root is complete (no
    ``incomplete.reason``), and it is handed on while the log is read, at the records after its final answer,
    not by the log's end: the daemon exports it then, instead of holding it until the idle timeout. A prompt the
    CLI did not complete (aborted mid-tool, retries exhausted) is closed by the log's end, never complete."""
    e = SCENARIOS[name]
    (path,) = _session_logs(e.root)
    fold = Pipeline.for_session(SessionFile.from_path(path), FoldSettings(), project=False)
    read = [r for step in fold.feed_file(path) for r in step.records if isinstance(r, PromptRun)]
    closed = [r for r in fold.close("file_ended").records if isinstance(r, PromptRun)]
    runs = sorted([*read, *closed], key=lambda r: r.start_ns)
    results = _cli_results(e)
    assert len(runs) == len(results)
    for run, result in zip(runs, results, strict=True):
        if "terminal_reason" not in result:
            continue  # /compact: no loop of its own; the next prompt closes it
        if _completed(result):
            assert (run.outcome, run.incomplete_reason) == ("completed", None), (name, result)
            assert run in read, "ended by its own records, not by the log's end"
        else:
            assert run.outcome != "completed" and run in closed, (name, result)


@pytest.mark.parametrize("name", ["plain-question", "multi-tool", "recorded-resumed"])
def test_a_final_answer_ends_its_prompt_at_the_record_after_its_last_block(name: str) -> None:
    """The final answer is written one record per content block, each with the stop reason: the prompt ends once
    a record after the answer shows the loop is over (``last-prompt`` here), dated at the answer; fed line by
    line, nothing ends it earlier. The framer's state between the two survives a checkpoint (a restart there ends
    the prompt at the next record as well)."""
    (path,) = _session_logs(SCENARIOS[name].root)
    blob = path.read_bytes()
    objs = [json.loads(line) for line in blob.splitlines()]
    answers = {
        time_of(o["timestamp"], [])
        for o in objs
        if o.get("type") == "assistant" and o["message"].get("stop_reason") == "end_turn"
    }
    fold = Pipeline.for_session(SessionFile.from_path(path), FoldSettings(), project=False)
    ended: list[tuple[str, PromptRun]] = []
    for item in split_lines(blob):
        runs = [r for r in fold.feed(item).records if isinstance(r, PromptRun)]
        if runs:
            state = json.loads(json.dumps(fold.context_snapshot()[FRAME_KEY]))
            assert ClaudeCodeFramer(state).snapshot() == state
        ended.extend((json.loads(item.data)["type"], r) for r in runs)  # type: ignore[union-attr]
    assert ended and not [r for r in fold.close("file_ended").records if isinstance(r, PromptRun)]
    for kind, run in ended:
        assert kind in ("last-prompt", "user", "queue-operation"), kind  # the next record, the next prompt's
        assert run.end_ns in answers


CC_332 = FIXTURES / "other-agents" / "claude-code-2.1.332"


def _ended_at(path: Path) -> list[tuple[int, dict[str, object], PromptRun]]:
    """Each prompt handed on while the log is fed a line at a time, with the line (its number and record) that
    handed it on; none is left for the log's end."""
    fold = Pipeline.for_session(SessionFile.from_path(path), FoldSettings(), project=False)
    out = []
    for number, item in enumerate(split_lines(path.read_bytes())):
        for r in fold.feed(item).records:
            if isinstance(r, PromptRun):
                out.append((number, json.loads(item.data), r))  # type: ignore[union-attr]
    assert not [r for r in fold.close("file_ended").records if isinstance(r, PromptRun)]
    return out


def test_interactive_claude_code_ends_a_prompt_at_turn_duration() -> None:
    """[2.1.332 interactive-subagent, in tmux]: interactive Claude Code writes ``system`` ``turn_duration`` when a
    loop is over; the prompt whose final answer it follows ends there, complete, dated at the answer."""
    (path,) = _session_logs(CC_332 / "interactive-subagent")
    (*_, (_, record, run)) = _ended_at(path)
    assert (record["type"], record.get("subtype")) == ("system", "turn_duration")
    assert (run.outcome, run.incomplete_reason) == ("completed", None)


@pytest.mark.parametrize("name", ["background-subagent", "interactive-subagent", "parallel-subagents"])
def test_a_prompt_waits_for_its_background_sub_agents(name: str) -> None:
    """[2.1.332]: an ``Agent`` call runs its sub-agent in the background (its result says ``isAsync``,
    ``async_launched``) and the main agent answers at once: that answer does not end the prompt (nor does the
    ``last-prompt`` or ``turn_duration`` after it), which waits for the sub-agents' ``<task-notification>``
    reports and ends, complete, at the answer to the last of them, once the log shows that loop is over."""
    (path,) = _session_logs(CC_332 / name)
    lines = path.read_bytes().splitlines()
    last_report = max(i for i, line in enumerate(lines) if b"<task-notification>" in line)
    ((number, record, run),) = _ended_at(path)  # one human prompt: a report is none
    assert number > last_report and record["type"] in ("last-prompt", "system"), record["type"]
    assert (run.outcome, run.incomplete_reason) == ("completed", None)
