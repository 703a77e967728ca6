"""The files deliveries are appended to and rotated by size: the embedded default's ``<state-dir>/otlp.jsonl``
and the dead letters' ``dead-letter.jsonl`` (:mod:`copilot_otel.deliver.deadletter`), one :class:`RotatingFile`.

Without rotation such a file grows without bound (every ``replay`` appends a full copy of the history to
``otlp.jsonl``). When a write would take it past its ``max_bytes``, it is renamed ``<name>.1`` (the older ones
shift to ``.2`` …), and the oldest beyond ``keep`` rotated files is deleted (the dead letters first count what it
held): at most ``(keep + 1) * max_bytes`` on disk. ``otlp.jsonl`` keeps :data:`KEEP` files of :data:`MAX_BYTES`.

The file (and its lock) is created 0600 like every other file of the state directory (under ``umask 000`` an
``open(path, "ab")`` made it 0666: readable and writable by everyone), and never through a link
(:meth:`~copilot_otel._platform.Platform.open_private`).

Several processes may write ``otlp.jsonl`` (``replay``'s worker processes, a daemon and a ``replay``): each write
checks the size and appends under a lock file next to it (``.otlp.jsonl.lock``), so two writers never rotate twice
for one full file nor together pass the bound. Each append is written whole or not at all (a short write is taken
back), on a file opened for appending, so concurrent writers never interleave a line.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from pathlib import Path

from .._platform import current

__all__ = ["KEEP", "MAX_BYTES", "RotatingFile"]

MAX_BYTES = 64 * 1024 * 1024
KEEP = 3
# How long a writer waits for another one's rotation (they take milliseconds).
_LOCK_TIMEOUT_S = 10.0


class RotatingFile:
    """Appends lines to ``path``, rotating it by size (``max_bytes``), keeping ``keep`` rotated files.

    Args:
        path: The file.
        max_bytes: The size a write may not take it past (a line longer than that still goes to an empty file).
        keep: How many rotated files are kept (``<name>.1`` the most recent); 0 deletes the file when it is full.
        shared: Whether writers in other processes append to it too: then the size check and the write are made
            under ``.<name>.lock`` next to it.
        sync: ``fsync`` each append before returning (a dead letter the caller counts must be on disk).
        on_drop: Called with the file rotation is about to delete, before it goes (the dead letters count its
            lines); what it raises abandons the rotation, like any other failure of it.
    """

    def __init__(
        self,
        path: Path,
        max_bytes: int = MAX_BYTES,
        keep: int = KEEP,
        *,
        shared: bool = True,
        sync: bool = False,
        on_drop: Callable[[Path], None] | None = None,
    ) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.keep = max(keep, 0)
        self._shared = shared
        self._sync = sync
        self._on_drop = on_drop
        self._lock = threading.Lock()

    def rotated(self, index: int) -> Path:
        """The ``index``-th rotated file (1 is the most recent)."""
        return self.path.with_name(f"{self.path.name}.{index}")

    def append(self, data: bytes) -> None:
        """Append ``data`` (whole lines), rotating first if it would not fit.

        Raises:
            OSError: The file cannot be written (``ENOSPC`` and the like; the file is as it was, and the caller
                retries). A failed rotation only delays it: the data is appended anyway.
        """
        with self._lock:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not self._shared:
                self._append(data)
                return
            from filelock import FileLock

            # The size check and the write under one lock shared by every writer: checked apart, two writers
            # could each find room for their line and together pass the bound.
            lock = FileLock(
                str(self.path.with_name(f".{self.path.name}.lock")), timeout=_LOCK_TIMEOUT_S, mode=0o600
            )
            with lock:
                self._append(data)

    def _append(self, data: bytes) -> None:
        size = self._size()
        if size > 0 and size + len(data) > self.max_bytes:
            with contextlib.suppress(OSError):
                self._rotate()
        fd = current.open_private(self.path, os.O_WRONLY | os.O_APPEND)
        try:
            _write_whole(fd, data, sync=self._sync)
        finally:
            os.close(fd)

    def _size(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def _rotate(self) -> None:
        """Shift the rotated files up by one and make the file the first of them (under the writers' lock)."""
        dropped = self.rotated(self.keep) if self.keep else self.path
        if self._on_drop is not None and dropped.exists():
            self._on_drop(dropped)
        if self.keep == 0:
            self.path.unlink()
            return
        with contextlib.suppress(FileNotFoundError):
            dropped.unlink()
        for index in range(self.keep - 1, 0, -1):
            with contextlib.suppress(FileNotFoundError):
                current.replace(self.rotated(index), self.rotated(index + 1))
        current.replace(self.path, self.rotated(1))


def _write_whole(fd: int, data: bytes, *, sync: bool) -> None:
    """Append ``data`` whole (and ``fsync`` it when ``sync``), or not at all: a full disk that took only part of a
    line must not leave it there to swallow the next one.

    Raises:
        OSError: ``ENOSPC`` and the like; the file is as it was.
    """
    written = 0
    try:
        while written < len(data):
            written += os.write(fd, data[written:])
        if sync:
            os.fsync(fd)
    except OSError:
        if written:  # a short write then the error: take the partial line back
            with contextlib.suppress(OSError):
                os.ftruncate(fd, os.fstat(fd).st_size - written)
        raise
