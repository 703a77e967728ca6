"""The CI's "no POSIX" mode: copilot-otel runs here as it would have to on Windows.

Loaded at interpreter start through ``PYTHONPATH=.ci/no_posix`` (``.ci/run`` sets it for one step, and the
worker processes it spawns inherit it). It

* makes the POSIX-only modules (``fcntl``, ``termios``, ``pwd``, ``grp``, ``resource``) unimportable from any
  ``copilot_otel`` module: an ``import fcntl`` there raises ``ModuleNotFoundError``, as on Windows. Third-party
  libraries keep them: psutil, filelock and watchdog pick their Windows backends by themselves there;
* removes the POSIX-only ``os`` functions and flags a Windows Python lacks and which a daemon reading and
  writing files would reach for, for everyone: positional I/O, ``fork``, descriptor ownership and modes,
  process groups, ``O_CLOEXEC``/``O_DIRECTORY``. So the platform seam falls back to its portable
  implementation, the one Windows builds on.

A few POSIX calls stay because the Linux backends of the test tools and libraries call them unconditionally
(``os.getuid`` by pytest, ``os.O_NONBLOCK`` and ``os.fchmod`` by filelock, ``os.register_at_fork``); ``mypy --platform win32``
checks statically that copilot-otel itself uses none of them outside the seam.
"""

from __future__ import annotations

import builtins
import os
from typing import Any

BLOCKED_MODULES = frozenset({"fcntl", "termios", "pwd", "grp", "resource"})
REMOVED_FROM_OS = (
    "pread",
    "pwrite",
    "preadv",
    "pwritev",
    "fork",
    "forkpty",
    "fchown",
    "lchown",
    "killpg",
    "getpgid",
    "setsid",
    "sync",
    "O_CLOEXEC",
    "O_DIRECTORY",
)

for _name in REMOVED_FROM_OS:
    if hasattr(os, _name):
        delattr(os, _name)

_real_import = builtins.__import__


def _guarded_import(
    name: str,
    globals: dict[str, Any] | None = None,  # noqa: A002 - the signature of __import__
    locals: dict[str, Any] | None = None,  # noqa: A002
    fromlist: Any = (),
    level: int = 0,
) -> Any:
    importer = (globals or {}).get("__name__") or ""
    if level == 0 and name.partition(".")[0] in BLOCKED_MODULES and importer.startswith("copilot_otel"):
        raise ModuleNotFoundError(
            f"{importer} imports {name}, which does not exist on Windows (the CI's no-POSIX mode)", name=name
        )
    return _real_import(name, globals, locals, fromlist, level)


builtins.__import__ = _guarded_import
