"""The names of the state dir's ``lock`` and ``status.json``, and ``status.json`` read back: light enough for
``status``.

:mod:`copilot_otel.daemon.state` writes both (the daemon's :class:`~copilot_otel.daemon.state.StateStore`), and with them loads
SQLite, ``filelock`` and the checkpoint database, about 35 ms that ``copilot-otel status``, which only reads
``status.json`` and the lock's pid, must not pay (it starts in under 100 ms, issue 25).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from ..common.errors import StateError
from ..common.jsonobject import NotAJsonObject, json_object

__all__ = ["LOCK_FILE", "STATUS_FILE", "DaemonStatus", "read_daemon_status", "read_status"]

LOCK_FILE = "lock"
STATUS_FILE = "status.json"


def read_status(state_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """Read the ``status.json`` a daemon wrote in ``state_dir``; ``None`` if there is none.

    Raises:
        StateError: The file exists but cannot be read or is not a JSON object.
    """
    path = Path(state_dir) / STATUS_FILE
    try:
        data = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise StateError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        return json_object(data)
    except NotAJsonObject as exc:
        raise StateError(f"{path} is {exc}") from exc


@dataclass(frozen=True, slots=True)
class DaemonStatus:
    """What ``status.json`` holds (read by ``copilot-otel status``; the field names are its keys)."""

    pid: int
    version: str
    started_at: float
    updated_at: float
    session_state: str
    files_tracked: int
    files_followed: int
    sessions_open_prompts: int
    open_prompts: list[dict[str, Any]]
    backlog_spans: int
    spans_exported: int
    logs_exported: int
    dead_lettered: int
    dead_letters: int
    dead_letter_file: str
    unencodable: int
    endpoint_error: str
    retries: int
    last_export_ok_at: float | None
    last_error: str
    lines_read: int
    lines_dropped: dict[str, int]
    values_dropped: dict[str, int]
    detections: dict[str, int]
    prompts_closed: dict[str, int]
    destination: str
    discovery: str
    scans: (
        int  # full scans of the session-state folder compared so far (the first, the watch's, the safety net)
    )
    last_scan_s: float  # what the last one cost (100,000 sessions: a second or more)
    open_files_cap: int
    reads_deferred_no_descriptor: int
    state_flush_failures: int
    # The last failed write of the checkpoints (why, and when: Unix seconds), kept after writes succeed again, and
    # the failures since the last write that succeeded (0: the state on disk is current).
    state_write_error: str
    state_write_failed_at: float | None
    state_writes_failing: int
    # Files read beside a log that were not read (a FIFO or /dev/zero in place of a .meta.json), by reason.
    side_files_refused: dict[str, int]
    runaway_interrupts: dict[str, int] | None = None
    notifications: dict[str, int] | None = None
    # Records of kinds their reader does not read, per agent and CLI version (Health.not_read_rows).
    records_not_read: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The JSON document (the runaway counters only when an action is configured)."""
        doc = asdict(self)
        for key in ("runaway_interrupts", "notifications"):
            if doc[key] is None:
                del doc[key]
        return doc

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> DaemonStatus:
        """The status a ``status.json`` holds, whichever version wrote it: a key it lacks (an older daemon's, or
        a key since renamed) or holds with a value of another type gets the field's default (0, "", nothing,
        ``None``), so ``status`` reads every field by its name and type, never a string key."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            kind, default = _FIELD_KINDS[str(f.type)]
            value = doc.get(f.name)
            values[f.name] = _as_kind(value, kind) if _is_kind(value, kind) else default()
        return cls(**values)


# What each annotation of DaemonStatus reads from JSON: the kind of value, and what makes the default for one
# missing or of another type. (A table, not typing's introspection: resolving the annotations costs start-up time.)
def _none() -> None:
    return None


_FIELD_KINDS: dict[str, tuple[str, Callable[[], Any]]] = {
    "int": ("int", int),
    "float": ("float", float),
    "float | None": ("float", _none),
    "str": ("str", str),
    "dict[str, int]": ("counts", dict),
    "dict[str, int] | None": ("counts", _none),
    "list[dict[str, Any]]": ("rows", list),
}


def _is_kind(value: object, kind: str) -> bool:
    if isinstance(value, bool):  # JSON's true is no count
        return False
    if kind == "int":
        return isinstance(value, int)
    if kind == "float":
        return isinstance(value, (int, float))
    if kind == "str":
        return isinstance(value, str)
    if kind == "counts":
        return isinstance(value, dict)
    return isinstance(value, list)


def _as_kind(value: Any, kind: str) -> Any:
    """``value`` (of ``kind``) as the field holds it: a float from a JSON integer, the counts' values as ints and
    the rows that are objects (a count of another type is 0, a row of another type left out)."""
    if kind == "float":
        return float(value)
    if kind == "counts":
        return {str(k): v if isinstance(v, int) and not isinstance(v, bool) else 0 for k, v in value.items()}
    if kind == "rows":
        return [row for row in value if isinstance(row, dict)]
    return value


def read_daemon_status(state_dir: str | os.PathLike[str]) -> DaemonStatus | None:
    """:func:`read_status` as the typed :class:`DaemonStatus` (missing keys get their defaults).

    Raises:
        StateError: The file exists but cannot be read or is not a JSON object.
    """
    doc = read_status(state_dir)
    return DaemonStatus.from_dict(doc) if doc is not None else None
