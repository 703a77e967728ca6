"""Waiting for a condition, never for a time: the one wait of the suite.

The suite runs on busy machines (two cores shared by many), where any fixed sleep is either too short (a flaky
test) or too long (a slow one). A test that needs something to have happened (a line in a daemon's log, a key in
its ``status.json``, a process started, a file written) waits for exactly that with :func:`until`, which polls,
because what it waits on is another process's file or screen and nothing wakes a waiter when those change.

A fixed sleep left in a test is not a wait: it paces a real writer on purpose (a log written line by line as
the CLI writes it) or lets wall time pass that the test is about (a timeout, a CPU share over a window), and says
so in a comment.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# How often a condition is checked: short next to every deadline, long enough that the polling is no load.
POLL_S = 0.05


def until(
    check: Callable[[], T | None],
    timeout: float = 20.0,
    what: str = "the condition",
    *,
    detail: Callable[[], object] | None = None,
    poll_s: float = POLL_S,
) -> T:
    """Poll ``check()`` until it returns something truthy, and return that.

    At ``timeout`` seconds, fail (``AssertionError``, so pytest shows it as the test's failure) naming ``what``
    and, with ``detail``, what it returns then (a daemon's last lines, a screen).
    """
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            said = f":\n{detail()}" if detail is not None else ""
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}{said}")
        time.sleep(poll_s)  # the poll interval: what is checked is another process's file or screen
