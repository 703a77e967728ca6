"""The loop's facts, one concern per test, over the recorded sessions of the four sources.

Every test asks one question of every scenario of every source (``tests/loop_scenarios.py`` reads each source's
facts into the terms they share), through the real pipeline (reader → framer or translator → the one loop): one
trace per human prompt, the main agent's model calls in their turns and its last one the final answer, the tool
calls with their outcomes, the tokens, the compactions, the error that ended a prompt, how each prompt ended, each
sub-agent under the call that started it, live == replay, the sniff, the library. A fact a source's recording does
not state is not checked for it (``None`` in its :class:`~tests.loop_scenarios.Scenario`).

What only one agent does (its framer's state, its rules in the CLI's own words) is in that agent's file:
``test_claude_code_loop.py`` (and, for what Claude Code 2.1.332 writes anew, ``test_claude_code_332.py`` and
``test_claude_code_332_loop.py``), ``test_codex_loop.py``, ``test_gemini_loop.py``; Copilot CLI's loop features in
``test_loop_features.py``, ``test_agentloop.py`` and ``test_fold_prompts.py``.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from copilot_otel import library
from copilot_otel.model.activity import (
    AgentRun,
    Compaction,
    ModelCall,
    PromptRun,
    Record,
    SessionError,
    ToolCall,
    Turn,
)
from copilot_otel.pipeline import FoldSettings, Pipeline, source_for
from copilot_otel.sources import Source, sniff
from copilot_otel.sources.claude_code.framer import CLAUDE_CODE
from copilot_otel.sources.codex.framer import CODEX
from copilot_otel.sources.gemini.framer import GEMINI
from copilot_otel.sources.sessions import SessionFile
from tests.conftest import all_fixture_logs
from tests.loop_scenarios import (
    ALL,
    ANY,
    IDS,
    SCENARIOS,
    WITH_SUBAGENTS,
    Agent,
    Folded,
    Sub,
    fold,
    gemini_checks,
    outcomes,
    scenario,
)

# Claude Code: 9 of 2.1.197's shared set, 5 recorded; 12 sessions of 2.1.332's 11 recordings (a fork writes two).
EXPECTED_SCENARIOS = {"copilot": 11, "claude-code": 27, "codex": 14, "gemini": 10}


def test_every_recorded_scenario_of_every_source_is_checked() -> None:
    assert Counter(s.agent for s in ALL) == EXPECTED_SCENARIOS
    assert sorted(s.name for s in ALL if s.agent == "gemini") == [
        "abort-mid-tool", "denied-tool", "failing-tool", "multi-tool", "parallel-tools", "plain-question", "resumed",
        "runaway", "runaway-distinct", "subagent",
    ]  # fmt: skip
    for s in ALL:
        assert s.main.is_file() and s.main in s.logs, s.id
        assert len([sub for sub in s.subagents if sub.path]) == len(s.logs) - 1, s.id
    for name in (s.name for s in ALL if s.agent == "gemini"):
        assert all(run["exit_code"] == 0 for run in gemini_checks(name)["runs"])
        assert scenario("gemini", name).main.name.startswith("session-")


def test_there_are_subagent_scenarios_of_every_source() -> None:
    assert WITH_SUBAGENTS == [
        "claude-code/2.1.332-background-subagent", "claude-code/2.1.332-interactive-subagent",
        "claude-code/2.1.332-parallel-subagents", "claude-code/recorded-subagent-tools-fail", "claude-code/subagent",
        "codex/recorded-subagent-tools-fail", "codex/subagent", "copilot/capi-subagent", "copilot/subagent",
        "gemini/subagent",
    ]  # fmt: skip


@pytest.mark.parametrize("sid", IDS)
def test_one_trace_per_human_prompt(sid: str) -> None:
    s = SCENARIOS[sid]
    runs = fold(s.main).runs()
    assert len(runs) == s.prompts
    assert len({r.trace_id for r in runs}) == len(runs)
    assert all(r.human for r in runs)


@pytest.mark.parametrize("sid", IDS)
def test_the_main_agents_model_calls_per_prompt(sid: str) -> None:
    """Each prompt's own model calls (a chat span each), the ones it counts, their provider and outcomes: every
    call ok where the facts say nothing else (rule B: a failed request the log does not hold has no span)."""
    s = SCENARIOS[sid]
    folded = fold(s.main)
    runs = folded.runs()
    calls = folded.main_calls()
    assert len(calls) == s.main_calls
    if s.calls_per_prompt is not None:
        by_trace = {r.trace_id: 0 for r in runs}
        for call in calls:
            by_trace[call.trace_id] += 1
        assert list(by_trace.values()) == s.calls_per_prompt
        assert [r.usage.calls for r in runs] == (s.answered_per_prompt or s.calls_per_prompt)
    assert Counter(c.outcome.value for c in calls) == (s.call_outcomes or Counter({"ok": s.main_calls}))
    answered = [c for c in calls if c.outcome.value == "ok"]
    assert {c.provider for c in answered} == ({s.provider} if answered else set())


@pytest.mark.parametrize("sid", IDS)
def test_each_model_call_is_in_a_turn_and_each_tool_under_a_turn(sid: str) -> None:
    """A turn span per model call, the call inside it (a compaction's own call stands alone, under its prompt; a
    failed attempt the CLI retried is under the call it was an attempt of), and each tool call under a turn of its
    trace (or, for Copilot, a sub-agent's run)."""
    folded = fold(SCENARIOS[sid].main)
    calls = folded.of(ModelCall)
    turns = {t.span_id: t for t in folded.of(Turn)}
    standalone = [c for c in calls if c.origin == "compaction"]
    attempts = [c for c in calls if c.attempt is not None]
    assert len(turns) == len(calls) - len(standalone) - len(attempts)
    by_span = {c.span_id: c for c in calls}
    for call in calls:
        if call in attempts:
            assert by_span[call.parent_span_id].trace_id == call.trace_id
        elif call not in standalone:
            turn = turns[call.parent_span_id]
            assert turn.start_ns <= call.start_ns <= call.end_ns <= turn.end_ns
            assert turn.trace_id == call.trace_id
    agents = {a.span_id for a in folded.of(AgentRun)}
    for tool in folded.of(ToolCall):
        assert tool.parent_span_id in turns or tool.parent_span_id in agents, tool.name
        if tool.parent_span_id in turns:
            assert turns[tool.parent_span_id].trace_id == tool.trace_id


@pytest.mark.parametrize("sid", sorted(i for i in IDS if SCENARIOS[i].final_answer is not None))
def test_the_main_agents_last_model_call_is_its_final_answer(sid: str) -> None:
    """Where the facts say how the main agent's last reply was sent (the recorder's requests, in order), its last
    model call ends as it: the final answer (``end_turn``) has finish reason ``stop``."""
    s = SCENARIOS[sid]
    calls = sorted(fold(s.main).main_calls(), key=lambda call: call.start_ns)
    assert (calls[-1].finish_reason == "stop") == s.final_answer


@pytest.mark.parametrize("sid", IDS)
def test_tool_calls_with_their_outcomes(sid: str) -> None:
    """The main agent's tool calls by id, with their outcomes: denied apart from failed, an interrupted one
    cancelled (Copilot's by outcome, its sub-agent's in the same log among them)."""
    s = SCENARIOS[sid]
    folded = fold(s.main)
    if s.tools is not None:
        assert outcomes(folded.of(ToolCall)) == s.tools
    if s.tool_counts is not None:
        assert Counter(outcomes(folded.of(ToolCall)).values()) == s.tool_counts


@pytest.mark.parametrize("sid", IDS)
def test_the_main_agents_tokens(sid: str) -> None:
    """The tokens in the fold's meaning: input includes the cached, output the thoughts; the prompts' sums are the
    main agent's calls' sums."""
    s = SCENARIOS[sid]
    folded = fold(s.main)
    runs, calls = folded.runs(), folded.main_calls()
    if s.usage is not None:
        assert (sum(r.usage.input or 0 for r in runs), sum(r.usage.output or 0 for r in runs)) == s.usage
        assert (sum(c.usage.input or 0 for c in calls), sum(c.usage.output or 0 for c in calls)) == s.usage
    if s.cache_read is not None:
        assert sum(r.usage.cache_read or 0 for r in runs) == s.cache_read
    if s.per_call_usage is not None:
        by_order = sorted(calls, key=lambda call: call.start_ns)
        assert [(m.usage.input, m.usage.cache_read, m.usage.reasoning) for m in by_order] == s.per_call_usage


@pytest.mark.parametrize("sid", IDS)
def test_compactions(sid: str) -> None:
    """The compactions the facts count, with their triggers where the facts name them."""
    s = SCENARIOS[sid]
    folded = fold(s.main)
    compactions = folded.of(Compaction)
    if s.compactions is not None:
        assert [r.trigger for r in compactions] == s.compactions
    if s.compaction_count is not None:  # (Codex: the summarization is a model call of its own)
        standalone = [c for c in folded.of(ModelCall) if c.origin == "compaction"]
        assert len(compactions) == s.compaction_count == len(standalone)


@pytest.mark.parametrize("sid", IDS)
def test_an_error_that_ended_a_prompt(sid: str) -> None:
    """The error that ended a prompt is that prompt's, typed by the HTTP status where the facts give one; no other
    prompt ends in an error."""
    s = SCENARIOS[sid]
    folded = fold(s.main)
    runs = folded.runs()
    if s.errors is not None:
        assert [r.message for r in folded.of(SessionError)] == s.errors
    if not s.ended_by_error:
        assert not [r for r in runs if r.outcome == "error"], sid
        return
    (failed,) = [r for r in runs if r.error]
    assert failed.outcome == "error"
    if s.error_type is not None:
        assert failed.error_type == s.error_type


@pytest.mark.parametrize("sid", IDS)
def test_how_each_prompt_ended(sid: str) -> None:
    """Issue 31.1: where the CLI's facts say a prompt completed, its root is complete (no ``incomplete.reason``);
    a prompt the CLI did not complete (aborted, retries exhausted, cut, stopped by its loop detection) never is.
    Where the source's log shows a prompt's end, it is handed on while the log is read, not by the log's end (the
    daemon exports it then instead of holding it until the idle timeout); an interrupted tool aborts its prompt."""
    s = SCENARIOS[sid]
    folded = fold(s.main)
    runs = folded.runs()
    read = [r for r in folded.read if isinstance(r, PromptRun)]
    assert s.ends is not None and len(runs) == len(s.ends)
    if s.tools is not None and "interrupted" in s.tools.values():
        assert [r.outcome for r in runs] == ["aborted"]
    for run, end in zip(runs, s.ends, strict=True):
        if end is None:
            continue  # (Claude Code's /compact: no loop of its own; the next prompt closes it)
        assert run.outcome in end.outcomes, (sid, run.outcome)
        if end.reason != ANY:
            assert run.incomplete_reason == end.reason, sid
        if end.by is not None:
            assert (run in read) == (end.by == "read"), (sid, end.by)


def _subagent(sub: Sub, parent: Folded) -> tuple[AgentRun, list[Record], bool]:
    """A sub-agent's run, its own records, and whether the run counts its calls (it does where it comes from the
    log that holds them): from its log folded alone (no record of the parent's read), which hands on the run
    (Claude Code, Gemini) or leaves it to the parent's fold (Codex); or, for Copilot, from the parent's log, which
    holds both."""
    by_parent = {a.task_call_id: a for a in parent.of(AgentRun)}
    if sub.path is None:
        agent = by_parent[sub.spawned_by]
        inside = {agent.span_id} | {t.span_id for t in parent.of(Turn) if t.parent_span_id == agent.span_id}
        return agent, [r for r in parent.records if getattr(r, "parent_span_id", None) in inside], True
    records = fold(sub.path).records
    assert not any(isinstance(r, PromptRun) for r in records), "a sub-agent is no human prompt"
    own = [r for r in records if isinstance(r, AgentRun)]
    if sub.spawned_by in by_parent:
        assert not own, "the parent's fold hands on the run, the child's none"
        agent = by_parent[sub.spawned_by]
        turns = [r for r in records if isinstance(r, Turn)]
        assert turns and {t.parent_span_id for t in turns} == {agent.span_id}
        return agent, records, False
    (agent,) = own
    return agent, records, True


@pytest.mark.parametrize("sid", WITH_SUBAGENTS)
def test_a_subagent_is_rooted_under_the_call_that_started_it(sid: str) -> None:
    """Loop rule A: each sub-agent's run hangs under the span of the parent's tool call that started it, in the
    parent's trace, with its own model calls and tools."""
    s = SCENARIOS[sid]
    parent = fold(s.main)
    (run,) = parent.runs()
    spawning = {t.call_id: t for t in parent.of(ToolCall)}
    assert len(parent.of(AgentRun)) in (0, len(s.subagents))
    for sub in s.subagents:
        agent, records, counted = _subagent(sub, parent)
        assert agent.trace_id == run.trace_id == spawning[sub.spawned_by].trace_id
        assert agent.parent_span_id == spawning[sub.spawned_by].span_id
        assert agent.task_call_id == sub.spawned_by and agent.outcome.value == "ok"
        assert agent.end_ns > agent.start_ns
        assert sub.agent_id in (None, sub.log_id)
        if sub.log_id is not None:
            assert agent.agent_id == sub.log_id
        own_calls = [r for r in records if isinstance(r, ModelCall)]
        assert len(own_calls) == sub.calls
        if counted:
            assert agent.usage.calls == sub.calls
        own_tools = outcomes([r for r in records if isinstance(r, ToolCall)])
        if sub.tools is not None:
            assert own_tools == sub.tools
        if sub.tool_counts is not None:
            assert Counter(own_tools.values()) == sub.tool_counts
        assert all(getattr(r, "trace_id", run.trace_id) == run.trace_id for r in records)
        if sub.usage is not None:
            assert (
                sum(c.usage.input or 0 for c in own_calls),
                sum(c.usage.output or 0 for c in own_calls),
            ) == (sub.usage)
            if counted:
                assert (agent.usage.input, agent.usage.output) == sub.usage


ALL_LOGS = [(s.id, path) for s in ALL for path in s.logs]


@pytest.mark.parametrize(("sid", "path"), ALL_LOGS, ids=[f"{i}-{p.stem[-12:]}" for i, p in ALL_LOGS])
def test_live_equals_replay(sid: str, path: Path) -> None:
    """Each log (a sub-agent's too) fed in pieces of 1, 7 and 4096 bytes (as a tail reads a file being written)
    gives what the whole gives."""
    whole = fold(path).records
    assert whole
    blob = path.read_bytes()
    session = SessionFile.from_path(path)
    for size in (1, 7, 4096):
        pipeline = Pipeline.for_session(session, FoldSettings(), project=False)
        pieces = (blob[i : i + size] for i in range(0, len(blob), size))
        live = [r for step in pipeline.feed_chunks(pieces) for r in step.records]
        live += pipeline.close("file_ended").records
        assert live == whole, (sid, size)


SNIFFED: dict[Agent, tuple[Source | None, object]] = {
    "copilot": (None, None),  # (no source of the others': a Copilot log is read as it always was)
    "claude-code": (Source.CLAUDE_CODE, CLAUDE_CODE),
    "codex": (Source.CODEX, CODEX),
    "gemini": (Source.GEMINI, GEMINI),
}


@pytest.mark.parametrize("sid", IDS)
def test_sniff_tells_the_source_and_the_pipeline_reads_it_with_its_framer(sid: str) -> None:
    """Every log of a scenario (a sub-agent's too) is told as its agent's, and folded by that agent's framer."""
    s = SCENARIOS[sid]
    sniffed, source = SNIFFED[s.agent]
    for path in s.logs:
        if sniffed is not None:
            assert sniff(path) is sniffed, path
        assert source_for(SessionFile.from_path(path)) is source, path


def test_no_copilot_fixture_is_read_as_another_agents() -> None:
    for log in all_fixture_logs():
        assert source_for(SessionFile.from_path(log)) is None, log  # Copilot's, read as before


@pytest.mark.parametrize("agent", sorted(EXPECTED_SCENARIOS))
def test_library_reads_a_session_as_replay_folds_it(agent: Agent) -> None:
    """``library.read_session`` of a session log gives the records replay folds (the same pipeline)."""
    s = scenario(agent, "multi-tool")
    records = library.read_session(s.main).records
    assert records == fold(s.main).records
    assert sum(isinstance(r, ModelCall) for r in records) == s.main_calls
