"""Every signal honours the same OTLP settings: the daemon's metrics (the SDK's reader) included.

Against the real receiver over a socket; the telemetry is built from a real :class:`Config`, as ``run`` builds it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from copilot_otel.deliver.telemetry import Telemetry
from copilot_otel.settings.config import load_config
from tests.http_answer import answering
from tests.otlp_receiver import OtlpReceiver


def _telemetry(receiver: OtlpReceiver, tmp_path: Path, protocol: str) -> Telemetry:
    endpoint = receiver.grpc_endpoint if protocol == "grpc" else receiver.http_endpoint
    cli = {"endpoint": endpoint, "protocol": protocol, "state_dir": str(tmp_path)}
    return Telemetry.from_config(load_config(cli), with_metrics=True)


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
@pytest.mark.parametrize("variable", ["OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT"])
def test_the_daemons_metric_export_timeout_is_in_milliseconds(
    receiver: OtlpReceiver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, protocol: str, variable: str
) -> None:
    # The SDK's own OTLP metric exporters read these variables as seconds: 1000 meant 1000 s there, so a
    # collector answering after 4 s was waited for; 1000 ms is 1 s, and that export has to give up.
    monkeypatch.setenv(variable, "1000")
    receiver.fail_next(1, "timeout_after_accept", signal="metrics", delay_s=4)
    telemetry = _telemetry(receiver, tmp_path, protocol)
    try:
        assert telemetry.metrics is not None
        telemetry.metrics.count("copilot_otel.export.retries", 1)
        assert telemetry.metrics.flush(timeout_s=20) is False, "the 1 s deadline passed before the answer"
        assert telemetry.metrics.flush(timeout_s=20) is True, "the next export is answered at once"
    finally:
        telemetry.close()


def _export_one_count(cli: dict[str, str]) -> None:
    """Count once and export, as the daemon does (the SDK reader), through telemetry built from ``cli``."""
    telemetry = Telemetry.from_config(load_config(cli))
    try:
        assert telemetry.metrics is not None
        telemetry.metrics.count("copilot_otel.export.retries", 1)
        assert telemetry.metrics.flush(timeout_s=10)
    finally:
        telemetry.close()


def test_the_daemons_metrics_carry_the_metrics_headers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-team=all")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_HEADERS", "x-team=metrics")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_COMPRESSION", "gzip")
    with answering() as (url, seen):
        _export_one_count({"endpoint": url, "state_dir": str(tmp_path)})
    assert seen["/v1/metrics"]["x-team"] == "metrics"
    assert seen["/v1/metrics"]["content-encoding"] == "gzip"


@pytest.mark.parametrize(("preference", "temporality"), [("cumulative", 2), ("delta", 1), ("lowmemory", 1)])
def test_metric_temporality_comes_from_the_settings_table(
    receiver: OtlpReceiver, tmp_path: Path, preference: str, temporality: int
) -> None:
    # A config file key like any other setting (it used to be read from the environment by the SDK and by replay)
    config_file = tmp_path / "config.toml"
    config_file.write_text(f'metrics_temporality = "{preference}"\n')
    cli = {"endpoint": receiver.http_endpoint, "state_dir": str(tmp_path), "config_file": str(config_file)}
    _export_one_count(cli)
    points = [m for m in receiver.metrics() if m["name"] == "copilot_otel.export.retries"]
    assert points and {m["temporality"] for m in points} == {temporality}  # 1 = DELTA, 2 = CUMULATIVE


def test_each_signal_goes_where_the_resolved_config_says(tmp_path: Path) -> None:
    """The per-signal endpoints come from the config the telemetry is built from (here an environment given to
    ``load_config``, not this process's): the exporter reads no variable of its own."""
    from copilot_otel.deliver.export import Signal

    with answering() as (url, seen):
        env = {
            "HOME": str(tmp_path),
            "OTEL_EXPORTER_OTLP_ENDPOINT": url,
            "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": f"{url}/custom/logs",
        }
        config = load_config({"state_dir": str(tmp_path)}, env)
        telemetry = Telemetry.from_config(config, with_metrics=False)
        try:
            transport = telemetry.sender.transport
            assert transport.send(Signal.TRACES, b"", 5).ok
            assert transport.send(Signal.LOGS, b"", 5).ok
        finally:
            telemetry.close()
    assert sorted(seen) == ["/custom/logs", "/v1/traces"]
