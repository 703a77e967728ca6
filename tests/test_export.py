"""Transport details the receiver-based tests do not see: request headers."""

from __future__ import annotations

from copilot_otel.deliver.export import Signal, build_transport
from tests.http_answer import answering


def test_otlp_headers_from_the_environment_reach_the_collector() -> None:
    with answering() as (url, seen):
        env = {
            "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%20s3cret,x-team=a",
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-team=traces",
        }
        transport = build_transport(url, "http/protobuf", None, env)
        assert transport.send(Signal.TRACES, b"", 5).ok
        assert transport.send(Signal.LOGS, b"", 5).ok
    logs, traces = seen["/v1/logs"], seen["/v1/traces"]
    assert logs["authorization"] == "Bearer s3cret"  # URL-decoded
    assert logs["x-team"] == "a" and logs["content-type"] == "application/x-protobuf"
    # the per-signal variable wins over the general one, whole (the OTLP exporter specification; the SDK does so)
    assert traces["x-team"] == "traces" and "authorization" not in traces
