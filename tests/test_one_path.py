"""Replay and live are one path: the same logs give the same spans, log records and counters either way.

Every fixture (the CLI's own sessions of every shape, and the older public ones) gets blank, torn and invalid
lines written into it; the whole set is then replayed into one real OTLP receiver and followed by a real
``copilot-otel run`` process into another. Both read their lines through ``pipeline.Pipeline``; this test is what
keeps them from drifting apart again (blank lines used to be skipped by one and counted as ``invalid_json`` by the
other, and a line over the length limit was dropped live but folded by replay).

One difference is by design and masked: where a log simply ends with a prompt still open, replay closes it as
``file_ended`` while the daemon waits, sees that no CLI process owns the session any more, and closes it as
``owner_exited`` (or, for the legacy flat files that have no lock files, once they idled: ``idle_timeout``, set
short here). Which spans are incomplete must still be the same.

The lines neither reader can take are also written into a Copilot CLI log and a Claude Code log alone (a line over
the length limit, a kind no reader reads, a torn last line without its newline): replay and the daemon take every
step through ``Pipeline.take``, and must count each under the same reason (the daemon once left a torn last line
uncounted).
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from copilot_otel.cli import main
from copilot_otel.pipeline import MAX_LINE_BYTES
from tests.conftest import CLI_GENERATED, FIXTURES, all_fixture_logs
from tests.daemon_process import DaemonProcess
from tests.otlp_receiver import OtlpReceiver
from tests.waiting import until

CLI_SHAPES = FIXTURES / "cli-shapes"

# What a real log can hold besides events: blank lines (a CRLF one too), a line torn in the middle of its JSON,
# bytes that are not UTF-8, JSON that is not an object, an object without a type.
BAD_LINES = (
    b"\n",
    b"   \r\n",
    b'{"type":"assistant.message","data":{"content":"torn in the mid\n',
    b"\xff\xfe\x00 not utf-8\n",
    b"[1, 2, 3]\n",
    b'{"data": {}, "id": "no-type"}\n',
)
# The drop reasons those lines must be counted under (blank lines are framing, not data: not counted).
EXPECTED_DROPS = {"invalid_json": 1, "invalid_utf8": 1, "not_an_object": 1, "missing_field": 1}
END_OF_LOG = {"file_ended", "owner_exited", "idle_timeout"}
# Short enough for the test, long enough that the freshly written logs are not skipped as idle history.
IDLE_TIMEOUT_S = "15"


def _sources() -> dict[str, Path]:
    """Every fixture log, by the name it gets in the session-state root (folder name, or flat-file name)."""
    out: dict[str, Path] = {}
    for log in all_fixture_logs():
        out[log.parent.name if log.parent.parent == CLI_GENERATED else log.name] = log
    for log in sorted(CLI_SHAPES.glob("*/events.jsonl")):
        out[log.parent.name] = log
    return out


def _with_bad_lines(data: bytes) -> bytes:
    lines = data.splitlines(keepends=True)
    return b"".join(lines[:2]) + b"".join(BAD_LINES) + b"".join(lines[2:])


def _write_root(root: Path) -> int:
    """A session-state root holding every fixture with the bad lines in it; returns how many sessions."""
    sources = _sources()
    for name, log in sources.items():
        target = root / name / "events.jsonl" if log.name == "events.jsonl" else root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(_with_bad_lines(log.read_bytes()))
    return len(sources)


def _mask(attributes: dict[str, Any]) -> dict[str, Any]:
    masked = dict(attributes)
    if masked.get("copilot_otel.incomplete.reason") in END_OF_LOG:
        masked["copilot_otel.incomplete.reason"] = "<end of log>"
    return masked


def _span(span: dict[str, Any]) -> str:
    kept = {k: v for k, v in span.items() if k != "resource"}
    kept["attributes"] = _mask(span["attributes"])
    return json.dumps(kept, sort_keys=True)


def _log(record: dict[str, Any]) -> str:
    kept = {k: v for k, v in record.items() if k not in ("resource", "observed_time_ns")}
    kept["attributes"] = _mask(record["attributes"])
    return json.dumps(kept, sort_keys=True)


def _counters(receiver: OtlpReceiver) -> dict[str, Any]:
    """The last value of every series the fold and the line reader count (not the export's own health)."""
    last: dict[str, Any] = {}
    for point in receiver.metrics():
        if point["name"].startswith("copilot_otel.deliver.export") or point["type"] == "gauge":
            continue
        key = point["name"] + json.dumps(point["attributes"], sort_keys=True)
        # Sums are rounded: the two paths add the same values in a different order (float addition).
        total = None if point["sum"] is None else round(point["sum"], 9)
        value = None if point["value"] is None else round(point["value"], 9)
        last[key] = (value, point["count"], total, point["bucket_counts"])
    return last


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("one-path")
    replay_root, live_root = tmp / "replay-root", tmp / "live-root"
    sessions = _write_root(replay_root)
    _write_root(live_root)
    with pytest.MonkeyPatch.context() as mp, OtlpReceiver() as replayed, OtlpReceiver() as live:
        mp.setenv("HOME", str(tmp / "home"))
        code = main(
            [
                "replay",
                str(replay_root),
                "--endpoint",
                replayed.http_endpoint,
                "--no-progress",
                "--state-dir",
                str(tmp / "replay-state"),
            ]
        )
        assert code == 0
        want = {s["span_id"] for s in replayed.spans()}
        daemon = DaemonProcess(
            live_root,
            tmp / "live-state",
            live.http_endpoint,
            tmp / "daemon.log",
            "--idle-timeout",
            IDLE_TIMEOUT_S,
            env={"COPILOT_OTEL_METRICS": "true", "OTEL_METRIC_EXPORT_INTERVAL": "3600000"},
        ).start()
        try:
            # Open prompts close once the daemon sees no CLI owns them (a few seconds after the last line).
            live.wait_for(lambda r: {s["span_id"] for s in r.spans()} >= want, 90)
            live.wait_for(lambda r: len(r.logs()) >= len(replayed.logs()), 30)
        finally:
            assert daemon.terminate() == 0  # the final metric export happens on the way out
        return {
            "sessions": sessions,
            "replayed": replayed,
            "live": live,
            "daemon_log": daemon.output(),
        }


def test_the_same_spans(both: dict[str, Any]) -> None:
    replayed, live = both["replayed"], both["live"]
    want = sorted(_span(s) for s in replayed.spans())
    got = sorted(set(_span(s) for s in live.spans()))  # a live span may arrive twice, never differently
    assert len(want) > 400 and len(set(want)) == len(want)
    assert got == want
    assert {s["trace_id"] for s in live.spans()} == {s["trace_id"] for s in replayed.spans()}


def test_the_same_log_records(both: dict[str, Any]) -> None:
    # Two public captures share a session id and so their first records: compared as sets.
    want = {_log(r) for r in both["replayed"].logs()}
    got = {_log(r) for r in both["live"].logs()}
    assert len(want) > 150
    assert got == want


def test_the_same_counters(both: dict[str, Any]) -> None:
    want, got = _counters(both["replayed"]), _counters(both["live"])
    assert want == got
    # and they say what was written: every bad line counted under its reason, once per session
    drops: dict[str, float] = defaultdict(float)
    for key, (value, *_) in want.items():
        if key.startswith("copilot_otel.lines.dropped"):
            drops[json.loads(key[len("copilot_otel.lines.dropped") :])["copilot_otel.drop.reason"]] += value
    assert dict(drops) == {reason: n * both["sessions"] for reason, n in EXPECTED_DROPS.items()}


def test_bad_lines_cost_only_themselves(both: dict[str, Any]) -> None:
    """No traceback, and the events around the bad lines still fold (each session keeps its first prompt)."""
    assert "Traceback" not in both["daemon_log"]
    sessions_with_spans = {s["attributes"].get("session.id") for s in both["live"].spans()}
    assert len(sessions_with_spans) >= both["sessions"] - 1  # one public capture is only a session.start


# Lines no reader can take, in a Copilot CLI log and in a Claude Code log (another reader, another framer), and a
# last line torn by a CLI killed mid-write: each must be counted under the same reason by replay and the daemon.
UNKNOWN_COPILOT = b'{"type":"some.future.event","data":{},"id":"f1","timestamp":"2026-11-29T17:11:30.055Z","parentId":null}\n'
UNKNOWN_CLAUDE = b'{"type":"some-future-record","sessionId":"fd356df0-b044-4ac6-98a7-fac74578e4de"}\n'
TORN_LAST_LINE = b'{"type":"assistant.message","data":{"content":"torn'


def _too_long() -> bytes:
    """A line one byte over the limit (dropped as ``too_long`` unread, by both)."""
    return b'{"type":"x","data":"' + b"y" * (MAX_LINE_BYTES - 21) + b'"}\n'


def _odd(log: Path, unknown: bytes) -> bytes:
    lines = log.read_bytes().splitlines(keepends=True)
    odd = (unknown, _too_long(), b"[1, 2, 3]\n", b"\xff\xfe not utf-8\n")
    return b"".join(lines[:3]) + b"".join(odd) + b"".join(lines[3:]) + TORN_LAST_LINE


def _dropped(doc: dict[str, Any]) -> int:
    counts = doc.get("lines_dropped")
    return sum(counts.values()) if isinstance(counts, dict) else 0


def _line_counters(receiver: OtlpReceiver) -> dict[str, Any]:
    return {
        k: v
        for k, v in _counters(receiver).items()
        if k.startswith(("copilot_otel.lines.", "copilot_otel.values."))
    }


def test_odd_lines_are_dropped_and_counted_alike(tmp_path: Path) -> None:
    """A line too long, one of a kind no reader reads, a bad one and a torn last line without its newline, in a
    Copilot CLI log and a Claude Code log: replay and a real daemon count them under the same reasons, and the same
    lines read (the daemon folds the torn last line once the file is quiet and no CLI holds it, as replay folds it
    at the end of the file)."""
    home = Path(os.environ["HOME"])
    root = tmp_path / "session-state"
    copilot = root / "odd-lines" / "events.jsonl"
    copilot.parent.mkdir(parents=True)
    copilot.write_bytes(_odd(CLI_GENERATED / "plain-question" / "events.jsonl", UNKNOWN_COPILOT))
    (claude_source,) = (FIXTURES / "other-agents" / "claude-code" / "plain-question" / "projects").glob(
        "*/*.jsonl"
    )
    claude = home / ".claude" / "projects" / claude_source.parent.name / claude_source.name
    claude.parent.mkdir(parents=True)
    claude.write_bytes(_odd(claude_source, UNKNOWN_CLAUDE))
    metrics = {"COPILOT_OTEL_METRICS": "true", "OTEL_METRIC_EXPORT_INTERVAL": "3600000"}
    with pytest.MonkeyPatch.context() as mp, OtlpReceiver() as replayed, OtlpReceiver() as live:
        for name, value in metrics.items():
            mp.setenv(name, value)
        args = [
            "replay",
            str(root),
            str(home / ".claude"),
            "--endpoint",
            replayed.http_endpoint,
            "--no-progress",
        ]
        assert main([*args, "--state-dir", str(tmp_path / "replay-state")]) == 0
        want = _line_counters(replayed)
        drops = sum(v[0] for k, v in want.items() if k.startswith("copilot_otel.lines.dropped"))
        assert drops == 2 * 4  # too long, not an object, not UTF-8, torn: in each log
        daemon = DaemonProcess(
            root, tmp_path / "state", live.http_endpoint, tmp_path / "daemon.log", env=metrics
        ).start()
        status = tmp_path / "state" / "status.json"
        try:
            until(
                lambda: status.exists() and _dropped(json.loads(status.read_bytes() or b"{}")) >= drops,
                60,
                "the daemon counted the lines replay dropped",
                detail=lambda: status.read_text() if status.exists() else "no status",
            )
        finally:
            assert daemon.terminate() == 0  # the final metric export happens on the way out
    assert _line_counters(live) == want


def test_the_library_counts_a_logs_odd_lines_as_replay_does(tmp_path: Path) -> None:
    """The same odd lines read by the library (``read_session``, what ``report`` and ``live`` add up): its lines read
    and dropped are replay's (on main the library counted the dropped lines among those read)."""
    from copilot_otel.library import read_session

    log = tmp_path / "odd-lines" / "events.jsonl"
    log.parent.mkdir(parents=True)
    log.write_bytes(_odd(CLI_GENERATED / "plain-question" / "events.jsonl", UNKNOWN_COPILOT))
    with OtlpReceiver() as replayed, pytest.MonkeyPatch.context() as mp:
        mp.setenv("COPILOT_OTEL_METRICS", "true")
        mp.setenv("OTEL_METRIC_EXPORT_INTERVAL", "3600000")
        assert main(["replay", str(log), "--endpoint", replayed.http_endpoint, "--no-progress"]) == 0
        counters = _line_counters(replayed)
    read = read_session(log)
    assert read.lines == sum(v[0] for k, v in counters.items() if k.startswith("copilot_otel.lines.read"))
    dropped = sum(v[0] for k, v in counters.items() if k.startswith("copilot_otel.lines.dropped"))
    assert len(read.drops) == dropped == 4
