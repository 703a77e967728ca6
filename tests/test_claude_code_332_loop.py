"""Claude Code 2.1.332's new records in the loop's terms (issue 31): refusals, failed attempts, a fork's copied
history, queued prompts, the session's title and the CLI's own accounting.

Each test feeds a real 2.1.332 recording (``tests/fixtures/other-agents/claude-code-2.1.332``, its README says each
record kind with a real line) through the real pipeline; what it expects comes from the recorder's ``checks.json``
(written from its scripts and runs, never from the session files) or from the one record the point is about.
"""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from copilot_otel.cli import main
from copilot_otel.model import ids
from copilot_otel.model.activity import AgentRun, ModelCall, PromptRun, Record, ToolCall, Turn, UserMessage
from copilot_otel.model.timestamps import timestamp_ns
from copilot_otel.pipeline import FoldSettings, Pipeline
from copilot_otel.settings.content import ContentKind, ContentPolicy
from copilot_otel.sources import LogKind
from copilot_otel.sources.claude_code import reader as cc
from copilot_otel.sources.sessions import SessionFile
from tests.conftest import replay_into
from tests.otlp_receiver import OtlpReceiver
from tests.test_claude_code_332 import SCENARIOS, _first_prompt_id, _fold, _main_expectations, _session_logs

# Who refused each refused call, as each recording's tool_result record says it (``permissionDecision``).
REFUSED_BY = {
    "plan-mode-refusal": {"toolu_plan_0_0": "plan mode", "toolu_plan_1_0": "auto-mode classifier"},
    "hook-refusal": {"toolu_hook_0_0": "PreToolUse hook"},
}


def _records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def test_a_refused_call_is_denied_and_says_who_refused() -> None:
    """[plan-mode-refusal], [hook-refusal] Each call ``checks.json`` meant to be refused is denied (it never ran:
    ``error.type`` ``denied``, not a tool failure), and says who refused it: the plan mode, the auto-mode
    classifier, the project's PreToolUse hook. The calls meant to run did, and say nothing of the kind."""
    for name, refused_by in REFUSED_BY.items():
        s = SCENARIOS[name]
        assert {call for call, (_, expect) in s.tools.items() if expect == "denied"} == set(refused_by)
        (path,) = _session_logs(s.root).values()
        tools = {r.call_id: r for r in _fold(path) if isinstance(r, ToolCall)}
        for call_id, (_, expect) in s.tools.items():
            tool = tools[call_id]
            if expect == "denied":
                assert (tool.success, tool.error_type, tool.denied_by) == (
                    False,
                    "denied",
                    refused_by[call_id],
                )
                assert tool.message and "denied by" not in tool.message  # the refusal's own words
            else:
                assert (tool.success, tool.error_type, tool.denied_by) == (True, None, None)


def test_replay_exports_a_refusal_as_denied(receiver: OtlpReceiver) -> None:
    """[plan-mode-refusal] ``replay``: each refused call's span is an ERROR with ``error.type`` ``denied``, who
    refused it on the span, and Claude Code's own ``decision_type`` ``reject``."""
    assert replay_into(receiver, SCENARIOS["plan-mode-refusal"].root) == 0
    spans = {
        span["attributes"]["gen_ai.tool.call.id"]: span
        for span in receiver.spans()
        if span["name"].startswith("execute_tool ")
    }
    for call_id, who in REFUSED_BY["plan-mode-refusal"].items():
        attrs = spans[call_id]["attributes"]
        assert spans[call_id]["status_code"] == 2
        assert attrs["error.type"] == "denied"
        assert attrs["copilot_otel.tool.denied_by"] == who
        assert attrs["decision_type"] == "reject"


def test_a_model_call_is_named_by_its_request() -> None:
    """2.1.332 writes no ``requestId``: each model call's response id is its replies' ``requestRef`` (the
    ``api-request`` record the CLI wrote for it), one per call, in every session and sub-agent file (a fork's
    copied replies are its parent's calls)."""
    for s in SCENARIOS.values():
        for log in cc.scan(s.root):
            refs = {
                r["message"]["id"]: r["requestRef"]  # type: ignore[index]
                for r in _records(log.path)
                if r.get("type") == "assistant"
                and r["message"]["model"] != "<synthetic>"  # type: ignore[index]
                and "requestSessionId" not in r  # a fork's copy of its parent's replies: the parent's calls
            }
            calls = {r.response_id for r in _fold(log.path) if isinstance(r, ModelCall) and r.attempt is None}
            assert calls == set(refs.values()) and None not in calls, log.path.name


