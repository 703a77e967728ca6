"""Opted-in content on chat spans: real fixture logs through ``copilot-otel replay`` into a real OTLP receiver.

What each model call sent and answered is rebuilt here from the raw events with plain ``json`` (a small model of
the conversation, independent of the fold): the messages new since the agent's previous call (the prompt, then
the results of the tools that call asked for) and the tool calls the assistant requested.
"""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from copilot_otel.pipeline import FoldSettings
from copilot_otel.settings.content import ContentKind, ContentPolicy
from copilot_otel.sources.copilot.parse import SKIPPED_TYPES
from tests.conftest import CLI_GENERATED, TOKEN_LIKE, fixture_copy, read_events, replay_into
from tests.conftest import FIXTURES as FIXTURE_ROOT
from tests.otlp_receiver import OtlpReceiver

CAPTURE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
# Every cli-generated fixture: each one writes turn events, so each turn is one model call.
FIXTURES = sorted(p.parent.name for p in CLI_GENERATED.glob("*/events.jsonl"))
ROOT = "<root agent>"


@dataclass
class ExpectedCall:
    """One model call as the raw log tells it."""

    input: list[dict[str, Any]] = field(default_factory=list)
    tool_requests: list[dict[str, Any]] = field(default_factory=list)


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"type": "text", "content": text}]}


def _tool_result(call_id: str, data: dict[str, Any]) -> dict[str, Any]:
    result = data.get("result")
    text = result.get("content") if isinstance(result, dict) else None
    if text is None:  # a failed tool: the model is sent the error message
        text = (data.get("error") or {}).get("message")
    return {"role": "tool", "parts": [{"type": "tool_call_response", "id": call_id, "response": text}]}


def expected_calls(events: list[dict[str, Any]]) -> dict[str, list[ExpectedCall]]:
    """Model calls per agent (sub-agents by name), in order: what each sent new and which tools it asked for."""
    names: dict[str, str] = {}
    pending: dict[str, list[dict[str, Any]]] = defaultdict(list)
    calls: dict[str, list[ExpectedCall]] = defaultdict(list)
    tool_agent: dict[str, str] = {}
    for e in events:
        kind, data = e["type"], e.get("data", {})
        agent = e.get("agentId") or ROOT
        if kind == "subagent.started":
            names[agent] = data["agentName"]
        elif kind == "user.message":
            pending[agent].append(_user(data["content"]))
        elif kind == "tool.execution_start":
            tool_agent[data["toolCallId"]] = agent
        elif kind == "tool.execution_complete":
            call_id = data["toolCallId"]
            pending[tool_agent[call_id]].append(_tool_result(call_id, data))
        elif kind == "assistant.turn_start":
            calls[agent].append(ExpectedCall(input=pending.pop(agent, [])))
        elif kind == "assistant.message":
            calls[agent][-1].tool_requests += data.get("toolRequests") or []
    return {names.get(agent, agent): agent_calls for agent, agent_calls in calls.items()}


def chat_spans(receiver: OtlpReceiver) -> dict[str, list[dict[str, Any]]]:
    """Exported chat spans per agent (``gen_ai.agent.name``, the root agent has none), in start order."""
    chats: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for span in sorted(receiver.spans(), key=lambda s: s["start_ns"]):
        if span["attributes"].get("gen_ai.operation.name") == "chat":
            chats[span["attributes"].get("gen_ai.agent.name", ROOT)].append(span)
    return chats


def _messages(attributes: dict[str, Any], key: str) -> list[dict[str, Any]]:
    value = attributes.get(key)
    return json.loads(value) if value is not None else []


def _output_parts(attributes: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [
        part
        for message in _messages(attributes, "gen_ai.output.messages")
        for part in message["parts"]
        if part["type"] == kind
    ]


def _tool_calls(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"type": "tool_call", "id": r["toolCallId"], "name": r["name"], "arguments": r["arguments"]}
        for r in requests
    ]


def _replay_fixture(receiver: OtlpReceiver, name: str) -> dict[str, list[ExpectedCall]]:
    assert replay_into(receiver, CLI_GENERATED / name) == 0
    return expected_calls(read_events(CLI_GENERATED / name / "events.jsonl"))


