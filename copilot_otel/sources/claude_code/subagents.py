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
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...loop.neutral import NO_DATA, PromptSubmitted, Rooted, SubagentDone
from ...model import ids
from ...model.inputs import Event
from ..sessions import stays_inside
from .reader import SystemRecord, UserRecord, read_meta

__all__ = ["Background", "rooted", "subagent_log", "subagent_seed"]

# The source of a background task's report, injected into the prompt that started the task.
_NOTIFICATION_SOURCE = "task-notification"
# An agent id as Claude Code writes it (``a7573f4966d31bc03``): a sub-agent's log is named by it.
_AGENT_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")


class Background:
    """The open prompt's background sub-agents not reported back yet (how many, and the ids of those whose launch
    named them), its other ``promptId`` s (its tasks' reports), and a companion record's ``promptId`` waiting for
    the record it goes with (keys ``background``, ``running``, ``aliases``, ``companion`` of the framer's
    snapshot)."""

    __slots__ = ("aliases", "background", "companion", "running")

    def __init__(self, state: Mapping[str, Any]) -> None:
        self.background: int = int(state.get("background", 0))
        self.running: list[str] = [a for a in state.get("running", ()) if isinstance(a, str)]
        self.aliases: list[str] = list(state.get("aliases", ()))
        self.companion: str | None = state.get("companion")

    def snapshot(self, into: dict[str, Any]) -> None:
        into["background"] = self.background
        # written only when there is one: a checkpoint of before it had the key reads back the same
        if self.running:
            into["running"] = list(self.running)
        into["aliases"] = list(self.aliases)
        into["companion"] = self.companion

    def reset(self, view: UserRecord, out: list[Event]) -> None:
        """A new prompt opens: nothing of it runs in the background yet. A sub-agent of the prompt before that has
        not reported (the user went on before it finished) is done as far as that prompt can tell: its log is read
        for that prompt's cost now, as far as it got, and said still running."""
        for agent in self.running:
            out.append(_done(view, agent, running=True))
        self.aliases, self.companion, self.background, self.running = [], None, 0, []

    def launched(self, view: UserRecord, out: list[Event]) -> None:
        """An ``Agent`` call's result: when it says its sub-agent runs on in the background, the prompt waits for
        that sub-agent's report; otherwise the sub-agent it names is done (its log is read for its calls)."""
        agent = view.subagent_id
        if view.subagent_launched:
            self.background += 1
            if agent is not None and agent not in self.running:
                self.running.append(agent)
        elif agent is not None:
            out.append(_done(view, agent))

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
        agent = view.notified_task_id
        if agent is not None:
            if agent in self.running:
                self.running.remove(agent)
            out.append(_done(view, agent))


def _done(view: UserRecord, agent: str, running: bool = False) -> SubagentDone:
    """The sub-agent ``agent`` is done (or still ``running`` when its prompt ended): its own log holds its calls
    (:func:`subagent_log` finds it)."""
    return SubagentDone("claude-code.subagent_done", f"subagent-done/{view.id}/{agent}", view.time_ns, NO_DATA,
                        None, view.offset, view.end_offset, view.dropped, log=agent, running=running)  # fmt: skip


def subagent_log(parent: Path, agent_id: str) -> Path | None:
    """The log of the sub-agent ``agent_id`` started by the log ``parent``: ``<session>/subagents/agent-<id>.jsonl``
    beside a session's log, the same folder beside a sub-agent's own; ``None`` for an id no agent has (the id is
    the log's data: never a way into another folder), or a link out of the parent's folder."""
    if _AGENT_ID.fullmatch(agent_id) is None:
        return None
    folder = parent.parent if is_subagent_file(parent) else parent.parent / parent.stem / "subagents"
    path = folder / f"agent-{agent_id}.jsonl"
    return path if stays_inside(path, os.path.realpath(parent.parent)) else None


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
