"""Files read beside a log: regular files only, opened without waiting, read up to a cap, each refusal said once.

A log is followed by the tailer (:mod:`copilot_otel.sources.tail`); a few other files are read whole or in part to make
sense of one: a Claude Code sub-agent's ``agent-<id>.meta.json``, a Gemini CLI sub-agent's parent log, a Copilot
session's ``workspace.yaml``, the first bytes of a log (which agent wrote it, which Codex session a thread
belongs to). Anyone who can write in the agents' folders can put something else there: a FIFO, whose ``open``
waits for a writer (the daemon's main thread hung there for good, ``show`` and ``replay`` too), or a link to
``/dev/zero``, which never ends (the daemon read it until ``MemoryError``). So every such read here:

* opens with :meth:`~copilot_otel._platform.Platform.open_regular` (``O_NONBLOCK``, then the descriptor's type:
  only a regular file is read);
* reads at most a cap, and a file larger than its cap is not read at all (its size says so before a byte is read);
* says each refusal once per file (a warning naming the file, what it is for and why) and counts it by reason
  (:func:`refusals`: ``status`` shows them); a missing file is no refusal (it may be written later, or gone).

What a refused file would have given is then unknown, as when it is missing: a sub-agent is still folded, only
without what its side file says.
"""

from __future__ import annotations

import enum
import logging
import os
import threading
from collections.abc import Generator, Iterator
from pathlib import Path

from .._platform import NotARegularFile, current

__all__ = ["Refusal", "read_chunks", "read_head", "read_lines", "read_text", "read_whole", "refusals"]

logger = logging.getLogger(__name__)

# How much is read at a time from a side file read line by line (a parent's log).
_CHUNK_BYTES = 1 << 20


class Refusal(enum.Enum):
    """Why a side file was not read (the counter's reason)."""

    NOT_REGULAR = "not_regular_file"
    """A FIFO, a device (``/dev/zero``), a folder or a socket in its place."""
    TOO_LARGE = "too_large"
    """Larger than the cap of what it is for."""
    UNREADABLE = "unreadable"
    """The open or a read failed (permission denied, an I/O error)."""


class _Said:
    """The refusals said so far: each file once per reason, counted by reason (shared by every thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: set[tuple[str, Refusal]] = set()
        self.counts: dict[str, int] = {}

    def refuse(self, path: str | os.PathLike[str], what: str, reason: Refusal, why: str) -> None:
        key = (os.fspath(path), reason)
        with self._lock:
            if key in self._seen:
                return
            self._seen.add(key)
            self.counts[reason.value] = self.counts.get(reason.value, 0) + 1
        logger.warning("skipped %s (%s): %s; it is not read", key[0], what, why)


_SAID = _Said()


def refusals() -> dict[str, int]:
    """Side files not read in this process, by :class:`Refusal` value (each file counted once per reason)."""
    with _SAID._lock:
        return dict(_SAID.counts)


def _open(path: str | os.PathLike[str], what: str) -> int | None:
    """A descriptor of the regular file ``path``; ``None`` when it is missing or refused (said)."""
    try:
        return current.open_regular(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except NotARegularFile as exc:
        _SAID.refuse(path, what, Refusal.NOT_REGULAR, f"it is {exc.kind}, not a regular file")
    except OSError as exc:
        _SAID.refuse(path, what, Refusal.UNREADABLE, f"cannot read it: {exc.strerror or exc}")
    return None


def _too_large(fd: int, path: str | os.PathLike[str], what: str, limit: int) -> bool:
    size = os.fstat(fd).st_size
    if size <= limit:
        return False
    _SAID.refuse(
        path, what, Refusal.TOO_LARGE, f"it holds {size:,} bytes, more than the {limit:,} read of it"
    )
    return True


def _read(fd: int, length: int) -> bytes:
    """Up to ``length`` bytes from the descriptor's position (fewer only at the end of the file)."""
    parts: list[bytes] = []
    left = length
    while left > 0 and (chunk := os.read(fd, min(left, _CHUNK_BYTES))):
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def read_whole(path: str | os.PathLike[str], what: str, limit: int) -> bytes | None:
    """The whole of the regular file ``path`` if it holds at most ``limit`` bytes; ``None`` when it is missing or
    refused (not a regular file, larger than ``limit``, unreadable: said once, counted). ``what`` names it in the
    warning ("a sub-agent's .meta.json")."""
    fd = _open(path, what)
    if fd is None:
        return None
    try:
        if _too_large(fd, path, what, limit):
            return None
        data = _read(fd, limit + 1)
    except OSError as exc:
        _SAID.refuse(path, what, Refusal.UNREADABLE, f"cannot read it: {exc.strerror or exc}")
        return None
    finally:
        os.close(fd)
    if len(data) > limit:  # it grew since its size was read
        _SAID.refuse(path, what, Refusal.TOO_LARGE, f"it grew past the {limit:,} bytes read of it")
        return None
    return data


