"""The committed real-CLI shape captures (``tests/fixtures/cli-shapes``) really have the shape they claim.

Each capture was made by ``python -m tests.realcli.shapes`` (the real Copilot CLI 1.0.102 against the scripted
fake model). These tests read them with plain ``json`` only, so a recapture that no longer shows the shape (a CLI
upgrade, a script change) fails here instead of silently feeding the fold a different session.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

SHAPES_DIR = Path(__file__).parent / "fixtures" / "cli-shapes"
# The shapes tests/realcli/shapes.py captures into this folder (other helpers add other folders).
CLI_SHAPES = (
    "autopilot-cap",
    "autopilot-complete",
    "autopilot-loop",
    "background-shell",
    "compaction-manual",
    "compaction-threshold",
    "denied-tools",
    "fleet",
    "mcp-tools",
    "model-change-resume",
    "plan-to-autopilot",
    "sigint-autopilot",
)
Event = dict[str, Any]


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def events(name: str) -> list[Event]:
    return _jsonl(SHAPES_DIR / name / "events.jsonl")


def stdout(name: str) -> list[dict[str, Any]]:
    return _jsonl(SHAPES_DIR / name / "_capture" / "stdout.jsonl")


def requests(name: str) -> list[dict[str, Any]]:
    return _jsonl(SHAPES_DIR / name / "_capture" / "model-requests.jsonl")


def spans(name: str) -> list[dict[str, Any]]:
    return [o for o in _jsonl(SHAPES_DIR / name / "_capture" / "otel.jsonl") if o.get("type") == "span"]


def meta(name: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads((SHAPES_DIR / name / "_capture" / "meta.json").read_text())
    return result


def of_type(evs: list[Event], kind: str) -> list[Event]:
    return [e for e in evs if e["type"] == kind]


def index_of(evs: list[Event], predicate: Any) -> int:
    return next(i for i, e in enumerate(evs) if predicate(e))


def tool_starts(evs: list[Event], tool: str | None = None) -> list[Event]:
    return [e for e in of_type(evs, "tool.execution_start") if tool is None or e["data"]["toolName"] == tool]


def completes_by_id(evs: list[Event]) -> dict[str, Event]:
    return {e["data"]["toolCallId"]: e for e in of_type(evs, "tool.execution_complete")}


def continuations(evs: list[Event]) -> list[Event]:
    return [e for e in of_type(evs, "user.message") if e["data"].get("isAutopilotContinuation")]


def cli_written_messages(evs: list[Event]) -> list[Event]:
    """``assistant.message`` events the CLI wrote itself: no model call behind them."""
    return [e for e in of_type(evs, "assistant.message") if "model" not in e["data"]]


def autopilot_stopped(name: str) -> list[str]:
    return [o["data"]["reason"] for o in stdout(name) if o["type"] == "session.autopilot_stopped"]


@pytest.mark.parametrize("name", CLI_SHAPES)
def test_capture_is_a_complete_real_cli_session(name: str) -> None:
    evs = events(name)
    info = meta(name)
    assert info["scenario"] == name
    assert info["cli_version"] == "GitHub Copilot CLI 1.0.102."
    assert "only the model is fake" in info["model_backend"]
    assert evs[0]["type"] == "session.start"
    assert evs[0]["data"]["sessionId"] == info["session_id"]
    assert evs[0]["data"]["copilotVersion"] == "1.0.102"
    assert evs[0]["data"]["context"]["cwd"] == info["working_directory"]
    assert evs[-1]["type"] == "session.shutdown"
    assert len(of_type(evs, "session.shutdown")) == len(info["runs"])
    assert len(of_type(evs, "session.resume")) == len(info["runs"]) - 1
    assert all(run["exit_code"] == 0 for run in info["runs"])
    assert [o["type"] for o in stdout(name)].count("result") == len(info["runs"])
    assert spans(name), "the CLI's own OTel export must hold spans"
    # every tool call id is unique: the fake model never replays a step (e.g. after a compaction)
    ids = [e["data"]["toolCallId"] for e in tool_starts(evs)]
    assert len(ids) == len(set(ids))


def test_autopilot_cap_runs_to_its_continuation_cap() -> None:
    evs = events("autopilot-cap")
    assert "--max-autopilot-continues" in meta("autopilot-cap")["runs"][0]["args"]
    assert of_type(evs, "session.mode_changed")[0]["data"] == {
        "previousMode": "interactive",
        "newMode": "autopilot",
    }
    conts = continuations(evs)
    assert len(conts) == 3
    for cont in conts:
        assert cont["data"]["source"] == "autopilot"
        assert cont["data"]["content"] == ""
        assert cont["data"]["turnId"] == "0"
        assert cont["data"]["agentMode"] == "autopilot"
    prompts = of_type(evs, "user.message")
    assert len({u["data"]["interactionId"] for u in prompts}) == len(prompts) == 4
    assert not of_type(evs, "session.task_complete")
    assert not tool_starts(evs)
    assert len(of_type(evs, "assistant.turn_start")) == 4
    assert autopilot_stopped("autopilot-cap") == ["cap_reached"]


def test_autopilot_complete_ends_with_task_complete() -> None:
    evs = events("autopilot-complete")
    done = of_type(evs, "session.task_complete")
    assert [d["data"] for d in done] == [{"summary": "Wrote 42 to result.txt.", "success": True}]
    (call,) = tool_starts(evs, "task_complete")
    assert completes_by_id(evs)[call["data"]["toolCallId"]]["data"]["success"] is True
    # no model call after the task is complete
    at = evs.index(done[0])
    assert not [e for e in evs[at:] if e["type"] in ("assistant.turn_start", "session.usage_record")]
    assert len(continuations(evs)) == 1
    assert len(requests("autopilot-complete")) == len(of_type(evs, "session.usage_record")) == 3
    assert autopilot_stopped("autopilot-complete") == ["task_complete"]


def test_autopilot_loop_repeats_one_bash_call_across_continuations() -> None:
    evs = events("autopilot-loop")
    bash = tool_starts(evs, "bash")
    assert len(bash) >= 30
    assert {json.dumps(b["data"]["arguments"], sort_keys=True) for b in bash} == {
        json.dumps({"command": "echo loop", "description": "Loop again"}, sort_keys=True)
    }
    assert len(continuations(evs)) == 3
    # the calls are spread over the prompt and every continuation (the turn ids restart at "0" in each)
    bounds = [i for i, e in enumerate(evs) if e["type"] == "user.message"] + [len(evs)]
    positions = [evs.index(b) for b in bash]
    per_segment = [sum(1 for p in positions if lo < p < hi) for lo, hi in itertools.pairwise(bounds)]
    assert per_segment == [8, 8, 8, 8]
    assert autopilot_stopped("autopilot-loop") == ["cap_reached"]


def test_fleet_has_background_subagents_notifications_and_cli_written_reads() -> None:
    evs = events("fleet")
    assert meta("fleet")["runs"][0]["args"].count("--fleet") == 1
    started = of_type(evs, "subagent.started")
    assert len(started) == 2
    assert {s["data"]["executionMode"] for s in started} == {"background"}
    tasks = tool_starts(evs, "task")
    assert {t["data"]["arguments"]["mode"] for t in tasks} == {"background"}
    for task in tasks:
        result = completes_by_id(evs)[task["data"]["toolCallId"]]["data"]["result"]["content"]
        assert result.startswith("Agent started in background")
    # each sub-agent ran its own script (marker), with its events tagged by agentId
    child_prompts = [u for u in of_type(evs, "user.message") if "agentId" in u]
    assert sorted(u["data"]["content"].split()[-1] for u in child_prompts) == [
        "[[script:fleeta]]",
        "[[script:fleetb]]",
    ]
    notes = of_type(evs, "system.notification")
    assert [n["data"]["kind"]["type"] for n in notes] == ["agent_idle", "agent_idle"]
    assert {n["data"]["kind"]["agentId"] for n in notes} == {s["agentId"] for s in started}
    written = cli_written_messages(evs)
    assert len(written) == 2
    for message in written:
        for absent in ("model", "apiCallId", "interactionId", "turnId"):
            assert absent not in message["data"]
        (request,) = message["data"]["toolRequests"]
        assert request["name"] == "read_agent"
        assert request["arguments"]["agent_id"] in {s["agentId"] for s in started}
        assert completes_by_id(evs)[request["toolCallId"]]["data"]["success"] is True
    # the CLI-written message follows its notification
    assert evs.index(written[0]) > evs.index(notes[0])


def test_background_shell_notifies_and_the_cli_reads_it() -> None:
    evs = events("background-shell")
    (background, foreground) = tool_starts(evs, "bash")
    assert background["data"]["arguments"]["mode"] == "async"
    completes = completes_by_id(evs)
    assert completes[background["data"]["toolCallId"]]["data"]["result"]["content"].startswith(
        "<command started in background"
    )
    (note,) = of_type(evs, "system.notification")
    assert note["data"]["kind"] == {
        "type": "shell_completed",
        "shellId": "build",
        "exitCode": 0,
        "description": "Build in the background",
    }
    # it finished while the agent worked: after the foreground command had started
    assert evs.index(note) > evs.index(foreground)
    (written,) = cli_written_messages(evs)
    assert evs.index(written) > evs.index(note)
    (request,) = written["data"]["toolRequests"]
    assert request["name"] == "read_bash"
    assert request["arguments"]["shellId"] == "build"
    assert "background build finished" in completes[request["toolCallId"]]["data"]["result"]["content"]


def test_compaction_threshold() -> None:
    evs = events("compaction-threshold")
    (start,) = of_type(evs, "session.compaction_start")
    assert start["data"]["trigger"] == "threshold"
    assert start["data"]["currentTokens"] > start["data"]["tokenLimit"] == 64000
    (complete,) = of_type(evs, "session.compaction_complete")
    assert complete["data"]["success"] is True
    assert complete["data"]["compactionAttemptId"] == start["data"]["compactionAttemptId"]
    assert evs.index(start) < evs.index(complete)
    reqs = requests("compaction-threshold")
    kinds = Counter(r["headers"].get("x-interaction-type") for r in reqs)
    assert kinds["conversation-compaction"] == 1
    # the compaction call has no usage record; every other model call has one
    assert len(of_type(evs, "session.usage_record")) == len(reqs) - 1
    assert [r["step"]["prompt_tokens"] for r in reqs if "prompt_tokens" in r.get("step", {})] == [70000]


def test_compaction_manual_after_resume() -> None:
    evs = events("compaction-manual")
    assert meta("compaction-manual")["runs"][1]["prompt"] == "/compact"
    resumed = index_of(evs, lambda e: e["type"] == "session.resume")
    after = evs[resumed:]
    (start,) = of_type(after, "session.compaction_start")
    assert start["data"]["trigger"] == "manual"
    assert of_type(after, "session.compaction_complete")[0]["data"]["success"] is True
    assert not of_type(after, "user.message")
    assert not of_type(after, "assistant.turn_start")
    model_events = {e["type"] for e in after if e["type"].startswith("model.")}
    assert model_events == {
        "model.turn_started",
        "model.model_call_started",
        "model.model_call_success",
        "model.message",
        "model.response",
        "model.turn_ended",
        "model.messages_snapshot",
    }
    assert not of_type(evs[:resumed], "session.compaction_start")
    assert requests("compaction-manual")[-1]["headers"]["x-interaction-type"] == "conversation-compaction"


def test_plan_then_autopilot_exits_plan_mode_and_completes() -> None:
    evs = events("plan-to-autopilot")
    prompts = [u for u in of_type(evs, "user.message") if not u["data"].get("isAutopilotContinuation")]
    assert [p["data"]["agentMode"] for p in prompts] == ["plan", "plan"]
    assert "[[PLAN]]" in prompts[0]["data"]["transformedContent"]
    modes = [(m["data"]["previousMode"], m["data"]["newMode"]) for m in of_type(evs, "session.mode_changed")]
    assert modes == [("interactive", "plan"), ("plan", "autopilot")]
    # the switch to autopilot happens inside the second prompt, by the approved exit_plan_mode
    switch = index_of(
        evs, lambda e: e["type"] == "session.mode_changed" and e["data"]["newMode"] == "autopilot"
    )
    assert evs.index(prompts[1]) < switch
    (exit_plan,) = tool_starts(evs, "exit_plan_mode")
    result = completes_by_id(evs)[exit_plan["data"]["toolCallId"]]["data"]
    assert result["success"] is True
    assert result["result"]["content"].startswith("Plan approved!")
    assert of_type(evs, "session.task_complete")[0]["data"]["success"] is True
    assert [e["type"] for e in evs].index("session.task_complete") > switch


def test_model_change_on_resume() -> None:
    evs = events("model-change-resume")
    (change,) = of_type(evs, "session.model_change")
    assert change["data"]["source"] == "startup"
    assert (change["data"]["previousModel"], change["data"]["newModel"]) == ("gpt-4.1", "gpt-5-mini")
    resumed = index_of(evs, lambda e: e["type"] == "session.resume")
    second = [i for i, e in enumerate(evs) if e["type"] == "user.message"][1]
    assert resumed < evs.index(change) < second
    models = [r["body"]["model"] for r in requests("model-change-resume")]
    assert models[-1] == "gpt-5-mini"
    assert set(models[:-1]) == {"gpt-4.1"}
    assert {m["data"]["model"] for m in of_type(evs[second:], "assistant.message")} == {"gpt-5-mini"}


def test_mcp_tools_succeed_and_fail_both_ways() -> None:
    evs = events("mcp-tools")
    starts = {e["data"]["toolName"]: e for e in tool_starts(evs)}
    assert set(starts) == {"shapes-echo", "shapes-add", "shapes-fail", "shapes-boom"}
    for name, start in starts.items():
        assert start["data"]["mcpServerName"] == "shapes"
        assert start["data"]["mcpToolName"] == name.removeprefix("shapes-")
        assert start["data"]["mcpTransport"] == "stdio"
    completes = completes_by_id(evs)
    outcome = {name: completes[s["data"]["toolCallId"]]["data"] for name, s in starts.items()}
    assert outcome["shapes-echo"]["result"]["content"] == "hello from mcp"
    assert outcome["shapes-add"]["result"]["structuredContent"] == {"sum": 5}
    assert outcome["shapes-fail"]["success"] is False
    assert "fail: the tool refused" in outcome["shapes-fail"]["error"]["message"]
    assert outcome["shapes-boom"]["success"] is False
    assert "MCP error -32000" in outcome["shapes-boom"]["error"]["message"]
    assert "shapes-echo" in requests("mcp-tools")[0]["body"]["tools"]


def test_denied_and_excluded_tools() -> None:
    evs = events("denied-tools")
    args = meta("denied-tools")["runs"][0]["args"]
    assert {"--deny-tool=shell(rm)", "--deny-tool=write", "--excluded-tools=glob"} <= set(args)
    completes = completes_by_id(evs)
    denied = {
        s["data"]["toolName"]: completes[s["data"]["toolCallId"]]["data"]
        for s in tool_starts(evs)
        if completes[s["data"]["toolCallId"]]["data"].get("error", {}).get("code") == "denied"
    }
    assert set(denied) == {"bash", "create"}
    assert "`shell(rm)`" in denied["bash"]["error"]["message"]
    assert "`write`" in denied["create"]["error"]["message"]
    assert all(d["success"] is False for d in denied.values())
    (glob,) = tool_starts(evs, "glob")
    assert completes[glob["data"]["toolCallId"]]["data"]["error"] == {
        "message": "Tool 'glob' does not exist.",
        "code": "failure",
    }
    assert "glob" not in requests("denied-tools")[0]["body"]["tools"]
    allowed = [s for s in tool_starts(evs, "bash") if s["data"]["arguments"]["command"] == "echo still here"]
    assert completes[allowed[0]["data"]["toolCallId"]]["data"]["success"] is True


def test_sigint_during_an_autopilot_continuation() -> None:
    evs = events("sigint-autopilot")
    assert meta("sigint-autopilot")["runs"][0]["interrupt"]["on_tool_call"] == "call_apint_1_0"
    (cont,) = continuations(evs)
    (tool,) = tool_starts(evs, "bash")
    assert tool["data"]["toolCallId"] == "call_apint_1_0"
    assert evs.index(cont) < evs.index(tool)
    assert not of_type(evs, "tool.execution_complete")
    (abort,) = of_type(evs, "abort")
    assert evs.index(abort) > evs.index(tool)
    assert isinstance(abort["data"]["reason"], str)
    assert autopilot_stopped("sigint-autopilot") == ["aborted"]


# ---------------------------------------------------------------------------------------------- agent-loop features
# Shapes of issue 23 (hooks, skills, a custom agent, reasoning, failed calls, Ctrl-C mid-stream, an import).
FEATURE_SHAPES = (
    "hooks",
    "skill-agent",
    "skill-plugin",
    "skill-user",
    "custom-agent",
    "reasoning",
    "error-context",
    "error-ratelimit",
    "ctrlc-stream",
    "imported",
    "sandbox",
    "usage-out-of-range",
    "extension-tools",
)


@pytest.mark.parametrize("name", FEATURE_SHAPES)
def test_feature_capture_is_a_real_cli_session(name: str) -> None:
    evs = events(name)
    info = meta(name)
    assert info["scenario"] == name
    assert info["cli_version"] == "GitHub Copilot CLI 1.0.102."
    assert evs[0]["type"] == "session.start"
    assert evs[0]["data"]["sessionId"] == info["session_id"]
    assert evs[-1]["type"] == "session.shutdown"
    # an import writes no shutdown; every -p run writes one
    prompt_runs = [run for run in info["runs"] if "import" not in run]
    assert len(of_type(evs, "session.shutdown")) == len(prompt_runs)


def test_hooks_pairs_denial_timeout_and_warning() -> None:
    evs = events("hooks")
    starts = {e["data"]["hookInvocationId"]: e for e in of_type(evs, "hook.start")}
    ends = {e["data"]["hookInvocationId"]: e for e in of_type(evs, "hook.end")}
    assert starts.keys() == ends.keys()
    assert [e["data"]["hookType"] for e in of_type(evs, "hook.start")] == [
        "sessionStart",
        "userPromptSubmitted",
        "preToolUse",
        "preToolUse",
        "postToolUse",
        "agentStop",
        "sessionEnd",
    ]
    failed = [e for e in ends.values() if e["data"]["success"] is False]
    assert len(failed) == 1
    assert failed[0]["data"]["error"]["message"].startswith("HookTimeoutError")
    denied = completes_by_id(evs)["call_hooks_0_0"]["data"]
    assert denied["error"]["code"] == "denied"
    assert denied["error"]["message"].startswith("Denied by preToolUse hook")
    assert [w["data"]["warningType"] for w in of_type(evs, "session.warning")] == ["hook"]
    # the user prompt hook runs before the user.message it belongs to
    assert index_of(evs, lambda e: e["type"] == "hook.start") < index_of(
        evs, lambda e: e["type"] == "user.message"
    )


def test_skill_agent_invokes_a_project_skill_with_the_skill_tool() -> None:
    evs = events("skill-agent")
    (skill,) = of_type(evs, "skill.invoked")
    assert skill["data"]["name"] == "release-notes"
    assert skill["data"]["source"] == "project"
    assert tool_starts(evs, "skill")


def test_a_plugin_skill_names_its_plugin() -> None:
    (skill,) = of_type(events("skill-plugin"), "skill.invoked")
    assert (skill["data"]["source"], skill["data"]["pluginName"]) == ("plugin", "shapes-tools")
    assert skill["data"]["trigger"] == "agent-invoked"


def test_a_user_invoked_skill_is_written_before_its_user_message() -> None:
    evs = events("skill-user")
    skill = index_of(evs, lambda e: e["type"] == "skill.invoked")
    assert evs[skill]["data"]["trigger"] == "user-invoked"
    message = index_of(evs, lambda e: e["type"] == "user.message")
    assert skill < message
    assert evs[message]["data"]["content"].startswith("/notes-writer for version 2")
    assert meta("skill-user")["runs"][0]["tui"]


def test_custom_agent_is_selected_before_the_prompt() -> None:
    evs = events("custom-agent")
    selected = index_of(evs, lambda e: e["type"] == "subagent.selected")
    assert evs[selected]["data"]["agentName"] == "reviewer"
    assert "agentId" not in evs[selected]
    assert selected < index_of(evs, lambda e: e["type"] == "user.message")


def test_reasoning_tokens_and_effort_are_in_the_log() -> None:
    evs = events("reasoning")
    assert evs[0]["data"]["reasoningEffort"] == "high"
    usage = [e["data"]["usage"] for e in of_type(evs, "session.usage_record")]
    assert [u["reasoningTokens"] for u in usage] == [25, 10, 5]
    assert [u["cacheReadTokens"] for u in usage] == [1000, 1100, 0]
    (change,) = of_type(evs, "session.model_change")
    assert change["data"]["reasoningEffort"] == "low"


@pytest.mark.parametrize(("name", "status"), [("error-context", 400), ("error-ratelimit", 429)])
def test_failed_model_call_has_no_usage_and_a_status(name: str, status: int) -> None:
    evs = events(name)
    assert not of_type(evs, "session.usage_record")
    (error,) = of_type(evs, "session.error")
    assert error["data"]["statusCode"] == status
    assert index_of(evs, lambda e: e["type"] == "assistant.turn_end") < evs.index(error)
    assert all(run["exit_code"] == 1 for run in meta(name)["runs"])


def test_ctrl_c_mid_stream_ends_the_turn_then_aborts() -> None:
    evs = events("ctrlc-stream")
    types = [e["type"] for e in evs]
    assert len(of_type(evs, "assistant.turn_start")) == 2
    assert len(of_type(evs, "session.usage_record")) == 1  # none for the cut call
    # the cut turn's end and the abort, in either order (runs differ), then the shutdown
    assert sorted(types[-3:-1]) == ["abort", "assistant.turn_end"]


def test_imported_transcript_has_no_turns_then_a_real_prompt() -> None:
    evs = events("imported")
    resume = index_of(evs, lambda e: e["type"] == "session.resume")
    imported = evs[1:resume]
    assert evs[0]["data"]["startTime"] == "2026-11-20T09:00:00.000Z"
    assert [e["type"] for e in imported].count("user.message") == 2
    assert [e["type"] for e in imported].count("assistant.message") == 3
    assert not [e for e in imported if e["type"] in ("assistant.turn_start", "session.usage_record")]
    assert of_type(evs[resume:], "assistant.turn_start")


def test_the_cli_writes_a_count_beyond_two_to_the_53_as_is() -> None:
    evs = events("usage-out-of-range")
    (usage, *_) = [e["data"]["usage"] for e in of_type(evs, "session.usage_record")]
    assert usage["outputTokens"] == 2**60 > 2**53
    assert of_type(evs, "session.error")


def test_sandbox_without_bubblewrap_runs_nothing_but_says_sandboxed() -> None:
    (done,) = of_type(events("sandbox"), "tool.execution_complete")
    assert done["data"]["sandboxed"] is True
    assert done["data"]["success"] is True and done["data"]["shellExecution"]["exitCode"] == 1
    assert "Sandboxing is enabled but not supported" in done["data"]["result"]["content"]
