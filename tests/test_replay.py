"""``copilot-otel replay``: every fixture through the real pipeline into a real OTLP receiver over a socket.

Expectations are computed from the raw logs with plain ``json`` (not with our parser or fold), so a wrong
fold cannot agree with itself.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from copilot_otel.cli import main
from copilot_otel.common.errors import RejectedError
from tests.conftest import CLI_GENERATED, TOKEN_LIKE, all_fixture_logs, fixture_copy, read_events, replay_into
from tests.otlp_receiver import OtlpReceiver

FIXTURE_LOGS = all_fixture_logs()
IDS = [p.parent.name if p.name == "events.jsonl" else p.stem for p in FIXTURE_LOGS]


_events = read_events
_replay = replay_into


def _trace_spans(receiver: OtlpReceiver) -> dict[str, list[dict[str, Any]]]:
    traces: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for span in receiver.spans():
        traces[span["trace_id"]].append(span)
    return traces


def _human_prompts(events: list[dict[str, Any]]) -> int:
    count = 0
    for e in events:
        if e.get("type") != "user.message" or e.get("agentId"):
            continue
        d = e.get("data", {})
        if d.get("source") or d.get("isAutopilotContinuation") or d.get("delivery") == "steering":
            continue
        count += 1
    return count


def _expected_traces(events: list[dict[str, Any]]) -> int:
    """One trace per human prompt; agent activity while no prompt is open (a log that starts mid-way, work
    after a shutdown) gets a trace of its own rather than being dropped."""
    traces, is_open = 0, False
    for e in events:
        kind = e.get("type", "")
        d = e.get("data", {})
        if (
            kind == "user.message"
            and not e.get("agentId")
            and not str(d.get("source", "")).startswith("agent-")
        ):
            injected = d.get("source") or d.get("isAutopilotContinuation") or d.get("delivery") == "steering"
            if not injected or not is_open:
                traces += 1
                is_open = True
        elif kind in ("session.shutdown", "session.resume"):
            is_open = False
        elif (
            kind.startswith(("assistant.", "tool.", "subagent.")) or kind == "session.usage_record"
        ) and not is_open:
            traces += 1
            is_open = True
    return traces


def _agent_key(e: dict[str, Any]) -> str:
    return e.get("agentId") or e.get("data", {}).get("parentToolCallId") or "main"


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
@pytest.mark.parametrize("log", FIXTURE_LOGS, ids=IDS)
def test_fixture_replays_into_a_faithful_tree(receiver: OtlpReceiver, log: Path, protocol: str) -> None:
    assert _replay(receiver, log, protocol=protocol) == 0
    events = _events(log)
    spans = receiver.spans()
    by_id = {s["span_id"]: s for s in spans}
    assert len(by_id) == len(spans), "span ids are unique"

    # one trace per prompt; every trace is one tree under one invoke_agent root
    traces = _trace_spans(receiver)
    assert len(traces) == _expected_traces(events)
    for trace in traces.values():
        roots = [s for s in trace if s["parent_span_id"] is None]
        assert [r["name"] for r in roots] == ["invoke_agent"]
        assert roots[0]["attributes"]["gen_ai.operation.name"] == "invoke_agent"
        assert roots[0]["attributes"]["openinference.span.kind"] == "AGENT"
        for s in trace:
            if s["parent_span_id"] is not None:
                assert by_id[s["parent_span_id"]]["trace_id"] == s["trace_id"], s["name"]
            assert s["end_ns"] >= s["start_ns"]

    # turns: one per turn_start…turn_end; a model response outside any turn (old logs write no turn events)
    # is a turn of its own
    open_turn: dict[str, bool] = defaultdict(bool)
    expected_turns = 0
    for e in events:
        key = _agent_key(e)
        if e["type"] == "assistant.turn_start":
            expected_turns += 1
            open_turn[key] = True
        elif e["type"] == "assistant.turn_end":
            open_turn[key] = False
        elif e["type"] == "assistant.message" and not open_turn[key]:
            expected_turns += 1
    turns = [s for s in spans if s["name"].startswith("turn ")]
    assert len(turns) == expected_turns
    for turn in turns:
        assert turn["attributes"]["openinference.span.kind"] == "CHAIN"
        assert "gen_ai.operation.name" not in turn["attributes"]
        assert by_id[turn["parent_span_id"]]["name"].startswith("invoke_agent")
        chats = [s for s in spans if s["parent_span_id"] == turn["span_id"] and s["name"].startswith("chat ")]
        assert len(chats) == 1, f"{turn['name']} has exactly one chat span"
        assert turn["attributes"]["copilot_otel.turn.index"] == int(turn["name"].split()[1])

    # tools: one span per execution, under a turn (or an agent), with status from the log
    starts = [e for e in events if e["type"] == "tool.execution_start"]
    completes = {e["data"]["toolCallId"]: e["data"] for e in events if e["type"] == "tool.execution_complete"}
    tools = [s for s in spans if s["name"].startswith("execute_tool ")]
    assert sorted(s["attributes"]["gen_ai.tool.call.id"] for s in tools) == sorted(
        e["data"]["toolCallId"] for e in starts
    )
    for tool in tools:
        attrs = tool["attributes"]
        call = completes.get(attrs["gen_ai.tool.call.id"])
        assert tool["name"] == f"execute_tool {attrs['gen_ai.tool.name']}"
        assert attrs["openinference.span.kind"] == "TOOL"
        assert len(attrs["copilot_otel.tool.arguments_hash"]) == 16
        parent = by_id[tool["parent_span_id"]]["name"]
        assert parent.startswith(("turn ", "invoke_agent")), parent
        if call is None:
            assert tool["status_code"] == 2 and attrs["error.type"] == "cancelled"
            assert attrs["copilot_otel.incomplete"] is True
        elif call.get("success") is False:
            assert tool["status_code"] == 2 and attrs["error.type"] == "ToolError"
            assert tool["status_message"] == ((call.get("error") or {}).get("message") or "ToolError")[:512]
        else:
            assert tool["status_code"] == 0
            exit_code = (call.get("shellExecution") or {}).get("exitCode")
            assert attrs.get("process.exit.code") == exit_code

    # sub-agents nest under the task call that started them
    for started in (e for e in events if e["type"] == "subagent.started"):
        agent = next(s for s in spans if s["name"] == f"invoke_agent {started['data']['agentName']}")
        parent = by_id[agent["parent_span_id"]]
        before = events[: events.index(started)]
        if any(
            e["type"] == "tool.execution_start"
            and e["data"].get("toolName") == "task"
            and e["data"].get("toolCallId") == started["data"]["toolCallId"]
            for e in before
        ):
            assert parent["name"] == "execute_tool task"
            assert parent["attributes"]["gen_ai.tool.call.id"] == started["data"]["toolCallId"]
        else:  # the log never shows the spawning call (a trimmed log): the agent hangs under the root
            assert parent["name"] == "invoke_agent" and parent["parent_span_id"] is None
        assert agent["attributes"]["gen_ai.agent.name"] == started["data"]["agentName"]

    # tokens: the chat spans' sums equal the log's usage records
    usage = [e["data"]["usage"] for e in events if e["type"] == "session.usage_record"]
    chats = [s for s in spans if s["name"].startswith("chat ")]
    if usage:
        for key, attr in (
            ("inputTokens", "gen_ai.usage.input_tokens"),
            ("outputTokens", "gen_ai.usage.output_tokens"),
            ("cacheReadTokens", "gen_ai.usage.cache_read.input_tokens"),
        ):
            assert sum(c["attributes"][attr] for c in chats) == sum(u.get(key, 0) for u in usage)

    # timestamps come from the events, never the clock
    stamps = {e["timestamp"] for e in events}
    from copilot_otel.model.timestamps import parse_timestamp

    event_ns = {parse_timestamp(t) for t in stamps if isinstance(t, str) and t[:1].isdigit()}
    for s in spans:
        if s["attributes"].get("copilot_otel.chat.origin"):
            continue
        assert s["start_ns"] in event_ns, s["name"]
        assert s["end_ns"] in event_ns or s["end_ns"] == s["start_ns"], s["name"]

    # session context on every span
    session_id = next((e["data"]["sessionId"] for e in events if e["type"] == "session.start"), None)
    for s in spans:
        if session_id:
            assert s["attributes"]["gen_ai.conversation.id"] == session_id
            assert s["attributes"]["session.id"] == session_id


def _native(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("name", sorted(p.name for p in CLI_GENERATED.iterdir() if p.is_dir()))
def test_matches_the_cli_own_export(receiver: OtlpReceiver, name: str) -> None:
    """Same tool call ids, tool names, tool error statuses, token totals and conversation id as the CLI's export."""
    folder = CLI_GENERATED / name
    assert _replay(receiver, folder) == 0
    native = [r for r in _native(folder / "_capture" / "otel.jsonl") if r.get("type") == "span"]
    ours = receiver.spans()

    def tools(spans: list[dict[str, Any]], attrs_key: str, status: Any) -> dict[str, tuple[str, int]]:
        return {
            s[attrs_key]["gen_ai.tool.call.id"]: (s[attrs_key]["gen_ai.tool.name"], status(s))
            for s in spans
            if s[attrs_key].get("gen_ai.operation.name") == "execute_tool"
        }

    assert tools(ours, "attributes", lambda s: s["status_code"]) == tools(
        native, "attributes", lambda s: s["status"]["code"]
    )
    for key in ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"):
        native_sum = sum(
            s["attributes"].get(key, 0) for s in native if s["attributes"]["gen_ai.operation.name"] == "chat"
        )
        ours_sum = sum(
            s["attributes"][key] for s in ours if s["attributes"].get("gen_ai.operation.name") == "chat"
        )
        assert ours_sum == native_sum
    conversation = {s["attributes"]["gen_ai.conversation.id"] for s in native}
    assert {s["attributes"]["gen_ai.conversation.id"] for s in ours} == conversation
    native_roots = [s for s in native if s["name"] == "invoke_agent"]
    assert len({s["trace_id"] for s in ours}) == len(native_roots)
    # the root's turn count matches the CLI's (one model call per turn on disk)
    ours_turns = sorted(
        s["attributes"]["github.copilot.turn_count"] for s in ours if s["name"] == "invoke_agent"
    )
    native_turns = sorted(
        len(
            {
                c["attributes"].get("github.copilot.turn_id")
                for c in native
                if c["traceId"] == r["traceId"]
                and c["name"].startswith("chat ")
                and "github.copilot.turn_id" in c["attributes"]
            }
        )
        for r in native_roots
    )
    assert ours_turns == native_turns


