"""Durable per-file checkpoints, one daemon per state directory.

The state directory holds::

    lock               locked by the running daemon (filelock: flock / LockFileEx); holds its pid (never deleted)
    state.json         the checkpoints, replaced atomically by every flush
    state.json.prev    the previous generation (the fallback when state.json is torn or corrupt)
    state.json.tmp     a flush in progress (removed at startup if a crash left it)
    state.json.corrupt-<UTC time>   a bad state file kept for inspection, never read again
    status.json        the running daemon's status for ``copilot-otel status`` (not durable)

A flush is ``state.json.tmp`` → fsync → ``state.json`` renamed to ``state.json.prev`` → tmp renamed to
``state.json`` → fsync the directory (reliability rule 10; checklist #22-#25; on Windows the renames are
write-through instead, and retried briefly while another process holds the target open). At any instant one of
``state.json`` / ``state.json.prev`` is complete, so a crash or power loss never leaves nothing.

Loading never crashes and never starts at end-of-file: a torn or corrupt ``state.json`` is renamed to
``state.json.corrupt-<ts>`` with a warning and ``state.json.prev`` is used; if that is bad too the state
starts empty, which means every file is read again from offset 0 (deterministic ids make the replay
identical). :attr:`StateStore.load_outcome` says which happened.

The on-disk document is ``{"version": 1, "written_ns": int, "checkpoints": {path: checkpoint}}`` where
a checkpoint is its dataclass fields as JSON (orjson serialises the dataclasses natively)::

    {"identity": {"dev": 2049, "inode": 1234, "fingerprint": "9c1e...", "fingerprint_len": 1024},
     "safe_offset": 8123, "acked_offset": 9001, "context": {...} | null, "updated_ns": 1700000000000000000}

Keys are the file paths exactly as passed to :meth:`StateStore.put` (the daemon passes the absolute
paths discovery found), so the state does not depend on any config name (checklist #33).
"""

from __future__ import annotations

import contextlib
import enum
import errno
import logging
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from filelock import BaseFileLock

from ._platform import LockHeld, current
from .errors import StateError
from .tail import FileIdentity

__all__ = [
    "LOCK_FILE",
    "PREV_FILE",
    "STATE_FILE",
    "STATUS_FILE",
    "Checkpoint",
    "LoadOutcome",
    "StateStore",
]

logger = logging.getLogger(__name__)

STATE_FILE = "state.json"
PREV_FILE = "state.json.prev"
TMP_FILE = "state.json.tmp"
LOCK_FILE = "lock"
STATUS_FILE = "status.json"
_STATUS_TMP_FILE = "status.json.tmp"
# Bump when the document layout changes; a newer file is refused rather than misread.
SCHEMA_VERSION = 1
# A failing flush is retried on every call but logged at most this often.
_FLUSH_FAILURE_LOG_INTERVAL_S = 60.0


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


class LoadOutcome(str, enum.Enum):
    """What :class:`StateStore` found at startup."""

    FRESH = "fresh"
    """No state file: first start (every file is read from 0)."""
    LOADED = "loaded"
    """``state.json`` was read."""
    FROM_PREVIOUS = "from_previous"
    """``state.json`` was missing (interrupted flush) or corrupt; ``state.json.prev`` was used:
    files resume up to one flush earlier (replays are identical)."""
    EMPTY_AFTER_CORRUPTION = "empty_after_corruption"
    """Neither file was usable (copies kept as ``*.corrupt-<ts>``): every file is read from 0."""


class _Corrupt(Exception):
    """A state document that cannot be trusted (torn, not JSON, wrong shape)."""


