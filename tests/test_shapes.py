"""Every session shape the real CLI writes, checked against its own raw log.

The fixtures under ``tests/fixtures/cli-shapes`` were written by the real Copilot CLI 1.0.102 (autopilot to its
cap and to ``task_complete``, a long autopilot loop, ``--fleet`` background sub-agents, a background shell,
compaction by threshold and by ``/compact``, plan mode handing over to autopilot, model changes between prompts
over ACP and on resume, MCP tools, denied tools, permission prompts, steering and queued messages, cancels); with
the original captures they are replayed through the real pipeline into a real OTLP receiver. Every expectation
here is computed from the raw events with plain ``json``, never by the code under test.

Where the CLI's own export (``_capture/otel.jsonl``) disagrees, the log wins, and the test says so:

* the CLI starts a trace per ``user.message``, so each autopilot continuation and the CLI's own reply to a
  background notification become separate traces; the log says they continue the prompt that was running (same
  interaction, no human typed anything), so here there is one trace per human prompt;
* the CLI's export has no span for a compaction's model call; the log has its tokens
  (``compactionTokensUsed``), so here it is a ``chat`` span;
* the CLI ends a tool's span when the user aborts; the log has no completion, so here it is incomplete.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CLI_GENERATED, FIXTURES, read_events, replay_into
from tests.otlp_receiver import OtlpReceiver

SHAPES = FIXTURES / "cli-shapes"
FOLDERS = sorted(p.parent for p in [*SHAPES.glob("*/events.jsonl"), *CLI_GENERATED.glob("*/events.jsonl")])
NS = 1_000_000_000


def _ns(timestamp: str) -> int:
    from datetime import datetime

    dt = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    return int(dt.timestamp()) * NS + dt.microsecond * 1000


def _human(e: dict[str, Any]) -> bool:
    """A prompt a person sent here: not a sub-agent's task, not injected (autopilot, skill), not steering, not
    a message of an imported transcript (those carry no delivery: ``copilot sessions import`` writes only the
    content)."""
    d = e["data"]
    return (
        e["type"] == "user.message"
        and "agentId" not in e
        and not d.get("source")
        and not d.get("isAutopilotContinuation")
        and d.get("delivery") != "steering"
        and d.keys() != {"content"}
    )


@dataclass
class Exported:
    events: list[dict[str, Any]]
    spans: list[dict[str, Any]]
    logs: list[dict[str, Any]]

    def roots(self) -> list[dict[str, Any]]:
        return sorted((s for s in self.spans if s["parent_span_id"] is None), key=lambda s: s["start_ns"])

    def children(self, span: dict[str, Any]) -> list[dict[str, Any]]:
        return [s for s in self.spans if s["parent_span_id"] == span["span_id"]]

    def by_name(self, prefix: str) -> list[dict[str, Any]]:
        return [s for s in self.spans if s["name"].startswith(prefix)]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Exported]:
    out: dict[str, Exported] = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(tmp_path_factory.mktemp("home")))
        for folder in FOLDERS:
            with OtlpReceiver() as receiver:
                assert (
                    replay_into(receiver, folder, extra=("--state-dir", str(tmp_path_factory.mktemp("s"))))
                    == 0
                )
                out[folder.name] = Exported(
                    read_events(folder / "events.jsonl"), receiver.spans(), receiver.logs()
                )
    return out


def _names(kind: str) -> list[str]:
    """The fixtures whose log has at least one event of ``kind`` (so a test never passes on nothing)."""
    names = [f.name for f in FOLDERS if any(e["type"] == kind for e in read_events(f / "events.jsonl"))]
    assert names, f"no fixture has {kind}"
    return names


def _prompts(events: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The raw events of each human prompt: from its user.message to the next one."""
    prompts: list[list[dict[str, Any]]] = []
    for e in events:
        if _human(e):
            prompts.append([])
        if prompts:
            prompts[-1].append(e)
    return prompts


@pytest.mark.parametrize("name", [f.name for f in FOLDERS])
def test_one_trace_per_human_prompt(exported: dict[str, Exported], name: str) -> None:
    x = exported[name]
    human_roots = [r for r in x.roots() if not r["attributes"].get("copilot_otel.prompt.synthetic")]
    assert len(human_roots) == len([e for e in x.events if _human(e)])
    assert len({s["trace_id"] for s in x.spans}) == len(x.roots())


@pytest.mark.parametrize("name", [f.name for f in FOLDERS])
def test_a_turn_per_main_agent_turn_start_continuations_included(
    exported: dict[str, Exported], name: str
) -> None:
    x = exported[name]
    human_roots = [r for r in x.roots() if not r["attributes"].get("copilot_otel.prompt.synthetic")]
    for root, raw in zip(human_roots, _prompts(x.events), strict=True):
        turn_starts = [e for e in raw if e["type"] == "assistant.turn_start" and "agentId" not in e]
        turns = [s for s in x.children(root) if s["name"].startswith("turn ")]
        assert len(turns) == len(turn_starts), root["attributes"].get("github.copilot.interaction_id")
        assert root["attributes"]["github.copilot.turn_count"] == len(turn_starts)
        assert sorted(s["start_ns"] for s in turns) == sorted(_ns(e["timestamp"]) for e in turn_starts)


