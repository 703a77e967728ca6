"""The live path without change notifications: files with an open prompt are polled by ``stat``.

Windows delays or drops change notifications for appended files. Here the daemon's watcher is watchdog's own
polling observer set to look once an hour (a notification that comes an hour late) and the periodic rescan is
minutes away: the spans of a prompt written meanwhile must still arrive within seconds.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from watchdog.observers.polling import PollingObserver

from copilot_otel.daemon.daemon import Daemon
from copilot_otel.daemon.discover import Discovery
from copilot_otel.settings.config import load_config
from tests.conftest import CLI_GENERATED
from tests.otlp_receiver import OtlpReceiver

# Generous: the stat poll runs every 0.25 s; without it the next look would be the rescan, minutes away.
LATENCY_BOUND_S = 10.0


def test_an_open_prompt_is_followed_without_notifications(tmp_path: Path, receiver: OtlpReceiver) -> None:
    root = tmp_path / "session-state"
    log = root / "0a000001-0000-4000-8000-00000000beef" / "events.jsonl"
    log.parent.mkdir(parents=True)
    lines = (CLI_GENERATED / "plain-question" / "events.jsonl").read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(lines[:4]))  # session.start, the prompt, its first turn starts
    # Its CLI is alive (this process, which started before the lock was written): the prompt stays open.
    (log.parent / f"inuse.{os.getpid()}.lock").write_bytes(b"")
    config = load_config(
        {
            "session_state": root,
            "state_dir": tmp_path / "state",
            "endpoint": receiver.http_endpoint,
            "rescan_interval": "60",
            "export_delay": "0.1",
        },
        {"HOME": str(tmp_path), "COPILOT_OTEL_METRICS": "false"},
    )
    stop = threading.Event()
    daemon = Daemon(config, stop=stop)
    # A real watcher that reports changes an hour late, in place of inotify.
    daemon._discovery = Discovery(  # type: ignore[assignment]  # the one root's discovery stands in for them all
        root, daemon._on_change, observer_factory=lambda: PollingObserver(timeout=3600)
    )
    thread = threading.Thread(target=daemon.run, name="daemon-under-test")
    thread.start()
    try:
        # The daemon has read the open prompt (its start is a log event) before the rest is written.
        receiver.wait_for(
            lambda r: any(rec["event_name"] == "copilot_otel.prompt.started" for rec in r.logs()), 20
        )
        with open(log, "ab") as fh:  # the rest: the model answers, the turn ends, the session shuts down
            fh.write(b"".join(lines[4:]))
        receiver.wait_for(lambda r: any(s["name"].startswith("chat ") for s in r.spans()), LATENCY_BOUND_S)
        receiver.wait_for(lambda r: any(s["parent_span_id"] is None for s in r.spans()), LATENCY_BOUND_S)
        prompt = next(span for span in receiver.spans() if span["parent_span_id"] is None)
        # Ended by its own lines, not closed for idling or a vanished owner.
        assert "copilot_otel.incomplete" not in prompt["attributes"]
        assert daemon._discovery.mode == "inotify"  # the (late) watcher was in charge, not the fallback poll
    finally:
        stop.set()
        daemon._wake.set()
        thread.join(30)
    assert not thread.is_alive()