def test_replay_is_deterministic(receiver: OtlpReceiver) -> None:
    assert _replay(receiver, CLI_GENERATED) == 0
    first = sorted(receiver.spans(), key=lambda s: s["span_id"])
    first_logs = sorted(receiver.logs(), key=lambda r: (r["time_ns"], r["event_name"]))
    receiver.clear()
    assert _replay(receiver, CLI_GENERATED, protocol="grpc") == 0
    second = sorted(receiver.spans(), key=lambda s: s["span_id"])
    second_logs = sorted(receiver.logs(), key=lambda r: (r["time_ns"], r["event_name"]))
    assert first == second
    assert [(r["event_name"], r["trace_id"], r["attributes"]) for r in first_logs] == [
        (r["event_name"], r["trace_id"], r["attributes"]) for r in second_logs
    ]


def test_a_bad_line_costs_that_line_only(
    receiver: OtlpReceiver, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = CLI_GENERATED / "multi-tool"
    assert _replay(receiver, source) == 0
    clean = sorted(receiver.spans(), key=lambda s: s["span_id"])
    receiver.clear()
    broken = tmp_path / "0c000002-broken"
    shutil.copytree(source, broken)
    lines = (broken / "events.jsonl").read_bytes().splitlines(keepends=True)
    lines.insert(10, b'{"type": "tool.execution_start", "data": {tr\n')
    lines.insert(5, b"\xff\xfe not utf-8\n")
    lines.insert(3, b"[1, 2, 3]\n")
    (broken / "events.jsonl").write_bytes(b"".join(lines))
    assert _replay(receiver, broken) == 0
    assert sorted(receiver.spans(), key=lambda s: s["span_id"]) == clean
    err = capsys.readouterr()
    assert "events.jsonl:4: skipped a bad line (not_an_object" in err.err
    assert "events.jsonl:7: skipped a bad line (invalid_utf8" in err.err
    assert "3 bad lines skipped" in err.out


def test_collector_answering_503_still_gets_everything(receiver: OtlpReceiver) -> None:
    receiver.fail_next(3, "unavailable", signal="traces")
    receiver.fail_next(1, "retry_after", signal="logs", retry_after_s=0.5)
    assert _replay(receiver, CLI_GENERATED / "subagent") == 0
    assert len(receiver.spans()) == 12
    assert {r.outcome for r in receiver.request_log("traces")} >= {"accepted"}
    assert len([r for r in receiver.request_log("traces") if r.outcome != "accepted"]) == 3
    # the daemon's health metrics tell the same story for a replay
    health = {(m["name"], tuple(m["attributes"].values())): m["value"] for m in receiver.metrics()}
    assert health[("copilot_otel.export.retries", ())] == 4
    assert health[("copilot_otel.export.spans", ("exported",))] == 12


def test_unreachable_collector_fails_clearly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(
        [
            "replay",
            str(CLI_GENERATED / "plain-question"),
            "--endpoint",
            "http://127.0.0.1:9",
            "--max-retry-time",
            "1",
            "--no-progress",
        ]
    )
    assert rc != 0
    err = capsys.readouterr().err
    assert "did not accept" in err and "cannot connect to http://127.0.0.1:9/v1/traces" in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) <= 3


