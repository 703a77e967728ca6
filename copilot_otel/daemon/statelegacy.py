"""The one import of an earlier version's checkpoints, ``state.json`` (or ``state.json.prev``), into ``state.db``.

Before the database (issue 21) the checkpoints were one JSON document rewritten whole every second,
``state.json``, its previous copy kept as ``state.json.prev``. The first start of this version imports
``state.json`` in one transaction, or ``state.json.prev`` when ``state.json`` is torn or missing (files resume up
to one flush earlier: the replay is identical), and records in the database that it looked: neither file is read
again, nor changed, nor removed. A document that is not one an earlier copilot-otel wrote is skipped with a
warning (both corrupt: the store starts empty and every file is read again from 0, identical ids); one written by
a newer copilot-otel is refused with a one-line :class:`~copilot_otel.common.errors.StateError`.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

from ..common.errors import StateError
from ..common.jsonobject import NotAJsonObject, json_object
from ..sources.tail import FileIdentity
from .statedb import (
    DB_FILE,
    READ_AS_BACKFILL_SAYS,
    Checkpoint,
    Corrupt,
    LoadOutcome,
    import_rows,
    mark_imported,
    newer_version,
)

__all__ = ["LEGACY_FILE", "LEGACY_PREV_FILE", "import_legacy"]

# The state's log lines keep one logger name, whichever of its modules writes them.
logger = logging.getLogger("copilot_otel.daemon.state")

LEGACY_FILE = "state.json"
LEGACY_PREV_FILE = "state.json.prev"
# The version of the state.json documents an earlier copilot-otel wrote (imported once).
_LEGACY_VERSION = 1


def import_legacy(state_dir: Path, conn: sqlite3.Connection) -> LoadOutcome:
    """Import ``state.json`` (or, torn, ``state.json.prev``) once, in one transaction; both stay untouched.

    Raises:
        StateError: A file cannot be read, or a newer copilot-otel wrote it.
        sqlite3.Error: The database cannot be written.
    """
    candidates = ((LEGACY_FILE, LoadOutcome.MIGRATED), (LEGACY_PREV_FILE, LoadOutcome.FROM_PREVIOUS))
    found = False
    for name, outcome in candidates:
        path = state_dir / name
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise StateError(f"cannot read {path}: {exc.strerror or exc}") from exc
        found = True
        try:
            checkpoints = _decode(data)
        except Corrupt as exc:
            logger.warning("cannot import %s: it is corrupt (%s)", path, exc)
            continue
        import_rows(conn, checkpoints, f"imported {len(checkpoints)} from {name}")
        logger.info(
            "imported %d checkpoints from %s into %s (%s is kept beside it and no longer read)",
            len(checkpoints),
            path,
            state_dir / DB_FILE,
            name,
        )
        return outcome
    if not found:
        mark_imported(conn, "nothing to import")
        logger.info("no state in %s: starting fresh", state_dir)  # what is read: the daemon says (--backfill)
        return LoadOutcome.FRESH
    mark_imported(conn, "nothing usable to import")
    logger.error(
        "no usable state to import in %s (%s and %s are corrupt, both kept): starting empty; %s",
        state_dir,
        LEGACY_FILE,
        LEGACY_PREV_FILE,
        READ_AS_BACKFILL_SAYS,
    )
    return LoadOutcome.EMPTY_AFTER_CORRUPTION


def _decode(data: bytes) -> dict[str, Checkpoint]:
    """Turn an earlier version's state document into checkpoints; raises Corrupt for anything it did not write."""
    try:
        doc = json_object(data)
    except NotAJsonObject as exc:
        raise Corrupt(str(exc)) from exc
    version = doc.get("version")
    if type(version) is not int:
        raise Corrupt("no schema version")
    if version > _LEGACY_VERSION:
        raise StateError(newer_version(f"state.json version {version}"))
    entries = doc.get("checkpoints")
    if not isinstance(entries, dict):
        raise Corrupt("no checkpoints object")
    out: dict[str, Checkpoint] = {}
    try:
        for path, e in entries.items():
            ident = e["identity"]
            identity = FileIdentity(
                _int(ident["dev"]),
                _int(ident["inode"]),
                _str(ident["fingerprint"]),
                _int(ident["fingerprint_len"]),
            )
            context = e.get("context")
            if context is not None and not isinstance(context, dict):
                raise Corrupt(f"context of {path!r} is not an object")
            out[path] = Checkpoint(
                identity,
                _int(e["safe_offset"]),
                _int(e["acked_offset"]),
                context,
                _int(e["updated_ns"]),
                _int(e.get("size", 0)),
                _int(e.get("mtime_ns", 0)),
            )
    except (KeyError, TypeError) as exc:
        raise Corrupt(f"malformed checkpoint ({exc!r})") from exc
    return out


def _int(value: object) -> int:
    if type(value) is not int or value < 0:
        raise TypeError(f"expected a non-negative int, got {value!r}")
    return value


def _str(value: object) -> str:
    if type(value) is not str:
        raise TypeError(f"expected a string, got {value!r}")
    return value
