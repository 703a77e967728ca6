"""Failed attempts of a model call (the framer's rule 11), held until the call they were attempts of is known.

Claude Code 2.1.332 writes each attempt of a request that failed and was retried as a ``system`` ``api_error``
record, after the attempt's ``api-request``; the reply (or the CLI's giving up) comes records later. Which turn an
attempt belongs to is known only then, so the attempts wait here, in the framer's state, and are handed on as
:class:`~copilot_otel.loop.neutral.AttemptFailed` when that turn begins (or under the agent when the call failed
for good). Apart from the framer because no other record's handling reads this state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...loop.neutral import NO_DATA, AttemptFailed
from ...model.inputs import Event
from .reader import ApiError, ApiRequest

__all__ = ["Retries"]


class Retries:
    """The last request sent and the failed attempts not handed on yet (keys ``request``, ``attempts`` of the
    framer's snapshot)."""

    __slots__ = ("attempts", "request")

    def __init__(self, state: Mapping[str, Any]) -> None:
        # The last ``api-request`` (its time and model): the start of the attempt an ``api_error`` ends.
        request = state.get("request")
        self.request: dict[str, Any] | None = (
            dict(request) if request is not None and isinstance(request, Mapping) else None
        )
        # Failed attempts of the next model call, until its turn begins (or the CLI gives up on it).
        self.attempts: list[dict[str, Any]] = [dict(a) for a in state.get("attempts", ())]

    def snapshot(self, into: dict[str, Any]) -> None:
        into["request"] = self.request
        into["attempts"] = [dict(a) for a in self.attempts]

    def requested(self, view: ApiRequest) -> None:
        self.request = {"time_ns": view.time_ns, "model": view.model}

    def failed(self, view: ApiError, last_ns: int) -> None:
        """A failed attempt (``system`` ``api_error``): from its ``api-request`` (else the record before) to
        itself."""
        request = self.request or {}
        start = request.get("time_ns") or last_ns or view.time_ns
        status = view.status
        self.attempts.append(
            {"id": view.id, "time_ns": view.time_ns, "start_ns": min(start, view.time_ns), "offset": view.offset,
             "end_offset": view.end_offset, "model": request.get("model"), "status": status,
             "error_type": str(status) if status is not None else view.connection_code or "api_error",
             "message": view.formatted, "attempt": view.retry_attempt}
        )  # fmt: skip
        self.request = None

    def began(self, start_ns: int) -> int:
        """When the call whose first record is read at ``start_ns`` began: at its first failed attempt, if any."""
        return min(start_ns, self.attempts[0]["start_ns"]) if self.attempts else start_ns

    def hand_on(self, out: list[Event]) -> None:
        """The held attempts, as the loop's events (where they hang is where ``out`` is at)."""
        for a in self.attempts:
            out.append(
                AttemptFailed("claude-code.api_error", a["id"], a["time_ns"], NO_DATA, None, a["offset"],
                              a["end_offset"], start_ns=a["start_ns"], model=a["model"],
                              error_type=a["error_type"], message=a["message"], status_code=a["status"],
                              attempt=a["attempt"])
            )  # fmt: skip
        self.attempts = []
