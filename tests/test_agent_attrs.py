"""Every span, log record and metric point says which coding agent wrote its session, and a CLI's own vocabulary is
only on that CLI's sessions: ``github.copilot.*`` on Copilot CLI's, Claude Code's names on Claude Code's.

The fold names the agent (``LoopState.agent``, from the session start's producer); the projector is built with
it and writes ``copilot_otel.agent`` and the agent's vocabulary (``projections/vendors.py``). Real captures only: Claude
Code's recorded scenarios and Copilot CLI fixtures, folded by the real pipeline (records only), projected by the
real projector with the agent the fold named.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from copilot_otel.deliver.metrics import Aggregator
from copilot_otel.loop.core import FoldSettings, agent_of
from copilot_otel.model.activity import Record
from copilot_otel.model.records import Emission, LogRecord, Measurement, SpanRecord
from copilot_otel.pipeline import Pipeline
from copilot_otel.projections import Projector, catalog, claude_code, codex, ours
from copilot_otel.settings.content import ContentKind, ContentPolicy
from copilot_otel.sources.claude_code.reader import PROJECTS, scan
from copilot_otel.sources.sessions import resolve
from tests.conftest import FIXTURES
from tests.test_golden import CLAUDE_CODE_SCENARIOS as SCENARIOS

COPILOT_LOGS = sorted((FIXTURES / "cli-shapes").glob("*/events.jsonl"))
NO_CONTENT = ContentPolicy()
ALL_CONTENT = ContentPolicy(enabled=frozenset(ContentKind), on_spans=True, on_events=True)


def _fold(path: Path, settings: FoldSettings) -> Iterator[tuple[Path, str | None, list[Record]]]:
    """Each session log under ``path`` (a Claude Code home: each session's and sub-agent's file, as replay reads
    it): its file, the agent its fold named, and its records (whole, closed)."""
    targets = [str(log.path) for log in scan(path)] if (path / PROJECTS).is_dir() else [str(path)]
    for session in resolve(targets):
        pipeline = Pipeline.for_session(session, settings, project=False)
        records: list[Record] = []
        for step in pipeline.feed_file(session.path):
            records.extend(step.records)
        records.extend(pipeline.close("file_ended").records)
        yield session.path, pipeline.loop.agent, records


def _main_logs(scenario: Path, settings: FoldSettings) -> list[tuple[Path, str | None, list[Record]]]:
    """The scenario's session logs (a sub-agent's file has no session start: its agent comes from its source)."""
    return [folded for folded in _fold(scenario, settings) if "subagents" not in folded[0].parts]


def _projected(
    path: Path, content: ContentPolicy = NO_CONTENT, main_only: bool = True
) -> list[tuple[str | None, list[Emission]]]:
    settings = FoldSettings(content=content)
    folded = _main_logs(path, settings) if main_only else list(_fold(path, settings))
    return [(agent, Projector(content, agent).project(records)) for _, agent, records in folded]


def _keys(emission: Emission) -> Iterator[str]:
    """Every attribute key of an emission, its span events' names and keys included."""
    yield from emission.attributes
    if isinstance(emission, SpanRecord):
        for event in emission.events:
            yield event.name
            yield from event.attributes


def test_the_session_start_s_producer_names_the_agent() -> None:
    assert agent_of("copilot-agent") == "copilot"
    assert agent_of("claude-code") == "claude-code"
    assert agent_of("codex") == "codex"
    assert agent_of(None) is None
    assert agent_of("something-else") is None  # unknown: the fold keeps what it knew


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_the_fold_of_a_claude_code_session_names_claude_code(scenario: str) -> None:
    folded = _main_logs(SCENARIOS[scenario], FoldSettings())
    assert folded
    assert {agent for _, agent, _ in folded} == {"claude-code"}


def test_the_fold_of_a_copilot_session_names_copilot() -> None:
    agents = {agent for log in COPILOT_LOGS for _, agent, _ in _fold(log, FoldSettings())}
    assert agents == {"copilot"}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_claude_code_emissions_carry_no_copilot_name_and_say_claude_code(scenario: str) -> None:
    projected = _projected(SCENARIOS[scenario], ALL_CONTENT, main_only=False)
    emissions = [e for agent, out in projected if agent is not None for e in out]
    assert emissions
    for emission in emissions:
        leaked = [key for key in _keys(emission) if key.startswith("github.copilot.")]
        assert not leaked, (type(emission).__name__, leaked)
        assert emission.attributes[ours.AGENT] == "claude-code"


