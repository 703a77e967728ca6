"""Claude Code 2.1.332's sessions through the real pipeline: the facts of each scenario's ``checks.json`` that hold.

The sessions in ``tests/fixtures/other-agents/claude-code-2.1.332`` were recorded by ``tests/otheragents/record.py
--set 2.1.332`` from the real CLI; ``checks.json`` was written from the recorder's scripts and runs, never from the
session files (which sessions each run made, the requests the fake model server answered per script and the stop
reason it sent, the tool calls it asked for and how each was meant to end, the sub-agents and the call that started
each). Here the reader, the framer and the one loop must arrive at them: the session files are the runs' sessions, each
answered main-agent request is one model call, each scripted tool call one tool call that ran ok or (refused by plan
mode or a hook) did not, the last reply ends with the model's final answer, each sub-agent's file (background ones
too) hangs under the ``Agent`` call that started it, the file fed in pieces gives what the whole gives, and ``replay``
exports a chat span per answered call and a tool span per tool call to a real receiver.

What the loop makes of what 2.1.332 writes anew (a trace per human prompt with background agents, refusals as
denials, a fork's copied history, queued prompts, failed attempts, the title and the CLI's accounting) is held by
``tests/test_claude_code_332_loop.py``; the counts asserted here are those any reading of these records must keep.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from copilot_otel.model import ids
from copilot_otel.model.activity import AgentRun, ModelCall, PromptRun, Record, ToolCall
from copilot_otel.pipeline import FoldSettings, Pipeline, source_for
from copilot_otel.sources import LogKind, Source, sniff
from copilot_otel.sources.claude_code import reader as cc
from copilot_otel.sources.claude_code.framer import CLAUDE_CODE
from copilot_otel.sources.sessions import SessionFile
from tests.conftest import FIXTURES, replay_into
from tests.otlp_receiver import OtlpReceiver

ROOT = FIXTURES / "other-agents" / "claude-code-2.1.332"


@dataclass
class Scenario:
    """One scenario's checks, in the terms of the pipeline's records."""

    name: str
    root: Path
    checks: dict[str, object]
    sessions: list[str]  # the session each run's stdout named, in order, once each
    main_scripts: list[str]  # the scripts the main agent's requests were answered by
    sub_scripts: dict[str, str]  # a sub-agent's script → the id of the Agent call that started it
    answered: dict[str, int]  # requests answered (no HTTP error) per script
    tools: dict[str, tuple[str, str]]  # scripted tool call id → (its script, how it was meant to end)
    last_stop_reason: dict[str, str]  # script → the stop reason of the last reply sent for it
    order: list[str]  # the script of each request, in the order the server got them


def _scenario(folder: Path) -> Scenario:
    c = json.loads((folder / "checks.json").read_text(encoding="utf-8"))
    sub_scripts = {s["script"]: s["spawned_by"] for s in c["subagents"]}
    last: dict[str, str] = {}
    for request in c["requests"]:
        if request["stop_reason"] is not None:
            last[request["script"]] = request["stop_reason"]
    return Scenario(
        folder.name, folder, c, list(dict.fromkeys(r["session_id"] for r in c["runs"])),
        [s for s in c["requests_answered"] if s not in sub_scripts], sub_scripts, c["requests_answered"],
        {t["id"]: (t["script"], t["expect"]) for t in c["scripted_tool_calls"] if t["answered"]}, last,
        [r["script"] for r in c["requests"]],
    )  # fmt: skip


SCENARIOS = {p.name: _scenario(p) for p in sorted(ROOT.iterdir()) if (p / "checks.json").is_file()}
# Every scenario's sessions together (the fork's file holds a copy of its parent's history, which is the parent's).
ALL = sorted(SCENARIOS)
# The scenarios of one session log (the fork has two: its parent's is checked alone below).
WHOLE = sorted(name for name in SCENARIOS if name != "fork")
WITH_SUBAGENTS = sorted(name for name, s in SCENARIOS.items() if s.sub_scripts)


def _fold(path: Path) -> list[Record]:
    fold = Pipeline.for_session(SessionFile.from_path(path), FoldSettings(), project=False)
    records = [r for step in fold.feed_file(path) for r in step.records]
    return [*records, *fold.close("file_ended").records]


def _session_logs(root: Path) -> dict[str, Path]:
    return {log.path.stem: log.path for log in cc.scan(root) if log.kind is LogKind.SESSION}


def _spawned_by(path: Path) -> str:
    """The id of the ``Agent`` call a sub-agent's file says started it (its ``.meta.json``)."""
    meta = cc.read_meta(path)
    assert meta is not None and meta.tool_use_id, path
    return meta.tool_use_id


