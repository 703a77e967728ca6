"""Tail one session log: complete lines only, with file identity, truncation, replacement and deletion.

A :class:`FileTailer` follows one path and hands out complete, ``\\n``-terminated lines as raw bytes
(the parser deals with UTF-8). Its offset always sits on a line boundary, so a checkpoint taken from a
:class:`TailBatch` never splits a line (reliability rules 5-7, 9, 12)::

    tailer = FileTailer(path, offset=cp.safe_offset, identity=cp.identity)
    batch = tailer.read_lines(1 << 20)
    if batch.reset:      # lines start at offset 0 of content not seen before: start a fresh fold
        ...
    for item in batch.lines:
        if isinstance(item, TooLong): ...   # count + dead-letter (file, item.start, "too_long")
        else: start, end, data = item
    if batch.end:        # the file this batch came from is finished (replaced or deleted)
        ...

What the tailer detects, and how it reports it:

* **Truncation** (``size < offset``, same inode): restart at 0, ``batch.reset = ResetReason.TRUNCATED``.
* **Content changed** (same inode, but the fingerprint or the byte before the offset differ): the file
  was truncated and regrown (while we were stopped or between two reads) or the inode was reused:
  restart at 0, ``batch.reset = ResetReason.CONTENT_CHANGED``.
* **Replaced under the same name** (rename+create, delete+create): the old open fd is drained to EOF
  first (``batch.end = EndReason.REPLACED`` on the last batch of the old file), then the next batch
  reads the new file from 0 with ``batch.reset = ResetReason.REPLACED``. If the replacement is only
  seen when (re)opening - the tailer was closed, or was created from a checkpoint - there is no old fd
  to drain and the first batch carries ``reset = REPLACED``.
* **Rewritten under a new inode** (a writer that writes its log whole to a temporary and renames it
  over the old one): when the old fd is drained and the new file starts with the fingerprinted bytes
  and has a line boundary at the offset, it is the same log: the tailer takes the new fd and reads on
  from the offset (a batch with ``at_eof = False``, no end, no reset), as a restart's restore does.
* **Deleted**: the open fd is kept and drained to EOF, then ``batch.end = EndReason.DELETED`` and the
  tailer is spent (the caller forgets the file and its checkpoint).
* **Oversized line** (> ``max_line_bytes``): never held in memory; the tailer scans past it in chunks
  and yields :class:`TooLong` ``(start, end)`` so the caller counts it and the offset moves on.

Identity: dev + inode + a blake2b fingerprint of the first ``min(1024, size)`` bytes. A file shorter
than 1024 bytes has a *growing* fingerprint: it still matches while its first ``fingerprint_len``
bytes are unchanged, and the tailer extends it as the file grows (``batch.identity`` is always the
latest one; store it with the checkpoint). The identity deliberately carries no path: the state is
keyed by path, so two sessions whose files start with identical bytes are still two entries with two
inodes (checklist #38) - comparing identities across paths is the caller's business.

A device number alone changing (overlayfs, btrfs subvolumes, NFS after a reboot) is not treated as a
replacement: the inode and the fingerprint decide.

A tailer is not thread-safe: one thread owns it. I/O errors other than "the file is gone" (EACCES,
EMFILE, EIO) propagate as :class:`OSError` and leave the tailer's offset unchanged, so the call can be
retried.
"""

from __future__ import annotations

import enum
import hashlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

from .._platform import current
from ..common.errors import SourceError

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "DEFAULT_READ_CHUNK_BYTES",
    "FINGERPRINT_BYTES",
    "EndReason",
    "FileIdentity",
    "FileTailer",
    "Line",
    "ResetReason",
    "TailBatch",
    "TailItem",
    "TooLong",
    "fingerprint_of",
]

