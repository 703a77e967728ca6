"""Prompts queued while a turn runs (the framer's rule 12): the prompt waiting to open, or steering of the open one.

A human prompt is first a ``queue-operation`` ``enqueue`` (its text as typed), then the records of its new
``promptId``. A prompt sent while a turn runs (2.1.332) is instead delivered into the running prompt as an
``attachment`` ``queued_command`` after a tool result: it steers that prompt, as Copilot CLI's steering messages
do, and is dated when delivered (its own date is when it was enqueued). Apart from the framer because both what a
prompt is named by and which records a fork copied (:mod:`.forks`) depend on this queue.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...loop.neutral import NO_DATA, PromptSubmitted
from ...model.inputs import Event
from .reader import Attachment, QueueOperation

__all__ = ["Queue"]


class Queue:
    """The prompt as typed until its first record, and when it was enqueued (keys ``queued``, ``enqueue_ns`` of
    the framer's snapshot)."""

    __slots__ = ("enqueue_ns", "queued")

    def __init__(self, state: Mapping[str, Any]) -> None:
        self.queued: str | None = state.get("queued")  # the prompt as typed, until its first record
        self.enqueue_ns: int = int(state.get("enqueue_ns", 0))  # when it was enqueued

    def snapshot(self, into: dict[str, Any]) -> None:
        into["queued"] = self.queued
        into["enqueue_ns"] = self.enqueue_ns

    def operation(self, view: QueueOperation) -> None:
        text = view.prompt
        if text is not None:
            self.queued, self.enqueue_ns = text, view.time_ns
        elif self.queued is not None and view.removed == self.queued:
            self.queued = None  # delivered into the running prompt: it names no prompt

    def take(self) -> str | None:
        """The queued prompt's text, for the prompt that opens now."""
        text, self.queued = self.queued, None
        return text

    def steer(self, view: Attachment, last_ns: int, out: list[Event]) -> None:
        """A prompt delivered into the running one (``queued_command``): steering of it, dated when delivered (the
        record before it, ``last_ns``)."""
        text = view.queued_prompt
        if self.queued == text:
            self.queued = None
        out.append(
            PromptSubmitted("claude-code.queued", f"queued/{view.id}", last_ns or view.time_ns, NO_DATA, None,
                            view.offset, view.end_offset, view.dropped, content=text, delivery="steering")
        )  # fmt: skip
