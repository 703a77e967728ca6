"""The session's own word on itself (the framer's rule 14): its title and the CLI's own accounting.

``custom-title`` (``-n``, ``/rename``) names the session, said again after each loop; ``cost-state`` (2.1.332) is
the CLI's running accounting (cost, API and tool time, each model's cost). Neither is work of the loop: both are
handed on as :class:`~copilot_otel.loop.neutral.SelfReported` for ``show`` and ``report`` to set beside our own
figures. Apart from the framer because no other record's handling reads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...loop.neutral import NO_DATA, SelfReported
from ...model.inputs import Event
from .reader import CostState, CustomTitle

__all__ = ["SelfReport"]


class SelfReport:
    """The session's title as last said (key ``title`` of the framer's snapshot)."""

    __slots__ = ("title",)

    def __init__(self, state: Mapping[str, Any]) -> None:
        self.title: str | None = state.get("title")

    def snapshot(self, into: dict[str, Any]) -> None:
        into["title"] = self.title

    def titled(self, view: CustomTitle, last_ns: int, out: list[Event]) -> None:
        """The title, handed on when it changes (dated by the record before it: it has no date)."""
        title = view.title
        if title and title != self.title:
            self.title = title
            out.append(
                SelfReported("claude-code.title", f"title/{view.offset}", view.time_ns or last_ns, NO_DATA, None,
                             view.offset, view.end_offset, view.dropped, title=title)
            )  # fmt: skip

    @staticmethod
    def accounted(view: CostState, last_ns: int, out: list[Event]) -> None:
        """The CLI's own accounting of the session so far, dated by the record before it (it has no date)."""
        out.append(
            SelfReported("claude-code.cost", f"cost/{view.offset}", view.time_ns or last_ns, NO_DATA, None,
                         view.offset, view.end_offset, view.dropped, cost_usd=view.cost_usd,
                         api_duration_ms=view.api_duration_ms,
                         api_duration_without_retries_ms=view.api_duration_without_retries_ms,
                         tool_duration_ms=view.tool_duration_ms, duration_ms=view.duration_ms,
                         model_costs=view.model_costs)
        )  # fmt: skip
