"""The names of the state dir's ``lock`` and ``status.json``, and ``status.json`` read back: light enough for
``status``.

:mod:`copilot_otel.daemon.state` writes both (the daemon's :class:`~copilot_otel.daemon.state.StateStore`), and with them loads
SQLite, ``filelock`` and the checkpoint database, about 35 ms that ``copilot-otel status``, which only reads
``status.json`` and the lock's pid, must not pay (it starts in under 100 ms, issue 25).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

from ..common.errors import StateError

__all__ = ["LOCK_FILE", "STATUS_FILE", "read_status"]

LOCK_FILE = "lock"
STATUS_FILE = "status.json"


def read_status(state_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """Read the ``status.json`` a daemon wrote in ``state_dir``; ``None`` if there is none.

    Raises:
        StateError: The file exists but cannot be read or is not a JSON object.
    """
    path = Path(state_dir) / STATUS_FILE
    try:
        data = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise StateError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise StateError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise StateError(f"{path} does not hold a JSON object")
    return doc
