"""Collectors that reject: one that rejects every request is an endpoint problem (held and said in one line, like a
401), never a reason to dead-letter every record one request at a time; a partial success is counted with its
message, and nothing the collector accepted is sent again.

The collector is the real OTLP receiver over a socket; the daemon a real child process; the logs real CLI captures.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from copilot_otel.common.errors import EndpointError, RejectedError
from copilot_otel.daemon.state import read_checkpoints
from copilot_otel.deliver.deadletter import DeadLetters
from tests.conftest import CLI_GENERATED, replay_into
from tests.daemon_process import (
    DaemonProcess,
    assert_delivered_like_replay,
    checkpointed_at_end,
    expected_spans,
)
from tests.otlp_receiver import OtlpReceiver

_SESSIONS = ("multi-tool", "failing-tool", "capi-multi-tool")
_EVERY_REQUEST = "the collector rejects every request"


def _reject_everything(receiver: OtlpReceiver) -> None:
    """HTTP 400 / gRPC INVALID_ARGUMENT to every request, whatever it holds (a request with no records too), each
    answer worded anew, as a collector's message names the request or what it disliked in it."""
    for n in range(2_000):
        receiver.fail_next(
            1, "refuse", http_status=400, grpc_code="INVALID_ARGUMENT", message=f"invalid request #{n}"
        )


def _copies(root: Path) -> list[Path]:
    """The sessions' logs copied under ``root``, as the CLI's session-state folder holds them."""
    logs = []
    for name in _SESSIONS:
        (root / name).mkdir(parents=True)
        logs.append(root / name / "events.jsonl")
        logs[-1].write_bytes((CLI_GENERATED / name / "events.jsonl").read_bytes())
    return logs


def _endpoint(receiver: OtlpReceiver, protocol: str) -> str:
    return receiver.grpc_endpoint if protocol == "grpc" else receiver.http_endpoint


PROTOCOLS = [pytest.param("http/protobuf", id="http-400"), pytest.param("grpc", id="grpc-invalid-argument")]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_replay_to_a_collector_rejecting_every_request_fails_at_once_in_one_line(
    receiver: OtlpReceiver, capsys: pytest.CaptureFixture[str], _isolated_home: Path, protocol: str
) -> None:
    _reject_everything(receiver)
    rc = replay_into(receiver, *(CLI_GENERATED / name for name in _SESSIONS), protocol=protocol)
    err = capsys.readouterr().err
    assert rc == EndpointError.exit_code, err
    assert err.count(_EVERY_REQUEST) == 1 and "Traceback" not in err, err
    # the first request and one with no records in it: then it is known to be the endpoint
    assert receiver.requests["traces"] == 2
    assert DeadLetters(_isolated_home / ".local/state/copilot-otel/dead-letter.jsonl").count() == 0
    assert "dead-letter" not in err


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_daemon_holds_the_data_while_a_collector_rejects_every_request_then_delivers_it_once(
    tmp_path: Path, receiver: OtlpReceiver, protocol: str
) -> None:
    root, state = tmp_path / "session-state", tmp_path / "state"
    logs = _copies(root)
    _reject_everything(receiver)
    endpoint = _endpoint(receiver, protocol)
    d = DaemonProcess(root, state, endpoint, tmp_path / "daemon.log", "--protocol", protocol).start()
    try:
        # held through several retries (each: the batch, then the empty request), said once
        receiver.wait_for(lambda r: r.requests["traces"] >= 6, timeout=30)
        assert d.output().count(_EVERY_REQUEST) == 1, d.output()
        assert DeadLetters(state / "dead-letter.jsonl").count() == 0
        assert not read_checkpoints(state), "nothing checkpointed while held"
        # the collector is fixed: everything is delivered, once, and checkpointed
        receiver.reset_faults()
        assert_delivered_like_replay(receiver, logs, tmp_path, timeout=40)
        d.until("checkpoints at the ends of the logs", lambda: checkpointed_at_end(state, logs))
    finally:
        assert d.terminate() == 0, d.output()[-3000:]
    assert DeadLetters(state / "dead-letter.jsonl").count() == 0


def _tools(span: dict[str, object]) -> bool:
    return str(span["name"]).startswith("execute_tool")


@pytest.mark.parametrize(
    "protocol", [pytest.param("http/protobuf", id="http"), pytest.param("grpc", id="grpc")]
)
def test_a_partial_success_is_counted_with_its_message_and_nothing_accepted_is_sent_again(
    tmp_path: Path,
    receiver: OtlpReceiver,
    capsys: pytest.CaptureFixture[str],
    _isolated_home: Path,
    protocol: str,
) -> None:
    paths = [CLI_GENERATED / name for name in _SESSIONS]
    want = expected_spans([path / "events.jsonl" for path in paths], tmp_path)
    rejected = [span for span in want.values() if _tools(span)]
    assert len(rejected) >= 10
    capsys.readouterr()
    receiver.partial_reject_when(_tools)
    assert replay_into(receiver, *paths, protocol=protocol) == RejectedError.exit_code
    err = capsys.readouterr().err
    got = Counter(span["span_id"] for span in receiver.spans())
    assert set(got) == set(want) - {span["span_id"] for span in rejected}
    assert max(got.values()) == 1, "an accepted span was sent again"
    carried = sum(request.item_count for request in receiver.request_log("traces"))
    assert carried == len(want), f"{carried} spans sent for {len(want)}"
    summary = err.strip().splitlines()[-1]
    assert f"{len(rejected)} records rejected by the collector in a partial success" in summary, summary
    assert "rejected by partial_reject_when" in summary  # the collector's own message
    assert f"and rejected {len(rejected)}" in err and "none is re-sent" in err
    # which ones it rejected the collector did not say: none is a dead letter (a re-send would double the rest)
    assert DeadLetters(_isolated_home / ".local/state/copilot-otel/dead-letter.jsonl").count() == 0


def test_the_daemon_counts_a_partial_success_and_sends_nothing_twice(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    root, state = tmp_path / "session-state", tmp_path / "state"
    logs = _copies(root)
    want = expected_spans(logs, tmp_path)
    accepted = {span_id for span_id, span in want.items() if not _tools(span)}
    receiver.partial_reject_when(_tools)
    d = DaemonProcess(root, state, receiver.http_endpoint, tmp_path / "daemon.log").start()
    try:
        receiver.wait_for(lambda r: {s["span_id"] for s in r.spans()} >= accepted, timeout=30)
        d.until("checkpoints at the ends of the logs", lambda: checkpointed_at_end(state, logs))
    finally:
        assert d.terminate() == 0, d.output()[-3000:]
    got = Counter(span["span_id"] for span in receiver.spans())
    assert set(got) == accepted and max(got.values()) == 1, "an accepted span was sent again"
    carried = sum(request.item_count for request in receiver.request_log("traces"))
    assert carried == len(want), f"{carried} spans sent for {len(want)}"
    assert "rejected by partial_reject_when" in d.output() and "none is re-sent" in d.output()