def replay_calls(receiver: OtlpReceiver, name: str) -> list[tuple[dict[str, Any], ExpectedCall]]:
    """Replay fixture ``name``; each exported chat span paired with the call the raw log says it was."""
    expected = _replay_fixture(receiver, name)
    chats = chat_spans(receiver)
    assert chats.keys() == expected.keys()
    pairs: list[tuple[dict[str, Any], ExpectedCall]] = []
    for agent, calls in expected.items():
        assert len(chats[agent]) == len(calls), agent
        pairs += zip(chats[agent], calls, strict=True)
    return pairs


@pytest.mark.parametrize("name", FIXTURES)
def test_chat_spans_carry_the_messages_new_since_the_previous_call(
    receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setenv(CAPTURE, "true")
    for span, call in replay_calls(receiver, name):
        attributes = span["attributes"]
        assert _messages(attributes, "gen_ai.input.messages") == call.input
        assert _output_parts(attributes, "tool_call") == _tool_calls(call.tool_requests)
        if call.input:
            texts = [p.get("content") or p.get("response") for m in call.input for p in m["parts"]]
            assert attributes["input.value"] == "\n\n".join(texts)
        else:
            assert "input.value" not in attributes


def test_the_first_call_of_each_prompt_sends_the_users_message(
    receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CAPTURE, "true")
    assert replay_into(receiver, CLI_GENERATED / "resumed") == 0
    prompts = [
        e["data"]["content"]
        for e in read_events(CLI_GENERATED / "resumed" / "events.jsonl")
        if e["type"] == "user.message"
    ]
    assert len(prompts) == 2
    first_chats = []
    for trace in sorted({s["trace_id"] for s in receiver.spans()}):
        spans = [s for s in receiver.spans() if s["trace_id"] == trace and s["name"].startswith("chat ")]
        first_chats.append(min(spans, key=lambda s: s["start_ns"]))
    first_chats.sort(key=lambda s: s["start_ns"])
    assert [_messages(s["attributes"], "gen_ai.input.messages") for s in first_chats] == [
        [_user(text)] for text in prompts
    ]


def test_a_call_after_parallel_tools_gets_their_results_in_completion_order(
    receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CAPTURE, "true")
    events = read_events(CLI_GENERATED / "multi-tool" / "events.jsonl")
    completed = [e["data"]["toolCallId"] for e in events if e["type"] == "tool.execution_complete"]
    requested = [e["data"]["toolCallId"] for e in events if e["type"] == "tool.execution_start"]
    assert completed[:2] == requested[:2][::-1]  # the fixture's first two tools finish in reverse order
    assert replay_into(receiver, CLI_GENERATED / "multi-tool") == 0
    second = chat_spans(receiver)[ROOT][1]["attributes"]
    ids = [p["id"] for m in _messages(second, "gen_ai.input.messages") for p in m["parts"]]
    assert ids == completed[:2]


@pytest.mark.parametrize(
    ("switch", "gone"),
    [
        ("COPILOT_OTEL_CAPTURE_PROMPTS", "user"),
        ("COPILOT_OTEL_CAPTURE_TOOL_RESULTS", "tool"),
        ("COPILOT_OTEL_CAPTURE_TOOL_ARGUMENTS", "tool_call"),
        ("COPILOT_OTEL_CAPTURE_RESPONSES", "text"),
    ],
)
def test_each_kind_of_message_follows_its_own_switch(
    receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch, switch: str, gone: str
) -> None:
    monkeypatch.setenv(CAPTURE, "true")
    monkeypatch.setenv(switch, "false")
    expected = _replay_fixture(receiver, "multi-tool")
    calls, spans = expected[ROOT], chat_spans(receiver)[ROOT]
    roles = [[m["role"] for m in _messages(s["attributes"], "gen_ai.input.messages")] for s in spans]
    parts = [
        [p["type"] for m in _messages(s["attributes"], "gen_ai.output.messages") for p in m["parts"]]
        for s in spans
    ]
    assert not any(gone in r for r in roles) and not any(gone in p for p in parts)
    # what the switch does not govern is still there
    kept_roles = [[m["role"] for m in c.input if m["role"] != gone] for c in calls]
    assert roles == kept_roles
    assert any(kept_roles) and any(parts)
    if gone in ("user", "tool"):
        # an input with nothing left to show has no attribute at all
        for span, wanted in zip(spans, kept_roles, strict=True):
            assert ("gen_ai.input.messages" in span["attributes"]) == bool(wanted)
            assert ("input.value" in span["attributes"]) == bool(wanted)


def test_tool_call_arguments_in_output_messages_are_scrubbed(
    receiver: OtlpReceiver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = TOKEN_LIKE
    folder = fixture_copy(tmp_path, "multi-tool", '"command":"ls -la"', f'"command":"ls -la {token}"')
    monkeypatch.setenv(CAPTURE, "true")
    assert replay_into(receiver, folder) == 0
    first = chat_spans(receiver)[ROOT][0]["attributes"]
    commands = [p["arguments"].get("command") for p in _output_parts(first, "tool_call")]
    assert "ls -la [REDACTED]" in commands
    assert token not in json.dumps(receiver.spans())


# --- where content goes: spans, gen_ai.client.inference.operation.details log events, or both --------------

DETAILS = "gen_ai.client.inference.operation.details"
# Every attribute that can hold content, on any span or span event.
CONTENT_KEYS = (
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "input.value",
    "output.value",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "tool.parameters",
    "copilot_otel.user.message.content",
    "copilot_otel.session.title",
)


def details_by_span(receiver: OtlpReceiver) -> dict[tuple[str, str], dict[str, Any]]:
    """The details log events keyed by the (trace id, span id) they are correlated with; no two share one."""
    details = [r for r in receiver.logs() if r["event_name"] == DETAILS]
    keyed = {(r["trace_id"], r["span_id"]): r for r in details}
    assert len(keyed) == len(details)
    return keyed


def _content_on_spans(receiver: OtlpReceiver) -> list[str]:
    return [
        key
        for span in receiver.spans()
        for attributes in (span["attributes"], *(e["attributes"] for e in span["events"]))
        for key in CONTENT_KEYS
        if key in attributes
    ]


@pytest.mark.parametrize("name", FIXTURES)
def test_event_only_puts_each_calls_messages_on_a_details_event_and_nothing_on_spans(
    receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setenv(CAPTURE, "EVENT_ONLY")
    pairs = replay_calls(receiver, name)
    assert _content_on_spans(receiver) == []
    exported_spans = json.dumps(receiver.spans())
    for e in read_events(CLI_GENERATED / name / "events.jsonl"):
        if e["type"] == "user.message":
            assert e["data"]["content"] not in exported_spans
    details = details_by_span(receiver)
    assert details.keys() == {(span["trace_id"], span["span_id"]) for span, _ in pairs}
    for span, call in pairs:
        record = details[span["trace_id"], span["span_id"]]
        attributes = record["attributes"]
        assert record["severity_text"] == "INFO"
        assert attributes["gen_ai.operation.name"] == "chat"
        for key in ("gen_ai.request.model", "gen_ai.response.id"):
            assert attributes.get(key) == span["attributes"].get(key)
        assert _messages(attributes, "gen_ai.input.messages") == call.input
        assert _output_parts(attributes, "tool_call") == _tool_calls(call.tool_requests)


@pytest.mark.parametrize("name", ["multi-tool", "subagent"])
def test_span_and_event_puts_the_same_messages_in_both(
    receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setenv(CAPTURE, "SPAN_AND_EVENT")
    assert replay_into(receiver, CLI_GENERATED / name) == 0
    details = details_by_span(receiver)
    chats = [s for spans in chat_spans(receiver).values() for s in spans]
    assert len(details) == len(chats)
    for span in chats:
        event = details[span["trace_id"], span["span_id"]]["attributes"]
        for key in ("gen_ai.input.messages", "gen_ai.output.messages"):
            assert event[key] == span["attributes"][key]
    # the rest of the span content (tools, agents) is there too, as with SPAN_ONLY
    assert {"gen_ai.tool.call.arguments", "gen_ai.tool.call.result", "input.value"} <= set(
        _content_on_spans(receiver)
    )


@pytest.mark.parametrize(
    "env",
    [
        {},
        {CAPTURE: "true"},
        {CAPTURE: "SPAN_ONLY"},
        {CAPTURE: "SPAN_AND_EVENT", "OTEL_INSTRUMENTATION_GENAI_EMIT_EVENT": "false"},
    ],
)
def test_no_details_events_unless_content_goes_on_events(
    receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch, env: dict[str, str]
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert replay_into(receiver, CLI_GENERATED / "multi-tool") == 0
    assert any(r["event_name"] == "copilot_otel.prompt.started" for r in receiver.logs())
    assert details_by_span(receiver) == {}
    assert ("gen_ai.input.messages" in _content_on_spans(receiver)) == bool(env)


def test_event_only_without_the_event_captures_nothing(
    receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CAPTURE, "EVENT_ONLY")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_EMIT_EVENT", "false")
    assert replay_into(receiver, CLI_GENERATED / "multi-tool") == 0
    assert details_by_span(receiver) == {}
    assert _content_on_spans(receiver) == []


@pytest.mark.parametrize("mode", ["EVENT_ONLY", "SPAN_AND_EVENT"])
def test_a_secret_in_the_prompt_is_scrubbed_on_spans_and_events(
    receiver: OtlpReceiver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    prompt = "What is the capital of France?"
    folder = fixture_copy(tmp_path, "plain-question", prompt, f"use token {TOKEN_LIKE} please")
    monkeypatch.setenv(CAPTURE, mode)
    assert replay_into(receiver, folder) == 0
    assert TOKEN_LIKE not in json.dumps([receiver.spans(), receiver.logs()])
    (chat,) = chat_spans(receiver)[ROOT]
    (event,) = details_by_span(receiver).values()
    scrubbed = [_user("use token [REDACTED] please")]
    assert _messages(event["attributes"], "gen_ai.input.messages") == scrubbed
    on_span = _messages(chat["attributes"], "gen_ai.input.messages")
    assert on_span == (scrubbed if mode == "SPAN_AND_EVENT" else [])


def expected_agent_messages(events: list[dict[str, Any]]) -> list[tuple[str, str | None, str | None]]:
    """Per ``invoke_agent`` span, in start order: (span name, the prompt it was given, its last answer)."""
    agents: dict[tuple[int, str], list[Any]] = {}  # (prompt number, agent id) -> [name, input, output]
    prompt = -1
    for e in events:
        kind, data = e["type"], e.get("data", {})
        agent = e.get("agentId") or ROOT
        if kind == "user.message" and agent == ROOT:
            prompt += 1
            agents[(prompt, ROOT)] = ["invoke_agent", data["content"], None]
        elif kind == "subagent.started":
            agents[(prompt, agent)] = [f"invoke_agent {data['agentName']}", None, None]
        elif kind == "user.message":
            agents[(prompt, agent)][1] = agents[(prompt, agent)][1] or data["content"]
        elif kind == "assistant.message" and data.get("content"):
            agents[(prompt, agent)][2] = data["content"]
    return [(name, given, answer) for name, given, answer in agents.values()]


@pytest.mark.parametrize("name", ["multi-tool", "subagent", "resumed", "failing-tool"])
def test_agent_spans_carry_their_prompt_and_last_answer(
    receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setenv(CAPTURE, "true")
    assert replay_into(receiver, CLI_GENERATED / name) == 0
    expected = expected_agent_messages(read_events(CLI_GENERATED / name / "events.jsonl"))
    spans = sorted(
        (s for s in receiver.spans() if s["name"].startswith("invoke_agent")), key=lambda s: s["start_ns"]
    )
    assert [s["name"] for s in spans] == [name for name, _, _ in expected]
    for span, (_, given, answer) in zip(spans, expected, strict=True):
        attributes = span["attributes"]
        assert _messages(attributes, "gen_ai.input.messages") == ([_user(given)] if given else [])
        assert _messages(attributes, "gen_ai.output.messages") == (
            [{"role": "assistant", "parts": [{"type": "text", "content": answer}]}] if answer else []
        )


def test_agent_messages_stay_private_by_default(receiver: OtlpReceiver) -> None:
    assert replay_into(receiver, CLI_GENERATED / "subagent") == 0
    agents = [s for s in receiver.spans() if s["name"].startswith("invoke_agent")]
    assert len(agents) >= 2
    for span in agents:
        assert "gen_ai.input.messages" not in span["attributes"]
        assert "gen_ai.output.messages" not in span["attributes"]


def test_content_only_events_are_skipped_unless_their_content_is_captured() -> None:
    assert FoldSettings().undecoded_types == SKIPPED_TYPES
    on = FoldSettings(content=ContentPolicy(enabled=frozenset({ContentKind.SYSTEM_PROMPT})))
    assert on.undecoded_types == {b"assistant.reasoning"}


def _system_prompts(events: list[dict[str, Any]]) -> dict[str, str]:
    """The system prompt each ``invoke_agent`` span should carry: span name → the agent's last one."""
    names = {e.get("agentId"): e["data"]["agentName"] for e in events if e["type"] == "subagent.started"}
    prompts: dict[str, str] = {}
    for e in events:
        if e["type"] == "system.message":
            agent = e.get("agentId")
            prompts["invoke_agent" if agent is None else f"invoke_agent {names[agent]}"] = e["data"][
                "content"
            ]
    return prompts


@pytest.mark.parametrize("name", ["subagent", "capi-subagent", "plain-question"])
def test_system_prompt_is_captured_only_with_its_own_switch(
    receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setenv(CAPTURE, "true")
    assert replay_into(receiver, CLI_GENERATED / name) == 0
    assert all("gen_ai.system_instructions" not in s["attributes"] for s in receiver.spans())
    receiver.clear()
    monkeypatch.setenv("COPILOT_OTEL_CAPTURE_SYSTEM_PROMPT", "true")
    monkeypatch.setenv("COPILOT_OTEL_CONTENT_MAX_LENGTH", "1000000")  # the whole prompt, to compare it
    assert replay_into(receiver, CLI_GENERATED / name) == 0
    expected = _system_prompts(read_events(CLI_GENERATED / name / "events.jsonl"))
    assert expected
    got = {
        s["name"]: json.loads(s["attributes"]["gen_ai.system_instructions"])
        for s in receiver.spans()
        if "gen_ai.system_instructions" in s["attributes"]
    }
    assert got == {span: [{"type": "text", "content": text}] for span, text in expected.items()}


def test_reasoning_is_captured_only_with_its_own_switch(
    receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # No real capture has a reasoning model: a reasoning line in the real multi-tool log, in the first turn.
    lines = (CLI_GENERATED / "multi-tool" / "events.jsonl").read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if json.loads(line)["type"] == "assistant.turn_start") + 1
    reasoning = {
        "type": "assistant.reasoning",
        "data": {"reasoningId": "r-1", "content": "I should read the README first."},
        "id": "00000000-0000-4000-8000-00000000r001",
        "timestamp": json.loads(lines[at])["timestamp"],
    }
    folder = tmp_path / "reasoning"
    folder.mkdir()
    line = json.dumps(reasoning, separators=(",", ":"))  # compact, as the CLI writes: parse may skip it
    (folder / "events.jsonl").write_text("\n".join([*lines[:at], line, *lines[at:]]) + "\n")
    monkeypatch.setenv(CAPTURE, "true")

    def reasoning_parts() -> list[list[dict[str, Any]]]:
        chats = sorted(chat_spans(receiver)[ROOT], key=lambda s: s["start_ns"])
        return [_output_parts(s["attributes"], "reasoning") for s in chats]

    assert replay_into(receiver, folder) == 0
    assert not any(reasoning_parts())
    receiver.clear()
    monkeypatch.setenv("COPILOT_OTEL_CAPTURE_REASONING", "true")
    assert replay_into(receiver, folder) == 0
    parts = reasoning_parts()
    assert parts[0] == [{"type": "reasoning", "content": "I should read the README first."}]
    assert not any(parts[1:])


def test_the_session_title_is_read_from_either_workspace_key(
    receiver: OtlpReceiver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CLI 1.0.102 writes the title as ``name`` in workspace.yaml (older versions: ``summary``); with prompt
    capture on it is the session's title on every root span, whichever key holds it."""
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    source = FIXTURE_ROOT / "cli-shapes" / "permissions"
    name = next(
        line.split(": ", 1)[1]
        for line in (source / "workspace.yaml").read_text().splitlines()
        if line.startswith("name: ")
    )
    older = tmp_path / "older"
    shutil.copytree(source, older)
    text = (older / "workspace.yaml").read_text()
    (older / "workspace.yaml").write_text(text.replace("name: ", "summary: "))
    for folder in (source, older):
        receiver.clear()
        assert replay_into(receiver, folder) == 0
        roots = [s for s in receiver.spans() if s["parent_span_id"] is None]
        assert roots and {r["attributes"].get("copilot_otel.session.title") for r in roots} == {name}, folder