def test_each_failed_attempt_is_a_failed_call_of_its_own(
    receiver: OtlpReceiver, capsys: pytest.CaptureFixture[str]
) -> None:
    """[api-errors-retried] Each request the server answered with an HTTP error (``checks.json``: a 429, then a
    500) is one ERROR chat span, ``error.type`` its status, with its attempt number, under the span of the call it
    was an attempt of (the call the retry answered, which starts with it); the answered calls are as before; the
    metrics count each retry by model and status, for Claude Code; ``show`` draws each under its call."""
    s = SCENARIOS["api-errors-retried"]
    requests: list[dict[str, object]] = s.checks["requests"]  # type: ignore[assignment]
    failed = [r for r in requests if r["http_error"] is not None]
    assert [r["http_error"] for r in failed] == [429, 500]
    (path,) = _session_logs(s.root).values()
    calls = [r for r in _fold(path) if isinstance(r, ModelCall)]
    attempts = [c for c in calls if c.attempt is not None]
    assert [(c.error_type, c.attempt, c.outcome.value) for c in attempts] == [
        ("429", 1, "error"),
        ("500", 1, "error"),
    ]
    answered = [c for c in calls if c.attempt is None]
    assert [c.outcome.value for c in answered] == ["ok", "ok"] == ["ok"] * s.answered["retry"]
    for attempt, call in zip(attempts, answered, strict=True):
        assert attempt.parent_span_id == call.span_id
        assert call.start_ns <= attempt.start_ns < attempt.end_ns <= call.end_ns

    assert replay_into(receiver, s.root) == 0
    chats = [span for span in receiver.spans() if span["name"].startswith("chat ")]
    errors = sorted(
        (span["attributes"]["error.type"], span["attributes"]["copilot_otel.chat.attempt"])
        for span in chats
        if span["status_code"] == 2
    )
    assert errors == [("429", 1), ("500", 1)]
    retries = sorted(
        (
            p["attributes"]["error.type"],
            p["attributes"]["gen_ai.request.model"],
            p["attributes"]["copilot_otel.agent"],
        )
        for p in receiver.metrics()
        if p["name"] == "copilot_otel.model_call.retries"
        for _ in range(int(p["value"]))
    )
    assert retries == [("429", "claude-opus-5-5", "claude-code"), ("500", "claude-opus-5-5", "claude-code")]
    capsys.readouterr()
    assert main(["show", path.stem, "--claude-code-home", str(s.root), "--agents", "claude-code"]) == 0
    assert capsys.readouterr().out.count("(attempt 1)") == 2


def _fold_with_prompts(path: Path) -> list[Record]:
    """The file folded with prompts captured (the texts the checks name)."""
    settings = FoldSettings(content=ContentPolicy(enabled=frozenset({ContentKind.PROMPTS})))
    fold = Pipeline.for_session(SessionFile.from_path(path), settings, project=False)
    records = [r for step in fold.feed_file(path) for r in step.records]
    return [*records, *fold.close("file_ended").records]


def test_queued_prompts_steer_the_running_prompt_when_delivered() -> None:
    """[queued-prompts] The two messages ``checks.json`` says were queued while the Bash call ran are steering of
    the one human prompt, in the order sent, dated when delivered (after the tool result they follow, before the
    call that reads them, never at their earlier enqueue time); each turn begins after the one before it, and the
    prompt is named by what started it."""
    s = SCENARIOS["queued-prompts"]
    (path,) = _session_logs(s.root).values()
    records = _fold_with_prompts(path)
    (run,) = [r for r in records if isinstance(r, PromptRun)]
    assert run.human and run.input_text == s.checks["human_prompts"][0]  # type: ignore[index]
    steering = [n for n in run.notes if isinstance(n, UserMessage) and not n.opening]
    assert [n.content for n in steering] == s.checks["queued_prompts"]
    assert all(n.source == "steering" for n in steering)
    (bash,) = [r for r in records if isinstance(r, ToolCall) and r.call_id == "toolu_queue1_0_0"]
    calls = sorted((r for r in records if isinstance(r, ModelCall)), key=lambda r: r.start_ns)
    reads = next(c for c in calls if c.start_ns >= bash.end_ns)  # the call after the tool: it reads them
    assert all(bash.end_ns <= n.time_ns <= reads.start_ns for n in steering)
    turns = [r for r in records if isinstance(r, Turn)]
    assert [t.start_ns for t in turns] == sorted(t.start_ns for t in turns)
    assert all(a.end_ns <= b.start_ns for a, b in pairwise(turns))


