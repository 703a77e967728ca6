"""copilot-otel: GitHub Copilot CLI session logs → OpenTelemetry traces, metrics and log events.

The library is the product; ``copilot-otel`` (``cli.py``) is a thin shell over it.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
