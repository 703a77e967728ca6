"""``status.json`` read back as the typed record the daemon writes (:class:`DaemonStatus`), whichever version wrote
it: ``status`` reads fields by name and type, and a key an older daemon did not write gets its default."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from copilot_otel.cli import main
from copilot_otel.daemon.statusfile import (
    STATUS_FILE,
    DaemonStatus,
    NotReadRow,
    OpenPrompt,
    read_daemon_status,
)

# A value other than the default for each annotation of DaemonStatus (None for a count the status lacks).
_SET = {"int": 7, "int | None": 7, "float": 1.5, "float | None": 2.5, "str": "x", "dict[str, int] | None": {}}


def _written(**changes: Any) -> DaemonStatus:
    """A status as a daemon writes it, every field set to a value other than its default."""
    base = DaemonStatus.from_dict({})
    values: dict[str, Any] = {
        f.name: _SET.get(str(f.type), getattr(base, f.name)) for f in dataclasses.fields(DaemonStatus)
    }
    values.update(
        last_export_ok_at=2.5,
        state_write_failed_at=3.5,
        lines_dropped={"invalid_json": 2},
        runaway_interrupts={"turns": 1},
        notifications=None,
        open_prompts=[OpenPrompt("s", 1.5, 2.5, 3, 0)],
        records_not_read=[NotReadRow("codex", "1", {"k": 1})],
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
    assert (status.lines_read, status.destination, status.last_export_ok_at) == (None, "", None)
    assert (status.side_files_refused, status.records_not_read, status.runaway_interrupts) == (None, [], None)


def test_a_value_of_another_type_is_its_default_not_an_error() -> None:
    status = DaemonStatus.from_dict(
        {
            "pid": True,
            "files_tracked": "12",
            "detections": {"turns": "1", "tool_errors": 2},
            "open_prompts": [1, {"session_id": "s", "turns": "3", "tool_calls": 2}],
            "records_not_read": [{"agent": "codex", "kinds": {"k": 1}}, "codex"],
        }
    )
    assert (status.pid, status.files_tracked) == (0, None)
    assert status.detections == {"turns": 0, "tool_errors": 2}
    assert status.open_prompts == [OpenPrompt("s", None, None, None, 2)]
    assert status.records_not_read == [NotReadRow("codex", None, {"k": 1})]


def test_no_status_file_is_none(tmp_path: Path) -> None:
    assert read_daemon_status(tmp_path) is None


def test_status_shows_a_count_the_status_lacks_as_unknown_not_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An older daemon's status (a running one: this process) wrote some counts and not others: ``status`` shows
    what it wrote, 0 included, and ``?`` for what it did not; its rows are read by field, a missing one ``?``."""
    written = {
        "pid": os.getpid(),
        "files_tracked": 0,
        "retries": 2,
        "lines_dropped": {"too_long": 1},
        "open_prompts": [{"session_id": "s-1", "tool_calls": 4}],
        "records_not_read": [{"agent": "codex", "cli_version": "0.9", "kinds": {"k1": 1, "k2": 5}}],
    }
    (tmp_path / STATUS_FILE).write_bytes(orjson.dumps(written))
    assert main(["status", "--state-dir", str(tmp_path)]) == 0
    rows: dict[str, str] = {}  # the table's rows by their name (the first: "open prompts" titles a table too)
    for line in capsys.readouterr().out.splitlines():
        if "  " in line and not line.startswith(" "):
            name, value = line.split("  ", 1)
            rows.setdefault(name, value.strip())
    assert rows["files tracked"] == "0"
    assert rows["retries"] == "2"
    assert rows["lines dropped"] == "1 (too_long 1)"
    for unknown in ("open prompts", "lines read", "dead-lettered", "detections"):
        assert rows[unknown] == "?", unknown
    assert rows["backlog"] == "? spans waiting"
    assert rows["exported"] == "? spans, ? log events"
    assert rows["record kinds"] == "Codex CLI 0.9: 2 record kinds not read: k1, k2"
    assert rows["s-1"].split() == ["?", "?", "4", "?"]  # running for, turns, tool calls, last event


def test_status_says_one_span_waiting_in_the_singular(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / STATUS_FILE).write_bytes(orjson.dumps({"pid": os.getpid(), "backlog_spans": 1}))
    assert main(["status", "--state-dir", str(tmp_path)]) == 0
    backlog = [line for line in capsys.readouterr().out.splitlines() if line.startswith("backlog")]
    assert [line.split("  ", 1)[1].strip() for line in backlog] == [
        "1 span waiting"
    ]  # on main: "1 spans waiting"