def test_claude_code_spans_carry_claude_code_s_own_names() -> None:
    """``claude_code.api_request``'s token counts in Anthropic's meaning (input without the cache's), and
    ``claude_code.tool_result``'s outcome, with the denied call rejected apart from the failed ones."""
    spans = [
        e
        for scenario in ("denied-tool", "failing-tool", "multi-tool")
        for _, out in _projected(SCENARIOS[scenario])
        for e in out
        if isinstance(e, SpanRecord)
    ]
    chats = [s for s in spans if s.name.startswith("chat ")]
    tools = [s for s in spans if s.name.startswith("execute_tool ")]
    assert chats and tools
    for chat in chats:
        a = chat.attributes
        assert a[claude_code.MODEL] == a["gen_ai.request.model"]
        assert a[claude_code.OUTPUT_TOKENS] == a["gen_ai.usage.output_tokens"]
        counts = [
            a[claude_code.INPUT_TOKENS],
            a[claude_code.CACHE_READ_TOKENS],
            a[claude_code.CACHE_CREATION_TOKENS],
        ]
        assert all(isinstance(n, int) for n in counts)
        assert sum(n for n in counts if isinstance(n, int)) == a["gen_ai.usage.input_tokens"]
        assert a[claude_code.DURATION_MS] == (chat.end_ns - chat.start_ns) / 1e6
        assert str(a[ours.TURN_ID]).startswith("msg_")  # the message id the CLI's names called its turn id
    for tool in tools:
        a = tool.attributes
        assert a[claude_code.TOOL_NAME] == a["gen_ai.tool.name"]
        assert a[claude_code.SUCCESS] == ("false" if "error.type" in a else "true")
        assert a[claude_code.DECISION_TYPE] == ("reject" if a.get("error.type") == "denied" else "accept")
    assert {t.attributes[claude_code.DECISION_TYPE] for t in tools} == {"accept", "reject"}
    assert "false" in {t.attributes[claude_code.SUCCESS] for t in tools if "error.type" in t.attributes}


def test_the_prompt_s_events_use_claude_code_s_and_neutral_names() -> None:
    roots = [
        e
        for scenario in ("compaction", "recorded-abort-mid-tool", "recorded-retries-exhausted")
        for _, out in _projected(SCENARIOS[scenario])
        for e in out
        if isinstance(e, SpanRecord) and e.parent_span_id is None
    ]
    names = {event.name for root in roots for event in root.events}
    assert claude_code.USER_PROMPT_EVENT in names
    assert ours.COMPACTION_COMPLETE_EVENT in names
    assert ours.ABORT_EVENT in names
    for root in roots:
        assert ours.AGENT_TURN_COUNT in root.attributes
        assert root.attributes["langfuse.trace.name"] == "claude-code prompt"
    errors = [
        log
        for scenario in ("recorded-retries-exhausted",)
        for _, out in _projected(SCENARIOS[scenario])
        for log in out
        if isinstance(log, LogRecord) and log.event_name == "copilot_otel.session.error"
    ]
    assert errors and all(log.attributes["http.response.status_code"] == 429 for log in errors)


def test_the_claude_code_vocabulary_carries_no_content() -> None:
    """Its names say the same with every capture switch on as with none: no prompt, argument or result text."""
    own = (
        claude_code.MODEL,
        claude_code.INPUT_TOKENS,
        claude_code.OUTPUT_TOKENS,
        claude_code.CACHE_READ_TOKENS,
        claude_code.CACHE_CREATION_TOKENS,
        claude_code.DURATION_MS,
        claude_code.TOOL_NAME,
        claude_code.SUCCESS,
        claude_code.DECISION_TYPE,
    )

    def vocabulary(content: ContentPolicy) -> list[dict[str, Any]]:
        return [
            {k: v for k, v in e.attributes.items() if k in own}
            for scenario in ("multi-tool", "denied-tool")
            for _, out in _projected(SCENARIOS[scenario], content)
            for e in out
            if isinstance(e, SpanRecord)
        ]

    with_none = vocabulary(NO_CONTENT)
    assert any(with_none)
    assert vocabulary(ALL_CONTENT) == with_none


def test_copilot_emissions_say_copilot_and_keep_the_cli_s_names() -> None:
    emissions = [e for log in COPILOT_LOGS for _, out in _projected(log) for e in out]
    assert emissions
    assert all(e.attributes[ours.AGENT] == "copilot" for e in emissions)
    assert any(key.startswith("github.copilot.") for e in emissions for key in e.attributes)


