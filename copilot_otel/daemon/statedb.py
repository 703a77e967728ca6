"""The checkpoints' database, ``state.db``: its schema and rows, the one connection to it, the read-only reader.

:class:`Database` owns the daemon's connection: it opens and checks it, sets a corrupt file aside, re-creates the
database when its directory was deleted, and runs the queries and the one transaction of a flush. It raises;
:class:`~copilot_otel.daemon.state.StateStore` decides what a failure means (counted, logged, retried). The pending
changes, the directory lock and ``status.json`` are the store's; the import of an earlier version's
``state.json`` is :mod:`copilot_otel.daemon.statelegacy`'s.

Durability: ``journal_mode=WAL`` with ``synchronous=FULL``: a commit returns once its frames are fsynced in the
log, and SQLite applies a transaction whole or not at all, so a crash or power loss at any instant leaves the last
committed flush: every row is its old or its new value (reliability rule 10; a checkpoint moves only after the
collector accepted the data). The log is copied back into ``state.db`` by SQLite's automatic checkpoint every 1,000
pages (4 MB) and truncated to :data:`_WAL_SIZE_LIMIT` after that. A flush that fails (ENOSPC, read-only, the
database locked by another program: ``SQLITE_BUSY`` after :data:`_BUSY_TIMEOUT_S`) keeps the pending rows in
memory, is counted and logged (rate-limited) and retried by the next one.

WAL and network file systems: WAL's index (``state.db-shm``) is shared memory between processes on one host, so
SQLite does not support WAL on a network file system (NFS, SMB): there it may fail to open, or readers on
another host may see torn data. When SQLite refuses WAL the store warns once and uses the rollback journal
(``synchronous=FULL`` keeps every flush atomic and durable); keep the state directory on a local disk (the
default, under ``~/.local/state`` or ``%LOCALAPPDATA%``, is). WAL works on Windows' local disks.

Loading never crashes and never starts at end-of-file: a file that is not a database, or whose schema is not
ours, or, met by the scan of every row at start-up (:meth:`Database.settled`), a damaged page or a row holding what
no flush writes (an offset of -5, or of text), is renamed to ``state.db.corrupt-<ts>`` (with its ``-wal``/``-shm``)
with a warning and the store starts empty: every file is read again from offset 0 (deterministic ids make the
replay identical).
:attr:`StateStore.load_outcome <copilot_otel.daemon.state.StateStore.load_outcome>` says which happened. A database
written by a newer copilot-otel (``PRAGMA user_version``) is refused with a one-line
:class:`~copilot_otel.common.errors.StateError`.

``state.db`` is created by us first, 0600 and without following a link (SQLite would follow one, and gives its
``-wal``/``-shm`` the database's mode); a link at ``state.db`` (or its ``-wal``/``-shm``) is refused with one line.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from .._platform import current
from ..common.errors import StateError
from ..common.jsonobject import NotAJsonObject, json_object
from ..sources.tail import FINGERPRINT_BYTES, FileIdentity

__all__ = [
    "DB_FILE",
    "READ_AS_BACKFILL_SAYS",
    "SCHEMA_VERSION",
    "Checkpoint",
    "Corrupt",
    "Database",
    "LoadOutcome",
    "Pending",
    "context_blob",
    "describe",
    "import_rows",
    "is_corruption",
    "mark_imported",
    "newer_version",
    "read_checkpoints",
    "stored_checkpoints",
]

# The state's log lines keep one logger name, whichever of its modules writes them.
logger = logging.getLogger("copilot_otel.daemon.state")

DB_FILE = "state.db"
# SQLite's own companions of state.db: set aside with it, and never links.
_DB_COMPANIONS = ("-wal", "-shm")
# Bump when the schema changes (PRAGMA user_version); a newer database is refused rather than misread.
SCHEMA_VERSION = 1
# How long a flush waits for a write lock another program holds on state.db before it fails (and is retried a
# second later): the daemon's loop must not stall behind it.
_BUSY_TIMEOUT_S = 0.1
# After an automatic checkpoint the log is truncated to this (a large import or a burst would otherwise leave
# a log of its size on disk).
_WAL_SIZE_LIMIT = 4 * 1024 * 1024
# SQLite's primary result codes for a damaged or foreign file.
_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26
# dev and inode are unsigned 64-bit (128-bit on ReFS); SQLite's INTEGER is signed: larger values are stored as
# text, in columns declared without a type (no affinity: a column typed INTEGER or ANY would turn that text into a
# lossy REAL).
_INT64_MAX = 2**63 - 1
# The longest fingerprint a checkpoint holds (the tailer's).
_FINGERPRINT_MAX = FINGERPRINT_BYTES

_SCHEMA = f"""
CREATE TABLE checkpoints (
    path TEXT PRIMARY KEY NOT NULL,
    dev NOT NULL,
    inode NOT NULL,
    fingerprint TEXT NOT NULL,
    fingerprint_len INTEGER NOT NULL,
    safe_offset INTEGER NOT NULL,
    acked_offset INTEGER NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    updated_ns INTEGER NOT NULL,
    context BLOB
);
CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value);
PRAGMA user_version = {SCHEMA_VERSION};
"""
# context last: a row's large context spills into overflow pages, which queries not naming it never read.
_COLUMNS = (
    "path",
    "dev",
    "inode",
    "fingerprint",
    "fingerprint_len",
    "safe_offset",
    "acked_offset",
    "size",
    "mtime_ns",
    "updated_ns",
    "context",
)
# Every column but the context: what a row that fails the start-up scan's check is read again with, to say why.
_NO_CONTEXT_COLUMNS = ", ".join(_COLUMNS[:-1])
_UPSERT = (
    f"INSERT INTO checkpoints ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))}) "
    "ON CONFLICT (path) DO UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS[1:])
)
_SET_META = (
    "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)
# The meta key recording that state.json was looked at (imported, or nothing to import): never again.
_MIGRATED_KEY = "legacy_json"

#: What happens to the session files whose checkpoints were lost: what a first start does with them, which the
#: backfill setting decides (under ``--backfill none`` nothing already written is read again).
READ_AS_BACKFILL_SAYS = (
    "--backfill decides what of the session files on disk is read again, as at a first start (all, the default: "
    "each from its start, what was sent before repeating with identical ids; none: only what is written from then "
    "on; a moment: the prompts that started since then)"
)
_LINK_HINT = (
    "it is a symbolic link; copilot-otel never writes through links in its state directory (remove it)"
)


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Where to resume one source file (see the resume model in ``docs/design.md``).

    Attributes:
        identity: The file the offsets belong to (checked by :class:`~copilot_otel.sources.tail.FileTailer`
            at open: a mismatch means the offsets do not apply and the file is read from 0).
        safe_offset: Line boundary to re-feed the fold from (start of the oldest open prompt).
        acked_offset: Line boundary up to which everything derived was acknowledged by the exporter;
            emissions from lines ending at or before it are suppressed on replay.
        context: ``Pipeline.context_snapshot()`` (JSON-serialisable) or ``None``.
        updated_ns: Wall-clock time of the acknowledgement (for TTL garbage collection only).
        size: The file's size when it was read up to ``acked_offset`` (0: unknown).
        mtime_ns: The file's modification time then: with ``size`` and the inode, what tells a restart that the
            file is unchanged from one ``stat``, without opening it.
    """

    identity: FileIdentity
    safe_offset: int
    acked_offset: int
    context: dict[str, Any] | None = None
    updated_ns: int = 0
    size: int = 0
    mtime_ns: int = 0


