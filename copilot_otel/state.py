"""Durable per-file checkpoints in an embedded SQLite database, one daemon per state directory.

The state directory holds::

    lock               locked by the running daemon (filelock: flock / LockFileEx); holds its pid (never deleted)
    state.db           the checkpoints: one row per followed file (SQLite, write-ahead log)
    state.db-wal       SQLite's write-ahead log, state.db-shm its index (while a connection is open)
    state.db.corrupt-<UTC time>   a database that failed its check, kept for inspection (with its -wal/-shm)
    state.json         an earlier version's checkpoints (and state.json.prev): imported once, kept, never read again
    status.json        the running daemon's status for ``copilot-otel status`` (not durable)

Why a database (issue 21): ``state.json`` was one document rewritten whole, fsynced, every second while any
checkpoint moved: 7.7 MB at 10,000 sessions, and 385 MB written in 30 s for one live session beside 20,000 idle
ones. Now :meth:`StateStore.put` and :meth:`~StateStore.forget` only note the change in memory and
:meth:`~StateStore.flush` writes the changed rows, upserts and deletes, in one transaction: one live session writes
one row a second whatever the number of idle ones. The idle checkpoints stay on disk, not in memory: ``get`` reads
the pending changes first, then the row (by its primary key), and start-up lists :meth:`~StateStore.summaries`
without the context dicts.

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
ours, is renamed to ``state.db.corrupt-<ts>`` (with its ``-wal``/``-shm``) with a warning and the store starts
empty: every file is read again from offset 0 (deterministic ids make the replay identical).
:attr:`StateStore.load_outcome` says which happened. A database written by a newer copilot-otel
(``PRAGMA user_version``) is refused with a one-line :class:`~copilot_otel.errors.StateError`.

The state directory is the user's own: one other users can write or own is refused (:meth:`StateStore.__init__`),
and every file we create there is opened without following links, temporaries exclusively
(:meth:`~copilot_otel._platform.Platform.open_private`). A link planted at a temporary's name is removed with a
warning; a link at ``state.db`` (or its ``-wal``/``-shm``) is refused with one line.

Keys are the file paths exactly as passed to :meth:`StateStore.put` (the daemon passes the absolute paths
discovery found), so the state does not depend on any config name (checklist #33).
"""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from filelock import BaseFileLock

from ._platform import LockHeld, current
from .errors import StateError
from .tail import FileIdentity

__all__ = [
    "DB_FILE",
    "LEGACY_FILE",
    "LEGACY_PREV_FILE",
    "LOCK_FILE",
    "STATUS_FILE",
    "Checkpoint",
    "CheckpointSummary",
    "LoadOutcome",
    "StateStore",
    "read_checkpoints",
    "stored_checkpoints",
    "write_new_file",
]

logger = logging.getLogger(__name__)