class StateStore:
    """Checkpoints keyed by file path, with an exclusive lock on the state directory.

    Args:
        state_dir: Directory for the state (created with mode 0700 if missing).

    Raises:
        StateError: The directory cannot be created or written (also ENOSPC: the constructor performs
            one real flush to prove it can), another daemon holds the lock, or the state was written by
            a newer copilot-otel.

    ``get``/``put``/``forget``/``all`` are thread-safe and cheap (memory only); :meth:`flush` writes
    everything and may be called from any thread (calls are serialised). Call :meth:`close` at the end
    (it does not flush).
    """

    def __init__(self, state_dir: str | os.PathLike[str]) -> None:
        self._dir = Path(state_dir)
        self._lock = threading.Lock()  # guards _checkpoints, _generation, _flushed_generation
        self._flush_lock = threading.Lock()  # one flush at a time
        self._checkpoints: dict[str, Checkpoint] = {}
        self._generation = 0
        self._flushed_generation = 0
        self._dir_lock: BaseFileLock | None = None
        self._lock_id: tuple[int, int] | None = None  # (dev, inode) of the lock file we hold
        self._last_failure_log = float("-inf")
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

        self._acquire_lock()
        try:
            self._remove_stale_tmp()
            self._load()
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
            return self._generation != self._flushed_generation

    def get(self, path: str | os.PathLike[str]) -> Checkpoint | None:
        """The checkpoint stored for ``path``, or ``None``."""
        with self._lock:
            return self._checkpoints.get(os.fspath(path))

    def put(self, path: str | os.PathLike[str], checkpoint: Checkpoint) -> None:
        """Store (in memory) the checkpoint for ``path``; durable after the next successful flush.

        Raises:
            TypeError: ``checkpoint.context`` is not JSON-serialisable (a bug in the caller: raised
                here, at its source, rather than failing every later flush).
        """
        if checkpoint.context is not None:
            orjson.dumps(checkpoint.context)
        with self._lock:
            self._checkpoints[os.fspath(path)] = checkpoint
            self._generation += 1

    def forget(self, path: str | os.PathLike[str]) -> bool:
        """Drop the checkpoint for ``path`` (deleted file, TTL expired); True if there was one."""
        with self._lock:
            if self._checkpoints.pop(os.fspath(path), None) is None:
                return False
            self._generation += 1
            return True

    def all(self) -> dict[str, Checkpoint]:
        """A snapshot copy of every checkpoint, keyed by path."""
        with self._lock:
            return dict(self._checkpoints)

    def __len__(self) -> int:
        with self._lock:
            return len(self._checkpoints)

    def flush(self, *, force: bool = False) -> bool:
        """Write all checkpoints atomically and durably; a no-op returning True when nothing changed.

        Returns False if the write failed (ENOSPC, read-only, directory deleted): the checkpoints stay
        in memory, the previous ``state.json`` stays intact, :attr:`flush_failures` is incremented, the
        failure is logged (rate-limited) and the next call retries. Never raises ``OSError``.
        """
        if self._dir_lock is None:
            raise StateError(f"the state store for {self._dir} is closed")
        with self._flush_lock:
            with self._lock:
                generation = self._generation
                if generation == self._flushed_generation and not force:
                    return True
                snapshot = dict(self._checkpoints)
            written_ns = time.time_ns()
            payload = orjson.dumps(
                {"version": SCHEMA_VERSION, "written_ns": written_ns, "checkpoints": snapshot}
            )
            try:
                self._write_durably(payload)
            except OSError as exc:
                self._flush_failed(exc)
                return False
            with self._lock:
                self._flushed_generation = max(self._flushed_generation, generation)
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
            _write_file(tmp, orjson.dumps(status, option=orjson.OPT_INDENT_2), sync=False)
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
        file, the directory is re-created, the lock taken again and every checkpoint written at once, so a second
        daemon started on the same path finds it locked. Returns True when something had to be re-created.

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
            raise StateError(
                f"{exc}: it took over {self._dir} after it was deleted; this daemon stops without writing there"
            ) from None
        self.flush(force=True)
        return True

    def close(self) -> None:
        """Release the directory lock (idempotent). Does not flush: call :meth:`flush` first."""
        lock, self._dir_lock = self._dir_lock, None
        if lock is not None:
            lock.release()

    def __enter__(self) -> StateStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"StateStore({str(self._dir)!r}, {len(self)} checkpoints)"

    # -- lock ------------------------------------------------------------------------------------

    def _acquire_lock(self) -> None:
        try:
            self._dir.mkdir(mode=0o700, parents=True, exist_ok=True)
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

    # -- load ------------------------------------------------------------------------------------

    def _remove_stale_tmp(self) -> None:
        tmp = self._dir / TMP_FILE
        try:
            tmp.unlink()
        except FileNotFoundError:
            return
        except OSError as exc:  # the startup flush reports it properly
            logger.warning("cannot remove %s: %s", tmp, exc)
            return
        logger.info("removed %s left by an interrupted flush", tmp)

    def _load(self) -> None:
        state, prev = self._dir / STATE_FILE, self._dir / PREV_FILE
        loaded = self._read_document(state)
        if loaded is not None:
            self._checkpoints = loaded
            self.load_outcome = LoadOutcome.LOADED
            return
        state_was_corrupt = bool(self.corrupt_copies)
        if not state_was_corrupt and not prev.exists():
            self.load_outcome = LoadOutcome.FRESH
            logger.info(
                "no state in %s: starting fresh, every session file is read from the start", self._dir
            )
            return
        if not state_was_corrupt:
            logger.warning("%s is missing but %s exists (a flush was interrupted): using it", state, prev)
        loaded = self._read_document(prev)
        if loaded is not None:
            self._checkpoints = loaded
            self.load_outcome = LoadOutcome.FROM_PREVIOUS
            logger.warning(
                "resuming from %s (%d checkpoints): files resume up to one flush earlier, "
                "re-exported data repeats with identical ids",
                prev,
                len(loaded),
            )
            return
        self.load_outcome = LoadOutcome.EMPTY_AFTER_CORRUPTION
        logger.error(
            "no usable state in %s (kept as %s): starting empty, every session file is read again "
            "from the start (re-exported data repeats with identical ids)",
            self._dir,
            ", ".join(str(p) for p in self.corrupt_copies) or "nothing",
        )

    def _read_document(self, path: Path) -> dict[str, Checkpoint] | None:
        """Decode a state file; None if missing, or corrupt (then renamed aside, with a warning)."""
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StateError(f"cannot read {path}: {exc.strerror or exc}") from exc
        try:
            return _decode(data)
        except _Corrupt as exc:
            kept = _set_aside(path)
            self.corrupt_copies.append(kept)
            logger.warning("%s is corrupt (%s); kept as %s", path, exc, kept)
            return None

    # -- flush -----------------------------------------------------------------------------------

    def _write_durably(self, payload: bytes) -> None:
        tmp, state = self._dir / TMP_FILE, self._dir / STATE_FILE
        try:
            _write_file(tmp, payload, sync=True)
            with contextlib.suppress(FileNotFoundError):
                current.replace(state, self._dir / PREV_FILE)
            current.replace(tmp, state)
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        current.fsync_dir(self._dir)

    def _flush_failed(self, exc: OSError) -> None:
        self.flush_failures += 1
        self.consecutive_flush_failures += 1
        self.last_flush_error = f"{exc.strerror or exc} ({errno.errorcode.get(exc.errno or 0, exc.errno)})"
        now = time.monotonic()
        if now - self._last_failure_log >= _FLUSH_FAILURE_LOG_INTERVAL_S:
            self._last_failure_log = now
            logger.warning(
                "cannot write the state in %s: %s; keeping the last good state, will retry "
                "(%d consecutive failures)",
                self._dir,
                self.last_flush_error,
                self.consecutive_flush_failures,
            )


def _decode(data: bytes) -> dict[str, Checkpoint]:
    """Turn a state document into checkpoints; raises _Corrupt for anything we did not write."""
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise _Corrupt(f"not valid JSON: {exc}" if data else "empty file") from exc
    if not isinstance(doc, dict):
        raise _Corrupt("not a JSON object")
    version = doc.get("version")
    if type(version) is not int:
        raise _Corrupt("no schema version")
    if version > SCHEMA_VERSION:
        raise StateError(
            f"the state was written by a newer copilot-otel (state version {version}, this version "
            f"reads {SCHEMA_VERSION}); upgrade, or point --state-dir elsewhere"
        )
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


def _set_aside(path: Path) -> Path:
    """Rename a bad state file to ``<name>.corrupt-<UTC time>`` (never overwriting an older copy)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
    try:
        current.replace(path, target)
    except OSError as exc:
        raise StateError(f"cannot set aside the corrupt {path}: {exc.strerror or exc}") from exc
    return target


def _write_file(path: Path, payload: bytes, *, sync: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | current.open_flags, 0o600)
    try:
        view = memoryview(payload)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