class LoadOutcome(str, enum.Enum):
    """What :class:`~copilot_otel.daemon.state.StateStore` found at startup."""

    FRESH = "fresh"
    """No state: first start (every file is read from 0)."""
    LOADED = "loaded"
    """``state.db`` was opened."""
    MIGRATED = "migrated"
    """An earlier version's ``state.json`` was imported (it stays beside the database, unread from now on)."""
    FROM_PREVIOUS = "from_previous"
    """``state.json`` was torn or missing, its ``state.json.prev`` was imported: files resume up to one flush
    earlier (replays are identical)."""
    EMPTY_AFTER_CORRUPTION = "empty_after_corruption"
    """``state.db`` was not usable (kept as ``state.db.corrupt-<ts>``), or neither JSON file to import was (both left
    where they are, under their own names): every file is read from 0."""


class Corrupt(Exception):
    """A state file that cannot be trusted (not a database, not our schema, a torn JSON document)."""


Pending = tuple[Checkpoint, bytes | None] | None
"""A change not flushed yet: a put (with its encoded context) or a forget (``None``)."""


class Database:
    """The one connection to ``state.db``, used by one thread at a time (calls are serialised).

    Args:
        state_dir: The state directory (its lock is the caller's: this class never creates the directory).

    Until :meth:`open` succeeds, and after :meth:`close`, every query raises
    :class:`~copilot_otel.common.errors.StateError` ("closed").
    """

    def __init__(self, state_dir: Path) -> None:
        self._dir = state_dir
        self.path = state_dir / DB_FILE
        self._lock = threading.Lock()  # guards _conn (one connection, used by one thread at a time)
        self._conn: sqlite3.Connection | None = None
        self.corrupt_copies: list[Path] = []
        """Databases renamed aside as corrupt by this object."""

    # -- open, re-create, close ------------------------------------------------------------------

    def open(self, import_legacy: Callable[[sqlite3.Connection], LoadOutcome]) -> LoadOutcome:
        """Open ``state.db``: checked, set aside if corrupt, ``import_legacy`` called the first time only.

        ``import_legacy`` imports an earlier version's state through the connection it is given and records
        that it did (:func:`import_rows`, :func:`mark_imported`): it is never called for that database again.

        Raises:
            StateError: It cannot be opened, checked or written, or a newer copilot-otel wrote it.
        """
        path = self.path
        existed = path.exists()
        try:
            conn = _checked(_connect(path))
            try:
                if conn.execute("SELECT 1 FROM meta WHERE key = ?", (_MIGRATED_KEY,)).fetchone() is None:
                    outcome = import_legacy(conn)
                else:
                    outcome = LoadOutcome.LOADED if existed else LoadOutcome.FRESH
            except sqlite3.Error as exc:
                conn.close()
                if is_corruption(exc):  # a damaged page of the meta table
                    raise Corrupt(describe(exc)) from exc
                raise StateError(f"cannot write the state in {self._dir}: {describe(exc)}") from exc
            except BaseException:
                conn.close()
                raise
        except Corrupt as exc:
            self.start_empty(exc)
            return LoadOutcome.EMPTY_AFTER_CORRUPTION
        self._conn = conn
        return outcome

    def start_empty(self, exc: Corrupt) -> None:
        """Set the corrupt ``state.db`` aside (with its ``-wal``/``-shm``) and start an empty one: one warning line
        that says where the old one is kept and what is read again.

        Raises:
            StateError: It cannot be set aside, or the new database cannot be written (a full disk, say).
        """
        try:
            kept = self._set_aside_for_empty()
        except sqlite3.Error as error:  # (a full disk, say): one line, never a traceback
            raise StateError(f"cannot write the state in {self._dir}: {describe(error)}") from error
        logger.warning(
            "%s is corrupt (%s); kept as %s. Starting empty; %s", self.path, exc, kept, READ_AS_BACKFILL_SAYS
        )

    def _set_aside_for_empty(self) -> Path:
        """Close the connection, rename ``state.db`` aside and connect to a new, empty one; returns where the old
        one is kept.

        Raises:
            StateError, sqlite3.Error: It cannot be set aside, or the new database cannot be made or written.
        """
        path = self.path
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
            kept = _set_aside(path, _DB_COMPANIONS)
            self.corrupt_copies.append(kept)
            conn = _connect_fresh(path)
            try:
                mark_imported(conn, "not imported: the database was set aside as corrupt")
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return kept

    def recreate(self) -> None:
        """Re-create ``state.db`` in a re-created directory: a copy of the deleted one, read through our
        connection (still open on it), else a new database (logged).

        Raises:
            StateError: Not even a new database can be created (this object is closed then).
        """
        with self._lock:
            deleted, self._conn = self._conn, None
            try:
                self._conn = self._copy_of(deleted)
            finally:
                if deleted is not None:
                    with contextlib.suppress(sqlite3.Error):
                        deleted.close()

    def replace_corrupt(self, exc: sqlite3.Error) -> None:
        """A flush met a damaged page: set the database aside and start a new one, which the next flush fills with
        the pending changes (the other files' checkpoints are lost with the old one: they are read again from 0
        at the next start, identical ids)."""
        try:
            kept = self._set_aside_for_empty()
        except (StateError, sqlite3.Error) as again:
            logger.error("cannot replace the corrupt %s: %s", self.path, again)
            return
        logger.error(
            "%s became corrupt (%s); kept as %s and started anew; at the next start %s",
            self.path,
            describe(exc),
            kept,
            READ_AS_BACKFILL_SAYS,
        )

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(sqlite3.Error):
                conn.close()

    def connection(self) -> sqlite3.Connection:
        """The open connection.

        Raises:
            StateError: It is closed.
        """
        if self._conn is None:
            raise StateError(f"the state store for {self._dir} is closed")
        return self._conn

    # -- queries ---------------------------------------------------------------------------------

    def get(self, key: str) -> Checkpoint | None:
        """The row for ``key``, or ``None``.

        Raises:
            sqlite3.Error, TypeError, Corrupt: It cannot be read (a damaged page, a bad
                context, a value no flush writes).
        """
        with self._lock:
            found = (
                self.connection()
                .execute(f"SELECT {', '.join(_COLUMNS)} FROM checkpoints WHERE path = ?", (key,))
                .fetchone()
            )
        return _checkpoint(found) if found is not None else None

    def has(self, key: str) -> bool:
        """Whether there is a row for ``key``.

        Raises:
            sqlite3.Error: It cannot be read.
        """
        with self._lock:
            return (
                self.connection().execute("SELECT 1 FROM checkpoints WHERE path = ?", (key,)).fetchone()
                is not None
            )

    def settled(self) -> tuple[dict[str, int], list[str]]:
        """Start-up's split in one query, without building a checkpoint per row: the rows taken at their file's
        end with a stat (path → the hash of ``(inode, size, mtime_ns)``, as discovery's scan reports a log), and
        the paths of all the others. 100,000 rows: ~0.2 s, where a summary object per row took 0.7 s.

        The values read are checked on the way, this being the one read of every row at every start: a row that
        fails is read whole and told by :func:`_check` (the check costs nothing measurable at 100,000 rows; checking
        every column in SQL doubled the scan's CPU). The other columns are checked when a row is read whole.

        Raises:
            Corrupt: A damaged page, or a row holding what no flush writes (a negative or non-integer offset).
            StateError: The database cannot be read.
        """
        known: dict[str, int] = {}
        others: list[str] = []
        # Row by row from the cursor, not fetchall(): 100,000 rows of six values held at once (~25 MB) would be
        # freed around the path strings kept, leaving the daemon's heap that much larger for as long as it runs.
        try:
            with self._lock:
                conn = self.connection()
                rows = conn.execute(
                    "SELECT path, inode, size, mtime_ns, safe_offset, acked_offset FROM checkpoints"
                )
                for path, inode, size, mtime_ns, safe, acked in rows:
                    if not (
                        safe.__class__ is acked.__class__ is size.__class__ is mtime_ns.__class__ is int
                        and safe >= 0
                        and acked >= 0
                        and size >= 0
                        and (inode.__class__ is int or (inode.__class__ is str and inode.isdecimal()))
                    ):
                        bad = conn.execute(
                            f"SELECT {_NO_CONTEXT_COLUMNS} FROM checkpoints WHERE path = ?", (path,)
                        )
                        _check(bad.fetchone())  # says what is wrong
                    if size and mtime_ns and safe == acked == size:
                        known[path] = hash((int(inode), size, mtime_ns))
                    else:
                        others.append(path)
        except sqlite3.Error as exc:
            if is_corruption(exc):
                raise Corrupt(describe(exc)) from exc
            raise StateError(f"cannot read the checkpoints in {self.path}: {describe(exc)}") from exc
        return known, others

    def commit(self, batch: Mapping[str, Pending], written_ns: int | None) -> None:
        """One transaction: the upserts and deletes of ``batch`` (and, with ``written_ns``, the meta row).

        Raises:
            sqlite3.Error: It failed (nothing of it was written).
        """
        with self._lock:
            conn = self.connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                upserts = [_row(key, entry[0], entry[1]) for key, entry in batch.items() if entry is not None]
                if upserts:
                    conn.executemany(_UPSERT, upserts)
                deletes = [(key,) for key, entry in batch.items() if entry is None]
                if deletes:
                    conn.executemany("DELETE FROM checkpoints WHERE path = ?", deletes)
                if written_ns is not None:
                    conn.execute(_SET_META, ("written_ns", written_ns))
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
                raise

    # -- helpers ---------------------------------------------------------------------------------

    def _copy_of(self, deleted: sqlite3.Connection | None) -> sqlite3.Connection:
        """The new ``state.db`` of a re-created directory: a copy of the deleted one, read through ``deleted``."""
        path = self.path
        conn = _connect(path)
        try:
            if deleted is None:
                raise sqlite3.OperationalError("no connection")
            deleted.backup(conn)
            conn.execute("PRAGMA journal_mode = WAL")
            return conn
        except sqlite3.Error as exc:
            conn.close()
            for stale in (path, *(path.with_name(path.name + s) for s in _DB_COMPANIONS)):
                with contextlib.suppress(OSError):
                    stale.unlink()
            logger.error(
                "the checkpoints of the deleted %s could not be copied (%s): the new one holds the changes since "
                "the last flush; at the next start %s",
                path,
                describe(exc),
                READ_AS_BACKFILL_SAYS,
            )
            conn = _connect_fresh(path)
            mark_imported(conn, "not imported: the state directory was re-created")
            return conn

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        try:
            yield
        except (sqlite3.Error, TypeError, Corrupt) as exc:
            raise StateError(f"cannot read the checkpoints in {self.path}: {describe(exc)}") from exc


