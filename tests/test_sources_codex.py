"""Codex CLI's rollout files: discovery under its root and the typed reader, over every real fixture.

The fixtures are real Codex CLI 0.171.0 sessions recorded offline against a scripted Responses API server
(``tests/fixtures/other-agents/codex/README.md``); each scenario's facts are in ``checks.json``, written by the
recorder from the CLI's files, its stdout and the server's log. Here they are checked at the reader's level
(turns and their prompts, model calls and their tokens, tool call ids and outcomes, denied vs failed, the
sub-agent's thread and the call that spawned it, compaction, the turn's error).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from copilot_otel.model.inputs import Event
from copilot_otel.model.records import BadLine, DropReason
from copilot_otel.sources import LogKind, Source, ToolOutcome
from copilot_otel.sources.codex import reader as cx
from tests.conftest import FIXTURES
from tests.other_agents import assert_never_raises, views

HERE = FIXTURES / "other-agents" / "codex"
RECORDED = FIXTURES / "other-agents" / "recorded" / "codex"  # tests/otheragents/record.py
CHECKS: dict[str, Any] = json.loads((HERE / "checks.json").read_text(encoding="utf-8"))["scenarios"]
SCENARIOS = sorted(CHECKS)


def _events(path: Path) -> list[Event]:
    return views(path, cx.read_line)


def _of(cls: type[Any], events: list[Event]) -> list[Any]:
    return [e for e in events if isinstance(e, cls)]


class Thread:
    """One rollout file, read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.events = _events(path)
        (self.meta,) = _of(cx.SessionMeta, self.events)

    def usage(self) -> list[cx.Usage]:
        return [u for t in _of(cx.TokenUsage, self.events) if (u := t.usage) is not None]


class Scenario:
    def __init__(self, name: str) -> None:
        self.check: dict[str, Any] = CHECKS[name]
        self.root = HERE / name
        self.logs = cx.scan(self.root)
        threads = [Thread(log.path) for log in self.logs]
        (self.main,) = [t for t in threads if t.meta.parent_thread_id is None]
        self.children = {t.meta.thread_id: t for t in threads if t.meta.parent_thread_id is not None}


@pytest.fixture(params=SCENARIOS)
def scenario(request: pytest.FixtureRequest) -> Scenario:
    return Scenario(request.param)


def test_discovery_finds_exactly_the_recorded_files(scenario: Scenario) -> None:
    found = sorted(str(log.path.relative_to(scenario.root)) for log in scenario.logs)
    assert found == sorted(scenario.check["files"])
    assert {(log.source, log.kind) for log in scenario.logs} == {(Source.CODEX, LogKind.SESSION)}
    for log in scenario.logs:  # the file name's thread id is the one inside
        (meta,) = _of(cx.SessionMeta, _events(log.path))
        assert meta.thread_id == log.session_id
    assert scenario.main.meta.thread_id == scenario.check["session_ids"][0]
    assert scenario.main.meta.cli_version == "0.171.0"


def test_turns_and_their_prompts(scenario: Scenario) -> None:
    prompts: list[str] = []
    ends: list[str] = []
    errors: list[str] = []
    turn: str | None = None
    for e in scenario.main.events:
        if isinstance(e, cx.TaskStarted):
            turn = e.turn_id
            prompts.append("")
        elif isinstance(e, cx.ItemCompleted) and e.item_type == "UserMessage" and not prompts[-1]:
            assert e.turn_id == turn
            prompts[-1] = e.plain_text
        elif isinstance(e, cx.TaskComplete):
            assert e.turn_id == turn
            ends.append("task_complete (error)" if e.error_message else "task_complete")
            errors += [e.error_message] if e.error_message else []
    assert prompts == scenario.check["human_prompts"]
    assert ends == scenario.check["turn_ends"]
    assert errors == scenario.check["errors"]
    # the model-visible user messages the CLI writes itself are not prompts
    typed = [
        m.plain_text for m in _of(cx.Message, scenario.main.events) if m.role == "user" and not m.harness
    ]
    assert typed == scenario.check["human_prompts"]


def test_the_context_window_error_names_its_kind() -> None:
    (end,) = _of(cx.TaskComplete, Scenario("context-too-long").main.events)
    assert (end.error_kind, end.error_status) == ("context_window_exceeded", None)


def test_model_calls_and_tokens(scenario: Scenario) -> None:
    rollout = scenario.check["model_calls_rollout"]
    records = _of(cx.TokenUsage, scenario.main.events)
    assert len(records) == rollout["main"]
    assert len({r.response_id for r in records}) == len(records)
    assert list(Counter(r.turn_id for r in records).values()) == rollout["per_turn"]
    usage = scenario.main.usage()
    assert len(usage) == len(records)
    assert sum(u.input_tokens for u in usage) == scenario.check["usage_main"]["input_tokens"]
    assert sum(u.output_tokens for u in usage) == scenario.check["usage_main"]["output_tokens"]