def test_permanent_rejection_is_dead_lettered_and_reported(
    receiver: OtlpReceiver, _isolated_home: Path
) -> None:
    receiver.reject_when(lambda span: span["name"] == "execute_tool view")
    # not everything was delivered: the exit code says so (the rest was)
    assert _replay(receiver, CLI_GENERATED / "multi-tool") == RejectedError.exit_code
    names = Counter(s["name"] for s in receiver.spans())
    assert names["execute_tool view"] == 0 and names["execute_tool bash"] == 2
    dead = (_isolated_home / ".local/state/copilot-otel/dead-letter.jsonl").read_text().splitlines()
    assert [json.loads(d)["record"]["name"] for d in dead] == ["execute_tool view"]


def test_embedded_default_writes_otlp_json_lines(
    _isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["replay", str(CLI_GENERATED / "failing-tool"), "--no-progress"]) == 0
    out = _isolated_home / ".local/state/copilot-otel/otlp.jsonl"
    assert str(out) in capsys.readouterr().out
    records = [json.loads(line) for line in out.read_text().splitlines()]
    spans = [
        s
        for r in records
        for rs in r.get("resourceSpans", [])
        for ss in rs["scopeSpans"]
        for s in ss["spans"]
    ]
    events = _events(CLI_GENERATED / "failing-tool" / "events.jsonl")
    kinds = Counter(e["type"] for e in events)
    # root + (turn + chat) per turn + one per tool execution
    assert len(spans) == 1 + 2 * kinds["assistant.turn_start"] + kinds["tool.execution_start"]
    assert all(len(s["traceId"]) == 32 and len(s["spanId"]) == 16 for s in spans)
    assert any("resourceLogs" in r for r in records) and any("resourceMetrics" in r for r in records)


