"""``status.json`` read back as the typed record the daemon writes (:class:`DaemonStatus`), whichever version wrote
it: ``status`` reads fields by name and type, and a key an older daemon did not write gets its default."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import orjson

from copilot_otel.daemon.statusfile import STATUS_FILE, DaemonStatus, read_daemon_status


def _written(**changes: Any) -> DaemonStatus:
    """A status as a daemon writes it, every field set to a value other than its default."""
    base = DaemonStatus.from_dict({})
    values: dict[str, Any] = {
        f.name: {int: 7, float: 1.5, str: "x"}.get(type(getattr(base, f.name)), getattr(base, f.name))
        for f in dataclasses.fields(DaemonStatus)
    }
    values.update(
        last_export_ok_at=2.5,
        state_write_failed_at=3.5,
        lines_dropped={"invalid_json": 2},
        runaway_interrupts={"turns": 1},
        notifications=None,
        open_prompts=[{"session_id": "s", "turns": 3}],
        records_not_read=[{"agent": "codex", "cli_version": "1", "kinds": {"k": 1}}],
    )
    values.update(changes)
    return DaemonStatus(**values)


def test_what_the_daemon_writes_is_read_back_whole(tmp_path: Path) -> None:
    status = _written()
    (tmp_path / STATUS_FILE).write_bytes(orjson.dumps(status.to_dict()))
    assert read_daemon_status(tmp_path) == status


def test_an_older_daemons_status_gets_defaults_for_what_it_did_not_write(tmp_path: Path) -> None:
    old = {"pid": 41, "started_at": 100, "files_tracked": 3, "lines_dropped": {"invalid_json": 1}}
    (tmp_path / STATUS_FILE).write_bytes(orjson.dumps(old))
    status = read_daemon_status(tmp_path)
    assert status is not None
    assert (status.pid, status.started_at, status.files_tracked) == (41, 100.0, 3)
    assert status.lines_dropped == {"invalid_json": 1}
    assert (status.lines_read, status.destination, status.last_export_ok_at) == (0, "", None)
    assert (status.side_files_refused, status.records_not_read, status.runaway_interrupts) == ({}, [], None)


def test_a_value_of_another_type_is_its_default_not_an_error() -> None:
    status = DaemonStatus.from_dict(
        {
            "pid": True,
            "files_tracked": "12",
            "detections": {"turns": "1", "tool_errors": 2},
            "open_prompts": [1, {}],
        }
    )
    assert (status.pid, status.files_tracked) == (0, 0)
    assert status.detections == {"turns": 0, "tool_errors": 2}
    assert status.open_prompts == [{}]


def test_no_status_file_is_none(tmp_path: Path) -> None:
    assert read_daemon_status(tmp_path) is None
