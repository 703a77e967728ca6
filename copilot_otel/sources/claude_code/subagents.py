"""Sub-agents: a sub-agent's own file rooted in its parent's trace (loop rule A), and background sub-agents whose
reports come back into the prompt that started them (the framer's rule 15).

A sub-agent's file (``<session>/subagents/agent-<id>.jsonl``) is folded alone: :func:`subagent_seed` reads the
``.meta.json`` beside it (the ``Agent`` call that started it), and :func:`rooted` opens its work under that call's
span. A background sub-agent (2.1.332: an ``Agent`` call whose result says ``isAsync`` / ``async_launched``)
reports back with a ``<task-notification>`` ``user`` record under a new ``promptId`` (after a meta record with
``turnCompanion`` under the same id): no human prompt, but more of the prompt that started it, which ends only once
no background sub-agent of it still runs. Apart from the framer because this state (what runs in the background,
which ``promptId`` s are the open prompt's) is these records' alone.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...loop.neutral import NO_DATA, PromptSubmitted, Rooted
from ...model import ids
from ...model.inputs import Event
from .reader import SystemRecord, UserRecord, read_meta

__all__ = ["Background", "rooted", "subagent_seed"]

# The source of a background task's report, injected into the prompt that started the task.
_NOTIFICATION_SOURCE = "task-notification"
# ``toolUseResult.status`` of an ``Agent`` call that started its sub-agent in the background.
_ASYNC_LAUNCHED = "async_launched"


class Background:
    """The open prompt's background sub-agents not reported back yet, its other ``promptId`` s (its tasks'
    reports), and a companion record's ``promptId`` waiting for the record it goes with (keys ``background``,
    ``aliases``, ``companion`` of the framer's snapshot)."""

    __slots__ = ("aliases", "background", "companion")

    def __init__(self, state: Mapping[str, Any]) -> None:
        self.background: int = int(state.get("background", 0))
        self.aliases: list[str] = list(state.get("aliases", ()))
        self.companion: str | None = state.get("companion")

    def snapshot(self, into: dict[str, Any]) -> None:
        into["background"] = self.background
        into["aliases"] = list(self.aliases)
        into["companion"] = self.companion

    def reset(self) -> None:
        """A new prompt opens: nothing of it runs in the background yet."""
        self.aliases, self.companion, self.background = [], None, 0

    def launched(self, view: UserRecord) -> None:
        """An ``Agent`` call's result: when it says its sub-agent runs on in the background, the prompt waits for
        that sub-agent's report."""
        result = view.tool_use_result
        if (
            result.__class__ is dict
            and (  # decoded JSON: a dict or no object (not the costlier Mapping check)
                result.get("isAsync") is True or result.get("status") == _ASYNC_LAUNCHED
            )
        ):
            self.background += 1

    def still_running(self, view: SystemRecord) -> None:
        """``turn_duration`` says background sub-agents of the loop still run: the prompt waits for their reports,
        whatever was counted of their launches."""
        self.background = max(self.background, view.pending_background or 0)

    def notified(self, view: UserRecord, prompt_id: str, out: list[Event]) -> None:
        """A background task's report: no human prompt, though under a new ``promptId``. The prompt that started
        the sub-agent goes on with it (its trace, its turns, its runaway counters): the report is a message
        injected into it, and its ``promptId`` (and its companion's) an alias of that prompt's."""
        self.aliases.append(prompt_id)
        self.companion = None
        if self.background:
            self.background -= 1  # one background sub-agent reported back
        out.append(
            PromptSubmitted("claude-code.task_notification", f"notification/{view.id}", view.time_ns, NO_DATA, None,
                            view.offset, view.end_offset, view.dropped, content=view.plain_text or None,
                            source=_NOTIFICATION_SOURCE)
        )  # fmt: skip


def rooted(view: UserRecord, seed: Mapping[str, Any], prompt_id: str) -> Rooted:
    """A sub-agent file's first prompt record: its work, in the trace ``trace_id(sessionId, promptId)`` (its
    records carry the parent's ids), under the span the parent's fold gives the ``Agent`` call that started it."""
    call = seed.get("tool_use_id")
    session_id = view.session_id or ""
    return Rooted("claude-code.subagent", f"subagent/{view.id}", view.time_ns, NO_DATA, None, view.offset,
                  view.end_offset, view.dropped, session_id=view.session_id, prompt_key=prompt_id,
                  agent_key=seed.get("agent_id") or view.agent_id or view.id,
                  parent_span_id=ids.span_id(session_id, "tool", call, call) if call else 0,
                  task_call_id=call, name=seed.get("agent_type"), description=seed.get("description"),
                  content=view.plain_text or None)  # fmt: skip


def is_subagent_file(path: Path) -> bool:
    # On the path's text (every log's fold asks): pathlib's name and parent build their parts on each call.
    folder, name = os.path.split(path)
    return name.startswith("agent-") and name.endswith(".jsonl") and os.path.basename(folder) == "subagents"


def subagent_seed(path: Path) -> dict[str, Any]:
    """What a sub-agent's file needs from beside it to be rooted: its ``.meta.json`` (the tool call that started it,
    its type and description) and its agent id (the file's name)."""
    meta = read_meta(path)
    return {
        "agent_id": path.name[len("agent-") : -len(".jsonl")],
        "tool_use_id": meta.tool_use_id if meta is not None else None,
        "agent_type": meta.agent_type if meta is not None else None,
        "description": meta.description if meta is not None else None,
    }
