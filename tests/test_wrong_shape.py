"""Valid JSON of the wrong shape is counted, never silently lost (issue 22, point 6).

A real fixture log is rewritten so that every event's ``data`` is an array (or every leaf of it is null): the
lines are valid JSON, so they are kept and routed, but their events cannot be read as their types. Each such
event is a ``wrong_shape`` dropped value, in replay's summary, in its log lines and in the daemon's status.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from copilot_otel.pipeline import Pipeline
from copilot_otel.sources.copilot.events import CLASSES
from tests.conftest import CLI_GENERATED, all_fixture_logs, replay_into
from tests.daemon_process import DaemonProcess
from tests.otlp_receiver import OtlpReceiver
from tests.waiting import until

SOURCE = CLI_GENERATED / "failing-tool" / "events.jsonl"


def _nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _nulls(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_nulls(item) for item in value]
    return None


MUTATIONS = {"data-as-array": lambda data: [data], "all-null-leaves": _nulls}


def _mutated(tmp_path: Path, how: str) -> tuple[Path, int]:
    """The fixture with each event's data mutated; and how many typed events (with data) it has."""
    lines, typed = [], 0
    for raw in SOURCE.read_text().splitlines():
        event = json.loads(raw)
        if event.get("data"):
            typed += event["type"] in CLASSES
            event["data"] = MUTATIONS[how](event["data"])
        lines.append(json.dumps(event))
    folder = tmp_path / "session-state" / "failing-tool"
    folder.mkdir(parents=True)
    (folder / "events.jsonl").write_text("\n".join(lines) + "\n")
    return folder / "events.jsonl", typed


@pytest.mark.parametrize("how", list(MUTATIONS))
def test_replay_counts_and_logs_each_event_it_cannot_read(
    tmp_path: Path, how: str, receiver: OtlpReceiver, capsys: pytest.CaptureFixture[str]
) -> None:
    log, typed = _mutated(tmp_path, how)
    assert typed > 10
    assert replay_into(receiver, log) == 0  # the lines are kept: nothing the collector refused
    out, err = capsys.readouterr()
    assert f"values dropped (wrong_shape: {typed})" in out, out
    detail = "data is an array, not an object" if how == "data-as-array" else "every value of data is null"
    assert f"(wrong_shape: session.start: {detail})" in err, err


def test_the_daemon_status_counts_wrong_shapes(tmp_path: Path) -> None:
    log, typed = _mutated(tmp_path, "data-as-array")
    state = tmp_path / "state"
    with OtlpReceiver() as receiver:
        daemon = DaemonProcess(log.parent.parent, state, receiver.http_endpoint, tmp_path / "d.log").start()

        def counted() -> dict[str, Any] | None:
            try:
                status: dict[str, Any] = json.loads((state / "status.json").read_text())
            except (OSError, ValueError):
                return None
            return status if status.get("values_dropped", {}).get("wrong_shape") == typed else None

        try:
            status = until(counted, 20, "the wrong shapes counted in status.json", detail=daemon.output)
        finally:
            daemon.terminate()
    assert status["values_dropped"] == {"wrong_shape": typed}, status
    assert "(wrong_shape: session.start: data is an array, not an object)" in daemon.output()


def test_a_field_of_the_wrong_type_is_a_wrong_shape_and_real_logs_have_none() -> None:
    line = b'{"type":"tool.execution_start","id":"e1","data":{"toolCallId":7,"toolName":"view"}}'
    pipeline = Pipeline("s")
    steps = list(pipeline.feed_blob(line + b"\n"))
    details = [d.detail for step in steps for d in step.values_dropped]
    assert "tool.execution_start toolCallId is a number, not a string" in details
    for path in all_fixture_logs():
        shaped = [
            d.detail
            for step in Pipeline(path.parent.name).feed_blob(path.read_bytes())
            for d in step.values_dropped
            if d.reason.value == "wrong_shape"
        ]
        assert not shaped, (path, shaped[:3])
