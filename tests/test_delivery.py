"""Delivery under misconfiguration, poison values and slow collectors: never lose, never lie.

Everything runs against the real OTLP receiver over a socket (scripted answers), the daemon as a real child
process, ``replay`` through its real entry point. Fixtures come from ``tests/fixtures`` only; poison values are made
by editing a copy in ``tmp_path``.
"""

from __future__ import annotations

import json
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any, NamedTuple

import orjson
import pytest

from copilot_otel.cli import main
from copilot_otel.common.errors import EndpointError, ExportError, RejectedError
from copilot_otel.daemon.state import read_checkpoints
from copilot_otel.sources.copilot import events
from tests.conftest import CLI_GENERATED, fixture_copy, replay_into
from tests.daemon_process import DaemonProcess
from tests.otlp_receiver import OtlpReceiver, Signal
from tests.waiting import until


class Answer(NamedTuple):
    """What a collector says about the caller, not the data, and what our message must tell the user."""

    transport: str
    http_status: int
    grpc_code: str
    signal: Signal | None  # the signal scripted; None = every signal
    hint: str

    def script(self, receiver: OtlpReceiver) -> None:
        receiver.fail_next(
            10_000, "refuse", signal=self.signal, http_status=self.http_status, grpc_code=self.grpc_code
        )

    def endpoint(self, receiver: OtlpReceiver) -> tuple[str, str]:
        if self.transport == "grpc":
            return receiver.grpc_endpoint, "grpc"
        return receiver.http_endpoint, "http/protobuf"


_HEADERS = "check OTEL_EXPORTER_OTLP_HEADERS"
# A 404 or UNIMPLEMENTED for logs alone means "this backend takes no logs" (handled elsewhere): those script traces.
ENDPOINT_ANSWERS = [
    pytest.param(Answer("http", 401, "OK", None, _HEADERS), id="http-401"),
    pytest.param(Answer("http", 403, "OK", None, _HEADERS), id="http-403"),
    pytest.param(Answer("http", 404, "OK", "traces", "give the base URL"), id="http-404"),
    pytest.param(Answer("http", 407, "OK", None, "HTTPS_PROXY"), id="http-407"),
    pytest.param(Answer("grpc", 0, "UNAUTHENTICATED", None, _HEADERS), id="grpc-unauthenticated"),
    pytest.param(Answer("grpc", 0, "PERMISSION_DENIED", None, _HEADERS), id="grpc-permission-denied"),
    pytest.param(
        Answer("grpc", 0, "UNIMPLEMENTED", "traces", "no OTLP trace service there"), id="grpc-unimplemented"
    ),
]
_RETRY_30S = ("--max-retry-time", "30")


def _expected(tmp: Path, *paths: Path) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """Spans (by span id) and log events a clean replay of ``paths`` delivers, from a receiver of its own."""
    with OtlpReceiver() as other:
        rc = main(
            [
                "replay",
                *map(str, paths),
                "--endpoint",
                other.http_endpoint,
                "--no-progress",
                "--state-dir",
                str(tmp / "expected-state"),
            ]
        )
        assert rc == 0
        return {s["span_id"]: _strip(s) for s in other.spans()}, [_strip(log) for log in other.logs()]


def _strip(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k != "resource"}


def _dead_letters(home: Path) -> list[dict[str, Any]]:
    path = home / ".local/state/copilot-otel/dead-letter.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


# ============================================================================ 1. endpoint errors: replay fails at once
@pytest.mark.parametrize("answer", ENDPOINT_ANSWERS)
def test_replay_fails_at_once_on_an_endpoint_error_and_dead_letters_nothing(
    receiver: OtlpReceiver, capsys: pytest.CaptureFixture[str], _isolated_home: Path, answer: Answer
) -> None:
    answer.script(receiver)
    started = time.monotonic()
    rc = replay_into(
        receiver, CLI_GENERATED / "multi-tool", protocol=answer.endpoint(receiver)[1], extra=_RETRY_30S
    )
    took = time.monotonic() - started
    assert rc == EndpointError.exit_code
    assert took < 15, f"failed at once, not after the 30 s retry window ({took:.1f}s)"
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("copilot-otel: error:")]
    assert len(lines) == 1 and err.strip().splitlines()[-1] == lines[0]
    line = lines[0]
    assert (f"HTTP {answer.http_status}" if answer.transport == "http" else answer.grpc_code) in line
    assert answer.hint in line
    assert "delivered 0 of 14 spans" in line and "not delivered: 14 spans" in line
    assert len(receiver.request_log("traces")) == 1, "one answer is enough: it is about the endpoint"
    assert receiver.spans() == [] and _dead_letters(_isolated_home) == []


