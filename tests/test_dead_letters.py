"""Dead letters can be recovered: each keeps the exact request, ``copilot-otel dead-letters`` lists, re-sends and
clears them, and ``status``, ``doctor`` and replay's summary say where they are and how many.

The collector is the real OTLP receiver over a socket, scripted to refuse records the way a working collector does
(HTTP 400 / gRPC INVALID_ARGUMENT / a partial success); the daemon is a real child process.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from copilot_otel.cli import main
from copilot_otel.common.errors import RejectedError
from copilot_otel.daemon.state import read_checkpoints
from copilot_otel.deliver.deadletter import DeadLetters
from tests.conftest import CLI_GENERATED, replay_into
from tests.daemon_process import DaemonProcess, expected_spans
from tests.otlp_receiver import OtlpReceiver
from tests.waiting import until


def _status(state: Path) -> dict[str, Any]:
    path = state / "status.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _wait_status(state: Path, key: str, value: Any, timeout: float = 30) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        status = _status(state)
        return status if status.get(key) == value else None

    return until(reached, timeout, f"status with {key}={value!r}", detail=lambda: _status(state))


@pytest.mark.parametrize(
    ("protocol", "refusal"),
    [
        pytest.param("http/protobuf", "http-400", id="http-400"),
        pytest.param("http/protobuf", "partial_reject", id="http-partial-success"),
        pytest.param("grpc", "grpc-invalid-argument", id="grpc-invalid-argument"),
    ],
)
def test_dead_letters_from_the_daemon_are_resent_exactly_once(
    tmp_path: Path,
    receiver: OtlpReceiver,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    protocol: str,
    refusal: str,
) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # the long tmp paths on one line
    root, state = tmp_path / "session-state", tmp_path / "state"
    shutil.copytree(CLI_GENERATED / "plain-question", root / "plain-question")
    log = root / "plain-question" / "events.jsonl"
    want = expected_spans([log], tmp_path)
    assert len(want) == 3
    # the collector refuses these 3 spans (a request with no records it accepts: it is not the endpoint): bisected
    # down to them, each one dead-lettered; a partial success rejecting all of a request's records names them all
    if refusal == "partial_reject":
        receiver.fail_next(1, "partial_reject", signal="traces")
    else:
        receiver.reject_when(lambda span: span["span_id"] in want)
    endpoint = receiver.grpc_endpoint if protocol == "grpc" else receiver.http_endpoint
    d = DaemonProcess(root, state, endpoint, tmp_path / "daemon.log", "--protocol", protocol).start()
    try:
        status = _wait_status(state, "dead_letters", 3)
    finally:
        assert d.terminate() == 0
    assert receiver.spans() == [] and receiver.pending_faults() == 0
    assert status["dead_lettered"] == 3 and status["dead_letter_file"] == str(state / "dead-letter.jsonl")
    checkpoints = read_checkpoints(state)
    assert checkpoints[str(log)].acked_offset == log.stat().st_size, "dead letters do not hold the file"

    # status and doctor say where they are and how many
    assert main(["status", "--state-dir", str(state)]) == 1  # (the daemon is stopped)
    out = capsys.readouterr().out
    assert f"3 dead letters in {state / 'dead-letter.jsonl'}" in " ".join(out.split())
    main(["doctor", "--state-dir", str(state), "--endpoint", receiver.http_endpoint, "--timeout", "5"])
    doctor_out = " ".join(capsys.readouterr().out.split())
    assert f"dead letters: 3 dead letters in {state / 'dead-letter.jsonl'}" in doctor_out
    assert "dead-letters resend" in doctor_out
    receiver.clear()
    receiver.reset_faults()

    # list: one line per record, every one re-sendable
    assert main(["dead-letters", "list", "--state-dir", str(state)]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert sum("re-sendable" in line and "traces" in line for line in listed) == 3
    assert listed[-1].endswith("3 dead letters in " + str(state / "dead-letter.jsonl") + " (3 re-sendable)")

    # the collector accepts again: resend delivers each span once, exactly as replay exports it
    args = [
        "dead-letters",
        "resend",
        "--state-dir",
        str(state),
        "--endpoint",
        endpoint,
        "--protocol",
        protocol,
    ]
    assert main(args) == 0
    said = capsys.readouterr().out
    assert "re-sent 3 dead letters" in said and "0 left in" in said
    spans = receiver.spans()
    assert Counter(s["span_id"] for s in spans) == Counter(set(want)), "each span exactly once"
    assert all({k: v for k, v in s.items() if k != "resource"} == want[s["span_id"]] for s in spans)
    # and they are gone: a second resend sends nothing
    assert main(args) == 0
    assert "re-sent 0 dead letters" in capsys.readouterr().out
    assert len(receiver.spans()) == 3
    assert DeadLetters(state / "dead-letter.jsonl").count() == 0


def test_a_record_rejected_again_stays_a_dead_letter_and_resend_says_so(
    tmp_path: Path, receiver: OtlpReceiver, capsys: pytest.CaptureFixture[str], _isolated_home: Path
) -> None:
    receiver.reject_when(lambda span: span["name"].startswith("execute_tool"))
    assert replay_into(receiver, CLI_GENERATED / "multi-tool") == RejectedError.exit_code
    summary = capsys.readouterr().err.strip().splitlines()[-1]
    path = _isolated_home / ".local/state/copilot-otel/dead-letter.jsonl"
    assert f"5 dead letters wait in {path} ('copilot-otel dead-letters resend' sends them again)" in summary
    # still refused: nothing is lost, the exit code says so, and the file keeps all five
    rc = main(["dead-letters", "resend", "--endpoint", receiver.http_endpoint])
    assert rc == RejectedError.exit_code
    err = capsys.readouterr().err
    assert "the collector rejected 5 again" in err and "5 left in" in err and "Traceback" not in err
    assert DeadLetters(path).count() == 5
    # once only two are refused, three are delivered and two remain
    receiver.reset_faults()
    receiver.reject_when(lambda span: span["name"] in ("execute_tool view", "execute_tool grep"))
    before = len(receiver.spans())
    assert main(["dead-letters", "resend", "--endpoint", receiver.http_endpoint]) == RejectedError.exit_code
    assert len(receiver.spans()) - before == 3
    names = sorted(entry.name for entry in DeadLetters(path).entries())
    assert names == ["execute_tool grep", "execute_tool view"]
    assert main(["dead-letters", "clear"]) == 0
    assert "removed 2 dead letters" in capsys.readouterr().out
    assert DeadLetters(path).count() == 0 and not path.exists()


def test_the_dead_letter_file_is_bounded_and_counts_what_it_discarded(tmp_path: Path) -> None:
    letters = DeadLetters(tmp_path / "dead-letter.jsonl", max_bytes=4096)
    record = {"name": "execute_tool view", "attributes": {"gen_ai.conversation.id": "s1"}}
    for n in range(200):
        letters.append("traces", "HTTP 400", {**record, "n": n}, b"\x0a\x02" + n.to_bytes(2, "big"))
    on_disk = sum(p.stat().st_size for p in tmp_path.iterdir() if p.name.startswith("dead-letter.jsonl"))
    assert on_disk <= 2 * 4096
    kept = [entry.record["n"] for entry in letters.entries()]
    assert kept == sorted(kept) and kept[-1] == 199, "the newest are kept, oldest first"
    assert letters.count() == len(kept) and letters.discarded() == 200 - len(kept) > 0
    # the bytes come back exactly
    last = list(letters.entries())[-1]
    assert last.request == b"\x0a\x02" + (199).to_bytes(2, "big")
    # a resend claims both generations, oldest first, and writes back only what it leaves
    with letters.claimed() as claimed:
        assert [entry.record["n"] for entry in claimed] == kept
        claimed[:] = claimed[-2:]
    assert [entry.record["n"] for entry in letters.entries()] == kept[-2:]


def test_resend_goes_only_where_the_records_were_refused(
    tmp_path: Path, receiver: OtlpReceiver, capsys: pytest.CaptureFixture[str], _isolated_home: Path
) -> None:
    """Issue 24: a resend in a shell without the endpoint variable wrote the rejected records into the local
    otlp.jsonl and deleted them. Each entry now says who refused it; another destination needs --to-current."""
    receiver.reject_when(lambda span: span["name"].startswith("execute_tool"))
    assert replay_into(receiver, CLI_GENERATED / "multi-tool") == RejectedError.exit_code
    capsys.readouterr()
    path = _isolated_home / ".local/state/copilot-otel/dead-letter.jsonl"
    entries = list(DeadLetters(path).entries())
    assert len(entries) == 5
    assert {e.destination for e in entries} == {f"OTLP/HTTP {receiver.http_endpoint}/v1/traces"}

    # no endpoint set: the configured destination is the local file; refused in one line, nothing removed
    out_file = tmp_path / "otlp.jsonl"
    assert main(["dead-letters", "resend", "--output-file", str(out_file)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert f"were refused by OTLP/HTTP {receiver.http_endpoint}/v1/traces" in err
    assert f"the configured destination is OTLP/JSON file {out_file}" in err and "--to-current" in err
    assert DeadLetters(path).count() == 5
    assert not out_file.exists() or out_file.stat().st_size == 0  # (opened to check it can be written)

    # asked for explicitly, they go to the file and leave the dead letters
    assert main(["dead-letters", "resend", "--output-file", str(out_file), "--to-current"]) == 0
    assert "re-sent 5 dead letters" in capsys.readouterr().out
    assert DeadLetters(path).count() == 0 and out_file.stat().st_size > 0


def test_a_dead_letter_keeps_no_credentials_of_its_destination(tmp_path: Path) -> None:
    letters = DeadLetters(tmp_path / "dead-letter.jsonl")
    letters.append(
        "traces", "HTTP 400", {"name": "x"}, b"req", "OTLP/HTTP https://me:s3cret@host/v1/traces?k=tok"
    )
    text = letters.path.read_text()
    assert "s3cret" not in text and "tok" not in text
    assert next(letters.entries()).destination == "OTLP/HTTP https://***@host/v1/traces?***"
