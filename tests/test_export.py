"""Transport details the receiver-based tests do not see: request headers."""

from __future__ import annotations

from pathlib import Path

from copilot_otel.deliver.export import Signal
from copilot_otel.deliver.telemetry import Telemetry
from copilot_otel.settings.config import load_config
from tests.http_answer import answering


def test_otlp_headers_from_the_environment_reach_the_collector(tmp_path: Path) -> None:
    with answering() as (url, seen):
        env = {
            "HOME": str(tmp_path),
            "OTEL_EXPORTER_OTLP_ENDPOINT": url,
            "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%20s3cret,x-team=a",
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-team=traces",
        }
        # built as `run` and `replay` build it: the settings table reads the environment into a Config
        telemetry = Telemetry.from_config(load_config({"state_dir": str(tmp_path)}, env), with_metrics=False)
        try:
            assert telemetry.sender.transport.send(Signal.TRACES, b"", 5).ok
            assert telemetry.sender.transport.send(Signal.LOGS, b"", 5).ok
        finally:
            telemetry.close()
    logs, traces = seen["/v1/logs"], seen["/v1/traces"]
    assert logs["authorization"] == "Bearer s3cret"  # URL-decoded
    assert logs["x-team"] == "a" and logs["content-type"] == "application/x-protobuf"
    # the per-signal variable wins over the general one, whole (the OTLP exporter specification; the SDK does so)
    assert traces["x-team"] == "traces" and "authorization" not in traces