def read_head(path: str | os.PathLike[str], what: str, length: int) -> bytes | None:
    """The first ``length`` bytes of the regular file ``path`` (all of it when shorter); ``None`` when it is
    missing or refused (said once, counted)."""
    fd = _open(path, what)
    if fd is None:
        return None
    try:
        return _read(fd, length)
    except OSError as exc:
        _SAID.refuse(path, what, Refusal.UNREADABLE, f"cannot read it: {exc.strerror or exc}")
        return None
    finally:
        os.close(fd)


def read_chunks(path: str | os.PathLike[str], what: str, limit: int) -> Iterator[bytes] | None:
    """The regular file ``path`` from start to end, a chunk at a time (for a reader that frames its lines as replay
    does: :meth:`copilot_otel.pipeline.Pipeline.feed_chunks`); ``None`` when it is missing or refused (larger than
    ``limit``, not a regular file, unreadable: said once, counted). A read that fails midway ends the chunks there
    (said)."""
    fd = _open(path, what)
    if fd is None:
        return None
    try:
        if _too_large(fd, path, what, limit):
            os.close(fd)
            return None
    except OSError as exc:
        os.close(fd)
        _SAID.refuse(path, what, Refusal.UNREADABLE, f"cannot read it: {exc.strerror or exc}")
        return None

    def chunks() -> Iterator[bytes]:
        try:
            while chunk := os.read(fd, _CHUNK_BYTES):
                yield chunk
        except OSError as exc:
            _SAID.refuse(path, what, Refusal.UNREADABLE, f"cannot read it: {exc.strerror or exc}")
        finally:
            os.close(fd)

    return chunks()


def read_lines(
    path: str | os.PathLike[str], what: str, limit: int, max_line: int
) -> Generator[tuple[bytes, int, int], None, None]:
    """Each complete line of the regular file ``path`` with its start and end offsets (the line without its
    newline, a ``\r`` dropped, blank ones skipped), read a chunk at a time: memory stays within a chunk and
    ``max_line`` (a longer line is skipped).

    Nothing when it is missing or refused (larger than ``limit``, not a regular file, unreadable: said once,
    counted); a read that fails midway ends the lines there. The last line counts only with its newline, as the
    tailer reads a file still being written.
    """
    fd = _open(path, what)
    if fd is None:
        return
    try:
        if _too_large(fd, path, what, limit):
            return
        pending = bytearray()
        line_start = 0
        skipping = False  # inside a line longer than max_line: dropped up to its newline
        read = 0
        while read < limit:
            try:
                chunk = os.read(fd, min(limit - read, _CHUNK_BYTES))
            except OSError as exc:
                _SAID.refuse(path, what, Refusal.UNREADABLE, f"cannot read it: {exc.strerror or exc}")
                return
            if not chunk:
                return
            start = 0
            while (end := chunk.find(b"\n", start)) >= 0:
                if not skipping and len(pending) + end - start <= max_line:
                    pending += chunk[start:end]
                    line = bytes(pending).rstrip(b"\r")
                    if line:
                        yield line, line_start, read + end + 1
                pending.clear()
                skipping = False
                start = end + 1
                line_start = read + start
            if not skipping:
                pending += chunk[start:]
                if len(pending) > max_line:
                    pending.clear()
                    skipping = True
            read += len(chunk)
    finally:
        os.close(fd)


def read_text(path: Path, what: str, limit: int) -> str | None:
    """:func:`read_whole` decoded as UTF-8 (bad bytes replaced)."""
    data = read_whole(path, what, limit)
    return None if data is None else data.decode("utf-8", "replace")