DB_FILE = "state.db"
LEGACY_FILE = "state.json"
LEGACY_PREV_FILE = "state.json.prev"
LOCK_FILE = "lock"
STATUS_FILE = "status.json"
_STATUS_TMP_FILE = "status.json.tmp"
# SQLite's own companions of state.db: set aside with it, and never links.
_DB_COMPANIONS = ("-wal", "-shm")
# Bump when the schema changes (PRAGMA user_version); a newer database is refused rather than misread.
SCHEMA_VERSION = 1
# The version of the state.json documents an earlier copilot-otel wrote (imported once).
_LEGACY_VERSION = 1
# A failing flush (or read) is retried on every call but logged at most this often.
_FLUSH_FAILURE_LOG_INTERVAL_S = 60.0
# How long a flush waits for a write lock another program holds on state.db before it fails (and is retried a
# second later): the daemon's loop must not stall behind it.
_BUSY_TIMEOUT_S = 0.1
# After an automatic checkpoint the log is truncated to this (a large import or a burst would otherwise leave
# a log of its size on disk).
_WAL_SIZE_LIMIT = 4 * 1024 * 1024
# Rows per query when summaries() pages through the table (no read transaction held across the caller's work).
_PAGE_ROWS = 1_000
# SQLite's primary result codes for a damaged or foreign file.
_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26
# dev and inode are unsigned 64-bit (128-bit on ReFS); SQLite's INTEGER is signed: larger values are stored as
# text, in columns declared without a type (no affinity: a column typed INTEGER or ANY would turn that text into a
# lossy REAL).
_INT64_MAX = 2**63 - 1

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
_SUMMARY_COLUMNS = ", ".join(_COLUMNS[:-1])
_UPSERT = (
    f"INSERT INTO checkpoints ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))}) "
    "ON CONFLICT (path) DO UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS[1:])
)
_SET_META = (
    "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)
# The meta key recording that state.json was looked at (imported, or nothing to import): never again.
_MIGRATED_KEY = "legacy_json"


@dataclass(frozen=True, slots=True)
class CheckpointSummary:
    """A checkpoint without its context: what start-up needs to decide which files to follow (cheap to list)."""

    identity: FileIdentity
    safe_offset: int
    acked_offset: int
    size: int = 0
    mtime_ns: int = 0
    updated_ns: int = 0


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Where to resume one source file (see the resume model in ``docs/design.md``).

    Attributes:
        identity: The file the offsets belong to (checked by :class:`~copilot_otel.tail.FileTailer`
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

    @property
    def summary(self) -> CheckpointSummary:
        """This checkpoint without its context."""
        return CheckpointSummary(
            self.identity, self.safe_offset, self.acked_offset, self.size, self.mtime_ns, self.updated_ns
        )


class LoadOutcome(str, enum.Enum):
    """What :class:`StateStore` found at startup."""

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
    """``state.db`` (or both JSON files to import) was not usable (kept as ``*.corrupt-<ts>``): every file is read
    from 0."""


class _Corrupt(Exception):
    """A state file that cannot be trusted (not a database, not our schema, a torn JSON document)."""


_Pending = tuple[Checkpoint, bytes | None] | None  # a put (with its encoded context) or a forget
_ABSENT = object()


class StateStore:
    """Checkpoints keyed by file path, with an exclusive lock on the state directory.

    Args:
        state_dir: Directory for the state (created with mode 0700 if missing).

    Raises:
        StateError: The directory cannot be created or written (also ENOSPC: the constructor performs
            one real write to prove it can), other users can write it or own it, another daemon holds the lock,
            a link stands at ``state.db``, or the state was written by a newer copilot-otel.

    ``put``/``forget`` are thread-safe and cheap (memory only); ``get`` reads memory, then one row. :meth:`flush`
    writes what changed and may be called from any thread (calls are serialised). Call :meth:`close` at the end
    (it does not flush).
    """

    def __init__(self, state_dir: str | os.PathLike[str]) -> None:
        self._dir = Path(state_dir)
        self._lock = threading.Lock()  # guards _pending
        self._db_lock = threading.Lock()  # guards _conn (one connection, used by one thread at a time)
        self._flush_lock = threading.Lock()  # one flush at a time
        self._pending: dict[str, _Pending] = {}
        self._conn: sqlite3.Connection | None = None
        self._dir_lock: BaseFileLock | None = None
        self._lock_id: tuple[int, int] | None = None  # (dev, inode) of the lock file we hold
        self._last_warned: dict[str, float] = {}  # kind of failure -> when it was last logged
        self.load_outcome = LoadOutcome.FRESH
        """What was found at startup (see :class:`LoadOutcome`)."""
        self.corrupt_copies: list[Path] = []
        """Bad state files renamed aside during this load."""
        self.flush_failures = 0
        """Flushes that failed since startup (each is retried by the next flush)."""
        self.consecutive_flush_failures = 0
        """Failures since the last successful flush (0 when the state on disk is current)."""
        self.last_flush_error: str | None = None
        """The last flush failure as text, cleared by a successful flush."""
        self.last_flush_ns: int | None = None
        """Wall-clock time of the last successful flush."""
        self.rows_written = 0
        """Rows inserted, updated or deleted by the flushes since startup, as the database counts them (with the
        ``meta`` row a forced flush writes)."""

        self._acquire_lock()
        try:
            self._conn = self._open()
            if not self.flush(force=True):
                raise StateError(
                    f"cannot write the state in {self._dir}: {self.last_flush_error} "
                    "(copilot-otel needs a writable state directory to avoid losing or repeating data)"
                )
        except BaseException:
            self.close()
            raise

    # -- public API ------------------------------------------------------------------------------

    @property
    def state_dir(self) -> Path:
        """The state directory."""
        return self._dir

    @property
    def dirty(self) -> bool:
        """True if a change has not been flushed yet."""
        with self._lock:
            return bool(self._pending)

    def get(self, path: str | os.PathLike[str]) -> Checkpoint | None:
        """The checkpoint stored for ``path``, or ``None`` (also when its row cannot be read: logged, and the file
        is read from 0, which repeats identical data rather than losing any)."""
        key = os.fspath(path)
        with self._lock:
            if key in self._pending:
                entry = self._pending[key]
                return entry[0] if entry is not None else None
        try:
            with self._db_lock:
                row = self._db().execute(
                    f"SELECT {', '.join(_COLUMNS)} FROM checkpoints WHERE path = ?", (key,)
                )
                found = row.fetchone()
            return _checkpoint(found) if found is not None else None
        except (sqlite3.Error, orjson.JSONDecodeError, TypeError) as exc:
            self._read_failed(key, exc)
            return None

    def put(self, path: str | os.PathLike[str], checkpoint: Checkpoint) -> None:
        """Store (in memory) the checkpoint for ``path``; durable after the next successful flush.

        Raises:
            TypeError: ``checkpoint.context`` is not JSON-serialisable (a bug in the caller: raised
                here, at its source, rather than failing every later flush).
        """
        blob = orjson.dumps(checkpoint.context) if checkpoint.context is not None else None
        with self._lock:
            self._pending[os.fspath(path)] = (checkpoint, blob)

    def forget(self, path: str | os.PathLike[str]) -> bool:
        """Drop the checkpoint for ``path`` (deleted file, TTL expired); True if there was one."""
        key = os.fspath(path)
        with self._lock:
            pending = self._pending.get(key, _ABSENT)
        existed = pending is not None if pending is not _ABSENT else self._stored(key)
        if existed:
            with self._lock:
                self._pending[key] = None
        return existed

    def all(self) -> dict[str, Checkpoint]:
        """A copy of every checkpoint, keyed by path (every row and its context: use :meth:`summaries` at
        start-up).

        Raises:
            StateError: The database cannot be read.
        """
        with self._lock:
            pending = dict(self._pending)
        with self._reading():
            with self._db_lock:
                rows = self._db().execute(f"SELECT {', '.join(_COLUMNS)} FROM checkpoints").fetchall()
            out = {row[0]: _checkpoint(row) for row in rows}
        for key, entry in pending.items():
            if entry is None:
                out.pop(key, None)
            else:
                out[key] = entry[0]
        return out

    def summaries(self) -> Iterator[tuple[str, CheckpointSummary]]:
        """Every checkpoint without its context, as ``(path, summary)``: what start-up lists (100,000 rows are read
        a page at a time, never held together).

        Raises:
            StateError: The database cannot be read.
        """
        with self._lock:
            pending = dict(self._pending)
        after = ""
        while True:
            with self._reading():
                with self._db_lock:
                    rows = (
                        self._db()
                        .execute(
                            f"SELECT {_SUMMARY_COLUMNS} FROM checkpoints WHERE path > ? ORDER BY path LIMIT ?",
                            (after, _PAGE_ROWS),
                        )
                        .fetchall()
                    )
                page = [(row[0], _summary(row)) for row in rows if row[0] not in pending]
            yield from page
            if len(rows) < _PAGE_ROWS:
                break
            after = rows[-1][0]
        for key, entry in pending.items():
            if entry is not None:
                yield key, entry[0].summary

    def __len__(self) -> int:
        """How many checkpoints there are (counted by the database, without reading a row)."""
        with self._lock:
            pending = dict(self._pending)
        with self._reading(), self._db_lock:
            n: int = self._db().execute("SELECT count(*) FROM checkpoints").fetchone()[0]
        for key, entry in pending.items():
            stored = self._stored(key)
            n += (entry is not None and not stored) - (entry is None and stored)
        return n

    def flush(self, *, force: bool = False) -> bool:
        """Write the changed checkpoints in one durable transaction; a no-op returning True when nothing changed.

        ``force`` writes even then (a row of the ``meta`` table): the constructor proves with it that the directory
        can be written. Returns False if the write failed (ENOSPC, read-only, the database locked by another
        program, the directory deleted): the changes stay in memory, the last committed state stays intact,
        :attr:`flush_failures` is incremented, the failure is logged (rate-limited) and the next call retries.
        Never raises ``OSError`` or :class:`sqlite3.Error`.
        """
        if self._dir_lock is None:
            raise StateError(f"the state store for {self._dir} is closed")
        with self._flush_lock:
            with self._lock:
                batch = dict(self._pending)
            if not batch and not force:
                return True
            written_ns = time.time_ns()
            try:
                with self._db_lock:
                    conn = self._db()
                    before = conn.total_changes
                    _commit(conn, batch, written_ns if force else None)
                    self.rows_written += conn.total_changes - before
            except sqlite3.Error as exc:
                self._flush_failed(exc)
                if _is_corruption(exc):
                    self._replace_corrupt(exc)
                return False
            with self._lock:
                for key, entry in batch.items():
                    if self._pending.get(key, _ABSENT) is entry:
                        del self._pending[key]
            if self.consecutive_flush_failures:
                logger.warning(
                    "state flush to %s succeeded again after %d failures",
                    self._dir,
                    self.consecutive_flush_failures,
                )
            self.consecutive_flush_failures = 0
            self.last_flush_error = None
            self.last_flush_ns = written_ns
            return True

    def write_status(self, status: Mapping[str, Any]) -> bool:
        """Replace ``status.json`` atomically (no fsync: it is informational). False on OSError."""
        tmp = self._dir / _STATUS_TMP_FILE
        try:
            write_new_file(tmp, orjson.dumps(status, option=orjson.OPT_INDENT_2))
            current.replace(tmp, self._dir / STATUS_FILE)
        except OSError as exc:
            logger.debug("cannot write %s: %s", self._dir / STATUS_FILE, exc)
            with contextlib.suppress(OSError):
                tmp.unlink()
            return False
        return True

    @staticmethod
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
            doc = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise StateError(f"{path} is not valid JSON: {exc}") from exc
        if not isinstance(doc, dict):
            raise StateError(f"{path} does not hold a JSON object")
        return doc

    @property
    def usable(self) -> bool:
        """False once closed, or once another daemon took the directory over (then nothing more is written)."""
        return self._dir_lock is not None

    def check_dir(self) -> bool:
        """Make sure the directory and our lock are still there; re-create both if the directory was deleted.

        One ``stat``. When the lock file is gone (``rm -rf`` of the state directory while we run) or is another
        file, the directory is re-created, the lock taken again and the checkpoints written at once, so a second
        daemon started on the same path finds it locked. Returns True when something had to be re-created.

        The rows went with the directory, but not from us: our connection still has the deleted ``state.db`` (and
        its log) open, and on POSIX a deleted file stays readable through its open descriptors. So the whole
        database is copied from that connection into the new ``state.db`` (SQLite's backup: a few pages, once),
        then the pending changes are written: nothing is lost and nothing kept in memory for it. Where that copy
        fails, the new database holds the pending changes only (logged: the files whose rows were lost are read
        again from 0 at the next start, identical by deterministic ids). On Windows a directory with an open file
        cannot be deleted.

        Raises:
            StateError: Another daemon locked the re-created directory first. This store is closed then: it
                never writes into a directory another daemon owns.
        """
        if self._dir_lock is None:
            raise StateError(f"the state store for {self._dir} is closed")
        try:
            st = os.stat(self._dir / LOCK_FILE)
            if (st.st_dev, st.st_ino) == self._lock_id:
                return False
        except OSError:
            pass
        logger.warning(
            "the state directory %s was deleted while the daemon runs: re-creating it and taking its lock again",
            self._dir,
        )
        old, self._dir_lock = self._dir_lock, None
        with contextlib.suppress(OSError):
            old.release()
        try:
            self._acquire_lock()
        except StateError as exc:
            self._close_db()
            raise StateError(
                f"{exc}: it took over {self._dir} after it was deleted; this daemon stops without writing there"
            ) from None
        with self._db_lock:
            deleted, self._conn = self._conn, None
            try:
                self._conn = self._recreate(deleted)
            finally:
                if deleted is not None:
                    with contextlib.suppress(sqlite3.Error):
                        deleted.close()
        self.flush(force=True)
        return True

    def close(self) -> None:
        """Close the database and release the directory lock (idempotent). Does not flush: call :meth:`flush`
        first."""
        self._close_db()
        lock, self._dir_lock = self._dir_lock, None
        if lock is not None:
            lock.release()

    def __enter__(self) -> StateStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"StateStore({str(self._dir)!r})"

    # -- lock ------------------------------------------------------------------------------------

    def _acquire_lock(self) -> None:
        try:
            self._dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            problem = current.private_dir_problem(self._dir)
            if problem is not None:
                raise StateError(
                    f"refusing the state directory {self._dir}: it {problem} (other users could plant files "
                    "or links in it)"
                )
            self._dir_lock = current.lock_exclusive(self._dir / LOCK_FILE)
            st = os.stat(self._dir / LOCK_FILE)
            self._lock_id = (st.st_dev, st.st_ino)
        except LockHeld as exc:
            raise StateError(
                f"another copilot-otel daemon is already using {self._dir} (pid {exc.owner})"
            ) from None
        except OSError as exc:
            hint = " (not a directory)" if isinstance(exc, (FileExistsError, NotADirectoryError)) else ""
            raise StateError(f"cannot use state directory {self._dir}: {exc.strerror or exc}{hint}") from exc

    # -- open and load ---------------------------------------------------------------------------

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StateError(f"the state store for {self._dir} is closed")
        return self._conn

    def _open(self) -> sqlite3.Connection:
        """Open ``state.db``: checked, set aside if corrupt, the earlier version's JSON imported once."""
        path = self._dir / DB_FILE
        existed = path.exists()
        try:
            conn = _checked(self._connect(path))
        except _Corrupt as exc:
            kept = _set_aside(path, _DB_COMPANIONS)
            self.corrupt_copies.append(kept)
            logger.warning(
                "%s is corrupt (%s); kept as %s. Starting empty: every session file is read again from the start "
                "(re-exported data repeats with identical ids)",
                path,
                exc,
                kept,
            )
            self.load_outcome = LoadOutcome.EMPTY_AFTER_CORRUPTION
            conn = self._connect_fresh(path)
            _mark_migrated(conn, "not imported: the database was set aside as corrupt")
            return conn
        try:
            if conn.execute("SELECT 1 FROM meta WHERE key = ?", (_MIGRATED_KEY,)).fetchone() is None:
                self.load_outcome = self._migrate(conn)
            else:
                self.load_outcome = LoadOutcome.LOADED if existed else LoadOutcome.FRESH
        except sqlite3.Error as exc:
            conn.close()
            raise StateError(f"cannot write the state in {self._dir}: {_describe(exc)}") from exc
        except BaseException:
            conn.close()
            raise
        return conn

    def _connect(self, path: Path) -> sqlite3.Connection:
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
            raise StateError(f"cannot open {path}: {_describe(exc)}") from exc
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
            if _is_corruption(exc):
                raise _Corrupt(_describe(exc)) from exc
            raise StateError(f"cannot open {path}: {_describe(exc)}") from exc
        return conn

    def _connect_fresh(self, path: Path) -> sqlite3.Connection:
        try:
            return _checked(self._connect(path))
        except _Corrupt as exc:  # we just created it
            raise StateError(f"cannot create {path}: {exc}") from exc

    def _migrate(self, conn: sqlite3.Connection) -> LoadOutcome:
        """Import ``state.json`` (or, torn, ``state.json.prev``) once, in one transaction; both stay untouched."""
        candidates = ((LEGACY_FILE, LoadOutcome.MIGRATED), (LEGACY_PREV_FILE, LoadOutcome.FROM_PREVIOUS))
        found = False
        for name, outcome in candidates:
            path = self._dir / name
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise StateError(f"cannot read {path}: {exc.strerror or exc}") from exc
            found = True
            try:
                checkpoints = _decode(data)
            except _Corrupt as exc:
                logger.warning("cannot import %s: it is corrupt (%s)", path, exc)
                continue
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(_UPSERT, (_row(key, cp, _blob(cp)) for key, cp in checkpoints.items()))
                conn.execute(_SET_META, (_MIGRATED_KEY, f"imported {len(checkpoints)} from {name}"))
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
                raise
            with contextlib.suppress(
                sqlite3.Error
            ):  # the import's log (as large as the import) back in state.db
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            logger.info(
                "imported %d checkpoints from %s into %s (%s is kept beside it and no longer read)",
                len(checkpoints),
                path,
                self._dir / DB_FILE,
                name,
            )
            return outcome
        if not found:
            _mark_migrated(conn, "nothing to import")
            logger.info(
                "no state in %s: starting fresh, every session file is read from the start", self._dir
            )
            return LoadOutcome.FRESH
        _mark_migrated(conn, "nothing usable to import")
        logger.error(
            "no usable state to import in %s (%s and %s are corrupt, both kept): starting empty, every session "
            "file is read again from the start (re-exported data repeats with identical ids)",
            self._dir,
            LEGACY_FILE,
            LEGACY_PREV_FILE,
        )
        return LoadOutcome.EMPTY_AFTER_CORRUPTION

    def _recreate(self, deleted: sqlite3.Connection | None) -> sqlite3.Connection:
        """The new ``state.db`` of a re-created directory: a copy of the deleted one, read through ``deleted``."""
        path = self._dir / DB_FILE
        conn = self._connect(path)
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
                "the last flush; the other session files are read again from the start at the next start "
                "(identical ids)",
                path,
                _describe(exc),
            )
            conn = self._connect_fresh(path)
            _mark_migrated(conn, "not imported: the state directory was re-created")
            return conn

    def _replace_corrupt(self, exc: sqlite3.Error) -> None:
        """A flush met a damaged page: set the database aside and start a new one, which the next flush fills with
        the pending changes (the other files' checkpoints are lost with the old one: they are read again from 0
        at the next start, identical ids)."""
        path = self._dir / DB_FILE
        with self._db_lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
            try:
                kept = _set_aside(path, _DB_COMPANIONS)
                self._conn = self._connect_fresh(path)
                _mark_migrated(self._conn, "not imported: the database was set aside as corrupt")
            except (StateError, sqlite3.Error) as again:
                logger.error("cannot replace the corrupt %s: %s", path, again)
                return
        self.corrupt_copies.append(kept)
        logger.error(
            "%s became corrupt (%s); kept as %s and started anew: the session files whose checkpoints it held are "
            "read again from the start at the next start (identical ids)",
            path,
            _describe(exc),
            kept,
        )

    def _close_db(self) -> None:
        with self._db_lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(sqlite3.Error):
                conn.close()

    # -- reads and failures ----------------------------------------------------------------------

    def _stored(self, key: str) -> bool:
        """Whether ``state.db`` has a row for ``key`` (False when it cannot be read: logged)."""
        try:
            with self._db_lock:
                return (
                    self._db().execute("SELECT 1 FROM checkpoints WHERE path = ?", (key,)).fetchone()
                    is not None
                )
        except sqlite3.Error as exc:
            self._read_failed(key, exc)
            return False

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        try:
            yield
        except (sqlite3.Error, orjson.JSONDecodeError, TypeError) as exc:
            raise StateError(
                f"cannot read the checkpoints in {self._dir / DB_FILE}: {_describe(exc)}"
            ) from exc

    def _read_failed(self, key: str, exc: Exception) -> None:
        self._warn_limited(
            "read",
            "cannot read the checkpoint of %s from %s (%s): the file is read from the start (identical ids)",
            key,
            self._dir / DB_FILE,
            _describe(exc),
        )

    def _flush_failed(self, exc: sqlite3.Error) -> None:
        self.flush_failures += 1
        self.consecutive_flush_failures += 1
        self.last_flush_error = _describe(exc)
        self._warn_limited(
            "flush",
            "cannot write the state in %s: %s; keeping the last good state, will retry (%d consecutive failures)",
            self._dir,
            self.last_flush_error,
            self.consecutive_flush_failures,
        )

    def _warn_limited(self, kind: str, message: str, *args: object) -> None:
        """Log a warning of ``kind`` at most once per :data:`_FLUSH_FAILURE_LOG_INTERVAL_S`."""
        now = time.monotonic()
        if now - self._last_warned.get(kind, float("-inf")) >= _FLUSH_FAILURE_LOG_INTERVAL_S:
            self._last_warned[kind] = now
            logger.warning(message, *args)


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
        raise StateError(f"cannot read {path}: {_describe(exc)}") from exc
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StateError(_newer(f"state version {version}"))
        yield conn
    except (sqlite3.Error, orjson.JSONDecodeError, TypeError) as exc:
        raise StateError(f"cannot read {path}: {_describe(exc)}") from exc
    finally:
        conn.close()


def write_new_file(path: Path, payload: bytes, *, sync: bool = False) -> None:
    """Write ``payload`` to a new file at ``path`` (mode 0600), a temporary about to be renamed into place.

    The file is created exclusively and never through a link: whatever has the name already (a temporary a crash
    left, a link someone planted) is removed first, with a warning when it was a link, whose target stays
    untouched.

    Raises:
        OSError: It cannot be created or written.
    """
    try:
        fd = current.open_private(path, os.O_WRONLY, exclusive=True)
    except FileExistsError:
        if path.is_symlink():
            logger.warning(
                "removed the symbolic link %s (to %s): copilot-otel never writes through links in its state "
                "directory",
                path,
                os.readlink(path),
            )
        path.unlink()
        fd = current.open_private(path, os.O_WRONLY, exclusive=True)
    try:
        view = memoryview(payload)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


_LINK_HINT = (
    "it is a symbolic link; copilot-otel never writes through links in its state directory (remove it)"
)


def _checked(conn: sqlite3.Connection) -> sqlite3.Connection:
    """``conn`` once its schema is ours (created in an empty database), else closed and :class:`_Corrupt`.

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
            raise StateError(_newer(f"state version {version}"))
        if version == 0:
            if conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                raise _Corrupt("tables without a schema version")
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
                raise _Corrupt(f"not the schema of version {version}")
    except _Corrupt:
        conn.close()
        raise
    except sqlite3.Error as exc:
        conn.close()
        if _is_corruption(exc):
            raise _Corrupt(_describe(exc)) from exc
        raise StateError(f"cannot use the state database: {_describe(exc)}") from exc
    except BaseException:
        conn.close()
        raise
    return conn


def _commit(conn: sqlite3.Connection, batch: Mapping[str, _Pending], written_ns: int | None) -> None:
    """One transaction: the upserts and deletes of ``batch`` (and, with ``written_ns``, the meta row)."""
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


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


def _mark_migrated(conn: sqlite3.Connection, how: str) -> None:
    conn.execute(_SET_META, (_MIGRATED_KEY, how))


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


def _blob(cp: Checkpoint) -> bytes | None:
    return orjson.dumps(cp.context) if cp.context is not None else None


def _identity(row: tuple[Any, ...]) -> FileIdentity:
    return FileIdentity(int(row[1]), int(row[2]), row[3], row[4])


def _summary(row: tuple[Any, ...]) -> CheckpointSummary:
    return CheckpointSummary(_identity(row), row[5], row[6], row[7], row[8], row[9])


def _checkpoint(row: tuple[Any, ...]) -> Checkpoint:
    context = orjson.loads(row[10]) if row[10] is not None else None
    if context is not None and not isinstance(context, dict):
        raise TypeError(f"the context of {row[0]!r} is not an object")
    return Checkpoint(_identity(row), row[5], row[6], context, row[9], row[7], row[8])


def _wide(value: int) -> int | str:
    return value if value <= _INT64_MAX else str(value)


def _is_corruption(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
    if code is not None:
        return code & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB)
    text = str(exc)
    return "not a database" in text or "malformed" in text


def _describe(exc: Exception) -> str:
    name = getattr(exc, "sqlite_errorname", None)  # Python 3.11+: SQLITE_BUSY, SQLITE_FULL, ...
    return f"{exc} ({name})" if name else str(exc)


def _newer(found: str) -> str:
    return (
        f"the state was written by a newer copilot-otel ({found}, this version reads {SCHEMA_VERSION}); "
        "upgrade, or point --state-dir elsewhere"
    )


def _decode(data: bytes) -> dict[str, Checkpoint]:
    """Turn an earlier version's state document into checkpoints; raises _Corrupt for anything it did not write."""
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise _Corrupt(f"not valid JSON: {exc}" if data else "empty file") from exc
    if not isinstance(doc, dict):
        raise _Corrupt("not a JSON object")
    version = doc.get("version")
    if type(version) is not int:
        raise _Corrupt("no schema version")
    if version > _LEGACY_VERSION:
        raise StateError(_newer(f"state.json version {version}"))
    entries = doc.get("checkpoints")
    if not isinstance(entries, dict):
        raise _Corrupt("no checkpoints object")
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
                raise _Corrupt(f"context of {path!r} is not an object")
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
        raise _Corrupt(f"malformed checkpoint ({exc!r})") from exc
    return out


def _int(value: object) -> int:
    if type(value) is not int or value < 0:
        raise TypeError(f"expected a non-negative int, got {value!r}")
    return value


def _str(value: object) -> str:
    if type(value) is not str:
        raise TypeError(f"expected a string, got {value!r}")
    return value


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
