"""Claude Code's session logs: discovery under its root and the typed reader, over every real fixture.

The fixtures are real Claude Code 2.1.197 sessions recorded offline against a scripted model server
(``tests/fixtures/other-agents/claude-code/README.md``); each scenario's facts are in ``checks.json``, written by
the recorder from the CLI's files, its stdout and the server's log. Here they are checked at the reader's level
(prompts, model calls and their tokens, tool call ids and outcomes, denied vs failed, sub-agent links,
compaction); what a trace must show is the loop's and is checked once the source is wired into it.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from copilot_otel.model.inputs import Event
from copilot_otel.model.records import BadLine, DropReason
from copilot_otel.sources import LogKind, Source, ToolOutcome
from copilot_otel.sources.claude_code import reader as cc
from tests.conftest import FIXTURES
from tests.other_agents import assert_never_raises, views

HERE = FIXTURES / "other-agents" / "claude-code"
RECORDED = FIXTURES / "other-agents" / "recorded" / "claude-code"  # tests/otheragents/record.py
CHECKS: dict[str, Any] = json.loads((HERE / "checks.json").read_text(encoding="utf-8"))["scenarios"]
SCENARIOS = sorted(CHECKS)


def _events(path: Path) -> list[Event]:
    return views(path, cc.read_line)


def _raw(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


class Scenario:
    """One recorded scenario: its logs as discovery finds them, read by the reader."""

    def __init__(self, name: str) -> None:
        self.check: dict[str, Any] = CHECKS[name]
        self.root = HERE / name
        self.logs = cc.scan(self.root)
        (self.main,) = [log for log in self.logs if log.kind is LogKind.SESSION]
        self.events = _events(self.main.path)
        self.subagents = {str(log.agent_id): log for log in self.logs if log.kind is LogKind.SUBAGENT}

    def of(self, cls: type[Any], events: list[Event] | None = None) -> list[Any]:
        return [e for e in (self.events if events is None else events) if isinstance(e, cls)]

    def model_calls(self, events: list[Event] | None = None) -> dict[str, cc.Usage | None]:
        """Each model call (distinct ``message.id`` of the non-synthetic assistant records) and its usage."""
        calls: dict[str, cc.Usage | None] = {}
        for a in self.of(cc.AssistantRecord, events):
            if not a.synthetic:
                assert a.message_id is not None
                calls.setdefault(a.message_id, a.usage)
        return calls


@pytest.fixture(params=SCENARIOS)
def scenario(request: pytest.FixtureRequest) -> Scenario:
    return Scenario(request.param)


def test_discovery_finds_exactly_the_recorded_files(scenario: Scenario) -> None:
    found = sorted(str(log.path.relative_to(scenario.root)) for log in scenario.logs)
    expected = sorted(f for f in scenario.check["files"] if f.endswith(".jsonl"))
    assert found == expected
    assert {log.source for log in scenario.logs} == {Source.CLAUDE_CODE}
    assert scenario.main.session_id == scenario.check["session_ids"][0]
    for log in scenario.subagents.values():
        assert (log.session_id, log.parent) == (scenario.main.session_id, scenario.main.path)


def test_human_prompts(scenario: Scenario) -> None:
    queued = [q.prompt for q in scenario.of(cc.QueueOperation) if q.prompt is not None]
    assert queued == scenario.check["human_prompts"]
    users = [u for u in scenario.of(cc.UserRecord) if not u.sidechain]
    # every user record of a prompt carries its promptId: one id per human prompt, /compact included
    assert len(dict.fromkeys(u.prompt_id for u in users)) == len(scenario.check["human_prompts"])
    typed = [u.plain_text for u in users if u.kind is cc.UserKind.PROMPT]
    assert typed == [p for p in scenario.check["human_prompts"] if not p.startswith("/")]
    assert all(u.prompt_source for u in users if u.kind is cc.UserKind.PROMPT)


def test_model_calls_and_tokens(scenario: Scenario) -> None:
    calls = scenario.model_calls()
    transcript = scenario.check["model_calls_transcript"]
    assert len(calls) == transcript["main"]
    assert all(usage is not None for usage in calls.values())
    usage = [u for u in calls.values() if u is not None]
    expected = scenario.check["usage_main"]
    assert sum(u.input_tokens for u in usage) == expected["input_tokens"]
    assert sum(u.output_tokens for u in usage) == expected["output_tokens"]
    synthetic = [a for a in scenario.of(cc.AssistantRecord) if a.synthetic]
    assert len(synthetic) == transcript["synthetic_assistant_records"]
    # per prompt: a model call belongs to the prompt queued last before it
    per_prompt: list[set[str]] = []
    for e in scenario.events:
        if isinstance(e, cc.QueueOperation) and e.prompt is not None:
            per_prompt.append(set())
        elif isinstance(e, cc.AssistantRecord) and not e.synthetic and e.message_id:
            per_prompt[-1].add(e.message_id)
    assert [len(ids) for ids in per_prompt] == transcript["per_prompt"]


def test_usage_is_read_field_by_field_cache_included() -> None:
    """Every assistant record's usage equals its raw ``message.usage`` (cache creation and read included)."""
    checked = 0
    for path in sorted(HERE.glob("*/projects/**/*.jsonl")):
        for obj, e in zip(_raw(path), _events(path), strict=True):
            if obj["type"] != "assistant":
                continue
            assert isinstance(e, cc.AssistantRecord)
            u = obj["message"]["usage"]
            assert e.usage == cc.Usage(
                u["input_tokens"],
                u["output_tokens"],
                u["cache_creation_input_tokens"],
                u["cache_read_input_tokens"],
                u.get("service_tier"),
            )
            assert (e.message_id, e.model, e.request_id) == (
                obj["message"]["id"],
                obj["message"]["model"],
                obj.get("requestId"),
            )
            checked += 1
    assert checked >= 40