def _first_prompt_id(path: Path) -> str:
    for line in path.read_bytes().splitlines():
        obj = json.loads(line)
        if obj.get("type") == "user" and obj.get("promptId"):
            return str(obj["promptId"])
    raise AssertionError(f"no promptId in {path}")


def _main_expectations(s: Scenario, scripts: list[str]) -> tuple[int, dict[str, bool]]:
    """The main agent's answered calls over ``scripts``, and whether each of their tool calls was meant to run ok."""
    calls = sum(s.answered[name] for name in scripts)
    tools = {call_id: expect == "ok" for call_id, (script, expect) in s.tools.items() if script in scripts}
    return calls, tools


def test_every_scenario_is_checked() -> None:
    assert sorted(SCENARIOS) == [
        "api-errors-retried", "background-subagent", "fork", "hook-refusal", "interactive-subagent", "multi-tool",
        "parallel-subagents", "plain-question", "plan-mode-refusal", "queued-prompts", "titled-session",
    ]  # fmt: skip
    for s in SCENARIOS.values():
        assert s.checks["cli_version"] == "2.1.332 (Claude Code)"


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_session_files_are_the_runs_sessions(name: str) -> None:
    """Each run's session (the fork's a new one) is one session log, told as Claude Code's; each sub-agent has a
    file of its own whose ``.meta.json`` names the call that started it."""
    s = SCENARIOS[name]
    logs = _session_logs(s.root)
    assert sorted(logs) == sorted(s.sessions)
    for path in logs.values():
        assert sniff(path) is Source.CLAUDE_CODE
        assert source_for(SessionFile.from_path(path)) is CLAUDE_CODE
    subagents = [log for log in cc.scan(s.root) if log.kind is LogKind.SUBAGENT]
    assert sorted(_spawned_by(log.path) for log in subagents) == sorted(s.sub_scripts.values())


@pytest.mark.parametrize("name", ALL)
def test_model_calls_and_tool_calls(name: str) -> None:
    """The main agent's files give one model call per request the server answered for its scripts (a failed
    attempt none), and the scripted tool calls by id: the ones meant to run ran ok, the refused ones did not."""
    s = SCENARIOS[name]
    records = [r for path in _session_logs(s.root).values() for r in _fold(path)]
    calls, tools = _main_expectations(s, s.main_scripts)
    assert sum(isinstance(r, ModelCall) and r.outcome.value == "ok" for r in records) == calls
    assert {r.call_id: r.success for r in records if isinstance(r, ToolCall)} == tools


def test_a_forks_parent_is_read_as_it_was_written() -> None:
    """[fork] The parent's file alone: its prompt's calls and tool, in the trace of its first ``promptId``."""
    s = SCENARIOS["fork"]
    parent = _session_logs(s.root)[s.sessions[0]]
    records = _fold(parent)
    calls, tools = _main_expectations(s, ["fork1"])
    assert sum(isinstance(r, ModelCall) for r in records) == calls
    assert {r.call_id: r.success for r in records if isinstance(r, ToolCall)} == tools
    (run,) = [r for r in records if isinstance(r, PromptRun)]
    assert run.human and run.trace_id == ids.trace_id(parent.stem, _first_prompt_id(parent))