def test_usage_is_read_field_by_field_cache_included() -> None:
    checked = 0
    for path in sorted(HERE.glob("*/sessions/**/*.jsonl")):
        raw = [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
        for obj, e in zip(raw, _events(path), strict=True):
            if obj["type"] == "token_usage_record":
                assert isinstance(e, cx.TokenUsage)
                u = obj["payload"]["usage"]
                assert e.usage == cx.Usage(
                    u["input_tokens"],
                    u["cached_input_tokens"],
                    u["cache_write_input_tokens"],
                    u["output_tokens"],
                    u["reasoning_output_tokens"],
                    u["total_tokens"],
                )
                assert e.response_id == obj["payload"]["response_id"] == e.id
                checked += 1
    assert checked == 30


def _tool_calls(scenario: Scenario) -> list[tuple[str, str, str, str | None, ToolOutcome]]:
    out = []
    for agent, thread in [("main", scenario.main), *sorted(scenario.children.items())]:
        outputs = {o.call_id: o for o in _of(cx.FunctionCallOutput, thread.events)}
        executions = {
            i.item_id: i for i in _of(cx.ItemCompleted, thread.events) if i.item_type == "CommandExecution"
        }
        for call in _of(cx.FunctionCall, thread.events):
            assert call.call_id is not None and call.name is not None and call.arguments
            output = outputs[call.call_id]
            if call.call_id in executions:  # the structured end says what the output says
                assert executions[call.call_id].exit_code == output.exit_code
            elif call.name == "exec_command":
                assert output.outcome is ToolOutcome.DENIED  # refused before it ran: no execution
            out.append((str(agent), call.call_id, call.name, call.namespace, output.outcome))
    return out


def test_tool_calls_outcomes_denied_apart_from_failed(scenario: Scenario) -> None:
    expected = [
        (
            t["agent"],
            t["id"],
            t["name"],
            t["namespace"],
            ToolOutcome.DENIED
            if "Rejected(" in t["outcome"]
            else ToolOutcome.FAILED
            if t["is_error"]
            else ToolOutcome.OK,
        )
        for t in scenario.check["tool_calls"]
    ]
    assert _tool_calls(scenario) == expected


def test_the_fixtures_hold_denied_failed_and_ok() -> None:
    outcomes = Counter(c[4] for name in SCENARIOS for c in _tool_calls(Scenario(name)))
    assert outcomes[ToolOutcome.DENIED] == 1 and outcomes[ToolOutcome.FAILED] == 3
    assert outcomes[ToolOutcome.OK] > 10


def test_sub_agents_link_to_the_call_that_spawned_them(scenario: Scenario) -> None:
    expected = scenario.check["subagents"]
    assert sorted(scenario.children) == sorted(s["thread_id"] for s in expected)
    spawned = {
        thread: item.item_id
        for item in _of(cx.ItemCompleted, scenario.main.events)
        if item.item_type == "CollabAgentToolCall" and item.tool == "spawn_agent"
        for thread in item.receiver_thread_ids
    }
    (main_turn,) = [t.turn_id for t in _of(cx.TaskStarted, scenario.main.events)] or [None]
    for s in expected:
        child = scenario.children[s["thread_id"]]
        assert child.path.name == s["file"]
        meta = child.meta
        assert (meta.parent_thread_id, meta.nickname, meta.depth, meta.thread_source) == (
            s["parent_thread_id"],
            s["nickname"],
            1,
            "subagent",
        )
        assert spawned[s["thread_id"]] == s["parent_call_id"]
        (started,) = _of(cx.TaskStarted, child.events)
        assert started.parent_turn_id == main_turn  # the child's turn names the turn that spawned it
        usage = child.usage()
        assert (
            len(usage)
            == s["model_calls"]
            == scenario.check["model_calls_rollout"]["subagents"][s["thread_id"]]
        )
        assert sum(u.input_tokens for u in usage) == s["usage"]["input_tokens"]
        assert sum(u.output_tokens for u in usage) == s["usage"]["output_tokens"]


def test_sub_agents_start_and_end_in_the_parents_records(scenario: Scenario) -> None:
    """What the parent's log says of each sub-agent (rule A, parent-emitted): the spawn item names its thread,
    nickname and model; a ``wait`` / ``close_agent`` item and the ``<subagent_notification>`` say it completed.
    Both rollouts name the root thread as their session."""
    expected = {s["thread_id"]: s for s in scenario.check["subagents"]}
    main_thread = scenario.main.meta.thread_id
    assert scenario.main.meta.session_id == main_thread
    items = [i for i in _of(cx.ItemCompleted, scenario.main.events) if i.item_type == "CollabAgentToolCall"]
    spawns = [i for i in items if i.tool == "spawn_agent"]
    assert {t: i.nicknames[t] for i in spawns for t in i.receiver_thread_ids} == {
        t: s["nickname"] for t, s in expected.items()
    }
    assert all(i.model == "gpt-5.5" and i.prompt for i in spawns)
    assert all(not i.final_states for i in spawns)  # pending_init: not an end
    ended = {t: end for i in items if i.tool != "spawn_agent" for t, end in i.final_states.items()}
    assert ended == dict.fromkeys(expected, "completed")
    notified = [n for m in _of(cx.Message, scenario.main.events) if (n := m.notified_thread) is not None]
    assert notified == [(t, "completed") for t in expected]
    for thread in expected:
        assert scenario.children[thread].meta.session_id == main_thread
    assert scenario.main.meta.branch == "main" and scenario.main.meta.commit


def test_compaction(scenario: Scenario) -> None:
    compacted = _of(cx.Compacted, scenario.main.events)
    assert len(compacted) == scenario.check["compactions"]
    assert all(c.replaced_items for c in compacted)
    items = [i for i in _of(cx.ItemCompleted, scenario.main.events) if i.item_type == "ContextCompaction"]
    assert len(items) == len(compacted)


# ---------------------------------------------------------------------------------------------- discovery
def test_default_root_honours_codex_home(tmp_path: Path) -> None:
    assert cx.default_root({"HOME": str(tmp_path)}) == tmp_path / ".codex"
    assert cx.default_root({"HOME": str(tmp_path), "CODEX_HOME": "/srv/codex"}) == Path("/srv/codex")
    assert cx.default_root({"HOME": str(tmp_path), "CODEX_HOME": "~/cx"}) == tmp_path / "cx"


ID = "01a233e6-c884-7793-9b71-fae3014670c6"


def _rollout(root: Path, day: str, name: str) -> Path:
    path = root / "sessions" / day / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"{}\n")
    return path


