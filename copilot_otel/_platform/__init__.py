"""Everything that differs between Linux, macOS and Windows, behind one small interface.

Nothing else in the package calls an OS-specific function: only the modules here may. The interface is
:class:`~._portable.Platform`; :data:`current` is the implementation for this machine:

=========================  =========================================================================
``open_shared(path)``      read-only descriptor that lets the writer rename or delete the file meanwhile
``open_regular(path)``     the same for a regular file only, never waiting (``O_NONBLOCK``): not a FIFO or device
``pread`` / ``read_into``  positional reads (``os.pread`` / ``os.preadv`` where they exist)
``open_flags``             extra ``os.open`` flags for files we write: binary, not inherited by children
``replace(src, dst)``      atomic rename over ``dst``, retried briefly on a Windows sharing violation
``fsync_dir(path)``        make a rename durable (a no-op where a directory cannot be opened)
``open_private``           a state file of ours: 0600, never through a link (``O_NOFOLLOW``), temporaries ``O_EXCL``
``private_dir_problem``    why a state directory other users can write (or own) is unsafe (POSIX; ACLs on Windows)
``max_open_files``         the descriptor limit (``RLIMIT_NOFILE``; a fixed default on Windows)
``release_free_memory``    freed heap pages back to the OS after a big scan (glibc ``malloc_trim``; Linux)
``dir_watcher``            change hints for the session folders: inotify (Linux), watchdog elsewhere
``lock_exclusive``         the one-daemon lock (:mod:`filelock`), with the holder's pid readable
``process_alive``          liveness and identity of a process (:mod:`psutil`): a reused pid is not the CLI
``process_facts``          who a process is (user, executable, start time, terminal) before it is interrupted
``send_interrupt``         SIGINT to the CLI (``can_interrupt`` is false on Windows: notify instead)
``notification_command``   the desktop notification: notify-send / gdbus, osascript, a PowerShell toast
``watch_stop``             what asks a daemon to stop: SIGTERM/SIGINT; Ctrl+Break and console close on Windows
``default_dirs``           where state and config live by default (XDG / Application Support / AppData)
``worker_start_method``    how replay starts worker processes (fork only on Linux)
``spawn_detached``         a program left running on its own (``statusline``'s refresh): its own session / group
``service_manager``        which per-user service manager ``copilot-otel service`` drives
``user_id()``              the numeric user id (POSIX; ``None`` on Windows), for launchd's ``gui/<uid>``
``text_streams``           stdout/stderr that never fail on a cp1252 console (:mod:`._console`)
``single_keys``            key presses one at a time (termios cbreak / msvcrt), for ``live`` (:mod:`._keys`)
=========================  =========================================================================

The names are imported on first use (PEP 562): ``statusline``'s hook, which Claude Code waits for after every
message, imports only :mod:`._quick` (default folders, a detached start, a pid's liveness), whose functions the
classes below call for those three decisions.

Implementations: :class:`~._linux.Linux`, :class:`~._darwin.Darwin` (both :class:`~._posix.Posix`) and
:class:`~._windows.Windows`, each built on :class:`~._portable.Platform`, which uses only calls every OS has.
Where ``os`` lacks the POSIX calls (the CI's "no POSIX" run, ``.ci/no_posix``) that portable base is used as it
is, so the code paths Windows shares with it run on Linux too. Every module here imports on every OS.
"""

from __future__ import annotations

import sys
from importlib import import_module

# Not `from typing import TYPE_CHECKING`: the statusline hook's path imports this package and pays for nothing else.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ._console import can_encode_glyphs, text_streams, utf8_stdout
    from ._keys import single_keys
    from ._portable import (
        DefaultDirs,
        DirWatcher,
        LockHeld,
        NotARegularFile,
        Platform,
        ProcessFacts,
        ServiceManager,
        WatchSink,
    )

    current: Platform
    """The implementation in use on this machine."""

__all__ = [
    "DefaultDirs",
    "DirWatcher",
    "LockHeld",
    "NotARegularFile",
    "Platform",
    "ProcessFacts",
    "ServiceManager",
    "WatchSink",
    "can_encode_glyphs",
    "current",
    "for_platform",
    "launchd_domains",
    "single_keys",
    "text_streams",
    "utf8_stdout",
]

# Where each name is defined: imported on first use (PEP 562), as the package's own public API is. Every
# ``copilot_otel._platform.<module>`` import runs this file first, and the statusline hook imports only
# :mod:`._quick` (its threads, sockets, ctypes and record types would cost it a third of its time).
_WHERE = {
    **dict.fromkeys(("can_encode_glyphs", "text_streams", "utf8_stdout"), "._console"),
    "single_keys": "._keys",
    **{name: "._portable" for name in __all__ if name[0].isupper()},  # the types: all the portable seam's
}


def __getattr__(name: str) -> Any:
    """``current`` (built once, on first use) and the names above, from their modules."""
    if name == "current":
        value = for_platform(sys.platform)
    elif name in _WHERE:
        value = getattr(import_module(_WHERE[name], __name__), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # the next use finds it without this call
    return value


def launchd_domains(uid: int) -> list[str]:
    """The launchd domains a per-user agent may live in (macOS; imported on use)."""
    from ._darwin import launchd_domains as domains

    return domains(uid)


def for_platform(name: str) -> Platform:
    """The implementation for ``sys.platform`` value ``name`` (the portable one where its calls are missing).

    Each OS's module is imported here, for that OS only: the others' calls do not exist on it.
    """
    if name == "win32":
        from ._windows import Windows

        return Windows()
    from ._posix import posix_calls_present

    if not posix_calls_present():
        from ._portable import Platform

        return Platform()
    if name == "darwin":
        from ._darwin import Darwin

        return Darwin()
    from ._linux import Linux

    return Linux()