def test_a_fork_exports_its_own_work_once_and_links_to_its_parent(
    receiver: OtlpReceiver, capsys: pytest.CaptureFixture[str]
) -> None:
    """[fork] The fork's file holds a copy of its parent's history (the README): the copy is the parent's, so the
    fork's file gives only its own prompt's work (the calls answered for its script, its tool, its tokens), one
    trace that starts at its own prompt and whose root links to the parent's prompt; ``replay`` of both sessions
    gives one chat span per answered request and each tool call once; ``show --json`` says the link too."""
    s = SCENARIOS["fork"]
    logs = _session_logs(s.root)
    parent, fork = logs[s.sessions[0]], logs[s.sessions[1]]
    lines = _records(fork)
    own_start = next(r for r in lines if r.get("type") == "user" and r["uuid"] not in _uuids(parent))
    copied = [r for r in lines if r.get("uuid") in _uuids(parent)]
    assert copied and all(r["type"] in ("user", "attachment", "assistant") for r in copied)

    records = _fold(fork)
    calls, tools = _main_expectations(s, ["fork2"])
    model_calls = [r for r in records if isinstance(r, ModelCall)]
    assert len(model_calls) == calls
    assert {r.call_id: r.success for r in records if isinstance(r, ToolCall)} == tools
    replies: list[Any] = [
        r["message"] for r in lines if r.get("type") == "assistant" and "requestSessionId" not in r
    ]
    own_output = sum({m["id"]: m["usage"]["output_tokens"] for m in replies}.values())
    assert sum(c.usage.output or 0 for c in model_calls) == own_output
    (run,) = [r for r in records if isinstance(r, PromptRun)]
    assert run.trace_id == ids.trace_id(fork.stem, str(own_start["promptId"]))
    assert run.start_ns == min(r.start_ns for r in records if hasattr(r, "start_ns"))
    assert run.copied_records == len(copied)
    parent_prompt = _first_prompt_id(parent)
    assert run.continues == (
        ids.trace_id(parent.stem, parent_prompt),
        ids.span_id(parent.stem, "root", parent_prompt),
    )

    assert replay_into(receiver, s.root) == 0
    spans = receiver.spans()
    assert len([sp for sp in spans if sp["name"].startswith("chat ")]) == sum(s.answered.values())
    tool_ids = [
        sp["attributes"]["gen_ai.tool.call.id"] for sp in spans if sp["name"].startswith("execute_tool ")
    ]
    assert sorted(tool_ids) == sorted(s.tools)
    roots = {sp["trace_id"]: sp for sp in spans if sp["parent_span_id"] is None}
    (link,) = roots[f"{run.trace_id:032x}"]["links"]
    linked = roots[link["trace_id"]]  # the parent's prompt, exported from the parent's file
    assert linked["span_id"] == link["span_id"]
    assert linked["attributes"]["gen_ai.conversation.id"] == parent.stem
    capsys.readouterr()
    assert (
        main(["show", fork.stem, "--json", "--claude-code-home", str(s.root), "--agents", "claude-code"]) == 0
    )
    shown = json.loads(capsys.readouterr().out)["spans"]
    assert [sp["links"] for sp in shown if sp["parent_span_id"] is None] == [
        [{"trace_id": link["trace_id"], "span_id": link["span_id"]}]
    ]


def _uuids(path: Path) -> set[object]:
    return {r.get("uuid") for r in _records(path)} - {None}


def _last(path: Path, kind: str) -> dict[str, Any]:
    return [r for r in _records(path) if r.get("type") == kind][-1]


def test_the_sessions_own_title_and_accounting_in_show_and_report(capsys: pytest.CaptureFixture[str]) -> None:
    """[titled-session] The name given with ``-n`` (``checks.json``'s argv) is the session's title in ``show``'s
    listing and heading and in ``report session``'s row; the CLI's own accounting (its last ``cost-state``) is
    shown beside our sums: its cost in the heading and as ``cli_cost_usd`` in the report's row."""
    s = SCENARIOS["titled-session"]
    argv: list[str] = s.checks["runs"][0]["argv"]  # type: ignore[index]
    title = argv[argv.index("-n") + 1]
    (path,) = _session_logs(s.root).values()
    cost = _last(path, "cost-state")["totalCostUSD"]
    home = ["--claude-code-home", str(s.root), "--agents", "claude-code"]

    # The listing as a document: its table is as wide as the terminal (80 columns under xdist, which cuts titles).
    assert main(["show", *home, "--json"]) == 0
    (row,) = [r for r in json.loads(capsys.readouterr().out)["sessions"] if r["session_id"] == path.stem]
    assert row["title"] == title
    assert main(["show", path.stem, *home]) == 0
    heading = " ".join(capsys.readouterr().out.split("\n\n")[0].split())
    assert heading.startswith(f"Session {path.stem} {title}")
    assert f"claude-code's own accounting: ${cost:,.4f}" in heading and "· ours: " in heading
    assert main(["report", "session", *home, "--json"]) == 0
    (report_row,) = json.loads(capsys.readouterr().out)["rows"]
    assert (report_row["title"], report_row["cli_cost_usd"]) == (title, round(cost, 6))


