"""Worker processes for reading many session logs at once: one chunker and one pool, shared by ``replay`` and
``report``.

Sessions are independent and the fold is pure, so a large history is split into chunks of about the same size
in bytes (a few big logs and many small ones balance out), and each chunk goes to a worker process. How the
workers start is the platform seam's decision (:meth:`copilot_otel._platform.Platform.worker_start_method`):
fork only on Linux (and never with a gRPC channel about), spawn elsewhere: forking after Apple's frameworks
started threads crashes on macOS.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .._platform import Platform, current
from ..sources.sessions import SessionFile

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

__all__ = ["by_size", "log_bytes", "process_pool"]


def log_bytes(session: SessionFile) -> int:
    """A log's size (0 when it cannot be stat'ed now: its read will say what is wrong with it)."""
    with contextlib.suppress(OSError):
        return session.path.stat().st_size
    return 0


def by_size(sessions: Sequence[SessionFile], chunk_bytes: int) -> list[list[SessionFile]]:
    """The sessions, in order, cut into chunks of at least ``chunk_bytes`` each (but the last).

    A chunk closes once it holds ``chunk_bytes`` or more, so a log bigger than that is a chunk of its own and
    small logs share one (balance against the per-chunk overhead of a worker's task).
    """
    chunks: list[list[SessionFile]] = [[]]
    size = 0
    for session in sessions:
        size += log_bytes(session)
        chunks[-1].append(session)
        if size >= chunk_bytes:
            chunks.append([])
            size = 0
    return [c for c in chunks if c]


def process_pool(
    workers: int,
    *,
    protocol: str = "",
    initializer: Callable[..., object] | None = None,
    initargs: tuple[Any, ...] = (),
    platform: Platform | None = None,
) -> ProcessPoolExecutor:
    """A pool of ``workers`` processes started the way this platform starts them safely.

    Args:
        protocol: The OTLP protocol the workers export with (``grpc`` never forks); ``""`` when they open no
            connection at all (``report``).
        platform: The seam's implementation (default: this machine's); tests pass another OS's.
    """
    # Imported here: only a large history starts workers, and multiprocessing costs every command start-up time.
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    method = (platform or current).worker_start_method(protocol)
    context = multiprocessing.get_context(method)
    return ProcessPoolExecutor(workers, mp_context=context, initializer=initializer, initargs=initargs)
