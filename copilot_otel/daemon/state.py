"""Durable per-file checkpoints in an embedded SQLite database, one daemon per state directory.

The state directory holds::

    lock               locked by the running daemon (filelock: flock / LockFileEx); holds its pid (never deleted)
    state.db           the checkpoints: one row per followed file (SQLite, write-ahead log)
    state.db-wal       SQLite's write-ahead log, state.db-shm its index (while a connection is open)
    state.db.corrupt-<UTC time>   a database that failed its check, kept for inspection (with its -wal/-shm)
    state.json         an earlier version's checkpoints (and state.json.prev): imported once, kept, never read again
    status.json        the running daemon's status for ``copilot-otel status`` (not durable)

Three modules, one job each: this one, :class:`StateStore`, keeps the changes not yet flushed, flushes them,
holds the directory's lock (and re-takes it when the directory is deleted) and writes ``status.json``;
:mod:`copilot_otel.daemon.statedb` is the database (schema, rows, the one connection, durability, corruption, the
read-only reader); :mod:`copilot_otel.daemon.statelegacy` imports an earlier version's ``state.json`` once. Every public
name stays importable from here.

Why a database (issue 21): ``state.json`` was one document rewritten whole, fsynced, every second while any
checkpoint moved: 7.7 MB at 10,000 sessions, and 385 MB written in 30 s for one live session beside 20,000 idle
ones. Now :meth:`StateStore.put` and :meth:`~StateStore.forget` only note the change in memory and
:meth:`~StateStore.flush` writes the changed rows, upserts and deletes, in one transaction: one live session writes
one row a second whatever the number of idle ones. The idle checkpoints stay on disk, not in memory: ``get`` reads
the pending changes first, then the row (by its primary key), and start-up reads :meth:`~StateStore.settled`
without the context dicts. A flush that fails keeps the pending rows in memory, is counted and logged
(rate-limited) and retried by the next one (durability and failures: :mod:`copilot_otel.daemon.statedb`).

The state directory is the user's own: one other users can write or own is refused (:meth:`StateStore.__init__`),
and every file we create there is opened without following links, temporaries exclusively
(:meth:`~copilot_otel._platform.Platform.open_private`). A link planted at a temporary's name is removed with a
warning; a link at ``state.db`` (or its ``-wal``/``-shm``) is refused with one line.

Keys are the file paths exactly as passed to :meth:`StateStore.put` (the daemon passes the absolute paths
discovery found), so the state does not depend on any config name (checklist #33).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
from filelock import BaseFileLock

from .._platform import LockHeld, current
from ..common.errors import StateError
from ..common.files import write_new_file
from .statedb import (
    DB_FILE,
    Checkpoint,
    Corrupt,
    Database,
    LoadOutcome,
    Pending,
    context_blob,
    describe,
    is_corruption,
    read_checkpoints,
    stored_checkpoints,
)
from .statelegacy import LEGACY_FILE, LEGACY_PREV_FILE, import_legacy
from .statusfile import LOCK_FILE, STATUS_FILE, read_status

__all__ = [
    "DB_FILE",
    "LEGACY_FILE",
    "LEGACY_PREV_FILE",
    "LOCK_FILE",
    "STATUS_FILE",
    "Checkpoint",
    "LoadOutcome",
    "StateStore",
    "read_checkpoints",
    "stored_checkpoints",
]

logger = logging.getLogger(__name__)

_STATUS_TMP_FILE = "status.json.tmp"
# A failing flush (or read) is retried on every call but logged at most this often.
_FLUSH_FAILURE_LOG_INTERVAL_S = 60.0

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
        self._flush_lock = threading.Lock()  # one flush at a time
        self._pending: dict[str, Pending] = {}
        self._database = Database(self._dir)
        self._dir_lock: BaseFileLock | None = None
        self._lock_id: tuple[int, int] | None = None  # (dev, inode) of the lock file we hold
        self._last_warned: dict[str, float] = {}  # kind of failure -> when it was last logged
        self.load_outcome = LoadOutcome.FRESH
        """What was found at startup (see :class:`LoadOutcome`)."""
        self.flush_failures = 0
        """Flushes that failed since startup (each is retried by the next flush)."""
        self.consecutive_flush_failures = 0
        """Failures since the last successful flush (0 when the state on disk is current)."""
        self.last_flush_error: str | None = None
        """The last flush failure as text, cleared by a successful flush."""
        self.last_failure: str | None = None
        """The last flush failure as text, kept after later flushes succeed (what ``status`` says of it)."""
        self.last_failure_ns: int | None = None
        """Wall-clock time of the last flush failure."""

        self._acquire_lock()
        try:
            self.load_outcome = self._database.open(functools.partial(import_legacy, self._dir))
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
    def corrupt_copies(self) -> list[Path]:
        """Bad state files renamed aside during this load."""
        return self._database.corrupt_copies

    def get(self, path: str | os.PathLike[str]) -> Checkpoint | None:
        """The checkpoint stored for ``path``, or ``None`` (also when its row cannot be read: logged, and the file
        is read from 0, which repeats identical data rather than losing any)."""
        key = os.fspath(path)
        with self._lock:
            if key in self._pending:
                entry = self._pending[key]
                return entry[0] if entry is not None else None
        try:
            return self._database.get(key)
        except (sqlite3.Error, TypeError, Corrupt) as exc:
            self._read_failed(key, exc)
            return None

    def put(self, path: str | os.PathLike[str], checkpoint: Checkpoint) -> None:
        """Store (in memory) the checkpoint for ``path``; durable after the next successful flush.

        Raises:
            TypeError: ``checkpoint.context`` is not JSON-serialisable (a bug in the caller: raised
                here, at its source, rather than failing every later flush).
        """
        blob = context_blob(checkpoint)
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

    def settled(self) -> tuple[dict[str, int], list[str]]:
        """The checkpoints split for start-up: those taken at their file's end with a stat (path → the hash of
        ``(inode, size, mtime_ns)``) and the paths of the others (pending changes included).

        A database found damaged on the way (a damaged page, a row no flush writes) is set aside and the store
        starts empty, as one found so at open: :attr:`load_outcome` says so.

        Raises:
            StateError: The database cannot be read, or a damaged one cannot be replaced.
        """
        with self._lock:
            pending = dict(self._pending)
        try:
            known, others = self._database.settled()
        except Corrupt as exc:
            self._database.start_empty(exc)
            self.load_outcome = LoadOutcome.EMPTY_AFTER_CORRUPTION
            known, others = {}, []
        if pending:
            others = [key for key in others if key not in pending]
            for key, entry in pending.items():
                known.pop(key, None)
                if entry is None:
                    continue
                cp = entry[0]
                if cp.size and cp.mtime_ns and cp.safe_offset == cp.acked_offset == cp.size:
                    known[key] = hash((cp.identity.inode, cp.size, cp.mtime_ns))
                else:
                    others.append(key)
        return known, others

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
                self._database.commit(batch, written_ns if force else None)
            except sqlite3.Error as exc:
                self._flush_failed(exc)
                if is_corruption(exc):
                    self._database.replace_corrupt(exc)
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

    # status.json is read without the store (copilot-otel status must not load SQLite): one reader, there.
    read_status = staticmethod(read_status)

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
            self._database.close()
            raise StateError(
                f"{exc}: it took over {self._dir} after it was deleted; this daemon stops without writing there"
            ) from None
        self._database.recreate()
        self.flush(force=True)
        return True

    def close(self) -> None:
        """Close the database and release the directory lock (idempotent). Does not flush: call :meth:`flush`
        first."""
        self._database.close()
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

    # -- reads and failures ----------------------------------------------------------------------

    def _stored(self, key: str) -> bool:
        """Whether ``state.db`` has a row for ``key`` (False when it cannot be read: logged)."""
        try:
            return self._database.has(key)
        except sqlite3.Error as exc:
            self._read_failed(key, exc)
            return False

    def _read_failed(self, key: str, exc: Exception) -> None:
        self._warn_limited(
            "read",
            "cannot read the checkpoint of %s from %s (%s): the file is read from the start (identical ids)",
            key,
            self._dir / DB_FILE,
            describe(exc),
        )

    def _flush_failed(self, exc: sqlite3.Error) -> None:
        self.flush_failures += 1
        self.consecutive_flush_failures += 1
        self.last_flush_error = self.last_failure = describe(exc)
        self.last_failure_ns = time.time_ns()
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