@pytest.mark.parametrize("name", [f.name for f in FOLDERS])
def test_exactly_one_chat_per_model_call_with_its_own_tokens(
    exported: dict[str, Exported], name: str
) -> None:
    x = exported[name]
    chats = x.by_name("chat ")
    by_id: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for chat in chats:
        by_id[chat["attributes"].get("gen_ai.response.id", "")].append(chat)
    usage = [e["data"]["usage"] for e in x.events if e["type"] == "session.usage_record"]
    for u in usage:
        (chat,) = by_id[u["apiCallId"]]
        assert chat["attributes"]["gen_ai.usage.input_tokens"] == u["inputTokens"]
        # a count beyond 2**53 (usage-out-of-range) is unknown: absent, never 0
        expected = u["outputTokens"] if u["outputTokens"] < 2**53 else None
        assert chat["attributes"].get("gen_ai.usage.output_tokens") == expected
    compactions = [
        e["data"]["compactionTokensUsed"]
        for e in x.events
        if e["type"] == "session.compaction_complete"
        and isinstance(e["data"].get("compactionTokensUsed"), dict)
    ]
    compaction_chats = [c for c in chats if c["attributes"].get("copilot_otel.chat.origin") == "compaction"]
    assert [c["attributes"]["gen_ai.usage.input_tokens"] for c in compaction_chats] == [
        u["inputTokens"] for u in compactions
    ]
    # Every other chat is a call that failed or was cut short (no usage record can exist for it): never a
    # message the CLI wrote itself.
    others = [c for c in chats if c not in compaction_chats and "gen_ai.response.id" not in c["attributes"]]
    for chat in others:
        assert chat["attributes"]["gen_ai.response.finish_reasons"] == ["error"], chat
    assert len(chats) == len(usage) + len(compactions) + len(others)


@pytest.mark.parametrize("name", _names("system.notification"))
def test_messages_the_cli_writes_itself_are_not_model_calls(exported: dict[str, Exported], name: str) -> None:
    x = exported[name]
    cli_calls = {
        r["toolCallId"]
        for e in x.events
        if e["type"] == "assistant.message"
        and not any(e["data"].get(k) for k in ("model", "apiCallId", "turnId"))
        for r in e["data"].get("toolRequests") or []
    }
    assert cli_calls
    tools = {s["attributes"]["gen_ai.tool.call.id"]: s for s in x.by_name("execute_tool ")}
    roots = {r["span_id"] for r in x.roots()}
    for call_id in cli_calls:
        span = tools[call_id]
        assert span["attributes"]["copilot_otel.tool.cli_initiated"] is True
        assert span["parent_span_id"] in roots  # under the agent, in no turn
    # and every notification is on its prompt's trace, as a span event and as a log event
    notes = [e for e in x.events if e["type"] == "system.notification"]
    events = [
        ev for r in x.roots() for ev in r["events"] if ev["name"] == "github.copilot.system.notification"
    ]
    assert [ev["attributes"]["github.copilot.system.notification.type"] for ev in events] == [
        n["data"]["kind"]["type"] for n in notes
    ]
    logs = [r for r in x.logs if r["event_name"] == "copilot_otel.notification"]
    assert len(logs) == len(notes) and all(r["trace_id"] for r in logs)


@pytest.mark.parametrize("name", [f.name for f in FOLDERS])
def test_the_root_model_is_the_one_its_calls_used(exported: dict[str, Exported], name: str) -> None:
    x = exported[name]
    calls_by_interaction: dict[str, str] = {}
    for e in x.events:
        if e["type"] == "assistant.message" and "agentId" not in e and e["data"].get("model"):
            calls_by_interaction[e["data"].get("interactionId")] = e["data"]["model"]
    for root in x.roots():
        chats = [c for t in x.children(root) for c in x.children(t) if c["name"].startswith("chat ")]
        chats = [c for c in chats if "gen_ai.response.id" in c["attributes"]]
        if chats:
            last = max(chats, key=lambda c: c["start_ns"])
            assert root["attributes"]["gen_ai.request.model"] == last["attributes"]["gen_ai.request.model"]


def test_a_model_change_between_prompts_belongs_to_the_next_prompt(exported: dict[str, Exported]) -> None:
    for name in ("acp-model-change", "model-change-resume"):
        x = exported[name]
        models = [
            [e["data"]["model"] for e in raw if e["type"] == "assistant.message" and e["data"].get("model")]
            for raw in _prompts(x.events)
        ]
        assert len({m for ms in models for m in ms}) == 2, "the capture switched models between its prompts"
        roots = [r for r in x.roots() if not r["attributes"].get("copilot_otel.prompt.synthetic")]
        assert [r["attributes"]["gen_ai.request.model"] for r in roots] == [ms[-1] for ms in models]