def _tool_calls(scenario: Scenario) -> list[tuple[str, str, str, ToolOutcome, str | None]]:
    """(agent, id, name, outcome, message id of the model call that asked) of every tool call, main first."""
    out = []
    for agent, events in [("main", scenario.events)] + [
        (agent_id, _events(log.path)) for agent_id, log in sorted(scenario.subagents.items())
    ]:
        results = {r.tool_use_id: r for u in scenario.of(cc.UserRecord, events) for r in u.tool_results}
        for a in scenario.of(cc.AssistantRecord, events):
            for use in a.tool_uses:
                assert use.id is not None and use.name is not None
                out.append((agent, use.id, use.name, results[use.id].outcome, a.message_id))
    return out


def test_tool_calls_outcomes_denied_apart_from_failed(scenario: Scenario) -> None:
    denied = {d["tool_use_id"] for d in scenario.check["stdout"]["permission_denials"]}
    expected = [
        (
            t["agent"],
            t["id"],
            t["name"],
            ToolOutcome.DENIED
            if t["id"] in denied
            else ToolOutcome.FAILED
            if t["is_error"]
            else ToolOutcome.OK,
        )
        for t in scenario.check["tool_calls"]
    ]
    calls = _tool_calls(scenario)
    assert [c[:4] for c in calls] == expected
    # each tool call under the model call that asked for it
    under = {
        m.group(1): m.group(2)
        for line in scenario.check["a_faithful_trace_export_must_show"]
        if (m := re.match(r"tool span (\S+) .* under model call (\S+):", line))
    }
    assert len(under) == len([t for t in scenario.check["tool_calls"] if t["agent"] == "main"])
    assert {c[1]: c[4] for c in calls if c[1] in under} == under


def test_the_fixtures_hold_denied_failed_and_ok() -> None:
    outcomes = Counter(c[3] for name in SCENARIOS for c in _tool_calls(Scenario(name)))
    assert outcomes[ToolOutcome.DENIED] == 1 and outcomes[ToolOutcome.FAILED] == 2
    assert outcomes[ToolOutcome.OK] > 10


def test_sub_agents_link_to_the_tool_call_that_started_them(scenario: Scenario) -> None:
    expected = scenario.check["subagents"]
    assert sorted(scenario.subagents) == sorted(s["agent_id"] for s in expected)
    results = {r.tool_use_id: u for u in scenario.of(cc.UserRecord) for r in u.tool_results if u.subagent_id}
    for s in expected:
        log = scenario.subagents[s["agent_id"]]
        assert log.path.name == s["file"]
        meta = cc.read_meta(log.path)
        assert meta == cc.SubagentMeta(s["agent_type"], s["description"], s["parent_tool_use_id"], 1)
        assert results[s["parent_tool_use_id"]].subagent_id == s["agent_id"]
        events = _events(log.path)
        assert all(e.agent_id == s["agent_id"] for e in events if isinstance(e, cc.Record))
        assert all(e.sidechain for e in events if isinstance(e, cc.Record))
        first = scenario.of(cc.UserRecord, events)[0]
        assert first.kind is cc.UserKind.PROMPT  # the sub-agent's task, the Agent call's prompt
        calls = scenario.model_calls(events)
        assert (
            len(calls)
            == s["model_calls"]
            == scenario.check["model_calls_transcript"]["subagents"][s["agent_id"]]
        )
        usage = [u for u in calls.values() if u is not None]
        assert sum(u.input_tokens for u in usage) == s["usage"]["input_tokens"]
        assert sum(u.output_tokens for u in usage) == s["usage"]["output_tokens"]


def test_compaction(scenario: Scenario) -> None:
    boundaries = scenario.of(cc.CompactBoundary)
    assert [b.trigger for b in boundaries] == scenario.check["compactions"]
    assert all(b.pre_tokens and b.pre_tokens > 0 for b in boundaries)
    summaries = [u for u in scenario.of(cc.UserRecord) if u.kind is cc.UserKind.COMPACT_SUMMARY]
    assert len(summaries) == len(boundaries)


