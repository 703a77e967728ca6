"""The platform calls on the ``statusline`` hook's path, importable without the rest of this package.

Claude Code waits for the hook after every message, so its path pays for no import it can do without: this module
imports only ``os``, ``sys`` and ``pathlib`` (``subprocess`` when it starts a program, ``platformdirs`` or
``psutil`` on the OS that needs them). The platform classes delegate to these functions, so each decision is made
in one place: where copilot-otel's files live by default (:func:`default_dirs`), how a program is left running on
its own (:func:`spawn_detached`) and whether a pid is a live process (:func:`pid_alive`).
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

# Not `from typing import TYPE_CHECKING`: typing alone would be a tenth of the hook's imports.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any, Literal

    #: Whose convention the default folders follow: XDG (Linux, and any OS without its own), macOS's, Windows'.
    DirsKind = Literal["xdg", "darwin", "windows"]

__all__ = [
    "APP_NAME",
    "PID_OFFSET",
    "default_dirs",
    "dirs_kind",
    "home",
    "lock_owner",
    "mark_released",
    "pid_alive",
    "recently_locked",
    "spawn_detached",
]

APP_NAME = "copilot-otel"
# The largest pid any OS gives (Windows' are DWORDs; Linux's at most 2**22): a larger number is no process.
MAX_PID = 2**32 - 1
# The pid starts at byte 1 of a lock file of ours: byte 0 is the one Windows locks, unreadable by others while held.
PID_OFFSET = 1


def dirs_kind(name: str = sys.platform) -> DirsKind:
    """The convention of ``sys.platform`` value ``name``, as :func:`copilot_otel._platform.for_platform` picks the
    implementation (a POSIX system without the POSIX calls, the CI's simulation of one, is run on Linux)."""
    return "windows" if name == "win32" else "darwin" if name == "darwin" else "xdg"


def home(env: Mapping[str, str], windows: bool = False) -> Path:
    """The user's home directory under ``env``: ``HOME``, else the OS's idea of it. On Windows ``%USERPROFILE%``
    first: that is where Copilot CLI (Node's ``os.homedir()``) puts ``.copilot``, while ``HOME`` is often an
    MSYS/Git Bash path set for other tools."""
    for var in ("USERPROFILE", "HOME") if windows else ("HOME",):
        value = env.get(var, "").strip()
        if value:
            return Path(value)
    return Path.home()


def _xdg(env: Mapping[str, str], var: str, fallback: str, windows: bool) -> Path:
    """``$var`` when it is an absolute path (the XDG spec ignores relative ones), else ``~/<fallback>``."""
    value = env.get(var, "").strip()
    return Path(value) if value and os.path.isabs(value) else home(env, windows) / fallback


def default_dirs(env: Mapping[str, str], kind: DirsKind) -> tuple[Path, Path]:
    r"""``(state, config)``: where copilot-otel keeps its files when no setting says otherwise.

    * ``xdg``: ``$XDG_STATE_HOME`` / ``$XDG_CONFIG_HOME`` when absolute, else ``~/.local/state`` and ``~/.config``.
    * ``darwin``: ``~/Library/Application Support/copilot-otel`` for both (as platformdirs says), unless an XDG
      variable names a directory, or an earlier version's ``~/.local/state`` / ``~/.config`` one exists (so an
      upgrade never moves anyone's checkpoints).
    * ``windows``: state in ``%LOCALAPPDATA%\copilot-otel`` (machine-local), config in ``%APPDATA%\copilot-otel``
      (roams with the profile), as platformdirs resolves them; an explicit ``XDG_STATE_HOME``/``XDG_CONFIG_HOME``
      wins.
    """
    windows = kind == "windows"
    state = _xdg(env, "XDG_STATE_HOME", ".local/state", windows) / APP_NAME
    config = _xdg(env, "XDG_CONFIG_HOME", ".config", windows) / APP_NAME
    if kind == "darwin":
        import platformdirs.macos

        apple = platformdirs.macos.MacOS(APP_NAME, appauthor=False)
        if not (env.get("XDG_STATE_HOME", "").strip() or state.is_dir()):
            state = Path(apple.user_state_dir)
        if not (env.get("XDG_CONFIG_HOME", "").strip() or config.is_dir()):
            config = Path(apple.user_config_dir)
    elif windows:
        import platformdirs.windows

        if not env.get("XDG_STATE_HOME", "").strip():
            state = Path(platformdirs.windows.Windows(APP_NAME, appauthor=False).user_state_dir)
        if not env.get("XDG_CONFIG_HOME", "").strip():
            config = Path(
                platformdirs.windows.Windows(APP_NAME, appauthor=False, roaming=True).user_config_dir
            )
    return state, config


# The children spawn_detached started, kept referenced: a Popen collected while its process runs warns
# (ResourceWarning), and the caller exits right after anyway.
_DETACHED: list[Any] = []


def spawn_detached(argv: Sequence[str], windows: bool = False) -> None:
    """Start ``argv`` and leave it running on its own: no standard streams, not waited for, apart from the
    caller's process group (a hook runner that stops its command, as Claude Code stops a statusline command that
    took too long, does not stop it). POSIX: a session of its own. Windows: ``DETACHED_PROCESS`` (no console of
    its own or the caller's) and ``CREATE_NEW_PROCESS_GROUP`` (a Ctrl+C to the caller's group does not reach it),
    by value, since :mod:`subprocess` names them on Windows only."""
    import subprocess

    options: dict[str, Any] = (
        {"creationflags": 0x00000008 | 0x00000200} if windows else {"start_new_session": True}
    )
    _DETACHED.append(
        subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            **options,
        )
    )


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (a pid that is someone else's counts). POSIX: ``kill(pid, 0)``, which sends
    nothing (what ``psutil.pid_exists`` does there); on Windows, where ``os.kill(pid, 0)`` would send Ctrl+C,
    :func:`psutil.pid_exists`."""
    if not 0 < pid <= MAX_PID:  # a damaged status or lock file: os.kill would raise OverflowError
        return False
    if sys.platform == "win32" or not hasattr(os, "kill"):
        import psutil

        return bool(psutil.pid_exists(pid))
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True
    except OSError:  # ProcessLookupError: no such process
        return False
    return True


def lock_owner(path: str | os.PathLike[str]) -> str:
    """The pid the last holder wrote in a lock file of ours (at :data:`PID_OFFSET`), or ``"unknown"``."""
    try:
        with open(path, "rb") as fh:
            fh.seek(PID_OFFSET)
            text = fh.read(32).decode("ascii", "replace").strip()
    except OSError:
        return "unknown"
    return text if text.isdigit() else "unknown"


def recently_locked(path: str | os.PathLike[str], since_s: float) -> bool:
    """Whether a lock file of ours was taken after ``since_s`` (Unix seconds, its mtime: taking it writes the pid)
    by a process that still runs, without a lock call of its own (the lock library's import alone would cost the
    statusline hook more than the rest of its path). A holder that has just released it while still exiting
    counts, and a pid reused after that can count only until ``since_s`` passes the file's time."""
    try:
        if os.stat(path).st_mtime < since_s:
            return False
    except OSError:
        return False
    owner = lock_owner(path)
    return owner.isdigit() and pid_alive(int(owner))


def mark_released(path: str | os.PathLike[str]) -> None:
    """Blank the pid in a lock file and set its time back to 1970 before its holder releases it:
    :func:`recently_locked` says it is free from then on, although the holder's process may take a while yet to
    exit. The pid bytes are past the one byte Windows locks. (A file that cannot be written is left as it is: the
    pid check still ends with the process.)"""
    with contextlib.suppress(OSError), open(path, "r+b") as fh:
        fh.seek(PID_OFFSET)
        size = len(fh.read(32))
        fh.seek(PID_OFFSET)
        fh.write(b" " * size)  # no pid: lock_owner says "unknown" (Windows may date the file anew on close)
    with contextlib.suppress(OSError):
        os.utime(path, (0, 0))