def test_replay_to_a_doubled_path_says_to_give_the_base_url(
    receiver: OtlpReceiver,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    _isolated_home: Path,
) -> None:
    # the everyday mistake: the signal path in the base endpoint variable (the receiver answers a real 404)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"{receiver.http_endpoint}/v1/traces")
    assert main(["replay", str(CLI_GENERATED / "plain-question"), "--no-progress"]) == EndpointError.exit_code
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(
        f"copilot-otel: error: HTTP 404 from {receiver.http_endpoint}/v1/traces/v1/traces: the endpoint already "
        f"ends in /v1/traces; wrong path or port: give the base URL (OTEL_EXPORTER_OTLP_ENDPOINT="
        f"{receiver.http_endpoint})"
    )
    assert _dead_letters(_isolated_home) == []


# ======================================================== 1. endpoint errors: the daemon holds, then delivers once
@pytest.mark.parametrize("answer", ENDPOINT_ANSWERS)
def test_daemon_holds_data_while_the_endpoint_refuses_then_delivers_it_exactly_once(
    tmp_path: Path, receiver: OtlpReceiver, answer: Answer
) -> None:
    root, state = tmp_path / "session-state", tmp_path / "state"
    for name in ("multi-tool", "failing-tool"):
        shutil.copytree(CLI_GENERATED / name, root / name)
    paths = [root / name / "events.jsonl" for name in ("multi-tool", "failing-tool")]
    want_spans, want_logs = _expected(tmp_path, *paths)
    answer.script(receiver)
    endpoint, protocol = answer.endpoint(receiver)
    d = DaemonProcess(root, state, endpoint, tmp_path / "daemon.log", "--protocol", protocol).start()
    try:
        # held: status says what to fix, nothing is accepted, dead-lettered or checkpointed
        def held() -> dict[str, Any] | None:
            path = state / "status.json"
            doc: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
            return doc if doc.get("endpoint_error") else None

        status_json = until(held, 30, "an endpoint error in status.json", detail=lambda: d.output()[-3000:])
        assert answer.hint in status_json["endpoint_error"] and status_json["dead_lettered"] == 0
        assert status_json["last_error"] == status_json["endpoint_error"]
        assert status_json["backlog_spans"] > 0
        assert receiver.spans() == [] and not (state / "dead-letter.jsonl").exists()
        checkpoints = read_checkpoints(state)
        assert all(c.acked_offset == 0 for c in checkpoints.values()), checkpoints
        # the endpoint is fixed (token renewed, collector reconfigured): no restart needed
        receiver.reset_faults()
        receiver.wait_for(lambda r: {s["span_id"] for s in r.spans()} >= set(want_spans), 60)
        receiver.wait_for(lambda r: len(r.logs()) >= len(want_logs), 30)
    finally:
        rc = d.terminate()  # its stop flushes what it holds: a span it would send twice has been sent by now
    assert rc == 0
    spans = receiver.spans()
    assert Counter(s["span_id"] for s in spans) == Counter(set(want_spans)), "every span exactly once"
    assert all(_strip(s) == want_spans[s["span_id"]] for s in spans)
    assert sorted(map(repr, map(_strip, receiver.logs()))) == sorted(map(repr, want_logs)), (
        "every log event once"
    )
    assert not (state / "dead-letter.jsonl").exists()
    out = d.output()
    assert "Traceback" not in out and "dead-lettered" not in out
    said = [line for line in out.splitlines() if "holding the data" in line]
    assert len(said) == 1 and answer.hint in said[0], "said once, plainly, with what to fix"
    assert "accepting again" in out
    final = json.loads((state / "status.json").read_text())
    assert final["endpoint_error"] == "" and final["dead_lettered"] == 0 and final["backlog_spans"] == 0


# ============================================================================ 2. poison values cost only themselves
_POISONED_END = "2026-11-29T17:11:32.618Z"  # the end of multi-tool's second bash, moved to the year 2700


def _poisoned_session(tmp_path: Path) -> Path:
    """multi-tool with a tool that completes in the year 2700 and a model call of 2**70 output tokens."""
    folder = fixture_copy(tmp_path, "multi-tool", _POISONED_END, _POISONED_END.replace("2026", "2700"))
    log = folder / "events.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    usage = next(i for i, line in enumerate(lines) if b'"sequence":2' in line)
    assert b'"outputTokens":40,' in lines[usage]
    lines[usage] = lines[usage].replace(b'"outputTokens":40,', b'"outputTokens":%d,' % 2**70)
    log.write_bytes(b"".join(lines))
    return folder


