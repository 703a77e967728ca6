"""A traces-only backend (Arize Phoenix answers logs and metrics with 404 / UNIMPLEMENTED) is named in one run.

Issue 24: ``replay`` stopped at the first refused signal with exit 5 ("collector down"): logs in one run, metrics
in the next, three runs to learn what ``doctor`` says at once. Now every signal is tried, the spans are delivered,
and one line names all the refused ones, exit 6 (the endpoint refuses us, not the data). The receiver is the real
OTLP server over a socket, serving traces only.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from copilot_otel.cli import main
from copilot_otel.common.errors import EndpointError
from tests.conftest import CLI_GENERATED
from tests.otlp_receiver import OtlpReceiver


@pytest.fixture
def phoenix() -> Iterator[OtlpReceiver]:
    with OtlpReceiver(accept_only={"traces"}) as receiver:
        yield receiver


def _replay(receiver: OtlpReceiver, protocol: str, *extra: str) -> list[str]:
    endpoint = receiver.grpc_endpoint if protocol == "grpc" else receiver.http_endpoint
    argv = ["replay", str(CLI_GENERATED / "multi-tool"), "--endpoint", endpoint, "--protocol", protocol]
    return [*argv, "--no-progress", "--max-retry-time", "20", *extra]


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_one_run_names_every_refused_signal(
    phoenix: OtlpReceiver, capsys: pytest.CaptureFixture[str], protocol: str
) -> None:
    assert main(_replay(phoenix, protocol)) == EndpointError.exit_code == 6
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err  # one line: no warning per signal before it
    assert err.startswith(
        "copilot-otel: error: the endpoint refuses logs and metrics (a traces-only backend such as Phoenix?): "
        "set COPILOT_OTEL_LOGS=false COPILOT_OTEL_METRICS=false; delivered 14 of 14 spans and 0 of "
    ), err
    assert len(phoenix.spans()) == 14  # the spans went, whatever the other signals met
    asked = {(r.signal, r.outcome) for r in phoenix.request_log()}
    assert asked == {("traces", "accepted"), ("logs", "refused"), ("metrics", "refused")}


def test_with_logs_off_only_the_metrics_are_named(
    phoenix: OtlpReceiver, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COPILOT_OTEL_LOGS", "false")
    assert main(_replay(phoenix, "http/protobuf")) == 6
    err = capsys.readouterr().err
    assert (
        "the endpoint refuses metrics (a traces-only backend such as Phoenix?): set COPILOT_OTEL_METRICS=false"
        in err
    )
    assert "logs" not in err.split(";")[0]


def test_with_both_off_a_traces_only_backend_takes_everything(
    phoenix: OtlpReceiver, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COPILOT_OTEL_LOGS", "false")
    monkeypatch.setenv("COPILOT_OTEL_METRICS", "false")
    assert main(_replay(phoenix, "http/protobuf")) == 0
    assert capsys.readouterr().out.startswith("copilot-otel: exported 1 session: 14 spans")
    assert {r.signal for r in phoenix.request_log()} == {"traces"}