@pytest.mark.parametrize("name", WHOLE)
def test_the_first_prompt_is_a_human_trace_and_the_last_reply_is_the_answer(name: str) -> None:
    """The first human prompt is a trace of its own, keyed by its ``promptId`` (loop rule C); the main agent's
    last model call is the reply the server sent last, the final answer (``end_turn``: finish reason ``stop``),
    and the session file's last ``assistant`` record says ``end_turn``."""
    s = SCENARIOS[name]
    (path,) = _session_logs(s.root).values()
    records = _fold(path)
    runs = sorted((r for r in records if isinstance(r, PromptRun)), key=lambda r: r.start_ns)
    assert runs[0].human and runs[0].trace_id == ids.trace_id(path.stem, _first_prompt_id(path))
    last_script = [script for script in s.order if script in s.main_scripts][-1]
    assert s.last_stop_reason[last_script] == "end_turn"
    calls = sorted((r for r in records if isinstance(r, ModelCall)), key=lambda r: r.start_ns)
    assert calls[-1].finish_reason == "stop"
    assistants = [
        obj for obj in map(json.loads, path.read_bytes().splitlines()) if obj.get("type") == "assistant"
    ]
    assert assistants[-1]["message"]["stop_reason"] == "end_turn"


@pytest.mark.parametrize("name", WITH_SUBAGENTS)
def test_a_subagent_file_hangs_under_its_agent_call(name: str) -> None:
    """Loop rule A, for 2.1.332's background sub-agents too: each sub-agent's file, folded alone, is one agent run
    under the span of the ``Agent`` call that started it (the ``.meta.json``'s ``toolUseId``), in that call's trace,
    with one model call per request answered for its script and its scripted tools run ok."""
    s = SCENARIOS[name]
    (main,) = _session_logs(s.root).values()
    spawning = {t.call_id: t for t in _fold(main) if isinstance(t, ToolCall)}
    by_call = {call_id: script for script, call_id in s.sub_scripts.items()}
    subagents = [log for log in cc.scan(s.root) if log.kind is LogKind.SUBAGENT]
    assert len(subagents) == len(s.sub_scripts)
    for log in subagents:
        call_id = _spawned_by(log.path)
        script = by_call[call_id]
        records = _fold(log.path)
        assert not any(isinstance(r, PromptRun) for r in records)
        (agent,) = [r for r in records if isinstance(r, AgentRun)]
        assert agent.task_call_id == call_id and agent.outcome.value == "ok"
        assert agent.trace_id == spawning[call_id].trace_id
        assert agent.parent_span_id == spawning[call_id].span_id
        calls, tools = _main_expectations(s, [script])
        assert sum(isinstance(r, ModelCall) for r in records) == calls == agent.usage.calls
        assert {r.call_id: r.success for r in records if isinstance(r, ToolCall)} == tools


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_live_equals_replay(name: str) -> None:
    """Each file (session and sub-agent) fed in pieces cut anywhere gives what the whole gives."""
    for log in cc.scan(SCENARIOS[name].root):
        whole = _fold(log.path)
        blob = log.path.read_bytes()
        for size in (7, 4096):
            fold = Pipeline.for_session(SessionFile.from_path(log.path), FoldSettings(), project=False)
            pieces = (blob[i : i + size] for i in range(0, len(blob), size))
            live = [r for step in fold.feed_chunks(pieces) for r in step.records]
            assert [*live, *fold.close("file_ended").records] == whole, (log.path.name, size)


@pytest.mark.parametrize("name", ALL)
def test_replay_exports_a_chat_span_per_answered_call(name: str, receiver: OtlpReceiver) -> None:
    """``replay`` of the scenario's CLI home to a real OTLP receiver: one chat span that did not fail per request
    the server answered (main agent and sub-agents), one ``execute_tool`` span per scripted tool call, by id."""
    s = SCENARIOS[name]
    assert replay_into(receiver, s.root) == 0
    spans = receiver.spans()
    chats = [span for span in spans if span["name"].startswith("chat ") and span["status_code"] != 2]
    assert len(chats) == sum(s.answered.values())
    tools = sorted(
        span["attributes"]["gen_ai.tool.call.id"]
        for span in spans
        if span["name"].startswith("execute_tool ")
    )
    assert tools == sorted(s.tools)
