"""The sessions ``tests/otheragents/record.py`` recorded from the real CLIs: what the shared set lacks.

A resumed session (two prompts in one log), a runaway (the same call 25 times), an abort mid-tool (SIGINT) and a
sub-agent whose tools fail, for Claude Code and Codex CLI. Each scenario's ``checks.json`` was written by the
recorder from its scripts and its runs (ids, intended outcomes, requests answered, exit codes, signals), never from
the CLI's files; here the readers must find those facts in the files.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from copilot_otel.model.inputs import Event
from copilot_otel.sources import LogKind, ToolOutcome
from copilot_otel.sources.claude_code import reader as cc
from copilot_otel.sources.codex import reader as cx
from tests.conftest import FIXTURES
from tests.other_agents import views

HERE = FIXTURES / "other-agents" / "recorded"
CASES = sorted((p.parent.parent.name, p.parent.name) for p in HERE.glob("*/*/checks.json"))
OUTCOMES = {"ok": ToolOutcome.OK, "failed": ToolOutcome.FAILED, "interrupted": ToolOutcome.INTERRUPTED}


def test_every_scenario_of_both_clis_is_there() -> None:
    expected = {"resumed", "runaway", "abort-mid-tool", "subagent-tools-fail", "retries-exhausted"}
    assert {(cli, s) for cli, s in CASES} == {(cli, s) for cli in ("claude-code", "codex") for s in expected}


class Recording:
    def __init__(self, cli: str, scenario: str) -> None:
        self.cli = cli
        self.root = HERE / cli / scenario
        self.check: dict[str, Any] = json.loads((self.root / "checks.json").read_text(encoding="utf-8"))
        self.module = cc if cli == "claude-code" else cx
        self.logs = self.module.scan(self.root)
        self.files = {log.path: views(log.path, self.module.read_line) for log in self.logs}

    @property
    def events(self) -> list[Event]:
        return [e for events in self.files.values() for e in events]

    def outcomes(self) -> dict[str, tuple[str | None, ToolOutcome]]:
        """Each tool call's id → (name, outcome), over every file of the session."""
        out: dict[str, tuple[str | None, ToolOutcome]] = {}
        if self.cli == "claude-code":
            names = {
                u.id: u.name for e in self.events if isinstance(e, cc.AssistantRecord) for u in e.tool_uses
            }
            for e in self.events:
                if isinstance(e, cc.UserRecord):
                    for r in e.tool_results:
                        assert r.tool_use_id is not None
                        out[r.tool_use_id] = (names.get(r.tool_use_id), r.outcome)
        else:
            names = {e.call_id: e.name for e in self.events if isinstance(e, cx.FunctionCall)}
            for e in self.events:
                if isinstance(e, cx.FunctionCallOutput):
                    assert e.call_id is not None
                    out[e.call_id] = (names.get(e.call_id), e.outcome)
        return out

    def model_calls(self, script: str) -> int:
        """The model calls the files hold for one script (the fake names each reply after its script)."""
        if self.cli == "claude-code":
            return len(
                {
                    e.message_id
                    for e in self.events
                    if isinstance(e, cc.AssistantRecord) and (e.message_id or "").startswith(f"msg_{script}_")
                }
            )
        return sum(
            1
            for e in self.events
            if isinstance(e, cx.TokenUsage) and (e.response_id or "").startswith(f"resp_{script}_")
        )


@pytest.fixture(params=CASES, ids=["/".join(c) for c in CASES])
def rec(request: pytest.FixtureRequest) -> Recording:
    return Recording(*request.param)


def test_discovery_and_prompts(rec: Recording) -> None:
    assert sorted(str(p.relative_to(rec.root)) for p in rec.files) == sorted(
        f for f in rec.check["files"] if f.endswith(".jsonl")
    )
    main = [
        log.path
        for log in rec.logs
        if log.kind is LogKind.SESSION and log.session_id == rec.check["session_id"]
    ]
    assert len(main) == 1, "one log per session: a resume appends to it"
    events = rec.files[main[0]]
    if rec.cli == "claude-code":
        prompts = [e.prompt for e in events if isinstance(e, cc.QueueOperation) and e.prompt]
    else:
        prompts = [
            e.plain_text for e in events if isinstance(e, cx.Message) and e.role == "user" and not e.harness
        ]
        assert len([e for e in events if isinstance(e, cx.TaskStarted)]) == len(prompts)
        assert len([e for e in events if isinstance(e, cx.SessionMeta)]) == 1  # a resume writes none
    assert prompts == rec.check["human_prompts"]