# Filebeat filestream and the Collector's filelog both fingerprint the first KiB (reliability rule 6).
FINGERPRINT_BYTES = 1_024
# Biggest line handed out whole; a Copilot event carrying a large tool output can reach a few MiB.
DEFAULT_MAX_LINE_BYTES = 16 * 1024 * 1024
# One pread; also the most a tailer buffers besides the lines it returns (so ~2 chunks at peak).
DEFAULT_READ_CHUNK_BYTES = 64 * 1024
# Smallest pread when the budget is nearly spent.
_MIN_READ_BYTES = 4 * 1024
# Default byte budget of one read_lines() call: big enough for backfill, small enough to be fair.
DEFAULT_BATCH_BYTES = 1024 * 1024
# 128-bit digest: collision-free in practice for a prefix comparison, 32 hex chars in the state file.
_DIGEST_BYTES = 16
# Positional reads and the open go through the platform seam: pread/preadv on Unix, and on Windows a handle
# opened with FILE_SHARE_DELETE, so the CLI can still rename or delete a log while we follow it.
_pread = current.pread
_read_into = current.read_into
_open = current.open_shared


def _fingerprint(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=_DIGEST_BYTES).hexdigest()


def _pread_full(fd: int, length: int, offset: int) -> bytes:
    """Read exactly ``length`` bytes unless EOF comes first (pread may return short reads)."""
    data = _pread(fd, length, offset)
    if len(data) == length or not data:
        return data
    parts = [data]
    got = len(data)
    while got < length:
        more = _pread(fd, length - got, offset + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


@dataclass(frozen=True, slots=True)
class FileIdentity:
    """Who a file is, independent of its name.

    Attributes:
        dev: ``st_dev`` when the identity was taken (informational: device numbers are not stable
            across reboots on every filesystem, so a differing ``dev`` alone is not a new file).
        inode: ``st_ino``; a different inode under the same path is a different file.
        fingerprint: blake2b (16-byte digest, hex) of the first ``fingerprint_len`` bytes.
        fingerprint_len: ``min(1024, size)`` when taken; below 1024 the fingerprint is "growing".
    """

    dev: int
    inode: int
    fingerprint: str
    fingerprint_len: int

    @property
    def complete(self) -> bool:
        """True once the fingerprint covers the full :data:`FINGERPRINT_BYTES` (it stops growing)."""
        return self.fingerprint_len >= FINGERPRINT_BYTES

    @classmethod
    def of_fd(cls, fd: int) -> FileIdentity:
        """Take the identity of an open file (reads at most 1024 bytes with ``pread``)."""
        st = os.fstat(fd)
        head = _pread_full(fd, min(st.st_size, FINGERPRINT_BYTES), 0)
        return cls(st.st_dev, st.st_ino, _fingerprint(head), len(head))

    @classmethod
    def of_path(cls, path: str | os.PathLike[str]) -> FileIdentity:
        """Take the identity of the file at ``path``; raises :class:`OSError` (e.g. FileNotFoundError)."""
        fd = _open(path)
        try:
            return cls.of_fd(fd)
        finally:
            os.close(fd)

    def matches_fd(self, fd: int) -> bool:
        """True if the open file has our inode and still starts with our fingerprinted prefix."""
        st = os.fstat(fd)
        if st.st_ino != self.inode or st.st_size < self.fingerprint_len:
            return False
        return _fingerprint(_pread_full(fd, self.fingerprint_len, 0)) == self.fingerprint

    def matches_path(self, path: str | os.PathLike[str]) -> bool:
        """Like :meth:`matches_fd` for a path; a missing file does not match."""
        try:
            fd = _open(path)
        except (FileNotFoundError, NotADirectoryError):
            return False
        try:
            return self.matches_fd(fd)
        finally:
            os.close(fd)


def fingerprint_of(path: str | os.PathLike[str], length: int) -> str | None:
    """The fingerprint of the first ``length`` bytes of the file at ``path``, to compare with a
    :class:`FileIdentity` taken under another name (checklist #39); ``None`` if it is shorter or unreadable."""
    try:
        fd = _open(path)
    except OSError:
        return None
    try:
        head = _pread_full(fd, length, 0)
    except OSError:
        return None
    finally:
        os.close(fd)
    return _fingerprint(head) if len(head) == length > 0 else None


class Line(NamedTuple):
    """One complete line: ``data`` is the bytes without the trailing ``\\n`` (a ``\\r`` stays).

    ``end`` is the offset just past the ``\\n``: the checkpoint once this line is acknowledged.
    """

    start: int
    end: int
    data: bytes


class TooLong(NamedTuple):
    """A line longer than ``max_line_bytes``, skipped without being held in memory.

    ``end`` is just past its ``\\n`` (or, in :attr:`TailBatch.final_partial`, the end of the file).
    """

    start: int
    end: int

    @property
    def length(self) -> int:
        """Bytes in the line, newline included."""
        return self.end - self.start


TailItem = Line | TooLong


class ResetReason(str, enum.Enum):
    """Why a batch's lines start again at offset 0 of content this tailer had not been reading."""

    TRUNCATED = "truncated"
    """Same inode, ``size < offset``: truncated (e.g. copytruncate)."""
    CONTENT_CHANGED = "content_changed"
    """Same inode, ``size >= offset`` but the first bytes (or the byte before the offset) differ:
    truncated and regrown, or the inode was reused by a new file."""
    REPLACED = "replaced"
    """A different file (different inode) now has this path."""


class EndReason(str, enum.Enum):
    """Why the file a batch came from is finished; the batch's lines are its last ones."""

    REPLACED = "replaced"
    """The path now names another file; the old one was drained to EOF. The next ``read_lines``
    starts the new file at 0 (``reset = REPLACED``)."""
    DELETED = "deleted"
    """The path is gone; the old fd was drained to EOF and closed. The tailer is spent: forget it
    (and its checkpoint, after its last lines are acknowledged)."""


@dataclass(frozen=True, slots=True)
class TailBatch:
    """What one :meth:`FileTailer.read_lines` call produced. All items come from ONE file.

    Attributes:
        lines: Complete lines and :class:`TooLong` markers, in file order, contiguous from the
            previous offset (or from 0 when ``reset`` is set).
        identity: Identity of the file the lines came from (the latest, possibly grown, fingerprint);
            ``None`` only when the file was already gone at open and nothing was read.
        offset: Line-boundary offset after the last item (== last item's ``end``): where the next
            read of this file starts. Store it (after acknowledgement) with ``identity``.
        reset: Set when the lines start at offset 0 of content this tailer was not reading before
            (see :class:`ResetReason`): drop the fold state of the previous content, never apply an old
            checkpoint to it. ``None`` for a normal continuation or a fresh tailer without identity.
        end: Set on the last batch of a finished file (see :class:`EndReason`).
        final_partial: With ``end`` only: trailing bytes after the last ``\\n`` of the finished
            file, which will never be completed (a :class:`Line` whose ``end`` is the end of file, or
            :class:`TooLong`); count or dead-letter it. ``None`` if the file ended with ``\\n``.
        at_eof: True if reading stopped at the end of the file (what is left, if anything, is an
            incomplete line); False if it stopped because the ``max_bytes`` budget ran out - call
            again soon.
    """

    lines: list[TailItem]
    identity: FileIdentity | None
    offset: int
    reset: ResetReason | None = None
    end: EndReason | None = None
    final_partial: TailItem | None = None
    at_eof: bool = True


class _PathStatus(enum.Enum):
    SAME = 0
    REPLACED = 1
    MISSING = 2


@dataclass(slots=True)
class _LongScan:
    """Progress scanning a line bigger than one chunk, kept across calls so polls never rescan."""

    start: int
    scanned_to: int


def _held_chunks(fd: int, limit: int) -> Iterator[bytes] | None:
    """All of ``fd``'s file by position, :data:`DEFAULT_READ_CHUNK_BYTES` at a time (its offset untouched on POSIX);
    ``None`` past ``limit`` or when its size cannot be read. A read that fails midway ends the chunks there."""
    try:
        size = os.fstat(fd).st_size
    except OSError:
        return None
    if size > limit:
        return None

    def chunks() -> Iterator[bytes]:
        done = 0
        try:
            while done < size and (
                part := current.pread(fd, min(DEFAULT_READ_CHUNK_BYTES, size - done), done)
            ):
                yield part
                done += len(part)
        except OSError:
            return

    return chunks()


class FileTailer:
    """Follow one file and return its complete lines as bytes.

    Args:
        path: The file to follow.
        offset: Where to start (a line boundary, normally a checkpoint's offset).
        identity: The identity the offset belongs to (from the checkpoint). When given, the file is
            checked against it at open: a different inode, shrunk file or changed content means the
            offset does not apply and reading starts at 0 with ``reset`` set. ``None`` trusts
            ``offset`` (still checked for truncation and a line boundary).
        max_line_bytes: Longest line returned whole; longer lines become :class:`TooLong`.
        read_chunk_bytes: Size of one ``pread``; bounds the tailer's own buffering.

    The fd is opened lazily on the first :meth:`read_lines` and after :meth:`close` (the daemon closes
    idle tailers to bound open files; close only a tailer whose last batch had ``at_eof`` - data
    still unread when a file is replaced behind a closed tailer cannot be recovered).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        offset: int = 0,
        identity: FileIdentity | None = None,
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        read_chunk_bytes: int = DEFAULT_READ_CHUNK_BYTES,
    ) -> None:
        if offset < 0:
            raise ValueError(f"Expected offset to be >= 0, got {offset!r}")
        if max_line_bytes < 1:
            raise ValueError(f"Expected max_line_bytes to be >= 1, got {max_line_bytes!r}")
        if read_chunk_bytes < 1:
            raise ValueError(f"Expected read_chunk_bytes to be >= 1, got {read_chunk_bytes!r}")
        self._path = os.fspath(path)
        self._offset = offset
        self._identity = identity
        self._max_line = max_line_bytes
        self._chunk = read_chunk_bytes
        self._fd: int | None = None
        self._pending_reset: ResetReason | None = None
        self._spent = False
        # (dev, ino, size, mtime_ns) of the path at the start of the last read: for stat_changed().
        self._last_seen: tuple[int, int, int, int] | None = None
        # (size, mtime_ns) of the fd when its identity/offset were last validated.
        self._validated: tuple[int, int] | None = None
        self._long: _LongScan | None = None

    # -- public --------------------------------------------------------------------------------

    @property
    def path(self) -> str:
        """The followed path."""
        return self._path

    @property
    def offset(self) -> int:
        """Current line-boundary offset in the current file (where the next read starts)."""
        return self._offset

    @property
    def identity(self) -> FileIdentity | None:
        """Identity of the current file (``None`` before the first open or after a replacement)."""
        return self._identity

    @property
    def last_seen(self) -> tuple[int, int, int] | None:
        """``(inode, size, mtime_ns)`` of the path at the start of the last read (``None`` before one, or once the
        path was found gone): what a checkpoint stores so that a restart can tell an unchanged file by its stat."""
        seen = self._last_seen
        return None if seen is None else (seen[1], seen[2], seen[3])

    @property
    def is_open(self) -> bool:
        """True while the tailer holds an fd."""
        return self._fd is not None

    @property
    def spent(self) -> bool:
        """True after a batch reported ``EndReason.DELETED``: further reads return nothing."""
        return self._spent

    def read_lines(self, max_bytes: int = DEFAULT_BATCH_BYTES) -> TailBatch:
        """Read complete lines from the offset, about ``max_bytes`` worth (at least one line if any).

        Opens the file if needed, checks it against the identity and offset, and reports truncation,
        replacement and deletion in the returned :class:`TailBatch`. A trailing partial line is never
        consumed. Raises :class:`OSError` for I/O errors other than the file being gone (state is
        unchanged then) and :class:`~copilot_otel.common.errors.SourceError` if the path is not a regular file.
        """
        if self._spent:
            return TailBatch([], self._identity, self._offset, end=EndReason.DELETED)
        if self._fd is None and not self._open():
            # Gone before we could open it: nothing can be drained.
            self._spent = True
            reset, self._pending_reset = self._pending_reset, None
            return TailBatch([], self._identity, self._offset, reset=reset, end=EndReason.DELETED)
        fd = self._fd
        assert fd is not None  # _open() set it
        status, st = self._path_status(fd)
        if (st.st_size, st.st_mtime_ns) != self._validated:
            # The file changed since the last check: shrunk, rewritten, or just grown.
            reason = self._check_and_grow(fd, st.st_size)
            if reason is not None:
                self._restart(fd, reason)
            elif self._long is not None and st.st_size < self._long.scanned_to:
                self._long = None  # shrank inside a long line: rescan it
            self._validated = (st.st_size, st.st_mtime_ns)

        lines, at_eof = self._read_available(fd, max(1, max_bytes))
        reset, self._pending_reset = self._pending_reset, None  # only once the read succeeded
        if status is _PathStatus.SAME or not at_eof:
            return TailBatch(lines, self._identity, self._offset, reset=reset, at_eof=at_eof)

        if status is _PathStatus.REPLACED and self._adopt_rewrite():
            # The same log rewritten under a new inode (written whole to a temporary and renamed over it): read on
            # from the offset in the new file, as a restart does; nothing ends, nothing is read twice.
            return TailBatch(lines, self._identity, self._offset, reset=reset, at_eof=False)
        # The name no longer points at this fd and we have read it to EOF: finish it.
        final_partial = _unterminated(fd, self._offset, self._max_line, self._chunk)
        batch = TailBatch(
            lines,
            self._identity,
            self._offset,
            reset=reset,
            end=EndReason.REPLACED if status is _PathStatus.REPLACED else EndReason.DELETED,
            final_partial=final_partial,
        )
        self.close()
        if status is _PathStatus.REPLACED:
            self._identity = None
            self._offset = 0
            self._pending_reset = ResetReason.REPLACED
        else:
            self._spent = True
        return batch

    def read_unterminated(self) -> TailItem | None:
        """Return the bytes after the offset when they form a line without ``\\n`` - without consuming.

        For the "last line never gets a newline" case (checklist #3): after the session ended and the
        file stayed idle, the caller may parse this and emit or dead-letter it. The offset does not
        move (a checkpoint must stay on a line boundary); if the line is completed later it is read
        again normally, and deterministic ids make the re-emission identical. Returns ``None`` when
        there are no such bytes, or a ``\\n`` arrived meanwhile (call :meth:`read_lines`). A
        :class:`Line` here has ``end`` = end of file; an oversized tail is :class:`TooLong`.
        """
        if self._spent or (self._fd is None and not self._open()):
            return None
        assert self._fd is not None
        return _unterminated(self._fd, self._offset, self._max_line, self._chunk)

    def stat_changed(self) -> bool:
        """Cheap check for the idle sweep: did the path's dev/inode/size/mtime change since the last read?

        One ``stat``, no open. A path that vanished counts as a change (reading reports it). Only
        meaningful for a tailer whose last batch had ``at_eof`` (otherwise there is unread data anyway).
        """
        if self._spent:
            return False
        if self._pending_reset is not None:
            return True  # a replacement is waiting to be read
        try:
            st = os.stat(self._path)
        except (FileNotFoundError, NotADirectoryError):
            return True
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) != self._last_seen

    def read_held(self, limit: int) -> Iterator[bytes] | None:
        """The whole file in chunks, through the descriptor held open (a file deleted since is still there), past
        what this tailer has read: for a reader that must see the file as written by now (a sub-agent's log its
        parent's prompt costs), read at once, on this tailer's thread. ``None``: no descriptor held, larger than
        ``limit``, or unreadable."""
        return None if self._fd is None else _held_chunks(self._fd, limit)

    def close(self) -> None:
        """Release the fd (idempotent); the next read reopens the path and re-validates the identity."""
        fd, self._fd = self._fd, None
        self._validated = None
        if fd is not None:
            os.close(fd)

    def __enter__(self) -> FileTailer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "spent" if self._spent else ("open" if self._fd is not None else "closed")
        return f"FileTailer({self._path!r}, offset={self._offset}, {state})"

    # -- opening and checking --------------------------------------------------------------------

    def _open(self) -> bool:
        """Open the path and validate identity/offset; False if the file does not exist."""
        try:
            fd = _open(self._path)
        except (FileNotFoundError, NotADirectoryError):
            return False
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise SourceError(f"{self._path} is not a regular file")
            if self._identity is not None and st.st_ino != self._identity.inode:
                # Another file under this name; the old one is out of reach (no fd to drain).
                self._restart(fd, ResetReason.REPLACED)
            else:
                reason = self._check_and_grow(fd, st.st_size)
                if reason is not None:
                    self._restart(fd, reason)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self._validated = (st.st_size, st.st_mtime_ns)
        return True

    def _rewrite_of_ours(self, fd: int, st: os.stat_result) -> bool:
        """Whether ``fd`` (another inode at our path, found while our own fd was open) is our file rewritten: it
        starts with our fingerprinted bytes and has a line boundary at our offset, the checks a reopened file passes
        (and, with the same first KiB, a restart's restore). Then it becomes ours: its inode in our identity, read on
        from the offset. (A checkpoint given to a tailer is still checked by its inode alone: checklist #38.)"""
        ident = self._identity
        if (
            ident is None
            or not stat.S_ISREG(st.st_mode)
            or st.st_size < max(self._offset, ident.fingerprint_len)
        ):
            return False
        if _fingerprint(_pread_full(fd, ident.fingerprint_len, 0)) != ident.fingerprint:
            return False
        if self._offset > 0 and _pread(fd, 1, self._offset - 1) != b"\n":
            return False
        self._identity = FileIdentity(st.st_dev, st.st_ino, ident.fingerprint, ident.fingerprint_len)
        return True

    def _adopt_rewrite(self) -> bool:
        """Our path names another inode, our fd is drained: if that file is ours rewritten, follow it from here."""
        try:
            fd = _open(self._path)
        except OSError:
            return False
        try:
            ours = self._rewrite_of_ours(fd, os.fstat(fd))
        except OSError:  # unreadable: taken for another file (its own read says why)
            ours = False
        if not ours:
            os.close(fd)
            return False
        self.close()
        self._fd = fd  # validated on the next read (its fingerprint grows there)
        return True

    def _path_status(self, fd: int) -> tuple[_PathStatus, os.stat_result]:
        """Does the path still name our open file? Also returns the fd's stat.

        Records what the path looked like for :meth:`stat_changed`.
        """
        fst = os.fstat(fd)
        try:
            pst = os.stat(self._path)
        except (FileNotFoundError, NotADirectoryError):
            self._last_seen = None
            return _PathStatus.MISSING, fst
        self._last_seen = (pst.st_dev, pst.st_ino, pst.st_size, pst.st_mtime_ns)
        if (pst.st_dev, pst.st_ino) != (fst.st_dev, fst.st_ino):
            return _PathStatus.REPLACED, fst
        return _PathStatus.SAME, fst

    def _check_and_grow(self, fd: int, size: int) -> ResetReason | None:
        """Validate the offset and fingerprint against the open file; grow a short fingerprint.

        Returns the reason to restart at 0, or None (then ``self._identity`` is the file's current
        identity: a fresh one when there was none, a longer one when the file grew).
        """
        ident = self._identity
        if size < self._offset:
            return ResetReason.TRUNCATED
        if ident is None:
            self._identity = FileIdentity.of_fd(fd)
        else:
            if size < ident.fingerprint_len:
                return ResetReason.TRUNCATED
            want = ident.fingerprint_len if ident.complete else min(size, FINGERPRINT_BYTES)
            head = _pread_full(fd, want, 0) if want else b""
            if len(head) < ident.fingerprint_len:
                return ResetReason.TRUNCATED  # shrank between fstat and pread
            if _fingerprint(head[: ident.fingerprint_len]) != ident.fingerprint:
                return ResetReason.CONTENT_CHANGED
            if len(head) > ident.fingerprint_len:
                st = os.fstat(fd)
                self._identity = FileIdentity(st.st_dev, st.st_ino, _fingerprint(head), len(head))
        # Datadog's check: a valid offset has a newline right before it.
        if self._offset > 0 and _pread(fd, 1, self._offset - 1) != b"\n":
            return ResetReason.CONTENT_CHANGED
        return None

    def _restart(self, fd: int, reason: ResetReason) -> None:
        """Start over at offset 0 of the open file with a fresh identity; report ``reason`` next."""
        self._pending_reset = self._pending_reset or reason
        self._offset = 0
        self._long = None
        self._identity = FileIdentity.of_fd(fd)

    # -- reading -------------------------------------------------------------------------------

    def _read_available(self, fd: int, max_bytes: int) -> tuple[list[TailItem], bool]:
        """Read complete lines from ``self._offset`` until EOF or the budget; advance the offset.

        Returns the items and ``at_eof``. ``max_bytes`` counts bytes read by this call (including
        bytes scanned past in an oversized line), so every call is bounded in time.
        """
        out: list[TailItem] = []
        pos = self._offset  # start of the first line not yet returned
        consumed = 0
        chunk = self._chunk
        max_line = self._max_line
        buf = b""  # bytes at pos.. that hold no newline yet (always shorter than one chunk)
        while True:
            long = self._long
            if long is not None and long.start == pos:
                before = long.scanned_to
                item, at_eof = self._scan_long(fd, long, max(max_bytes - consumed, chunk))
                consumed += long.scanned_to - before
                if item is None:
                    self._offset = pos
                    return out, at_eof
                out.append(item)
                pos = item.end
                buf = b""
            else:
                # Read only what fits beside the held partial line: the tailer never buffers more than
                # one chunk between iterations (~2 transiently), whatever the line lengths.
                # A small budget reads less (but at least _MIN_READ_BYTES, so tiny budgets still move).
                want = min(chunk - len(buf), max(max_bytes - consumed, _MIN_READ_BYTES))
                data = _pread(fd, want, pos + len(buf))
                if not data:
                    self._offset = pos
                    return out, True
                consumed += len(data)
                if buf:
                    data = buf + data
                parts = data.split(b"\n")
                buf = parts.pop()
                start = pos
                for part in parts:
                    end = start + len(part) + 1
                    out.append(TooLong(start, end) if len(part) > max_line else Line(start, end, part))
                    start = end
                pos = start
                if len(buf) >= chunk:
                    # A line bigger than a chunk: find its end without keeping its bytes.
                    self._long = _LongScan(pos, pos + len(buf))
                    buf = b""
                    continue
            if consumed >= max_bytes and out:  # budget spent, and progress made (never livelock)
                self._offset = pos
                return out, False

    def _scan_long(self, fd: int, long: _LongScan, max_scan: int) -> tuple[TailItem | None, bool]:
        """Find the end of a long line in chunks; return (Line or TooLong, True) or (None, at_eof).

        Memory: one chunk-sized scratch buffer, plus the line itself only if it fits
        ``max_line_bytes``. Progress stays in ``self._long`` so a long incomplete line at EOF is
        never rescanned, and a scan paused by the budget resumes where it stopped.
        """
        scratch = bytearray(self._chunk)
        limit = long.scanned_to + max_scan
        while True:
            if long.scanned_to >= limit:
                return None, False
            n = _read_into(fd, scratch, long.scanned_to)
            if n == 0:
                return None, True
            idx = scratch.find(b"\n", 0, n)
            if idx >= 0:
                end = long.scanned_to + idx + 1
                long.scanned_to = end
                break
            long.scanned_to += n
        self._long = None
        length = end - 1 - long.start
        if length > self._max_line:
            return TooLong(long.start, end), True
        del scratch
        data = _pread_full(fd, length, long.start)
        if len(data) != length:
            return None, True  # shrank under us: the next call's truncation check handles it
        return Line(long.start, end, data), True


def _unterminated(fd: int, pos: int, max_line: int, chunk: int) -> TailItem | None:
    """The bytes from ``pos`` to EOF if they hold no newline (bounded by ``max_line``).

    A function, not a tailer method: it reads without moving anything of the tailer's (its offset stays on a line
    boundary), so it needs only where to look and its limits.
    """
    size = os.fstat(fd).st_size
    if size <= pos:
        return None
    if size - pos > max_line:
        # Scan without holding: report TooLong unless a newline arrived meanwhile.
        scan = _LongScan(pos, pos)
        scratch = bytearray(chunk)
        while scan.scanned_to < size:
            n = _read_into(fd, scratch, scan.scanned_to)
            if n == 0:
                break
            if scratch.find(b"\n", 0, n) >= 0:
                return None
            scan.scanned_to += n
        return TooLong(pos, scan.scanned_to)
    data = _pread_full(fd, size - pos, pos)
    if not data or b"\n" in data:
        return None
    return Line(pos, pos + len(data), data)
