"""No OS-specific call outside ``copilot_otel/_platform/``: the seam is the one place that knows the OS.

An AST walk of every module of the package (the seam excepted) fails on an import of a module that exists on
some systems only (``fcntl``, ``msvcrt``, ``signal`` ...), on an ``os`` call or flag that is POSIX- or
Windows-only or behaves differently per OS (``os.getuid``, ``os.replace``, ``os.kill``, ``os.fork``,
``O_NOFOLLOW`` ...), on a branch on the OS (``sys.platform``, ``os.name``, ``platform.system()``) and on a
worker pool that picks its own start method (``multiprocessing.get_context("fork")``): each of those goes
through :data:`copilot_otel._platform.current`, which has one implementation per OS.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import copilot_otel

PACKAGE = Path(copilot_otel.__file__).parent
SEAM = PACKAGE / "_platform"

# Modules that exist on some operating systems only, or whose calls differ between them.
OS_MODULES = frozenset(
    {
        "fcntl",
        "msvcrt",
        "signal",
        "termios",
        "tty",
        "pty",
        "pwd",
        "grp",
        "resource",
        "winreg",
        "_winapi",
        "posix",
        "nt",
    }
)
# ``os`` names that are POSIX-only or Windows-only, or that behave differently per OS (``os.replace`` fails on
# Windows while another process holds the target open: the seam retries; ``os.kill(pid, 0)`` sends Ctrl+C there).
OS_NAMES = frozenset(
    {
        "getuid",
        "geteuid",
        "getgid",
        "getegid",
        "getgroups",
        "getpgid",
        "setsid",
        "setpgrp",
        "kill",
        "killpg",
        "fork",
        "forkpty",
        "replace",
        "pread",
        "preadv",
        "pwrite",
        "O_NOFOLLOW",
        "O_NONBLOCK",
        "O_NOCTTY",
        "O_BINARY",
        "O_NOINHERIT",
        "O_CLOEXEC",
        "name",
        "startfile",
        "getlogin",
    }
)
START_METHODS = frozenset({"fork", "forkserver", "spawn"})

ALLOWED: set[tuple[str, str]] = set()  # nothing: every OS-specific call goes through the seam


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return "?"


def os_calls(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """``(line, what)`` for every OS-specific call, import or branch in a module's syntax tree."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in OS_MODULES:
                    yield node.lineno, f"import {alias.name}"
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] in OS_MODULES:
                yield node.lineno, f"from {node.module} import ..."
            elif node.module == "os":
                for alias in node.names:
                    if alias.name in OS_NAMES:
                        yield node.lineno, f"from os import {alias.name}"
            elif node.module == "sys" and any(alias.name == "platform" for alias in node.names):
                yield node.lineno, "from sys import platform"
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "os" and node.attr in OS_NAMES:
                yield node.lineno, f"os.{node.attr}"
            elif node.value.id == "sys" and node.attr in ("platform", "getwindowsversion"):
                yield node.lineno, f"sys.{node.attr}"
            elif node.value.id == "platform" and node.attr in ("system", "platform", "win32_ver", "mac_ver"):
                yield node.lineno, f"platform.{node.attr}"
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name = node.func.attr
            if name in ("get_context", "set_start_method") and any(
                isinstance(arg, ast.Constant) and arg.value in START_METHODS for arg in node.args
            ):
                yield node.lineno, f"{_dotted(node.func)}({node.args[0].value!r})"  # type: ignore[attr-defined]
            elif name == "get_all_start_methods":
                yield node.lineno, f"{_dotted(node.func)}()"
        elif isinstance(node, ast.keyword) and node.arg in ("start_new_session", "creationflags"):
            yield node.lineno, f"{node.arg}="  # how a child process is detached differs per OS


def _package_modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if SEAM not in p.parents)


def test_no_os_specific_call_outside_the_platform_seam() -> None:
    found = []
    for path in _package_modules():
        relative = path.relative_to(PACKAGE).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for line, what in os_calls(tree):
            if (relative, what) not in ALLOWED:
                found.append(f"copilot_otel/{relative}:{line}: {what}")
    assert not found, "OS-specific calls outside copilot_otel/_platform/ (use the seam):\n" + "\n".join(found)


def test_the_guard_sees_each_kind_of_os_call() -> None:
    """The walk itself: each kind of call it must catch, written as the package would write it."""
    source = "\n".join(
        [
            "import fcntl",
            "from signal import SIGINT",
            "import os, sys, multiprocessing",
            "os.getuid()",
            "os.replace('a', 'b')",
            "os.kill(1, 0)",
            "flags = os.O_NOFOLLOW",
            "if sys.platform == 'win32': pass",
            "if os.name == 'nt': pass",
            "multiprocessing.get_context('fork')",
            "subprocess.Popen(['x'], start_new_session=True)",
            # Not OS calls: a loop variable named signal, a portable os call, a spawn context from the seam.
            "for signal in signals: signal.value",
            "os.fsync(3)",
            "multiprocessing.get_context(current.worker_start_method('http'))",
        ]
    )
    found = [what for _, what in sorted(os_calls(ast.parse(source)))]
    assert found == [
        "import fcntl",
        "from signal import ...",
        "os.getuid",
        "os.replace",
        "os.kill",
        "os.O_NOFOLLOW",
        "sys.platform",
        "os.name",
        "multiprocessing.get_context('fork')",
        "start_new_session=",
    ]
