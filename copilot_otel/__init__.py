"""copilot-otel: GitHub Copilot CLI session logs → OpenTelemetry traces, metrics and log events.

The library is the product; ``copilot-otel`` (``cli.py``) is a thin shell over it. :func:`read_session` gives what
a session did as neutral records (:mod:`copilot_otel.activity`), without sending anything.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .library import SessionRecords, iter_sessions, read_session

__all__ = ["SessionRecords", "__version__", "iter_sessions", "read_session"]
