"""The embedded default's file (``<state-dir>/otlp.jsonl``): appended to, and rotated by size.

Without rotation the file grew without bound (every ``replay`` appends a full copy of the history). When a
write would take it past :data:`MAX_BYTES`, it is renamed ``otlp.jsonl.1`` (the older ones shift to ``.2`` …),
and the oldest beyond :data:`KEEP` rotated files is deleted: at most ``(KEEP + 1) * MAX_BYTES`` on disk.

The file and its lock are created 0600 like every other file of the state directory (under ``umask 000`` an
``open(path, "ab")`` made it 0666: readable and writable by everyone), and never through a link
(:meth:`~copilot_otel._platform.Platform.open_private`).

Several processes may write the same file (``replay``'s worker processes, a daemon and a ``replay``): each
write checks the size and appends under a lock file next to it, so two writers never rotate twice for one full
file nor together pass the bound. Each line is appended in one ``write`` on a file opened for appending.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

from .._platform import current

__all__ = ["KEEP", "MAX_BYTES", "RotatingFile"]

MAX_BYTES = 64 * 1024 * 1024
KEEP = 3
# How long a writer waits for another one's rotation (they take milliseconds).
_LOCK_TIMEOUT_S = 10.0


class RotatingFile:
    """Appends lines to ``path``, rotating it by size (``max_bytes``), keeping ``keep`` rotated files."""

    def __init__(self, path: Path, max_bytes: int = MAX_BYTES, keep: int = KEEP) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.keep = max(keep, 0)
        self._lock = threading.Lock()

    def rotated(self, index: int) -> Path:
        """The ``index``-th rotated file (1 is the most recent)."""
        return self.path.with_name(f"{self.path.name}.{index}")

    def append(self, data: bytes) -> None:
        """Append ``data`` (whole lines), rotating first if it would not fit.

        Raises:
            OSError: The file cannot be written (the caller retries; a failed rotation only delays it).
        """
        from filelock import FileLock

        with self._lock:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            # The size check and the write under one lock shared by every writer: checked apart, two writers
            # could each find room for their line and together pass the bound.
            lock = FileLock(
                str(self.path.with_name(f".{self.path.name}.lock")), timeout=_LOCK_TIMEOUT_S, mode=0o600
            )
            with lock:
                size = self._size()
                if size > 0 and size + len(data) > self.max_bytes:
                    with contextlib.suppress(OSError):
                        self._rotate()
                fd = current.open_private(self.path, os.O_WRONLY | os.O_APPEND)
                try:
                    os.write(fd, data)
                finally:
                    os.close(fd)

    def _size(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def _rotate(self) -> None:
        """Shift the rotated files up by one and make the file the first of them (under the writers' lock)."""
        if self.keep == 0:
            self.path.unlink()
            return
        with contextlib.suppress(FileNotFoundError):
            self.rotated(self.keep).unlink()
        for index in range(self.keep - 1, 0, -1):
            with contextlib.suppress(FileNotFoundError):
                current.replace(self.rotated(index), self.rotated(index + 1))
        current.replace(self.path, self.rotated(1))
