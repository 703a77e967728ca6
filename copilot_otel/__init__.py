"""copilot-otel: GitHub Copilot CLI session logs → OpenTelemetry traces, metrics and log events.

The library is the product; ``copilot-otel`` (``cli.py``) is a thin shell over it. :func:`read_session` gives what
a session did as neutral records (:mod:`copilot_otel.model.activity`), without sending anything.
"""

from __future__ import annotations

from ._version import __version__

# Not `from typing import TYPE_CHECKING`: nothing is imported here before cli.py can turn a Ctrl-C into one line.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .library import SessionRecords, iter_sessions, read_session

__all__ = ["SessionRecords", "__version__", "iter_sessions", "read_session"]


def __getattr__(name: str) -> Any:
    """The public API, imported on first use (PEP 562): every ``copilot_otel.<module>`` import runs this package
    first, and the CLI's light commands (``--help``, ``status``, ``config``) must not load the pipeline."""
    if name in ("SessionRecords", "iter_sessions", "read_session"):
        from . import library  # on first use: start-up time of every command

        return getattr(library, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
