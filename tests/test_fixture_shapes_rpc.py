"""The RPC-driven captures in ``fixtures/cli-shapes`` hold the shapes they claim.

Each fixture was written by the real Copilot CLI 1.0.102 driven over JSON-RPC by
``tests/realcli/rpc_shapes.py`` (headless SDK mode or ACP) against the scripted fake model.
These tests read the committed files with plain ``json`` (independent of our parser) and pin
what a fold must handle: steering and queued deliveries, permission request/complete pairs
and their outcomes, an SDK model change between prompts, and aborts from ACP cancels.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest

from tests.conftest import FIXTURES, read_events

SHAPES = FIXTURES / "cli-shapes"
# The capture answered each permission after 1.0-2.0 s; allow for the CLI's own latency below that.
MIN_PERMISSION_WAIT_S = 0.9


def _events(name: str) -> list[dict[str, Any]]:
    path = SHAPES / name / "events.jsonl"
    if not path.is_file():
        pytest.fail(f"fixture missing: {path}", pytrace=False)
    return read_events(path)


def _jsonl(name: str, file: str) -> list[dict[str, Any]]:
    return read_events(SHAPES / name / "_capture" / file)


def _rpc_sent(name: str) -> list[dict[str, Any]]:
    """The JSON-RPC messages the driver sent to the CLI, in order."""
    return [r["message"] for r in _jsonl(name, "rpc.jsonl") if r["direction"] == "client->cli"]


def _time(event: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00"))


def _index(events: list[dict[str, Any]], event_type: str, **data: Any) -> list[int]:
    """Positions of the events of ``event_type`` whose data holds every ``key=value`` given."""
    return [
        i
        for i, e in enumerate(events)
        if e["type"] == event_type and all(e["data"].get(k) == v for k, v in data.items())
    ]


def _only(positions: list[int]) -> int:
    assert len(positions) == 1, positions
    return positions[0]


def test_every_capture_says_how_it_was_made() -> None:
    for name, protocol in {
        "steering-queued": "--headless",
        "steering-late": "--headless",
        "permissions": "--headless",
        "acp-model-change": "--acp",
        "acp-cancel": "--acp",
    }.items():
        meta = json.loads((SHAPES / name / "_capture" / "meta.json").read_text())
        assert meta["scenario"] == name
        assert meta["cli_version"] == "GitHub Copilot CLI 1.0.102."
        assert protocol in meta["argv"]
        assert "fake model" in meta["model_backend"]
        assert _events(name)[0]["data"]["sessionId"] == meta["session_id"]
        assert _events(name)[0]["data"]["context"]["cwd"] == meta["working_directory"]


# -- steering-queued ------------------------------------------------------------------------


def test_steering_message_joins_the_running_prompt() -> None:
    events = _events("steering-queued")
    first = _only(_index(events, "user.message", delivery="idle"))
    steering = _only(_index(events, "user.message", delivery="steering"))
    interaction = events[first]["data"]["interactionId"]
    assert events[steering]["data"]["interactionId"] == interaction
    # It arrives inside the running interaction: right after a turn of that interaction starts,
    # and it names that turn.
    turn_start = max(
        i for i in _index(events, "assistant.turn_start", interactionId=interaction) if i < steering
    )
    assert events[steering]["data"]["turnId"] == events[turn_start]["data"]["turnId"] == "1"
    assert not _index(events[turn_start:steering], "assistant.turn_end")
    # Unlike a prompt it has no datetime-prefixed transformedContent of its own.
    assert "transformedContent" not in events[steering]["data"]
    assert "transformedContent" in events[first]["data"]


def test_queued_message_starts_a_new_prompt_after_the_running_one() -> None:
    events = _events("steering-queued")
    first = _only(_index(events, "user.message", delivery="idle"))
    queued = _only(_index(events, "user.message", delivery="queued"))
    interaction = events[first]["data"]["interactionId"]
    own = events[queued]["data"]["interactionId"]
    assert own != interaction
    last_of_first = max(i for i, e in enumerate(events) if e["data"].get("interactionId") == interaction)
    assert last_of_first < queued
    assert events[queued]["data"]["turnId"] == "0"
    assert _index(events, "assistant.turn_start", interactionId=own, turnId="0")
    # The driver really sent it while the first prompt ran, with mode "enqueue"; steering with "immediate".
    modes = [
        m["params"].get("mode") for m in _rpc_sent("steering-queued") if m.get("method") == "session.send"
    ]
    assert modes == [None, "immediate", "enqueue"]


def test_steering_pushes_the_running_shell_to_the_background() -> None:
    events = _events("steering-queued")
    complete = events[_only(_index(events, "tool.execution_complete", toolCallId="call_steer_0_0"))]
    assert "moved to background" in complete["data"]["result"]["content"]
    notification = _only(_index(events, "system.notification"))
    assert events[notification]["data"]["kind"]["type"] == "shell_completed"
    # The CLI itself answers the notification with a read_bash call: no interactionId, no turn.
    written = events[notification + 1]
    assert written["type"] == "assistant.message"
    assert "interactionId" not in written["data"]
    assert [r["name"] for r in written["data"]["toolRequests"]] == ["read_bash"]
    # The model turn after it reuses the first prompt's interactionId with turnId back at "0".
    interaction = events[_only(_index(events, "user.message", delivery="idle"))]["data"]["interactionId"]
    later = [i for i in _index(events, "assistant.turn_start", interactionId=interaction) if i > notification]
    assert [events[i]["data"]["turnId"] for i in later] == ["0"]


def test_steering_sent_during_a_final_answer_becomes_a_queued_prompt() -> None:
    # mode "immediate" does not guarantee delivery "steering": with no later turn to steer into,
    # the CLI delivers the message as a new prompt once the running one has finished.
    events = _events("steering-late")
    modes = [m["params"].get("mode") for m in _rpc_sent("steering-late") if m.get("method") == "session.send"]
    assert modes == [None, "immediate"]
    prompts = _index(events, "user.message")
    assert [events[i]["data"]["delivery"] for i in prompts] == ["idle", "queued"]
    first, late = (events[i]["data"]["interactionId"] for i in prompts)
    assert first != late
    answer = _only(_index(events, "assistant.message", interactionId=first))
    first_turn_end = _index(events, "assistant.turn_end")[0]
    assert answer < first_turn_end < prompts[1]
    assert events[prompts[1]]["data"]["content"].startswith("Actually, keep it to one sentence.")


# -- permissions ----------------------------------------------------------------------------


def _permission_pairs(events: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """toolCallId -> (index of permission.requested, index of permission.completed)."""
    requested = {
        e["data"]["requestId"]: i for i, e in enumerate(events) if e["type"] == "permission.requested"
    }
    completed = {
        e["data"]["requestId"]: i for i, e in enumerate(events) if e["type"] == "permission.completed"
    }
    assert requested.keys() == completed.keys()
    pairs = {}
    for request_id, asked in requested.items():
        answered = completed[request_id]
        call = events[asked]["data"]["permissionRequest"]["toolCallId"]
        assert events[answered]["data"]["toolCallId"] == call
        pairs[call] = (asked, answered)
    return pairs


def test_permission_requests_pair_with_completions_inside_their_tool() -> None:
    events = _events("permissions")
    pairs = _permission_pairs(events)
    assert sorted(pairs) == ["call_perms_0_0", "call_perms_0_1", "call_perms_1_0"]
    for call, (asked, answered) in pairs.items():
        start = _only(_index(events, "tool.execution_start", toolCallId=call))
        done = _only(_index(events, "tool.execution_complete", toolCallId=call))
        # tool.execution_start comes first: the approval wait is inside the tool's own span.
        assert start < asked < answered < done
        assert (_time(events[answered]) - _time(events[asked])).total_seconds() >= MIN_PERMISSION_WAIT_S
    kinds = {call: events[asked]["data"]["permissionRequest"]["kind"] for call, (asked, _) in pairs.items()}
    assert kinds == {"call_perms_0_0": "shell", "call_perms_0_1": "write", "call_perms_1_0": "shell"}


def test_permission_outcomes_and_the_denied_tool() -> None:
    events = _events("permissions")
    pairs = _permission_pairs(events)
    results = {call: events[answered]["data"]["result"] for call, (_, answered) in pairs.items()}
    assert results["call_perms_0_0"] == {"kind": "approved"}
    assert results["call_perms_0_1"] == {"kind": "approved"}
    assert results["call_perms_1_0"] == {
        "kind": "denied-interactively-by-user",
        "feedback": "Do not delete the build output.",
    }
    outcome = {
        e["data"]["toolCallId"]: (e["data"]["success"], (e["data"].get("error") or {}).get("code"))
        for e in events
        if e["type"] == "tool.execution_complete"
    }
    assert outcome == {
        "call_perms_0_0": (True, None),
        "call_perms_0_1": (True, None),
        "call_perms_1_0": (False, "denied"),
    }
    # The driver answered "reject"; the CLI records it as denied-interactively-by-user.
    answers = [
        m["params"]["result"]["kind"]
        for m in _rpc_sent("permissions")
        if m.get("method") == "session.permissions.handlePendingPermissionRequest"
    ]
    assert sorted(answers) == ["approve-once", "approve-once", "reject"]


def test_cli_otel_export_shows_each_permission_wait_as_a_child_of_its_tool() -> None:
    spans = [r for r in _jsonl("permissions", "otel.jsonl") if r.get("type") == "span"]
    by_id = {s["spanId"]: s for s in spans}
    waits = [s for s in spans if s["name"] == "permission"]
    seen = {}
    for wait in waits:
        parent = by_id[wait["parentSpanId"]]
        assert parent["attributes"]["gen_ai.operation.name"] == "execute_tool"
        seen[parent["attributes"]["gen_ai.tool.call.id"]] = wait["attributes"][
            "github.copilot.permission.result"
        ]
    assert seen == {
        "call_perms_0_0": "approved",
        "call_perms_0_1": "approved",
        "call_perms_1_0": "denied-interactively-by-user",
    }


# -- acp-model-change -----------------------------------------------------------------------


def test_sdk_model_change_sits_between_the_two_prompts() -> None:
    events = _events("acp-model-change")
    prompts = _index(events, "user.message")
    assert len(prompts) == 2
    startup = _only(_index(events, "session.model_change", source="startup"))
    change = _only(_index(events, "session.model_change", source="sdk"))
    assert startup < prompts[0]
    assert events[startup]["data"]["newModel"] == "gpt-4.1"
    assert events[change]["data"]["previousModel"] == "gpt-4.1"
    assert events[change]["data"]["newModel"] == "gpt-5"
    last_turn_end_of_first = max(i for i in _index(events, "assistant.turn_end") if i < prompts[1])
    assert last_turn_end_of_first < change < prompts[1]
    # ACP's session.start names no selectedModel: the startup model_change is the only source.
    assert "selectedModel" not in events[0]["data"]


def test_messages_and_requests_follow_the_new_model() -> None:
    events = _events("acp-model-change")
    change = _only(_index(events, "session.model_change", source="sdk"))
    models = [
        (i > change, e["data"].get("model")) for i, e in enumerate(events) if e["type"] == "assistant.message"
    ]
    assert models == [(False, "gpt-4.1"), (False, "gpt-4.1"), (True, "gpt-5")]
    requested = [r["body"]["model"] for r in _jsonl("acp-model-change", "model-requests.jsonl")]
    assert requested == ["gpt-4.1", "gpt-4.1", "gpt-5"]
    methods = [m.get("method") for m in _rpc_sent("acp-model-change") if m.get("method")]
    assert methods == ["initialize", "session/new", "session/prompt", "session/set_model", "session/prompt"]


# -- acp-cancel -----------------------------------------------------------------------------


def test_cancel_and_overlapping_prompt_each_abort_their_interaction() -> None:
    events = _events("acp-cancel")
    prompts = _index(events, "user.message")
    assert len(prompts) == 3
    aborts = _index(events, "abort")
    assert len(aborts) == 2
    # One abort inside each of the first two interactions, none in the third.
    assert prompts[0] < aborts[0] < prompts[1] < aborts[1] < prompts[2]
    assert all(events[i]["data"]["reason"] == "user_initiated" for i in aborts)
    # The first was cancelled while the model hung: no model answer before its abort.
    assert not _index(events[prompts[0] : aborts[0]], "assistant.message")
    # The second was cancelled mid-tool: its tool started and never completed.
    assert _index(events[prompts[1] : aborts[1]], "tool.execution_start", toolCallId="call_slowtool_0_0")
    assert not _index(events, "tool.execution_complete", toolCallId="call_slowtool_0_0")
    assert events[max(_index(events, "assistant.message"))]["data"]["content"] == "[quick] Hello!"


def test_cancel_transcript_shows_cancel_then_a_prompt_overtaking_another() -> None:
    rows = _jsonl("acp-cancel", "rpc.jsonl")
    # Our requests (not our answers to the CLI's session/request_permission, whose ids are the CLI's).
    sent = {
        r["message"]["id"]: r
        for r in rows
        if r["direction"] == "client->cli" and "id" in r["message"] and "method" in r["message"]
    }
    answered = {
        r["message"]["id"]: r
        for r in rows
        if r["direction"] == "cli->client" and "result" in r["message"] and r["message"]["id"] in sent
    }
    prompts = sorted(i for i, r in sent.items() if r["message"]["method"] == "session/prompt")
    stops = [answered[i]["message"]["result"]["stopReason"] for i in prompts]
    assert stops == ["cancelled", "cancelled", "end_turn"]
    cancel = next(r for r in rows if r["message"].get("method") == "session/cancel")
    assert sent[prompts[0]]["seq"] < cancel["seq"] < answered[prompts[0]]["seq"]
    # Prompt 3 was sent while prompt 2 was still running.
    assert sent[prompts[2]]["seq"] < answered[prompts[1]]["seq"]


def test_acp_runs_write_no_cli_otel_export() -> None:
    # Recorded as found: 1.0.102 enables OTel in --acp mode but creates no per-session tracker.
    for name in ("acp-model-change", "acp-cancel"):
        assert not (SHAPES / name / "_capture" / "otel.jsonl").exists()
        assert json.loads((SHAPES / name / "_capture" / "meta.json").read_text())["otel_export"] is False