def test_the_sessions_title_is_on_its_spans_when_prompts_are_captured(
    receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """[titled-session] The title is exported as Copilot CLI's is: on the prompt's root span (and as Langfuse's
    trace name) when prompts may be captured, and not otherwise."""
    s = SCENARIOS["titled-session"]
    argv: list[str] = s.checks["runs"][0]["argv"]  # type: ignore[index]
    title = argv[argv.index("-n") + 1]
    assert replay_into(receiver, s.root) == 0
    (root,) = [sp for sp in receiver.spans() if sp["parent_span_id"] is None]
    assert "copilot_otel.session.title" not in root["attributes"]
    receiver.clear()
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    assert replay_into(receiver, s.root) == 0
    (root,) = [sp for sp in receiver.spans() if sp["parent_span_id"] is None]
    assert root["attributes"]["copilot_otel.session.title"] == title
    assert root["attributes"]["langfuse.trace.name"] == title


@pytest.mark.parametrize("name", ["background-subagent", "interactive-subagent", "parallel-subagents"])
def test_a_background_subagents_report_belongs_to_the_prompt_that_started_it(
    name: str, receiver: OtlpReceiver
) -> None:
    """[background-subagent], [interactive-subagent], [parallel-subagents] One human prompt (``checks.json``), one
    trace: the ``<task-notification>`` records (each under a new ``promptId``) are messages injected into the
    prompt that started the sub-agents, whose trace holds every main-agent call (the one answering them included,
    counted among its turns); the prompt ends, complete, at that last answer, after every sub-agent's work; each
    sub-agent's span ends where its own work ends (its file's last reply)."""
    s = SCENARIOS[name]
    (path,) = _session_logs(s.root).values()
    records = _fold(path)
    (run,) = [r for r in records if isinstance(r, PromptRun)]
    assert len(s.checks["human_prompts"]) == 1  # type: ignore[arg-type]
    assert run.human and run.outcome == "completed"
    calls = [r for r in records if isinstance(r, ModelCall)]
    assert len(calls) == sum(s.answered[script] for script in s.main_scripts) == run.turns_total
    assert all(c.trace_id == run.trace_id for c in calls)
    assert run.end_ns == max(c.end_ns for c in calls)
    reports = [n for n in run.notes if isinstance(n, UserMessage) and n.source == "task-notification"]
    notifications = [
        r for r in _records(path) if r.get("type") == "user" and r.get("turnOrigin") == "task_notification"
    ]
    assert len(reports) == len(notifications) == len(s.sub_scripts)
    for log in cc.scan(s.root):
        if log.kind is LogKind.SUBAGENT:
            (agent,) = [r for r in _fold(log.path) if isinstance(r, AgentRun)]
            last_reply = [r for r in _records(log.path) if r.get("type") == "assistant"][-1]
            assert agent.end_ns == timestamp_ns(str(last_reply["timestamp"]), [])
            assert agent.trace_id == run.trace_id and agent.end_ns <= run.end_ns

    assert replay_into(receiver, s.root) == 0
    roots = [sp for sp in receiver.spans() if sp["parent_span_id"] is None]
    assert [root["trace_id"] for root in roots] == [f"{run.trace_id:032x}"]


def test_a_loop_with_background_subagents_pending_has_not_finished(tmp_path: Path) -> None:
    """[interactive-subagent] ``turn_duration`` says how many background sub-agents of the loop still run
    (``pendingBackgroundAgentCount``): the prompt is not finished there even when the ``Agent`` call's result does not
    say it launched one (here its ``isAsync`` / ``status`` taken out of a copy of the real log): one trace, which
    ends at the answer to the sub-agent's report."""
    s = SCENARIOS["interactive-subagent"]
    (path,) = _session_logs(s.root).values()
    lines = []
    for line in path.read_bytes().splitlines():
        obj = json.loads(line)
        result = obj.get("toolUseResult")
        if isinstance(result, dict) and result.pop("isAsync", None) is not None:
            result.pop("status", None)
            line = json.dumps(obj).encode()
        lines.append(line)
    assert lines != path.read_bytes().splitlines()
    copy = tmp_path / path.name
    copy.write_bytes(b"\n".join(lines) + b"\n")
    records = _fold(copy)
    (run,) = [r for r in records if isinstance(r, PromptRun)]
    assert run.human and run.outcome == "completed"
    assert run.end_ns == max(r.end_ns for r in records if isinstance(r, ModelCall))