def test_no_content_leaves_the_machine_by_default(receiver: OtlpReceiver) -> None:
    folder = CLI_GENERATED / "capi-failing-tool"
    assert _replay(receiver, folder) == 0
    blob = json.dumps([receiver.spans(), receiver.logs()])
    for secret_ish in (
        "Check the config and run the tests",
        "config/missing.yaml",
        "test_add FAILED",
        "You are the GitHub Copilot CLI",
    ):
        assert secret_ish not in blob
    for span in receiver.spans():
        for key in ("input.value", "output.value", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"):
            assert key not in span["attributes"]


def test_content_capture_opt_in_is_scrubbed(
    receiver: OtlpReceiver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = TOKEN_LIKE
    folder = fixture_copy(
        tmp_path, "plain-question", "What is the capital of France?", f"use token {token} please"
    )
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    assert _replay(receiver, folder) == 0
    root = next(s for s in receiver.spans() if s["name"] == "invoke_agent")
    assert "use token" in root["attributes"]["input.value"]
    assert token not in json.dumps(receiver.spans())
    chat = next(s for s in receiver.spans() if s["name"].startswith("chat "))
    assert json.loads(chat["attributes"]["gen_ai.output.messages"])[0]["role"] == "assistant"


def test_replay_of_a_whole_session_state_root(receiver: OtlpReceiver, tmp_path: Path) -> None:
    root = tmp_path / "session-state"
    root.mkdir()
    for name in ("subagent", "resumed"):
        shutil.copytree(CLI_GENERATED / name, root / name)
    shutil.copy(FIXTURE_LOGS[-5], root / "c8963ad7-legacy.jsonl")
    assert _replay(receiver, root) == 0
    assert len(_trace_spans(receiver)) == 1 + 2 + _human_prompts(_events(FIXTURE_LOGS[-5]))


def test_unknown_session_id_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "no-such-session", "--no-progress"]) == 3
    err = capsys.readouterr().err.strip()
    assert err.startswith("copilot-otel: error: no such file, folder or session id: 'no-such-session'")
    assert len(err.splitlines()) == 1