@pytest.mark.parametrize("name", _names("subagent.started"))
def test_sub_agents_nest_under_the_tool_call_that_started_them(
    exported: dict[str, Exported], name: str
) -> None:
    x = exported[name]
    tools = {s["attributes"]["gen_ai.tool.call.id"]: s for s in x.by_name("execute_tool ")}
    agents = [s for s in x.by_name("invoke_agent ")]
    started = [e for e in x.events if e["type"] == "subagent.started"]
    assert len(agents) == len(started)
    for e in started:
        (agent,) = [
            a
            for a in agents
            if a["attributes"].get("copilot_otel.agent.task_call_id") == e["data"]["toolCallId"]
        ]
        assert agent["parent_span_id"] == tools[e["data"]["toolCallId"]]["span_id"]
        assert bool(agent["attributes"].get("copilot_otel.agent.background")) == (
            e["data"].get("executionMode") == "background"
        )


@pytest.mark.parametrize("name", _names("permission.requested"))
def test_permission_waits_are_spans_under_their_tool(exported: dict[str, Exported], name: str) -> None:
    x = exported[name]
    requested = {e["data"]["requestId"]: e for e in x.events if e["type"] == "permission.requested"}
    completed = {e["data"]["requestId"]: e for e in x.events if e["type"] == "permission.completed"}
    tools = {s["attributes"]["gen_ai.tool.call.id"]: s for s in x.by_name("execute_tool ")}
    waits = {s["attributes"]["copilot_otel.permission.request_id"]: s for s in x.by_name("permission")}
    assert set(waits) == set(requested)
    for request_id, req in requested.items():
        span = waits[request_id]
        assert span["parent_span_id"] == tools[req["data"]["permissionRequest"]["toolCallId"]]["span_id"]
        assert span["start_ns"] == _ns(req["timestamp"])
        if request_id in completed:
            done = completed[request_id]
            assert span["end_ns"] == _ns(done["timestamp"])
            assert span["attributes"]["github.copilot.permission.result"] == done["data"]["result"]["kind"]


@pytest.mark.parametrize("name", [f.name for f in FOLDERS])
def test_denied_tools_have_their_own_error_type(exported: dict[str, Exported], name: str) -> None:
    x = exported[name]
    tools = {s["attributes"]["gen_ai.tool.call.id"]: s for s in x.by_name("execute_tool ")}
    for e in x.events:
        if e["type"] != "tool.execution_complete" or e["data"].get("success") is not False:
            continue
        expected = "denied" if (e["data"].get("error") or {}).get("code") == "denied" else "ToolError"
        assert tools[e["data"]["toolCallId"]]["attributes"]["error.type"] == expected


def test_the_denied_fixtures_do_deny() -> None:
    for name in ("denied-tools", "permissions"):
        events = read_events(SHAPES / name / "events.jsonl")
        assert any((e["data"].get("error") or {}).get("code") == "denied" for e in events)


@pytest.mark.parametrize(
    ("kind", "span_event", "log_event"),
    [
        ("session.task_complete", "copilot_otel.session.task_complete", "copilot_otel.task_complete"),
        ("session.mode_changed", "copilot_otel.session.mode_changed", "copilot_otel.mode_changed"),
    ],
)
def test_task_completion_and_mode_changes_are_on_the_trace(
    exported: dict[str, Exported], kind: str, span_event: str, log_event: str
) -> None:
    for name in _names(kind):
        x = exported[name]
        raw = [e for e in x.events if e["type"] == kind]
        on_roots = [ev for r in x.roots() for ev in r["events"] if ev["name"] == span_event]
        logs = [r for r in x.logs if r["event_name"] == log_event]
        in_prompt = [e for e in raw if any(e in p for p in _prompts(x.events))]
        assert [ev["time_ns"] for ev in on_roots] == [_ns(e["timestamp"]) for e in in_prompt]
        assert len(logs) == len(raw)


def test_the_agent_mode_of_each_prompt(exported: dict[str, Exported]) -> None:
    x = exported["plan-to-autopilot"]
    roots = [r for r in x.roots() if not r["attributes"].get("copilot_otel.prompt.synthetic")]
    modes = [e["data"].get("agentMode") for e in x.events if _human(e)]
    assert [r["attributes"].get("copilot_otel.prompt.agent_mode") for r in roots] == modes == ["plan", "plan"]


def test_a_manual_compaction_is_a_trace_with_its_model_call(exported: dict[str, Exported]) -> None:
    x = exported["compaction-manual"]
    manual = [
        e for e in x.events if e["type"] == "session.compaction_complete" and e["data"]["trigger"] == "manual"
    ]
    (synthetic,) = [r for r in x.roots() if r["attributes"].get("copilot_otel.prompt.synthetic")]
    (chat,) = [c for c in x.children(synthetic) if c["name"].startswith("chat ")]
    assert (
        chat["attributes"]["gen_ai.usage.input_tokens"]
        == manual[0]["data"]["compactionTokensUsed"]["inputTokens"]
    )
    assert any(ev["name"] == "github.copilot.session.compaction_complete" for ev in synthetic["events"])


def test_fixtures_exist() -> None:
    assert len(FOLDERS) >= 28 and all(Path(f / "events.jsonl").exists() for f in FOLDERS)
