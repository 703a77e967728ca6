"""Requests a collector can take: every export request stays under a byte cap, a "too large" answer splits it, and
a record too large alone has its captured content cut (marked, said once, counted) instead of never arriving.

The collectors are real servers that keep their limits: the test receiver's gRPC server with gRPC's default
4 MiB message limit (what an OpenTelemetry Collector keeps), which answers ``RESOURCE_EXHAUSTED`` itself before any
handler sees the request, and its HTTP server answering 413 above a size, as collectors and the proxies in front of
them do. The sessions are copies of a real CLI log whose tool outputs are made long (240 kB each, as in the report
that found this), with content capture on.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from copilot_otel.cli import main
from tests.conftest import CLI_GENERATED, replay_into
from tests.daemon_process import DaemonProcess, checkpointed_at_end, expected_spans
from tests.otlp_receiver import OtlpReceiver

_SOURCE = CLI_GENERATED / "multi-tool" / "events.jsonl"
_SESSION = "0a000002-0000-4000-8000-000000000002"
_RESULT = "gen_ai.tool.call.result"
MIB = 1024 * 1024


def _capture(monkeypatch: pytest.MonkeyPatch, max_length: int) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    monkeypatch.setenv("COPILOT_OTEL_CONTENT_MAX_LENGTH", str(max_length))


def _output(chars: int, seed: int) -> str:
    """A long tool output of ``chars`` characters, different per session (nothing a cache could share)."""
    line = f"session {seed:04d}: a line of a long tool output, like a big file read or a build log\n"
    return (line * (chars // len(line) + 1))[:chars]


def _long_sessions(root: Path, sessions: int, output_chars: int) -> list[Path]:
    """``sessions`` copies of the multi-tool log, each under its own session id, every tool output that long."""
    logs = []
    for n in range(sessions):
        session = f"0a000002-0000-4000-8000-{n:012d}"
        lines = []
        for line in _SOURCE.read_text().splitlines():
            event = json.loads(line)
            if event["type"] == "tool.execution_complete":
                event["data"]["result"]["content"] = _output(output_chars, n)
            lines.append(json.dumps(event).replace(_SESSION, session))
        log = root / session / "events.jsonl"
        log.parent.mkdir(parents=True)
        log.write_text("\n".join(lines) + "\n")
        logs.append(log)
    return logs


def _exported(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str] | None,
    sessions: int,
    output_chars: int,
    max_length: int = 300_000,
) -> dict[str, Any]:
    """With content capture on, the long sessions under ``tmp_path/sessions``, and the spans a replay of them to a
    receiver without limits gets (what that replay said is left out of ``capsys``)."""
    _capture(monkeypatch, max_length)
    logs = _long_sessions(tmp_path / "sessions", sessions, output_chars)
    want = expected_spans(logs, tmp_path)
    if capsys is not None:
        capsys.readouterr()
    return want


def _once_each(spans: list[dict[str, Any]], want: dict[str, Any]) -> None:
    counts = Counter(span["span_id"] for span in spans)
    assert set(counts) == set(want), f"{len(set(want) - set(counts))} of {len(want)} spans missing"
    assert max(counts.values()) == 1, "a span was delivered twice"


def test_replay_over_grpc_fits_a_collectors_default_4_mib_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    want = _exported(tmp_path, monkeypatch, capsys, 6, 240_000)
    assert (
        sum(len(str(span["attributes"])) for span in want.values()) > 3 * 4 * MIB
    )  # one batch would not fit
    with OtlpReceiver(grpc_max_message=None) as receiver:
        rc = replay_into(receiver, tmp_path / "sessions", protocol="grpc")
        err = capsys.readouterr().err
        assert rc == 0, err
        spans = receiver.spans()
    _once_each(spans, want)
    results = [span["attributes"][_RESULT] for span in spans if _RESULT in span["attributes"]]
    assert len(results) == 30 and all(len(result) == 240_000 for result in results), "nothing was cut"
    assert "RESOURCE_EXHAUSTED" not in err


@pytest.mark.parametrize(
    ("protocol", "output_chars"),
    [
        pytest.param("grpc", 240_000, id="grpc-default-4MiB"),
        # a record of 2.5 MB: split by the 413s, then cut to fit
        pytest.param("http/protobuf", 1_250_000, id="http-413-above-1MiB"),
    ],
)
def test_the_daemon_fits_what_the_collector_takes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, protocol: str, output_chars: int
) -> None:
    # the daemon inherits the capture settings
    want = _exported(tmp_path, monkeypatch, None, 4, output_chars, output_chars + 1)
    logs = sorted((tmp_path / "sessions").glob("*/events.jsonl"))
    with OtlpReceiver(grpc_max_message=None, http_max_body=MIB) as receiver:
        state = tmp_path / "state"
        endpoint = receiver.grpc_endpoint if protocol == "grpc" else receiver.http_endpoint
        d = DaemonProcess(
            tmp_path / "sessions", state, endpoint, tmp_path / "daemon.log", "--protocol", protocol
        )
        d.start()
        try:
            receiver.wait_for(lambda r: {s["span_id"] for s in r.spans()} >= set(want), timeout=60)
            d.until("checkpoints at the ends of the logs", lambda: checkpointed_at_end(state, logs))
        finally:
            assert d.terminate() == 0, d.output()[-3000:]
        _once_each(receiver.spans(), want)
    assert "RESOURCE_EXHAUSTED" not in d.output() and "dead-letter" not in d.output()


def test_replay_over_http_keeps_every_request_under_the_configured_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COPILOT_OTEL_MAX_REQUEST_BYTES", str(MIB))
    want = _exported(tmp_path, monkeypatch, capsys, 3, 240_000)
    with OtlpReceiver(http_max_body=MIB) as receiver:
        assert replay_into(receiver, tmp_path / "sessions") == 0, capsys.readouterr().err
        outcomes = Counter(request.outcome for request in receiver.request_log())
        _once_each(receiver.spans(), want)
    assert outcomes["too_large"] == 0 and outcomes["accepted"] > 3, "a request the receiver refused"


def test_a_413_splits_the_request_and_lowers_the_cap_for_the_rest_of_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    want = _exported(tmp_path, monkeypatch, capsys, 3, 240_000)
    with OtlpReceiver(http_max_body=MIB) as receiver:
        assert replay_into(receiver, tmp_path / "sessions") == 0
        err = capsys.readouterr().err
        refused = [r for r in receiver.request_log("traces") if r.outcome == "too_large"]
        _once_each(receiver.spans(), want)
    # the first request (4 MiB) and its halves until they fit: then the cap holds, no more refusals
    assert 1 <= len(refused) <= 2, refused
    assert err.count("requests are kept under") == 1, (
        err
    )  # said once (the next lowering within 30 s is counted)
    assert "dead-letter" not in err


@pytest.mark.parametrize(
    ("protocol", "limit", "output_chars"),
    [
        pytest.param("grpc", None, 5_000_000, id="grpc-default-4MiB"),
        pytest.param("http/protobuf", MIB, 1_500_000, id="http-413-above-1MiB"),
    ],
)
def test_a_record_too_large_alone_has_its_captured_content_cut_and_is_delivered(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    protocol: str,
    limit: int | None,
    output_chars: int,
) -> None:
    want = _exported(tmp_path, monkeypatch, capsys, 1, output_chars, output_chars + 1)
    with OtlpReceiver(grpc_max_message=None, http_max_body=limit) as receiver:
        rc = replay_into(receiver, tmp_path / "sessions", protocol=protocol)
        out, err = capsys.readouterr()
        spans = receiver.spans()
    assert rc == 0, err
    _once_each(spans, want)
    results = [span["attributes"][_RESULT] for span in spans if _RESULT in span["attributes"]]
    assert len(results) == 5
    assert all("…[truncated " in result and len(result) < output_chars for result in results)
    # the chat spans' messages quote those outputs: cut too, and still JSON
    messages = [
        span["attributes"]["gen_ai.input.messages"] for span in spans if span["name"].startswith("chat")
    ]
    assert any("truncated" in text for text in messages) and all(json.loads(text) for text in messages)
    # said once, with the size and what sets it; counted in the summary
    assert err.count("its captured content was cut") == 1, err
    assert "COPILOT_OTEL_MAX_REQUEST_BYTES" in err
    cut = re.search(r"(\d+) records sent with captured content cut to fit in one request", out)
    assert cut is not None and int(cut[1]) >= 5, out  # the tool spans, and chat spans quoting their outputs


def test_the_local_file_keeps_a_record_of_any_size_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], _isolated_home: Path
) -> None:
    """Without an endpoint (the embedded OTLP/JSON file) there is no request limit to fit: nothing is cut."""
    _exported(tmp_path, monkeypatch, capsys, 1, 5_000_000, 5_000_001)
    assert main(["replay", str(tmp_path / "sessions"), "--no-progress"]) == 0
    out, err = capsys.readouterr()
    assert "captured content cut" not in out + err
    files = (_isolated_home / ".local/state/copilot-otel").glob("otlp.jsonl*")  # rotated past 100 MB
    lines = [line for path in files for line in path.read_bytes().splitlines()]
    whole = json.dumps(_output(5_000_000, 0))[1:-1].encode()  # as OTLP/JSON writes it
    assert sum(line.count(whole) for line in lines) >= 5  # each tool output, whole