def import_rows(conn: sqlite3.Connection, checkpoints: Mapping[str, Checkpoint], how: str) -> None:
    """Write ``checkpoints`` (an earlier version's state) in one transaction that records ``how`` they came."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.executemany(_UPSERT, (_row(key, cp, context_blob(cp)) for key, cp in checkpoints.items()))
        conn.execute(_SET_META, (_MIGRATED_KEY, how))
        conn.execute("COMMIT")
    except BaseException:
        _rollback(conn)
        raise
    with contextlib.suppress(sqlite3.Error):  # the import's log (as large as the import) back in state.db
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def mark_imported(conn: sqlite3.Connection, how: str) -> None:
    """Record that the earlier version's state was looked at (``how``): it is never imported again."""
    conn.execute(_SET_META, (_MIGRATED_KEY, how))


def read_checkpoints(state_dir: str | os.PathLike[str]) -> dict[str, Checkpoint]:
    """Every checkpoint in ``state_dir``'s database, read-only (while the daemon runs, too); empty without one.

    For ``status``, ``doctor`` and tests: the connection is ``mode=ro``, so it never writes the database (SQLite
    may create the empty ``-wal``/``-shm`` a WAL database is read through, with the database's mode), and the
    daemon's writes are not held up (WAL readers do not block the writer).

    Raises:
        StateError: The database exists but cannot be read.
    """
    with _read_only(state_dir) as conn:
        if conn is None:
            return {}
        rows = conn.execute(f"SELECT {', '.join(_COLUMNS)} FROM checkpoints").fetchall()
        return {row[0]: _checkpoint(row) for row in rows}


