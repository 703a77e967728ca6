"""Single key presses from the terminal, for ``copilot-otel live`` ("q" quits without Enter).

A terminal hands a program its input a line at a time until the program asks for each key: POSIX through
:mod:`termios` (cbreak mode: keys one by one, no echo, but Ctrl-C still interrupts), Windows through
:mod:`msvcrt` (the console gives keys one by one already). Where neither works (input is not a terminal, the
CI's no-POSIX run) no key is ever read: the view still stops on Ctrl-C.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Iterator
from typing import TextIO

__all__ = ["KeyWait", "single_keys"]

# ``wait(timeout_s)``: the keys typed within ``timeout_s`` seconds (returns at the first), "" when none was,
# "\x04" (end of transmission) when the terminal is gone.
KeyWait = Callable[[float], str]


def _no_keys() -> KeyWait:
    idle = threading.Event()  # never set: an interruptible wait, not a sleep

    def wait(timeout_s: float) -> str:
        idle.wait(timeout_s)
        return ""

    return wait


@contextlib.contextmanager
def single_keys(stream: TextIO) -> Iterator[KeyWait]:
    """Read ``stream``'s keys one at a time while in the block; the terminal's mode is restored after.

    Args:
        stream: The input (``sys.stdin``); when it is not a terminal, no key is read.
    """
    try:
        interactive = stream.isatty()
    except (ValueError, OSError):  # closed or detached
        interactive = False
    if not interactive:
        yield _no_keys()
        return
    if sys.platform == "win32":
        yield _windows_keys()
    else:
        with _posix_keys(stream) as wait:
            yield wait


if sys.platform == "win32":

    def _windows_keys() -> KeyWait:
        import msvcrt

        idle = threading.Event()

        def wait(timeout_s: float) -> str:
            # The console has no "wait for a key with a timeout": poll, a tenth of a second at a time.
            remaining = timeout_s
            while True:
                if msvcrt.kbhit():
                    return msvcrt.getwch()
                if remaining <= 0:
                    return ""
                step = min(0.1, remaining)
                idle.wait(step)
                remaining -= step

        return wait

else:

    @contextlib.contextmanager
    def _posix_keys(stream: TextIO) -> Iterator[KeyWait]:
        try:
            import select
            import termios
            import tty
        except ImportError:  # the CI's no-POSIX run: as on a platform without terminal modes
            yield _no_keys()
            return
        fd = stream.fileno()
        try:
            saved = termios.tcgetattr(fd)
            tty.setcbreak(
                fd
            )  # keys one by one, no echo; ISIG stays on, so Ctrl-C still raises KeyboardInterrupt
        except (termios.error, OSError):
            yield _no_keys()
            return

        def wait(timeout_s: float) -> str:
            ready, _, _ = select.select([fd], [], [], max(timeout_s, 0.0))
            if not ready:
                return ""
            data = os.read(fd, 64)
            return data.decode("utf-8", errors="replace") if data else "\x04"  # EOF: the terminal is gone

        try:
            yield wait
        finally:
            with contextlib.suppress(termios.error, OSError):
                termios.tcsetattr(fd, termios.TCSADRAIN, saved)
