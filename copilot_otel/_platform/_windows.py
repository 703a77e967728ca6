"""Windows: share-delete opens, write-through renames, console control events, AppData directories.

Importable on every OS (the pure parts are tested on Linux); the Win32 calls are made through :mod:`ctypes`
only on Windows, in the ``sys.platform == "win32"`` blocks below.

Files of ours in the state directory are opened by the portable :meth:`~._portable.Platform.open_private`: there
is no ``O_NOFOLLOW`` here, so a link is refused by an ``lstat`` before the open and temporaries are created with
``O_EXCL`` (``CREATE_NEW``, which fails on any existing name, a link included). The directory check
(:meth:`~._portable.Platform.private_dir_problem`) is the portable no-op: ``%LOCALAPPDATA%`` is private by its ACL.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from . import _quick
from ._portable import DefaultDirs, Platform, ServiceManager, StopHandler

__all__ = ["CONSOLE_EVENTS", "Windows"]

# Console control events that mean "this process is going away" (CTRL_CLOSE_EVENT, CTRL_LOGOFF_EVENT,
# CTRL_SHUTDOWN_EVENT). Ctrl+C and Ctrl+Break arrive as SIGINT / SIGBREAK through Python's own handler.
CONSOLE_EVENTS = {2: "CTRL_CLOSE_EVENT", 5: "CTRL_LOGOFF_EVENT", 6: "CTRL_SHUTDOWN_EVENT"}
# Windows ends the process once a close/logoff/shutdown handler returns, and at the latest after 5 s
# (SPI_GETHUNGAPPTIMEOUT): wait this long for the daemon's shutdown (flush, save state) to finish.
_CONSOLE_EVENT_WAIT_S = 4.5


if sys.platform == "win32":
    import ctypes
    import msvcrt
    from ctypes import wintypes

    _kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
    _kernel32.CreateFileW.argtypes = [
        wintypes.LPCWSTR,
        wintypes.DWORD,
        wintypes.DWORD,
        wintypes.LPVOID,
        wintypes.DWORD,
        wintypes.DWORD,
        wintypes.HANDLE,
    ]
    _kernel32.CreateFileW.restype = wintypes.HANDLE
    _kernel32.MoveFileExW.argtypes = [wintypes.LPCWSTR, wintypes.LPCWSTR, wintypes.DWORD]
    _kernel32.MoveFileExW.restype = wintypes.BOOL
    _HANDLER = ctypes.WINFUNCTYPE(wintypes.BOOL, wintypes.DWORD)
    _kernel32.SetConsoleCtrlHandler.argtypes = [_HANDLER, wintypes.BOOL]
    _kernel32.SetConsoleCtrlHandler.restype = wintypes.BOOL
    _INVALID_HANDLE = wintypes.HANDLE(-1).value


class Windows(Platform):
    """Windows 10 and later."""

    name = "windows"
    service_manager: ServiceManager | None = "task-scheduler"

    def home(self, env: Mapping[str, str]) -> Path:
        """``%USERPROFILE%`` first, then ``HOME`` (:func:`._quick.home`)."""
        return _quick.home(env, windows=True)

    def default_dirs(self, env: Mapping[str, str]) -> DefaultDirs:
        r"""``%LOCALAPPDATA%\copilot-otel`` and ``%APPDATA%\copilot-otel`` (:func:`._quick.default_dirs`)."""
        return DefaultDirs(*_quick.default_dirs(env, "windows"))

    # A console program in another console cannot be sent Ctrl+C (GenerateConsoleCtrlEvent reaches only the
    # caller's own console group), and TerminateProcess loses the session's shutdown: notify instead.
    can_interrupt = False

    def spawn_detached(self, argv: Sequence[str]) -> None:
        """Detached and in a process group of its own (:func:`._quick.spawn_detached`)."""
        _quick.spawn_detached(argv, windows=True)

    def send_interrupt(self, pid: int) -> None:
        raise OSError("Windows cannot send Ctrl+C to a program in another console")

    def notification_command(
        self, title: str, body: str, find: Callable[[str], str | None]
    ) -> list[str] | None:
        """A toast through PowerShell's WinRT projection (Windows 10+), attributed to PowerShell's app id."""
        shell = find("powershell") or find("pwsh")
        if shell is None:
            return None

        def quoted(text: str) -> str:
            return "'" + text.replace("'", "''") + "'"

        script = (
            "[Windows.UI.Notifications.ToastNotificationManager, Windows.UI.Notifications, "
            "ContentType=WindowsRuntime] > $null; "
            "$t = [Windows.UI.Notifications.ToastNotificationManager]::GetTemplateContent("
            "[Windows.UI.Notifications.ToastTemplateType]::ToastText02); "
            "$s = $t.GetElementsByTagName('text'); "
            f"$s.Item(0).AppendChild($t.CreateTextNode({quoted(title)})) > $null; "
            f"$s.Item(1).AppendChild($t.CreateTextNode({quoted(body)})) > $null; "
            "[Windows.UI.Notifications.ToastNotificationManager]::CreateToastNotifier("
            "'{1AC14E77-02E7-4E5D-B744-2EB1AE5198B7}\\WindowsPowerShell\\v1.0\\powershell.exe')"
            ".Show([Windows.UI.Notifications.ToastNotification]::new($t))"
        )
        return [shell, "-NoProfile", "-NonInteractive", "-Command", script]

    def stop_signals(self) -> tuple[signal.Signals, ...]:
        # A console process gets Ctrl+C as SIGINT and Ctrl+Break (what `taskkill` without /F and many service
        # wrappers send to a console group) as SIGBREAK; SIGTERM is only ever raised from inside the process.
        sigbreak = getattr(signal, "SIGBREAK", None)
        return (signal.SIGINT, signal.SIGTERM) + ((sigbreak,) if sigbreak is not None else ())

    if sys.platform == "win32":

        def open_shared(self, path: str | os.PathLike[str]) -> int:
            """``CreateFileW`` with FILE_SHARE_DELETE, so the CLI can rename or delete a log we are reading (an
            ``os.open`` descriptor would make that fail with a sharing violation)."""
            generic_read, share_all, open_existing, normal = 0x80000000, 0x1 | 0x2 | 0x4, 3, 0x80
            handle = _kernel32.CreateFileW(
                os.fspath(path), generic_read, share_all, None, open_existing, normal, None
            )
            if handle in (None, _INVALID_HANDLE):
                code = ctypes.get_last_error()
                raise OSError(0, ctypes.FormatError(code), os.fspath(path), code)
            # Binary unless O_TEXT is given; O_NOINHERIT as for every descriptor of ours.
            return msvcrt.open_osfhandle(handle, os.O_RDONLY | os.O_NOINHERIT)

        def _rename(self, src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
            # MOVEFILE_WRITE_THROUGH: returns once the rename is on disk, what fsync of the directory does on Unix.
            replace_existing, write_through = 0x1, 0x8
            if not _kernel32.MoveFileExW(os.fspath(src), os.fspath(dst), replace_existing | write_through):
                code = ctypes.get_last_error()
                raise OSError(0, ctypes.FormatError(code), os.fspath(src), code, os.fspath(dst))

        @contextlib.contextmanager
        def watch_stop(self, on_stop: StopHandler) -> Iterator[None]:
            """Signals as everywhere, plus the console closing, log-off and shutdown: those are answered on
            their own thread, which holds Windows off until the daemon has saved its state."""
            finished = threading.Event()

            def console_event(event: int) -> bool:
                name = CONSOLE_EVENTS.get(event)
                if name is None:
                    return False  # Ctrl+C / Ctrl+Break: Python's own handler turns them into signals
                with contextlib.suppress(KeyboardInterrupt):
                    on_stop(name)
                finished.wait(_CONSOLE_EVENT_WAIT_S)
                return True

            callback = _HANDLER(console_event)
            _kernel32.SetConsoleCtrlHandler(callback, True)
            try:
                with Platform.watch_stop(self, on_stop):
                    yield
            finally:
                finished.set()
                _kernel32.SetConsoleCtrlHandler(callback, False)
