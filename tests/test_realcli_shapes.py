"""The shape capture machinery: the fake model's compaction handling, the capture's reductions, one real capture.

The pure parts (``choose_reply``, the request/OTel reductions) run everywhere; the end-to-end capture of one shape
needs the real CLI (skips locally without it, fails under CI like ``test_realcli_smoke``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.realcli.fake_model import (
    COMPACTED_PREFIX,
    COMPACTION_INTERACTION,
    COMPACTION_TEXT,
    RecordedRequest,
    Script,
    Step,
    ToolCall,
    choose_reply,
    prompt_for,
    sse_frames,
)
from tests.realcli.shapes import SHAPES, _reduce_otel_lines, _reduce_requests, capture
from tests.test_realcli_smoke import copilot_binary  # noqa: F401 - the shared "installed or skip/fail" fixture

SCRIPT = Script(
    "demo",
    tuple(Step(tool_calls=(ToolCall("bash", {"command": f"echo {n}"}),)) for n in range(4)),
    final="Done.",
)
SCRIPTS = {SCRIPT.name: SCRIPT}
TOOLS = [{"type": "function", "function": {"name": "bash"}}]


def _body(*messages: dict[str, Any]) -> dict[str, Any]:
    system = {"role": "system", "content": "Current working directory: /w\n"}
    return {"model": "gpt-4.1", "messages": [system, *messages], "tools": TOOLS}


def _turns(n: int) -> list[dict[str, Any]]:
    """``n`` assistant tool calls, each with its tool result."""
    out: list[dict[str, Any]] = []
    for i in range(n):
        out += [{"role": "assistant", "content": "", "tool_calls": [{"id": f"c{i}"}]}, {"role": "tool"}]
    return out


def test_compaction_call_gets_the_summary_and_reports_where_the_history_was() -> None:
    prompt = {"role": "user", "content": prompt_for("demo")}
    ask = {"role": "user", "content": "Please create a detailed summary of the conversation so far."}
    reply = choose_reply(_body(prompt, *_turns(2), ask), SCRIPTS, COMPACTION_INTERACTION)
    assert reply.step.content == COMPACTION_TEXT
    assert reply.step.tool_calls == ()
    assert reply.compacts == ("demo", 2)
    assert reply.script is None  # not a scripted step: no tool-call ids are taken from the script


def test_after_a_compaction_the_script_continues_instead_of_replaying() -> None:
    summary = {"role": "user", "content": f"{COMPACTED_PREFIX} to free up context. {prompt_for('demo')}"}
    body = _body(summary, *_turns(1))
    assert choose_reply(body, SCRIPTS, None, {"demo": 2}).step_index == 3
    # without the offset the step would repeat (and with it the tool-call id call_demo_1_0)
    assert choose_reply(body, SCRIPTS).step_index == 1
    # an ordinary prompt is not shifted by an earlier compaction
    plain = _body({"role": "user", "content": prompt_for("demo")}, *_turns(1))
    assert choose_reply(plain, SCRIPTS, None, {"demo": 2}).step_index == 1


def test_step_usage_reaches_the_usage_chunk() -> None:
    script = Script("big", (Step(content="x", prompt_tokens=70_000, completion_tokens=7),))
    reply = choose_reply(_body({"role": "user", "content": prompt_for("big")}), {"big": script})
    frames = [f for f in sse_frames(reply, "gpt-4.1", 0) if f != b"data: [DONE]\n\n"]
    usage = json.loads(frames[-1].removeprefix(b"data: "))["usage"]
    assert usage == {"prompt_tokens": 70_000, "completion_tokens": 7, "total_tokens": 70_007}


def _record(seq: int, messages: list[dict[str, Any]]) -> RecordedRequest:
    body = {"messages": messages, "tools": TOOLS}
    headers = {
        "authorization": "<redacted>",
        "x-stainless-os": "Linux",
        "host": "127.0.0.1:1",
        "x-initiator": "user",
    }
    return RecordedRequest(seq, 0.0, "POST", "/v1/chat/completions", headers, body, "demo", seq - 1)


def test_request_log_folds_a_history_it_already_logged() -> None:
    system = {"role": "system", "content": "S" * 50}
    first = [system, {"role": "user", "content": "hi"}]
    second = [*first, {"role": "assistant", "content": "a"}, {"role": "tool", "content": "t"}]
    unrelated = [system, {"role": "user", "content": "other"}]
    lines = [
        json.loads(line)
        for line in _reduce_requests([_record(1, first), _record(2, second), _record(3, unrelated)], SCRIPTS)
    ]
    assert lines[0]["body"]["messages"][0]["content"].startswith("<system prompt: 50 chars, sha256 ")
    assert lines[0]["body"]["tools"] == ["bash"]
    assert lines[0]["headers"] == {"authorization": "<redacted>", "x-initiator": "user"}
    assert lines[0]["step"]["tool_calls"] == [{"name": "bash", "arguments": {"command": "echo 0"}}]
    assert lines[1]["body"]["messages"] == [
        {"role": "<history>", "same_as_seq": 1, "messages": 2},
        {"role": "assistant", "content": "a"},
        {"role": "tool", "content": "t"},
    ]
    assert len(lines[2]["body"]["messages"]) == 2  # shares only the system prompt: nothing folded


def test_otel_repeats_are_replaced_after_their_first_occurrence() -> None:
    long_value = "p" * 3_000
    spans = [
        {"type": "span", "attributes": {"gen_ai.system_instructions": long_value, "n": i}} for i in range(3)
    ]
    out = [json.loads(line) for line in _reduce_otel_lines(json.dumps(s) for s in spans)]
    values = [o["attributes"]["gen_ai.system_instructions"] for o in out]
    assert values[0] == long_value
    assert values[1] == values[2]
    assert values[1].startswith("<repeat: 3000 chars, sha256 ")
    assert [o["attributes"]["n"] for o in out] == [0, 1, 2]


@pytest.mark.realcli
@pytest.mark.timeout(120)
def test_capture_writes_a_fixture_folder(copilot_binary: Path, tmp_path: Path) -> None:  # noqa: F811
    shape = next(s for s in SHAPES if s.name == "autopilot-cap")
    target = capture(shape, tmp_path / "out", copilot_binary, tmp_path / "lab", lambda _line: None)
    assert target == tmp_path / "out" / "autopilot-cap"
    capture_dir = target / "_capture"
    for name in ("otel.jsonl", "stdout.jsonl", "stderr.txt", "model-requests.jsonl", "meta.json"):
        assert (capture_dir / name).is_file(), name
    assert list(capture_dir.glob("process-*.log"))
    meta = json.loads((capture_dir / "meta.json").read_text())
    assert meta["session_id"] == shape.session_id
    assert meta["working_directory"] == str(tmp_path / "lab" / "autopilot-cap" / "projects" / "autopilot-cap")
    assert [run["exit_code"] for run in meta["runs"]] == [0]
    assert f"--session-id={shape.session_id}" in meta["runs"][0]["args"]
    events = [json.loads(line) for line in (target / "events.jsonl").read_text().splitlines()]
    assert events[0]["data"]["sessionId"] == shape.session_id
    assert sum(1 for e in events if e["data"].get("isAutopilotContinuation")) == 3
    # the CLI masks the API key's value in its stdout: with a one-letter key that hit ordinary words
    assert "******" not in (capture_dir / "stdout.jsonl").read_text()