def _assert_poisoned_session_whole(got: dict[str, dict[str, Any]], clean: dict[str, dict[str, Any]]) -> None:
    """Every span of the poisoned multi-tool arrived, identical to the clean one's but for the two values lost:
    the tool that ended "in 2700" is dated at the event before, the call of 2**70 tokens has no output count."""
    assert set(got) == set(clean), "every span of the poisoned session arrived"
    differ = {k for k in clean if got[k] != clean[k]}
    by_name = {clean[k]["name"]: k for k in differ}
    assert sorted(by_name) == ["chat gpt-4.1", "execute_tool bash", "invoke_agent"], sorted(by_name)
    bash = got[by_name["execute_tool bash"]]
    assert bash["start_ns"] <= bash["end_ns"] < clean[by_name["execute_tool bash"]]["end_ns"] < 2**63
    assert {k: v for k, v in bash.items() if k != "end_ns"} == {
        k: v for k, v in clean[by_name["execute_tool bash"]].items() if k != "end_ns"
    }
    # Unknown is not zero (issue 23): the dropped count is absent, and so is every sum it is part of.
    chat = got[by_name["chat gpt-4.1"]]["attributes"]
    assert "gen_ai.usage.output_tokens" not in chat and "llm.token_count.completion" not in chat
    assert (
        chat["gen_ai.usage.input_tokens"]
        == clean[by_name["chat gpt-4.1"]]["attributes"]["gen_ai.usage.input_tokens"]
    )
    root = got[by_name["invoke_agent"]]["attributes"]
    assert "gen_ai.usage.output_tokens" not in root
    assert "gen_ai.usage.output_tokens" in clean[by_name["invoke_agent"]]["attributes"]


def test_replay_poison_values_cost_only_themselves(
    receiver: OtlpReceiver,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    _isolated_home: Path,
) -> None:
    root = tmp_path / "session-state"
    root.mkdir()
    poisoned = _poisoned_session(tmp_path)
    shutil.move(poisoned, root / "poisoned")
    for name in ("failing-tool", "subagent"):
        shutil.copytree(CLI_GENERATED / name, root / name)
    clean_spans, clean_logs = _expected(tmp_path, root / "failing-tool", root / "subagent")
    multi_tool, _ = _expected(tmp_path / "multi-tool", CLI_GENERATED / "multi-tool")
    # several small batches: a sending thread that died on the first would leave the next put blocked forever
    monkeypatch.setattr("copilot_otel.deliver.batcher.BATCH_RECORDS", 8)
    assert replay_into(receiver, root) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "encoded" not in out + err
    got = {s["span_id"]: _strip(s) for s in receiver.spans()}
    assert Counter(s["span_id"] for s in receiver.spans()).most_common(1)[0][1] == 1
    # the two clean sessions arrive whole, identical to a replay without the poisoned one
    assert {k: v for k, v in got.items() if k in clean_spans} == clean_spans
    _assert_poisoned_session_whole({k: v for k, v in got.items() if k not in clean_spans}, multi_tool)
    got_logs = [repr(_strip(log)) for log in receiver.logs()]
    assert all(repr(log) in got_logs for log in clean_logs)
    assert _dead_letters(_isolated_home) == []
    # metrics were sent, the 2**70 tokens not among them; the drops are counted by reason
    tokens = [m for m in receiver.metrics() if m["name"] == "gen_ai.client.inference.usage.output_tokens"]
    assert tokens and all(m["value"] < 2**53 for m in tokens)
    dropped = {
        m["attributes"]["copilot_otel.drop.reason"]: m["value"]
        for m in receiver.metrics()
        if m["name"] == "copilot_otel.values.dropped"
    }
    # (and the records of a kind the reader does not read, Copilot CLI 1.0.102's subagent.configured: issue 31)
    not_read = sum(
        orjson.loads(line)["type"] not in events.CLASSES
        for log in root.glob("*/events.jsonl")
        for line in log.read_bytes().splitlines()
    )
    assert not_read > 0 and dropped == {"bad_timestamp": 1, "out_of_range": 1, "not_read": not_read}
    said = [line for line in (out + err).splitlines() if "dropped a value" in line]
    assert len(said) == 2 and "'2700-11-29T17:11:32.618Z'" in said[1] and "1.18" in said[0], said
    summary = [line for line in out.splitlines() if line.startswith("copilot-otel: ")][-1]
    assert summary.startswith(
        f"copilot-otel: exported 3 sessions: {len(got)} spans, {len(got_logs)} log events"
    )
    assert "2 values dropped (bad_timestamp: 1, out_of_range: 1), their events kept" in summary