def stored_checkpoints(state_dir: str | os.PathLike[str]) -> int | None:
    """How many checkpoints ``state_dir``'s database holds (read-only, no row read); ``None`` without one.

    Raises:
        StateError: The database exists but cannot be read.
    """
    with _read_only(state_dir) as conn:
        if conn is None:
            return None
        count: int = conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0]
        return count


def newer_version(found: str) -> str:
    """The one line refusing state a newer copilot-otel wrote (``found`` names what said so)."""
    return (
        f"the state was written by a newer copilot-otel ({found}, this version reads {SCHEMA_VERSION}); "
        "upgrade, or point --state-dir elsewhere"
    )


@contextlib.contextmanager
def _read_only(state_dir: str | os.PathLike[str]) -> Iterator[sqlite3.Connection | None]:
    path = Path(state_dir).absolute() / DB_FILE
    if not path.exists():
        yield None
        return
    if path.is_symlink():
        raise StateError(f"refusing {path}: {_LINK_HINT}")
    try:
        conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=1.0, check_same_thread=False)
    except sqlite3.Error as exc:
        raise StateError(f"cannot read {path}: {describe(exc)}") from exc
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StateError(newer_version(f"state version {version}"))
        yield conn
    except (sqlite3.Error, TypeError, Corrupt) as exc:
        raise StateError(f"cannot read {path}: {describe(exc)}") from exc
    finally:
        conn.close()