def test_scan_lists_rollouts_by_thread_id(tmp_path: Path) -> None:
    _rollout(tmp_path, "2026/12/01", f"rollout-2026-12-01T23-18-12-{ID}.jsonl")
    _rollout(tmp_path, "2026/12/02", f"rollout-2026-12-02T01-00-00-{ID.upper()[:-1]}d.jsonl")
    _rollout(tmp_path, "2026/12/02", "rollout-without-an-id.jsonl")
    _rollout(tmp_path, "2026/12/02", "history.jsonl")
    assert [log.session_id for log in cx.scan(tmp_path)] == [ID, ID[:-1] + "d"]
    assert cx.scan(tmp_path / "missing") == []


@pytest.mark.skipif(not hasattr(os, "symlink") or os.name == "nt", reason="symbolic links")
def test_links_out_of_the_root_are_not_followed(tmp_path: Path) -> None:
    root = tmp_path / "codex"
    inside = _rollout(root, "2026/12/01", f"rollout-a-{ID}.jsonl")
    outside = _rollout(tmp_path / "elsewhere", "2026/12/01", f"rollout-b-{ID[:-1]}e.jsonl")
    (root / "sessions" / "2026" / "11").symlink_to(outside.parent, target_is_directory=True)
    (inside.parent / f"rollout-c-{ID[:-1]}f.jsonl").symlink_to(outside)
    (root / "sessions" / "loop").symlink_to(root / "sessions", target_is_directory=True)
    assert [log.path for log in cx.scan(root)] == [inside]


# ---------------------------------------------------------------------------------------------- robustness
def test_bad_lines_and_unknown_kinds() -> None:
    bad = cx.read_line(b'{"payload": {}}', 4, 20, 3)
    assert isinstance(bad, BadLine) and bad.reason is DropReason.MISSING_FIELD
    e = cx.read_line(b'{"type": "event_msg", "payload": {"type": "brand_new"}, "timestamp": "x"}', 0, 9, 1)
    assert type(e) is Event and (e.type, e.time_ns, e.id) == ("event_msg.brand_new", 0, "offset-0")
    # noted on the event it cost; and the kind, not read (said once per CLI version)
    assert [reason for reason, _ in e.dropped] == [DropReason.NOT_READ, DropReason.BAD_TIMESTAMP]
    odd = cx.read_line(b'{"type": "token_usage_record", "payload": [1]}', 0, 9, 1)
    assert isinstance(odd, cx.TokenUsage) and (odd.usage, odd.response_id) == (None, None)


def test_the_reader_never_raises_on_mutated_lines() -> None:
    lines = [
        line
        for path in [
            *sorted(HERE.glob("*/sessions/**/*.jsonl")),
            *sorted(RECORDED.glob("*/sessions/**/*.jsonl")),
        ]
        for line in path.read_bytes().splitlines()
        if line.strip()
    ]
    assert_never_raises(lines, cx.read_line, [cx.Usage])