def test_a_projector_not_told_the_agent_writes_what_it_wrote_before() -> None:
    """No agent attribute and the Copilot CLI's names (the output the Copilot goldens pin)."""
    _, _, records = next(_fold(COPILOT_LOGS[0], FoldSettings()))
    told = Projector(NO_CONTENT, "copilot").project(records)
    untold = Projector(NO_CONTENT).project(records)
    assert untold and all(ours.AGENT not in e.attributes for e in untold)
    for a, b in zip(told, untold, strict=True):
        assert {k: v for k, v in a.attributes.items() if k != ours.AGENT} == dict(b.attributes)


def test_metrics_split_by_agent() -> None:
    """One aggregation of both agents' points: each fold metric has a series per agent, and the main agent's
    invocations are named by the CLI (``gen_ai.agent.name``) where no custom agent is."""
    aggregator = Aggregator()
    points = [
        e
        for path in (SCENARIOS["multi-tool"], COPILOT_LOGS[0])
        for _, out in _projected(path)
        for e in out
        if isinstance(e, Measurement)
    ]
    for point in points:
        aggregator.record(point)
    series: dict[str, set[str]] = {}
    for name, attrs in [*aggregator.sums, *aggregator.histograms]:
        series.setdefault(name, set()).add(dict(attrs)[ours.AGENT])
    for name in (
        catalog.TOKEN_USAGE,
        catalog.OPERATION_DURATION,
        catalog.EXECUTE_TOOL_DURATION,
        catalog.PROMPT_COUNT,
    ):
        assert series[name] == {"copilot", "claude-code"}, name
    invoked = {
        dict(attrs)["gen_ai.agent.name"]
        for name, attrs in aggregator.histograms
        if name == catalog.INVOKE_AGENT_DURATION and dict(attrs)[ours.AGENT] == "claude-code"
    }
    assert invoked == {"claude-code"}


def _as(agent: str, scenario: str) -> list[Emission]:
    """A Claude Code scenario's real records, projected as if ``agent`` had written them (Codex CLI's logs are
    not folded on this branch: their framer is another change)."""
    return [
        e
        for _, _, records in _main_logs(SCENARIOS[scenario], FoldSettings())
        for e in Projector(NO_CONTENT, agent).project(records)
    ]


def test_codex_s_spans_carry_codex_s_own_names() -> None:
    """``codex.sse_event``'s token counts in OpenAI's meaning (the fold's: input with the cached tokens),
    ``codex.tool_result``'s, ``conversation.id`` on every span, ``codex.user_prompt`` for the prompt."""
    spans = [e for s in ("denied-tool", "multi-tool") for e in _as("codex", s) if isinstance(e, SpanRecord)]
    assert spans
    for span in spans:
        a = span.attributes
        assert a[ours.AGENT] == "codex"
        assert not [k for k in _keys(span) if k.startswith(("github.copilot.", "claude_code."))]
        assert claude_code.DECISION_TYPE not in a and claude_code.CACHE_CREATION_TOKENS not in a
        assert a[codex.CONVERSATION_ID] == a["session.id"]
        if span.name.startswith("chat "):
            assert a[codex.INPUT_TOKENS] == a["gen_ai.usage.input_tokens"]
            assert a[codex.CACHED_TOKENS] == a["gen_ai.usage.cache_read.input_tokens"]
            assert a[codex.OUTPUT_TOKENS] == a["gen_ai.usage.output_tokens"]
        if span.name.startswith("execute_tool "):
            assert a[codex.CALL_ID] == a["gen_ai.tool.call.id"]
            assert a[codex.SUCCESS] == ("false" if "error.type" in a else "true")
    assert codex.USER_PROMPT_EVENT in {e.name for s in spans for e in s.events}


def test_an_agent_without_names_of_its_own_gets_the_neutral_ones() -> None:
    emissions = _as("another-cli", "multi-tool")
    assert emissions and all(e.attributes[ours.AGENT] == "another-cli" for e in emissions)
    own = {claude_code.MODEL, claude_code.TOOL_NAME, codex.CONVERSATION_ID}
    for emission in emissions:
        keys = set(_keys(emission))
        assert not [k for k in keys if k.startswith(("github.copilot.", "claude_code.", "codex."))]
        assert not keys & own
    roots = [e for e in emissions if isinstance(e, SpanRecord) and e.parent_span_id is None]
    assert roots and all(ours.AGENT_TURN_COUNT in r.attributes for r in roots)
    assert ours.USER_MESSAGE_EVENT in {e.name for r in roots for e in r.events}