def test_replay_in_workers_counts_the_dropped_values_of_each(
    receiver: OtlpReceiver,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = tmp_path / "session-state"
    root.mkdir()
    for i in range(2):
        shutil.move(_poisoned_session(tmp_path / str(i)), root / f"poisoned-{i}")
    monkeypatch.setattr("copilot_otel.replay.CHUNK_BYTES", 1)  # one session per worker
    assert replay_into(receiver, root, extra=("--workers", "2")) == 0
    summary = [line for line in capsys.readouterr().out.splitlines() if line.startswith("copilot-otel: ")][-1]
    assert "4 values dropped (bad_timestamp: 2, out_of_range: 2), their events kept" in summary


def test_daemon_poison_values_cost_only_themselves_and_the_file_is_checkpointed(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    root, state = tmp_path / "session-state", tmp_path / "state"
    root.mkdir()
    shutil.move(_poisoned_session(tmp_path), root / "poisoned")
    for name in ("failing-tool", "subagent"):
        shutil.copytree(CLI_GENERATED / name, root / name)
    clean_spans, _ = _expected(tmp_path, root / "failing-tool", root / "subagent")
    multi_tool, _ = _expected(tmp_path / "multi-tool", CLI_GENERATED / "multi-tool")
    d = DaemonProcess(
        root,
        state,
        receiver.http_endpoint,
        tmp_path / "daemon.log",
        env={"COPILOT_OTEL_METRICS": "true", "OTEL_METRIC_EXPORT_INTERVAL": "500"},
    ).start()
    try:
        want = set(clean_spans) | set(multi_tool)
        receiver.wait_for(lambda r: {s["span_id"] for s in r.spans()} >= want, 30)
        receiver.wait_for(
            lambda r: any(m["name"] == "gen_ai.client.inference.usage.output_tokens" for m in r.metrics()), 30
        )  # (the checkpoints and the status are saved by the stop)
    finally:
        assert d.terminate() == 0
    got = {s["span_id"]: _strip(s) for s in receiver.spans()}
    assert {k: v for k, v in got.items() if k in clean_spans} == clean_spans
    _assert_poisoned_session_whole({k: v for k, v in got.items() if k not in clean_spans}, multi_tool)
    tokens = [m for m in receiver.metrics() if m["name"] == "gen_ai.client.inference.usage.output_tokens"]
    assert tokens and all(m["value"] < 2**53 for m in tokens)
    out = d.output()
    assert "Traceback" not in out and "unexpected error" not in out and "encoded" not in out
    assert sum("dropped a value" in line for line in out.splitlines()) == 2
    checkpoints = read_checkpoints(state)
    log = root / "poisoned" / "events.jsonl"
    assert checkpoints[str(log)].acked_offset == log.stat().st_size, "the poisoned file is not stuck"
    status = json.loads((state / "status.json").read_text())
    assert status["values_dropped"] == {"bad_timestamp": 1, "out_of_range": 1}
    assert status["unencodable"] == 0 and status["backlog_spans"] == 0


# ================================================================= 4. OTEL_EXPORTER_OTLP_TIMEOUT, for every signal
def test_a_collector_answering_after_12s_is_acknowledged_on_the_first_try(
    receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "30000")
    # each request is stored at once and answered 12 s later: traces, logs and metrics
    receiver.fail_next(3, "timeout_after_accept", delay_s=12)
    assert replay_into(receiver, CLI_GENERATED / "plain-question") == 0
    assert receiver.requests == {"traces": 1, "logs": 1, "metrics": 1}, "each signal sent once"
    assert len(receiver.spans()) == 3 and receiver.pending_faults() == 0


def test_per_signal_timeouts_win_over_the_general_one(
    receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "30000")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_TIMEOUT", "1000")
    receiver.fail_next(1, "timeout_after_accept", signal="traces", delay_s=3)
    receiver.fail_next(1, "timeout_after_accept", signal="logs", delay_s=3)
    assert replay_into(receiver, CLI_GENERATED / "plain-question") == 0
    assert receiver.requests["traces"] == 1, "3 s is within the general 30 s"
    assert receiver.requests["logs"] == 2, (
        "3 s is past the 1 s of OTEL_EXPORTER_OTLP_LOGS_TIMEOUT: sent again"
    )


def test_a_bad_timeout_is_a_one_line_config_error(
    receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "soon")
    assert replay_into(receiver, CLI_GENERATED / "plain-question") == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "copilot-otel: error: Expected OTEL_EXPORTER_OTLP_TRACES_TIMEOUT to be a positive number of "
        "milliseconds, got 'soon'"
    )


# ============================================================================== 8. replay's exit code and summary
@pytest.mark.parametrize("outcome", ["delivered", "dead_lettered", "endpoint", "down"])
def test_replay_exit_code_and_summary_tell_the_truth(
    receiver: OtlpReceiver, capsys: pytest.CaptureFixture[str], outcome: str
) -> None:
    if outcome == "dead_lettered":
        receiver.reject_when(lambda span: span["name"] == "execute_tool view")
    elif outcome == "endpoint":
        receiver.fail_next(100, "refuse", http_status=401)
    elif outcome == "down":
        receiver.stop()
    rc = replay_into(receiver, CLI_GENERATED / "multi-tool", extra=("--max-retry-time", "2"))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    if outcome == "delivered":
        assert rc == 0 and err.count("error") == 0
        assert out.startswith("copilot-otel: exported 1 session: 14 spans, 4 log events from 30 events in ")
        return
    line = err.strip().splitlines()[-1]
    assert line.startswith("copilot-otel: error: ")
    assert "were delivered" not in line  # the old "spans and log events were delivered" when none were
    if outcome == "dead_lettered":
        assert rc == RejectedError.exit_code
        assert "delivered 13 of 14 spans and 4 of 4 log events from 1 of 1 session " in line
        assert "1 records rejected by the collector were dead-lettered in " in line
    elif outcome == "endpoint":
        assert rc == EndpointError.exit_code
        assert "HTTP 401 Unauthorized" in line and "OTEL_EXPORTER_OTLP_HEADERS is not set" in line
        assert "delivered 0 of 14 spans and 0 of 4 log events" in line
        assert "not delivered: 14 spans, 4 log events, the metrics" in line
    else:
        assert rc == ExportError.exit_code
        assert "did not accept the data" in line and "cannot connect to" in line
        assert (
            "delivered 0 of 14 spans" in line and "not delivered: 14 spans, 4 log events, the metrics" in line
        )


def test_a_dead_letter_warning_is_rate_limited_with_a_count(
    receiver: OtlpReceiver, capsys: pytest.CaptureFixture[str]
) -> None:
    receiver.reject_when(lambda span: span["name"].startswith("execute_tool"))
    assert replay_into(receiver, CLI_GENERATED / "multi-tool") == RejectedError.exit_code
    err = capsys.readouterr().err
    warned = [line for line in err.splitlines() if "permanently rejected" in line]
    assert len(warned) == 1, warned
    assert "5 records rejected by the collector were dead-lettered" in err.strip().splitlines()[-1]


# ===================================================== 9. shutdown with the collector down: deadline, honest count
def test_shutdown_with_the_collector_down_keeps_its_deadline_and_counts_what_waits(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    root, state = tmp_path / "session-state", tmp_path / "state"
    names = ("multi-tool", "capi-multi-tool", "subagent")
    for name in names:
        shutil.copytree(CLI_GENERATED / name, root / name)
    spans, logs = _expected(tmp_path, *(root / n / "events.jsonl" for n in names))
    receiver.stop()  # the collector is down for the whole run
    d = DaemonProcess(
        root, state, receiver.http_endpoint, tmp_path / "daemon.log", env={"COPILOT_OTEL_METRICS": "true"}
    ).start()
    status_file = state / "status.json"

    def backlog() -> int | None:
        return json.loads(status_file.read_text())["backlog_spans"] if status_file.exists() else None

    until(  # every line read, every record queued, retries under way
        lambda: backlog() == len(spans) + len(logs),
        30,
        f"the daemon to queue every record ({len(spans) + len(logs)})",
        detail=lambda: f"backlog_spans: {backlog()}\n{d.output()[-2000:]}",
    )
    rc = d.terminate(timeout=40)
    assert rc == 0
    out = d.output()
    # The 10 s promise is the daemon's own shutdown deadline, which says so when it has to end a stop; the
    # test's wall clock on a busy machine is no measure of it.
    assert "did not stop" not in out and "did not exit" not in out
    assert f"{len(spans) + len(logs)} records were not delivered" in out, out[-1500:]
    assert "Traceback" not in out
    status = json.loads((state / "status.json").read_text())
    assert status["backlog_spans"] == len(spans) + len(logs)
    # and they are: the next start delivers them (nothing was checkpointed)
    receiver.start()
    d2 = DaemonProcess(root, state, receiver.http_endpoint, tmp_path / "daemon.log").start()
    try:
        receiver.wait_for(lambda r: {s["span_id"] for s in r.spans()} >= set(spans), 30)
    finally:
        assert d2.terminate() == 0