def test_tool_calls_end_as_scripted(rec: Recording) -> None:
    outcomes = rec.outcomes()
    expected = {t["id"]: (t["name"], OUTCOMES[t["expect"]]) for t in rec.check["scripted_tool_calls"]}
    assert all(t["answered"] for t in rec.check["scripted_tool_calls"])
    assert outcomes == expected


def test_model_calls_are_the_requests_answered(rec: Recording) -> None:
    for script, answered in rec.check["requests_answered"].items():
        assert rec.model_calls(script) == answered, script


def test_runaway_is_the_same_call_25_times() -> None:
    for cli in ("claude-code", "codex"):
        rec = Recording(cli, "runaway")
        if cli == "claude-code":
            calls = [
                (u.name, json.dumps(u.input))
                for e in rec.events
                if isinstance(e, cc.AssistantRecord)
                for u in e.tool_uses
            ]
        else:
            calls = [(e.name, str(e.arguments)) for e in rec.events if isinstance(e, cx.FunctionCall)]
        assert len(calls) == 25 and len(set(calls)) == 1, cli


def test_an_abort_mid_tool_is_in_the_log() -> None:
    claude = Recording("claude-code", "abort-mid-tool")
    assert [r["signal"] for r in claude.check["runs"]] == ["SIGINT"]
    kinds = [e.kind for e in claude.events if isinstance(e, cc.UserRecord)]
    assert kinds[-2:] == [cc.UserKind.TOOL_RESULTS, cc.UserKind.INTERRUPT]
    codex = Recording("codex", "abort-mid-tool")
    (aborted,) = [e for e in codex.events if isinstance(e, cx.TurnAborted)]
    (started,) = [e for e in codex.events if isinstance(e, cx.TaskStarted)]
    assert (aborted.turn_id, aborted.reason) == (started.turn_id, "interrupted")
    assert not [e for e in codex.events if isinstance(e, cx.TaskComplete)]
    (execution,) = [
        e for e in codex.events if isinstance(e, cx.ItemCompleted) and e.item_type == "CommandExecution"
    ]
    # the command's own end comes after the turn's (in two recordings: exit -1, then 137)
    assert execution.status == "failed" and execution.exit_code not in (None, 0)
    assert codex.events.index(execution) > codex.events.index(aborted)


def test_a_sub_agent_whose_tools_fail_links_to_its_call() -> None:
    claude = Recording("claude-code", "subagent-tools-fail")
    (sub,) = claude.check["subagents"]
    (log,) = [log for log in claude.logs if log.kind is LogKind.SUBAGENT]
    meta = cc.read_meta(log.path)
    assert meta is not None and meta.tool_use_id == sub["spawned_by"]
    codex = Recording("codex", "subagent-tools-fail")
    (sub,) = codex.check["subagents"]
    metas = [e for e in codex.events if isinstance(e, cx.SessionMeta)]
    (child,) = [m for m in metas if m.parent_thread_id == codex.check["session_id"]]
    spawned = {
        e.item_id: e.receiver_thread_ids
        for e in codex.events
        if isinstance(e, cx.ItemCompleted)
        and e.item_type == "CollabAgentToolCall"
        and e.tool == "spawn_agent"
    }
    assert spawned == {sub["spawned_by"]: (child.thread_id,)}


def test_retries_that_run_out_end_the_prompt_with_the_error() -> None:
    claude = Recording("claude-code", "retries-exhausted")
    assert claude.check["http_errors_sent"] == {"exhausted": 11}  # 1 + 10 retries
    assert [r["exit_code"] for r in claude.check["runs"]] == [1]
    (failed,) = [e for e in claude.events if isinstance(e, cc.AssistantRecord) and e.api_error]
    assert (failed.synthetic, failed.api_error_status, failed.error) == (True, 429, "rate_limit")
    assert failed.usage is not None and failed.usage.input_tokens == 0  # no model call
    codex = Recording("codex", "retries-exhausted")
    assert codex.check["http_errors_sent"] == {"exhausted": 3}
    (end,) = [e for e in codex.events if isinstance(e, cx.TaskComplete)]
    assert (end.error_kind, end.error_status) == ("response_too_many_failed_attempts", 429)
    assert end.error_message is not None and "429" in end.error_message
