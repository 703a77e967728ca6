"""Live runaway detection: while a runaway session is being written line by line, the detection and the live
gauge reach the collector before the prompt ends.

The runaway log is built from real CLI lines (tests/runaway.py): one prompt whose agent keeps calling ``bash``
with identical arguments, turn after turn.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from tests.conftest import SERIAL
from tests.daemon_process import DaemonProcess, assert_delivered_like_replay
from tests.otlp_receiver import OtlpReceiver
from tests.runaway import DEFAULT_SESSION_ID, iter_runaway_lines

pytestmark = SERIAL  # the detection must arrive while the runaway is still being written


def test_detection_and_gauge_arrive_while_the_runaway_is_still_going(tmp_path: Path) -> None:
    root = tmp_path / "session-state"
    log = root / DEFAULT_SESSION_ID / "events.jsonl"
    log.parent.mkdir(parents=True)
    arrivals: dict[str, int] = {}
    lock = threading.Lock()

    def on_accept(signal: str, items: list[dict[str, Any]] | None, count: int, received_ns: int) -> None:
        with lock:
            for item in items or ():
                if signal == "logs" and item["event_name"] == "copilot_otel.runaway.detected":
                    arrivals.setdefault(
                        f"detected:{item['attributes']['copilot_otel.runaway.reason']}", received_ns
                    )
                if (
                    signal == "metrics"
                    and item["name"] == "copilot_otel.live.max_turns"
                    and item["value"] >= 25
                ):
                    arrivals.setdefault("gauge", received_ns)
                if signal == "traces" and item["parent_span_id"] is None:
                    arrivals.setdefault("root", received_ns)

    with OtlpReceiver(on_accept=on_accept) as receiver:
        daemon = DaemonProcess(
            root,
            tmp_path / "state",
            receiver.http_endpoint,
            tmp_path / "daemon.log",
            env={"COPILOT_OTEL_METRICS": "true", "OTEL_METRIC_EXPORT_INTERVAL": "250"},
        )
        daemon.start()
        try:
            turn_starts = 0
            crossed_ns = 0
            lines = list(iter_runaway_lines(turns=40))
            with open(log, "a") as fh:
                for line in lines:
                    fh.write(line)
                    fh.flush()
                    if json.loads(line)["type"] == "assistant.turn_start":
                        turn_starts += 1
                        if turn_starts == 25:
                            crossed_ns = time.time_ns()
                            break
                    time.sleep(0.01)  # not a wait: paces the writer as the CLI writes, a turn at a time
            # The prompt is still open (15 turns and the shutdown are not written yet): wait for the alarm.
            receiver.wait_for(lambda r: "detected:turns" in arrivals and "gauge" in arrivals, 15)
            assert "root" not in arrivals, "the root span cannot exist yet: the prompt has not ended"
            assert "detected:identical_tool_calls" in arrivals
            detection = next(
                r
                for r in receiver.logs()
                if r["event_name"] == "copilot_otel.runaway.detected"
                and r["attributes"]["copilot_otel.runaway.reason"] == "turns"
            )
            assert detection["severity_number"] == 13  # WARN
            latency_s = (arrivals["detected:turns"] - crossed_ns) / 1e9
            print(f"runaway detection arrived {latency_s:.3f}s after the crossing line was written")
            # now let the session finish: the root arrives with the detection as a span event
            with open(log, "a") as fh:
                fh.writelines(lines[lines.index(line) + 1 :])
            assert_delivered_like_replay(receiver, [log], tmp_path)
        finally:
            assert daemon.terminate() == 0
    root_span = next(s for s in receiver.spans() if s["parent_span_id"] is None)
    assert root_span["trace_id"] == detection["trace_id"] and root_span["span_id"] == detection["span_id"]
    reasons = [
        e["attributes"]["copilot_otel.runaway.reason"]
        for e in root_span["events"]
        if e["name"] == "copilot_otel.runaway.detected"
    ]
    assert reasons.count("turns") == 1 and reasons.count("identical_tool_calls") == 1