def test_failed_attempts_leave_no_record() -> None:
    """The 429 and the prompt-too-long 400 are answered by the server but not in the transcript: there are fewer
    model calls in the file than the server answered (the loop cannot show them from the file alone)."""
    for name in ("api-error-429", "context-too-long"):
        s = Scenario(name)
        server = s.check["model_calls_server"]
        assert len(s.model_calls()) == server["main"] - len(server["http_errors_sent"])
        assert not [e for e in s.events if e.type not in cc.CLASSES and e.type != "mode"]


# ---------------------------------------------------------------------------------------------- discovery
def _session(root: Path, project: str, session: str, subagent: str | None = None) -> Path:
    folder = root / "projects" / project
    path = folder / f"{session}.jsonl"
    if subagent is not None:
        path = folder / session / "subagents" / f"agent-{subagent}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"{}\n")
    return path


def test_default_root_honours_claude_config_dir(tmp_path: Path) -> None:
    assert cc.default_root({"HOME": str(tmp_path)}) == tmp_path / ".claude"
    assert cc.default_root({"HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": "/elsewhere"}) == Path("/elsewhere")
    assert cc.default_root({"HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": "~/cc"}) == tmp_path / "cc"
    assert cc.default_root({"HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": "  "}) == tmp_path / ".claude"


def test_scan_lists_sessions_and_sub_agents_and_nothing_else(tmp_path: Path) -> None:
    main = _session(tmp_path, "-home-a-proj", "s1")
    sub = _session(tmp_path, "-home-a-proj", "s1", subagent="abc")
    (sub.parent / "agent-abc.meta.json").write_text("{}")
    (main.parent / "notes.txt").write_text("x")
    (main.parent / "s1" / "tool-results").mkdir()
    (main.parent / "s1" / "tool-results" / "big.jsonl").write_text("{}\n")  # no sub-agent's
    assert [(log.kind, log.session_id, log.agent_id, log.parent) for log in cc.scan(tmp_path)] == [
        (LogKind.SESSION, "s1", None, None),
        (LogKind.SUBAGENT, "s1", "abc", main),
    ]
    assert cc.scan(tmp_path / "missing") == []


@pytest.mark.skipif(not hasattr(os, "symlink") or os.name == "nt", reason="symbolic links")
def test_links_out_of_the_root_are_not_followed(tmp_path: Path) -> None:
    root = tmp_path / "claude"
    _session(root, "-p", "inside")
    outside = _session(tmp_path / "other", "-q", "secret")
    (root / "projects" / "-p" / "linked.jsonl").symlink_to(outside)
    (root / "projects" / "-q").symlink_to(outside.parent, target_is_directory=True)
    (root / "projects" / "-p" / "again.jsonl").symlink_to(root / "projects" / "-p" / "inside.jsonl")
    (root / "projects" / "-loop").symlink_to(root / "projects", target_is_directory=True)
    assert sorted(log.session_id for log in cc.scan(root)) == ["again", "inside"]


# ---------------------------------------------------------------------------------------------- robustness
def test_bad_lines_are_bad_lines_with_their_reason() -> None:
    cases = {
        b"{": DropReason.INVALID_JSON,
        b"\xff\xfe": DropReason.INVALID_UTF8,
        b"[1, 2]": DropReason.NOT_AN_OBJECT,
        b'{"type": 3}': DropReason.MISSING_FIELD,
        b'{"uuid": "u"}': DropReason.MISSING_FIELD,
    }
    for line, reason in cases.items():
        bad = cc.read_line(line, 10, 20, 2)
        assert isinstance(bad, BadLine) and (bad.reason, bad.offset, bad.line_number) == (reason, 10, 2)


def test_unknown_types_and_wrong_shapes_are_kept() -> None:
    e = cc.read_line(b'{"type": "brand-new", "uuid": "u1", "timestamp": "2026-12-01T23:17:22.977Z"}', 0, 9, 1)
    assert type(e) is Event and (e.type, e.id, e.time_ns) == ("brand-new", "u1", 1796167042977000000)
    assert e.dropped == [(DropReason.NOT_READ, "brand-new")]  # a kind not read: said once per CLI version
    a = cc.read_line(b'{"type": "assistant", "message": {"id": 7, "usage": [1]}, "timestamp": 5}', 0, 9, 1)
    assert isinstance(a, cc.AssistantRecord)
    assert (a.message_id, a.usage, a.tool_uses, a.time_ns, a.id) == (None, None, (), 0, "offset-0")
    assert {reason for reason, _ in a.dropped} == {DropReason.WRONG_SHAPE, DropReason.BAD_TIMESTAMP}


def test_the_reader_never_raises_on_mutated_lines() -> None:
    lines = [
        line
        for path in [
            *sorted(HERE.glob("*/projects/**/*.jsonl")),
            *sorted(RECORDED.glob("*/projects/**/*.jsonl")),
        ]
        for line in path.read_bytes().splitlines()
        if line.strip()
    ]
    assert_never_raises(lines, cc.read_line, [cc.ToolResult, cc.ToolUse])
