"""An HTTP 200 that is not an OTLP export response is an endpoint problem, not a delivery (issue 22, point 8).

A web UI or a catch-all proxy answers ``200 hello`` (text/html) to anything: a tiny real HTTP server on 127.0.0.1
plays it. ``replay`` must exit with the endpoint-problem code naming the reason, and a daemon pointed at it must
not advance its checkpoints: a second daemon pointed at a real collector then still delivers every span.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from copilot_otel.cli import main
from copilot_otel.common.errors import EndpointError
from copilot_otel.deliver.export import Signal
from copilot_otel.deliver.telemetry import Telemetry
from copilot_otel.settings.config import load_config
from tests.conftest import CLI_GENERATED
from tests.daemon_process import DaemonProcess, assert_delivered_like_replay
from tests.http_answer import answering
from tests.otlp_receiver import OtlpReceiver


@pytest.mark.parametrize(
    ("body", "content_type", "accepted"),
    [
        pytest.param(b"hello", "text/html; charset=utf-8", False, id="web-page"),
        pytest.param(b"", "text/html", False, id="empty-html"),
        pytest.param(b"\xff\xff\xff", "application/x-protobuf", False, id="not-a-response"),
        pytest.param(b"<html>", "application/json", False, id="not-json"),
        pytest.param(b"", "application/x-protobuf", True, id="empty-protobuf"),
        pytest.param(b"{}", "application/json", True, id="json-response"),
        pytest.param(b"", None, True, id="empty-untyped"),
    ],
)
def test_a_2xx_is_accepted_only_as_an_export_response(
    body: bytes, content_type: str | None, accepted: bool, tmp_path: Path
) -> None:
    with answering(body, content_type) as (url, _):
        config = load_config({"endpoint": url, "state_dir": str(tmp_path)}, {"HOME": str(tmp_path)})
        telemetry = Telemetry.from_config(config, with_metrics=False)
        result = telemetry.sender.transport.send(Signal.TRACES, b"", 5)
        telemetry.close()
    assert result.ok is accepted
    if not accepted:
        assert result.endpoint and "is not an OTLP export response" in result.message


def test_replay_to_a_web_page_fails_as_an_endpoint_problem(capsys: pytest.CaptureFixture[str]) -> None:
    log = CLI_GENERATED / "failing-tool" / "events.jsonl"
    with answering(b"hello", "text/html") as (url, posted):
        code = main(["replay", str(log), "--endpoint", url, "--max-retry-time", "2", "--no-progress"])
    err = capsys.readouterr().err
    assert posted, "the request reached the server"
    assert code == EndpointError.exit_code, err
    assert "is not an OTLP export response (text/html (5 bytes: 'hello'))" in err


def test_the_daemon_keeps_its_checkpoints_while_a_web_page_answers(tmp_path: Path) -> None:
    root = tmp_path / "session-state"
    shutil.copytree(CLI_GENERATED / "failing-tool", root / "failing-tool")
    state = tmp_path / "state"
    with answering(b"hello", "text/html") as (url, posted):
        daemon = DaemonProcess(root, state, url, tmp_path / "web.log").start()
        try:
            daemon.until(
                "the endpoint problem in its log", lambda: "is not an OTLP export response" in daemon.output()
            )
        finally:
            daemon.terminate()
    assert posted and "is not an OTLP export response" in daemon.output(), daemon.output()
    with OtlpReceiver() as receiver:
        again = DaemonProcess(root, state, receiver.http_endpoint, tmp_path / "collector.log").start()
        try:
            assert_delivered_like_replay(receiver, [root / "failing-tool" / "events.jsonl"], tmp_path)
        finally:
            again.terminate()
