"""Projections: neutral activity records (:mod:`copilot_otel.model.activity`) → spans, log events and metric points.

One module per vocabulary writes that vocabulary's attributes for each record, small enough to check line by
line against its specification: :mod:`.genai` (OTel GenAI semconv), :mod:`.copilot` (``github.copilot.*``, the
CLI's own export), :mod:`.openinference` (Phoenix), :mod:`.langfuse` and :mod:`.ours` (``copilot_otel.*``).
:mod:`.spans`, :mod:`.logs` and :mod:`.metrics` assemble each signal from them; :class:`Projector` routes each
record to what it becomes (:mod:`.projector`), and places captured content where the policy says (spans, details
events). :mod:`.catalog` declares what the rest of the package names: the instruments, the self-health metrics,
the attribute keys whose values are unique per record.

Every attribute, event and metric name the package writes is declared in this package and nowhere else (a test
fails on a name outside it), taken from ``opentelemetry-semantic-conventions`` where that package defines it.
The vocabulary modules import little (the records and the semconv package), so the modules that only need a
name (the wire encoder, the daemon's health metrics) do not import the projections: :class:`Projector` is loaded
when first asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .projector import Projector

__all__ = ["Projector"]


def __getattr__(name: str) -> Any:
    if name == "Projector":  # start-up time: the router imports every projection
        from .projector import Projector

        return Projector
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
