"""Claude Code's own loop rules, with the CLI's own words: what no other source does.

The facts every source shares (a trace per human prompt, the model calls and tools with their outcomes, the
tokens, the error that ended a prompt, how each prompt ended, sub-agents under their ``Agent`` call, live ==
replay) are checked over Claude Code's scenarios with the other sources' in ``tests/test_loop_facts.py``. Here:
rule C (a trace per ``promptId``), the CLI's ``<synthetic>`` records (no model call), the framer's state through a
checkpoint, ``replay`` pointed at any of Claude Code's folders, a parallel call's blocks, mutated records, and
where a prompt ends (the record after the final answer; interactive ``turn_duration``; background sub-agents).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from copilot_otel.model import ids, timestamps
from copilot_otel.model.activity import Compaction, ModelCall, PromptRun, Record, ToolCall
from copilot_otel.pipeline import FRAME_KEY, FoldSettings, Pipeline, split_lines
from copilot_otel.settings.content import ContentKind, ContentPolicy
from copilot_otel.sources import LogKind, time_of
from copilot_otel.sources.claude_code import reader as cc
from copilot_otel.sources.claude_code.framer import ClaudeCodeFramer
from copilot_otel.sources.sessions import SessionFile
from tests.conftest import FIXTURES, replay_into
from tests.loop_scenarios import fold, scenario
from tests.other_agents import _mutations
from tests.otlp_receiver import OtlpReceiver

OTHER = FIXTURES / "other-agents"


def _session_logs(root: Path) -> list[Path]:
    return [log.path for log in cc.scan(root) if log.kind is LogKind.SESSION]


def _main(name: str) -> Path:
    """The main session log of a scenario of the shared set (``recorded-…``: the recorder's)."""
    return scenario("claude-code", name).main


def _fold(path: Path) -> list[Record]:
    return fold(path).records


@pytest.mark.parametrize("name", ["compaction", "recorded-resumed"])
def test_rule_c_a_trace_per_prompt_id(name: str) -> None:
    """Loop rule C: each prompt's trace is keyed by Claude Code's ``promptId`` (a sub-agent's file, which carries
    the same id, can name it), whichever record of the prompt comes first (the ``/compact`` summary, a meta
    record)."""
    path = _main(name)
    prompt_ids = list(
        dict.fromkeys(
            obj["promptId"]
            for obj in map(json.loads, path.read_bytes().splitlines())
            if obj.get("type") == "user" and obj.get("promptId")
        )
    )
    runs = [r for r in _fold(path) if isinstance(r, PromptRun)]
    session = path.stem
    assert sorted(r.trace_id for r in runs) == sorted(ids.trace_id(session, p) for p in prompt_ids)


def test_synthetic_records_are_no_model_call() -> None:
    """[compaction]: the CLI's own ``<synthetic>`` reply after ``Continue from where you left off.`` is no call,
    and that meta record no prompt (3 traces, 5 calls, as the server counted)."""
    path = _main("compaction")
    synthetic = [
        obj for obj in map(json.loads, path.read_bytes().splitlines()) if (obj.get("message") or {}).get("model") == cc.SYNTHETIC_MODEL
    ]  # fmt: skip
    assert synthetic
    records = _fold(path)
    assert not any(
        isinstance(r, ModelCall) and r.response_id == s.get("requestId") for r in records for s in synthetic
    )
    # The /compact prompt holds the compaction, no model call.
    runs = sorted((r for r in records if isinstance(r, PromptRun)), key=lambda r: r.start_ns)
    (compaction,) = [r for r in records if isinstance(r, Compaction)]
    assert compaction.trace_id == runs[1].trace_id and runs[1].usage.calls == 0


def test_framer_state_round_trips() -> None:
    """The framer's state after every line survives a checkpoint (JSON) unchanged, and rides in the context."""
    path = _main("compaction")
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


@pytest.mark.parametrize("target", ["home", "projects", "project", "file"])
def test_replay_finds_the_session_however_pointed_at(target: str, receiver: OtlpReceiver) -> None:
    """``replay`` of Claude Code's home (the folder holding ``projects/``), its ``projects`` folder, a project folder
    or a session's ``.jsonl`` exports the session's spans (a sub-agent's only from the two roots)."""
    root = OTHER / "claude-code" / "subagent"
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
    path = _main("parallel-tools")
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
    for path in scenario("claude-code", name).logs:
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


@pytest.mark.parametrize("name", ["plain-question", "multi-tool", "recorded-resumed"])
def test_a_final_answer_ends_its_prompt_at_the_record_after_its_last_block(name: str) -> None:
    """The final answer is written one record per content block, each with the stop reason: the prompt ends once
    a record after the answer shows the loop is over (``last-prompt`` here), dated at the answer; fed line by
    line, nothing ends it earlier. The framer's state between the two survives a checkpoint (a restart there ends
    the prompt at the next record as well)."""
    path = _main(name)
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