def test_worker_processes_export_exactly_what_one_process_does(
    receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("copilot_otel.replay.CHUNK_BYTES", 50_000)  # several chunks even for the fixtures
    assert _replay(receiver, CLI_GENERATED, extra=("--workers", "1")) == 0
    one = sorted(receiver.spans(), key=lambda s: s["span_id"])
    one_metrics = {
        (m["name"], tuple(sorted(m["attributes"].items()))): m.get("value", m.get("count"))
        for m in receiver.metrics()
    }
    receiver.clear()
    # the parent's chunking decides the split (workers only fold what they are given)
    assert _replay(receiver, CLI_GENERATED, extra=("--workers", "2")) == 0
    two = sorted(receiver.spans(), key=lambda s: s["span_id"])
    two_metrics = {
        (m["name"], tuple(sorted(m["attributes"].items()))): m.get("value", m.get("count"))
        for m in receiver.metrics()
    }
    assert [_without_resource(s) for s in one] == [_without_resource(s) for s in two]
    assert one_metrics == two_metrics
    assert len({r.transport for r in receiver.request_log("traces")}) == 1


def _without_resource(span: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in span.items() if k != "resource"}


def test_event_only_capture_puts_no_content_on_spans(
    receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "EVENT_ONLY")
    assert _replay(receiver, CLI_GENERATED / "plain-question") == 0
    assert "What is the capital of France?" not in json.dumps(receiver.spans())


def test_an_endpoint_that_takes_no_logs_fails_with_a_hint(
    receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # a traces-only backend: logs go to a path it does not serve (HTTP 404), as Phoenix answers 405
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", f"{receiver.http_endpoint}/no-logs-here")
    assert _replay(receiver, CLI_GENERATED / "plain-question") == 6  # the endpoint's doing, not an outage
    err = capsys.readouterr().err
    assert "the endpoint refuses logs" in err and "COPILOT_OTEL_LOGS=false" in err
    # not a permanent rejection of the records: nothing is bisected into the dead-letter file
    assert not (Path.home() / ".local/state/copilot-otel/dead-letter.jsonl").exists()
    monkeypatch.setenv("COPILOT_OTEL_LOGS", "false")
    receiver.clear()
    assert _replay(receiver, CLI_GENERATED / "plain-question") == 0
    assert len(receiver.spans()) == 3
