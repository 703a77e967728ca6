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
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

from .statusdoc import LOCK_FILE, STATUS_FILE, read_status

__all__ = [
    "LOCK_FILE",
    "STATUS_FILE",
    "DaemonStatus",
    "NotReadRow",
    "OpenPrompt",
    "not_read_rows",
    "read_daemon_status",
    "read_status",
]

_Record = TypeVar("_Record", bound="DataclassInstance")


@dataclass(frozen=True, slots=True)
class OpenPrompt:
    """A prompt still open, as ``status.json``'s ``open_prompts`` lists it (the oldest first, at most 50).

    What a status lacks is ``None`` (``""`` for the session id): ``status`` shows it as ``?``, never as 0.
    """

    session_id: str
    started_at: float | None  # Unix seconds
    last_event_at: float | None  # Unix seconds
    turns: int | None
    tool_calls: int | None


@dataclass(frozen=True, slots=True)
class NotReadRow:
    """Records of kinds an agent's reader does not read, for one agent and CLI version (``records_not_read``)."""

    agent: str
    cli_version: str | None  # None: no record of the log named one (Gemini CLI's never do)
    kinds: dict[str, int]  # kind → records


def not_read_rows(not_read: Mapping[tuple[str, str | None], Mapping[str, int]]) -> list[NotReadRow]:
    """The router's counts of records not read (``Health.not_read``: (agent, CLI version) → kind → records) as
    the rows ``status.json`` holds, ordered by agent and version."""
    return [
        NotReadRow(agent, version, dict(sorted(kinds.items())))
        for (agent, version), kinds in sorted(not_read.items(), key=lambda item: str(item[0]))
    ]


@dataclass(frozen=True, slots=True)
class DaemonStatus:
    """What ``status.json`` holds (read by ``copilot-otel status``; the field names are its keys).

    A count is ``None`` when the status read lacks it (an older daemon's): ``status`` shows ``?``, not a 0 the daemon
    never wrote.
    """

    pid: int
    version: str
    started_at: float
    updated_at: float
    session_state: str
    files_tracked: int | None
    files_followed: int | None
    sessions_open_prompts: int | None
    open_prompts: list[OpenPrompt]
    backlog_spans: int | None
    spans_exported: int | None
    logs_exported: int | None
    dead_lettered: int | None
    dead_letters: int | None
    dead_letter_file: str
    unencodable: int | None
    endpoint_error: str
    retries: int | None
    last_export_ok_at: float | None
    last_error: str
    lines_read: int | None
    lines_dropped: dict[str, int] | None
    values_dropped: dict[str, int] | None
    detections: dict[str, int] | None
    prompts_closed: dict[str, int] | None
    destination: str
    discovery: str
    scans: (
        int | None
    )  # full scans of the session-state folder so far (the first, the watch's, the safety net)
    last_scan_s: float  # what the last one cost (100,000 sessions: a second or more)
    open_files_cap: int | None
    reads_deferred_no_descriptor: int | None
    state_flush_failures: int | None
    # The last failed write of the checkpoints (why, and when: Unix seconds), kept after writes succeed again, and
    # the failures since the last write that succeeded (0: the state on disk is current).
    state_write_error: str
    state_write_failed_at: float | None
    state_writes_failing: int | None
    # Files read beside a log that were not read (a FIFO or /dev/zero in place of a .meta.json), by reason.
    side_files_refused: dict[str, int] | None
    runaway_interrupts: dict[str, int] | None = None
    notifications: dict[str, int] | None = None
    # Records of kinds their reader does not read, per agent and CLI version (not_read_rows).
    records_not_read: list[NotReadRow] = field(default_factory=list)

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
        a key since renamed) or holds with a value of another type gets the field's default (``None`` for a
        count, 0, "", nothing), and its rows are read as typed rows alike, so ``status`` reads every field by its
        name and type, never a string key."""
        return _from_doc(cls, doc)


def _from_doc(cls: type[_Record], doc: Mapping[str, Any]) -> _Record:
    """One of this module's records (``cls``) from a JSON object: each field by its annotation (:data:`_FIELD_KINDS`)."""
    values: dict[str, Any] = {}
    for f in fields(cls):
        kind, default = _FIELD_KINDS[str(f.type)]
        value = doc.get(f.name)
        values[f.name] = _as_kind(value, kind) if _is_kind(value, kind) else default()
    return cls(**values)


# What each annotation of the records above reads from JSON: the kind of value (a row's record, for a list of
# rows), and what makes the default for one missing or of another type. (A table, not typing's introspection:
# resolving the annotations costs start-up time.)
def _none() -> None:
    return None


_FIELD_KINDS: dict[str, tuple[str | type, Callable[[], Any]]] = {
    "int": ("int", int),
    "int | None": ("int", _none),
    "float": ("float", float),
    "float | None": ("float", _none),
    "str": ("str", str),
    "str | None": ("str", _none),
    "dict[str, int]": ("counts", dict),
    "dict[str, int] | None": ("counts", _none),
    "list[OpenPrompt]": (OpenPrompt, list),
    "list[NotReadRow]": (NotReadRow, list),
}


def _is_kind(value: object, kind: str | type) -> bool:
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


def _as_kind(value: Any, kind: str | type) -> Any:
    """``value`` (of ``kind``) as the field holds it: a float from a JSON integer, the counts' values as ints and
    the rows that are objects, each as its record (a count of another type is 0, a row of another type left out)."""
    if kind == "float":
        return float(value)
    if kind == "counts":
        return {str(k): v if isinstance(v, int) and not isinstance(v, bool) else 0 for k, v in value.items()}
    if isinstance(kind, type):
        return [_from_doc(kind, row) for row in value if isinstance(row, dict)]
    return value


def read_daemon_status(state_dir: str | os.PathLike[str]) -> DaemonStatus | None:
    """:func:`read_status` as the typed :class:`DaemonStatus` (missing keys get their defaults).

    Raises:
        StateError: The file exists but cannot be read or is not a JSON object.
    """
    doc = read_status(state_dir)
    return DaemonStatus.from_dict(doc) if doc is not None else None
