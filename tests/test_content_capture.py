"""Opted-in content on chat spans: real fixture logs through ``copilot-otel replay`` into a real OTLP receiver.

What each model call sent and answered is rebuilt here from the raw events with plain ``json`` (a small model of
the conversation, independent of the fold): the messages new since the agent's previous call (the prompt, then
the results of the tools that call asked for) and the tool calls the assistant requested.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CLI_GENERATED, TOKEN_LIKE, fixture_copy, read_events, replay_into
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


@pytest.mark.parametrize("name", FIXTURES)
def test_chat_spans_carry_the_messages_new_since_the_previous_call(
    receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setenv(CAPTURE, "true")
    expected = _replay_fixture(receiver, name)
    chats = chat_spans(receiver)
    assert chats.keys() == expected.keys()
    for agent, calls in expected.items():
        assert len(chats[agent]) == len(calls), agent
        for span, call in zip(chats[agent], calls, strict=True):
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