def _connect(path: Path) -> sqlite3.Connection:
    """A connection to ``path`` (created 0600 by us first: SQLite would follow a link, and gives its
    ``-wal``/``-shm`` the database's mode), in WAL mode with full syncs."""
    for suffix in _DB_COMPANIONS:
        companion = path.with_name(path.name + suffix)
        if os.path.islink(companion):
            raise StateError(f"refusing {companion}: {_LINK_HINT}")
    try:
        os.close(current.open_private(path, os.O_RDWR))
        conn = sqlite3.connect(
            os.fspath(path), timeout=_BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
    except OSError as exc:
        raise StateError(f"cannot use {path}: {exc.strerror or exc}") from exc
    except sqlite3.Error as exc:
        raise StateError(f"cannot open {path}: {describe(exc)}") from exc
    try:
        # The first statement reads the header: a file that is not a database fails here.
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            logger.warning(
                "SQLite refused its write-ahead log for %s (journal mode %s; a network file system?): "
                "using the rollback journal, still atomic and durable; keep the state on a local disk",
                path,
                mode,
            )
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute(f"PRAGMA journal_size_limit = {_WAL_SIZE_LIMIT}")
    except sqlite3.Error as exc:
        conn.close()
        if is_corruption(exc):
            raise Corrupt(describe(exc)) from exc
        raise StateError(f"cannot open {path}: {describe(exc)}") from exc
    return conn


def _connect_fresh(path: Path) -> sqlite3.Connection:
    try:
        return _checked(_connect(path))
    except Corrupt as exc:  # we just created it
        raise StateError(f"cannot create {path}: {exc}") from exc


def _checked(conn: sqlite3.Connection) -> sqlite3.Connection:
    """``conn`` once its schema is ours (created in an empty database), else closed and :class:`Corrupt`.

    Cheap on purpose: the version and the table's columns, a few pages. Not ``PRAGMA integrity_check`` nor
    ``quick_check``: both read every page of the database (O(rows)), against the goal of resuming 100,000
    sessions within a second. A damaged page met later fails the read or the flush that meets it: ``get``
    answers ``None`` (that file is read from 0, identical ids) and flushes are counted as failed.

    Raises:
        StateError: A newer copilot-otel wrote it; or it cannot be read or written (locked, I/O error).
    """
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StateError(newer_version(f"state version {version}"))
        if version == 0:
            if conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                raise Corrupt("tables without a schema version")
            conn.execute("BEGIN IMMEDIATE")
            try:
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
                raise
        else:
            columns = tuple(row[1] for row in conn.execute("PRAGMA table_info(checkpoints)"))
            meta = tuple(row[1] for row in conn.execute("PRAGMA table_info(meta)"))
            if columns != _COLUMNS or meta != ("key", "value"):
                raise Corrupt(f"not the schema of version {version}")
    except Corrupt:
        conn.close()
        raise
    except sqlite3.Error as exc:
        conn.close()
        if is_corruption(exc):
            raise Corrupt(describe(exc)) from exc
        raise StateError(f"cannot use the state database: {describe(exc)}") from exc
    except BaseException:
        conn.close()
        raise
    return conn


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


def _set_aside(path: Path, companions: tuple[str, ...] = ()) -> Path:
    """Rename a bad state file to ``<name>.corrupt-<UTC time>`` (never overwriting an older copy), and its
    ``companions`` (name suffixes) with it."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
    try:
        current.replace(path, target)
        for suffix in companions:
            with contextlib.suppress(FileNotFoundError):
                current.replace(path.with_name(path.name + suffix), target.with_name(target.name + suffix))
    except OSError as exc:
        raise StateError(f"cannot set aside the corrupt {path}: {exc.strerror or exc}") from exc
    return target


# -- row codecs ----------------------------------------------------------------------------------


def _row(key: str, cp: Checkpoint, blob: bytes | None) -> tuple[object, ...]:
    ident = cp.identity
    return (
        key,
        _wide(ident.dev),
        _wide(ident.inode),
        ident.fingerprint,
        ident.fingerprint_len,
        cp.safe_offset,
        cp.acked_offset,
        cp.size,
        cp.mtime_ns,
        cp.updated_ns,
        blob,
    )


def context_blob(cp: Checkpoint) -> bytes | None:
    """``cp``'s context as its column stores it (JSON), ``None`` without one.

    Raises:
        TypeError: The context is not JSON-serialisable.
    """
    return orjson.dumps(cp.context) if cp.context is not None else None


def _identity(row: tuple[Any, ...]) -> FileIdentity:
    return FileIdentity(int(row[1]), int(row[2]), row[3], row[4])


def _check(row: tuple[Any, ...]) -> None:
    """Raise :class:`Corrupt` unless the row (its columns up to ``updated_ns``, in :data:`_COLUMNS` order) holds what
    a flush writes: offsets, sizes and the fingerprint's length are integers of their range, dev and inode
    integers (or the decimal text of one beyond 64 bits), the fingerprint text. Anything else was written by
    another program or a damaged disk: trusted, an offset of -5 stopped every start with a traceback."""
    path, dev, inode, fingerprint, fingerprint_len, safe, acked, size, mtime_ns, updated_ns = row[:10]
    values = {
        "dev": dev,
        "inode": inode,
        "fingerprint_len": fingerprint_len,
        "safe_offset": safe,
        "acked_offset": acked,
        "size": size,
    }
    for name, value in values.items():
        if not (
            _natural(value) or (name in ("dev", "inode") and isinstance(value, str) and value.isdecimal())
        ):
            raise Corrupt(f"the checkpoint of {path!r} holds {name} {value!r}")
    if fingerprint_len > _FINGERPRINT_MAX or not isinstance(fingerprint, str):
        raise Corrupt(
            f"the checkpoint of {path!r} holds a fingerprint of {fingerprint_len!r} bytes: {fingerprint!r}"
        )
    if type(mtime_ns) is not int or type(updated_ns) is not int or not isinstance(path, str):
        raise Corrupt(f"the checkpoint of {path!r} holds mtime_ns {mtime_ns!r}, updated_ns {updated_ns!r}")


def _natural(value: object) -> bool:
    return type(value) is int and value >= 0


def _checkpoint(row: tuple[Any, ...]) -> Checkpoint:
    _check(row)
    try:
        context = json_object(row[10]) if row[10] is not None else None
    except NotAJsonObject as exc:
        raise Corrupt(f"the context of {row[0]!r} is {exc}") from exc
    return Checkpoint(_identity(row), row[5], row[6], context, row[9], row[7], row[8])


def _wide(value: int) -> int | str:
    return value if value <= _INT64_MAX else str(value)


def is_corruption(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` says the database is damaged or is not one."""
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
    if code is not None:
        return code & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB)
    text = str(exc)
    return "not a database" in text or "malformed" in text


def describe(exc: Exception) -> str:
    """``exc`` as one line, with SQLite's error name where Python gives it."""
    name = getattr(exc, "sqlite_errorname", None)  # Python 3.11+: SQLITE_BUSY, SQLITE_FULL, ...
    return f"{exc} ({name})" if name else str(exc)
