"""Linux and macOS: positional reads with ``pread``/``preadv``, directory fsync, close-on-exec descriptors."""

from __future__ import annotations

import errno
import os
import stat
import sys

from ._portable import _LINK_REFUSED, Platform, _regular_or_closed

__all__ = ["Posix", "posix_calls_present"]

# What this implementation calls beyond the portable set; Windows has none of it.
_POSIX_CALLS = ("pread", "preadv", "O_CLOEXEC", "O_NONBLOCK", "O_NOCTTY", "O_DIRECTORY", "O_NOFOLLOW")
# What max_open_files() says when RLIMIT_NOFILE is unlimited.
_UNLIMITED_OPEN_FILES = 1 << 20


def posix_calls_present() -> bool:
    """Whether ``os`` has the POSIX calls :class:`Posix` uses (not on Windows, nor in the CI's no-POSIX run)."""
    return all(hasattr(os, name) for name in _POSIX_CALLS)


class Posix(Platform):
    """What Linux and macOS share."""

    name = "posix"

    if sys.platform != "win32":  # (so that `mypy --platform win32` does not look for these calls there)

        def open_shared(self, path: str | os.PathLike[str]) -> int:
            # O_NONBLOCK: opening a FIFO someone put in place of a log must not hang the daemon.
            return os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)

        def open_regular(self, path: str | os.PathLike[str]) -> int:
            # O_NONBLOCK: a FIFO's open returns at once (its fstat then refuses it) instead of waiting for a
            # writer; O_NOCTTY: a link to a terminal never becomes our controlling terminal.
            flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY
            return _regular_or_closed(path, os.open(path, flags))

        def pread(self, fd: int, length: int, offset: int) -> bytes:
            return os.pread(fd, length, offset)

        def read_into(self, fd: int, buffer: bytearray, offset: int) -> int:
            return os.preadv(fd, [buffer], offset)

        def max_open_files(self) -> int:
            import resource

            soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            return _UNLIMITED_OPEN_FILES if soft == resource.RLIM_INFINITY else int(soft)

        def fsync_dir(self, directory: str | os.PathLike[str]) -> None:
            fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

        def open_private(self, path: str | os.PathLike[str], flags: int, *, exclusive: bool = False) -> int:
            # O_NOFOLLOW: a link at the name fails the open itself (no window between a check and the open).
            try:
                fd = os.open(path, self._private_flags(flags, exclusive) | os.O_NOFOLLOW, 0o600)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise OSError(errno.ELOOP, _LINK_REFUSED, os.fspath(path)) from None
                raise
            try:  # a file an earlier version created under a permissive umask (otlp.jsonl was 0666) is tightened
                if stat.S_IMODE(os.fstat(fd).st_mode) & 0o077:
                    os.fchmod(fd, 0o600)
            except OSError:
                os.close(fd)
                raise
            return fd

        def user_id(self) -> int | None:
            return os.getuid()

        def private_dir_problem(self, path: str | os.PathLike[str]) -> str | None:
            st = os.stat(path)
            uid = os.geteuid()
            if st.st_uid != uid:
                return f"is owned by uid {st.st_uid}, not by you (uid {uid}): use a directory of your own"
            mode = stat.S_IMODE(st.st_mode)
            if mode & 0o022:
                return f"is writable by other users (mode {mode:04o}): run 'chmod go-w {os.fspath(path)}'"
            return None
