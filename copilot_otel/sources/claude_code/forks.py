"""A forked session's copy of its parent's history (the framer's rule 13), skipped and linked to the parent.

``--fork-session`` (2.1.332) opens the new log with the parent's records, their dates and uuids kept: the parent's
fold already exported them. This module tells those records apart until the fork's first prompt of its own, counts
them, and links that prompt's root to the parent's trace. Apart from the framer because the copy is read only
before a fork's first prompt, and its origin is read from beside the log (:func:`fork_seed`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...loop.neutral import NO_DATA, Continued
from ...model import ids
from ...model.inputs import Event
from .reader import AssistantRecord, Record, UserKind, UserRecord, read_fork

__all__ = ["ForkCopy", "fork_seed"]

logger = logging.getLogger(__name__)


class ForkCopy:
    """The fork's origin (the parent session and its prompts by record uuid) until the fork's first prompt, and the
    records copied so far (keys ``fork``, ``copied``, ``copied_prompt`` of the framer's snapshot)."""

    __slots__ = ("copied", "copied_prompt", "fork")

    def __init__(self, fork: Any, state: Mapping[str, Any]) -> None:
        self.fork: dict[str, Any] | None = (
            dict(fork) if fork is not None and isinstance(fork, Mapping) else None
        )
        self.copied: int = int(state.get("copied", 0))  # records of the parent's history skipped so far
        self.copied_prompt: str | None = state.get("copied_prompt")  # the last copied prompt record's uuid

    def snapshot(self, into: dict[str, Any]) -> None:
        into["fork"] = self.fork
        into["copied"] = self.copied
        into["copied_prompt"] = self.copied_prompt

    def skips(self, view: Event, queued: str | None, enqueue_ns: int) -> bool:
        """Part of the copy, before the fork's first prompt: a reply made in another session (``requestSessionId``),
        or a conversation record dated before the prompt enqueued last (the copy keeps the parent's dates).
        Counted and skipped: the parent's fold has it."""
        if not isinstance(view, Record):
            return False
        made_in = view.request_session_id if isinstance(view, AssistantRecord) else None
        if not (made_in and made_in != view.session_id) and not (
            queued is not None and 0 < view.time_ns < enqueue_ns
        ):
            return False
        self.copied += 1
        if isinstance(view, UserRecord) and view.kind is UserKind.PROMPT:
            self.copied_prompt = view.id
        return True

    @property
    def pending(self) -> bool:
        """The fork's first prompt is yet to come (or something was copied): it continues the parent's."""
        return bool(self.copied) or self.fork is not None

    def continued(self, view: UserRecord, out: list[Event]) -> None:
        """The fork's first prompt continues the parent's prompt it copied last: its root links to that trace."""
        fork = self.fork or {}
        parent = fork.get("parent")
        prompt = (fork.get("prompts") or {}).get(self.copied_prompt or "")
        out.append(
            Continued("claude-code.fork", f"fork/{view.id}", view.time_ns, NO_DATA, None, view.offset,
                      view.end_offset, view.dropped,
                      trace_id=ids.trace_id(parent, prompt) if parent and prompt else 0,
                      span_id=ids.span_id(parent, "root", prompt) if parent and prompt else 0,
                      copied_records=self.copied)
        )  # fmt: skip
        self.fork, self.copied, self.copied_prompt = None, 0, None


def fork_seed(path: Path) -> dict[str, Any] | None:
    """A session's own log that is a fork: its parent session and that log's prompts (``{"fork": …}``); else
    ``None``."""
    origin = read_fork(path)
    if origin is None:
        return None
    logger.debug(
        "%s is a fork of session %s: the history it copied from there is skipped, its first prompt links there",
        path.name, origin.parent_session_id,
    )  # fmt: skip
    return {"fork": {"parent": origin.parent_session_id, "prompts": origin.prompts}}
