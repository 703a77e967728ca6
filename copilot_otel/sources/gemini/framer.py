"""Gemini CLI's records as the agent loop's inputs: a small pure state machine after the reader.

:class:`GeminiFramer` turns the views of :mod:`.gemini` (in the order written) into the neutral events of
:mod:`copilot_otel.loop.neutral`, folded by :data:`~copilot_otel.loop.neutral.NEUTRAL` with the same handlers as
Copilot CLI's events. Where Gemini's loop differs (the numbers are those of ``docs/other-agents.md``):

* **The replace-by-id rule.** A message line whose ``id`` was written before replaces it: the CLI writes a gemini
  reply at the end of its stream and again, whole, when its tool calls end (and when its tokens come late). The
  framer never emits a model call twice: a reply's call (its turn, usage and answer) is emitted at its *first*
  copy, whose timestamp, tokens, model and text the later copies repeat unchanged; a later copy adds only what is
  new in it: the tool calls not yet begun (their requests, as a second answer of the same, still open, model call:
  the loop adds them to it, counts no tokens twice), the ends not yet seen (a call whose ``status`` is final), the
  usage if the first copy had none. Nothing waits for a later line, so the last reply of a log is complete at its
  own line (live and replay alike), and the framer holds no reply back.
* A turn per reply (3): it begins at the reply's first copy, dated by the record before it (the prompt or the tool
  results it answers: the log times no request, 6), and ends when the next message shows it is over (the next
  reply, a prompt, the CLI's note), dated by its own last moment (its reply, its last tool's end, the tool results
  sent back), not by that next message.
* Tokens to one meaning (4): input **includes** the cache's and the tool-use prompt's (``input + tool``), cache
  read ``cached`` (no cache write is reported: unknown), output **includes** the thoughts (``output +
  thoughts``; reasoning apart, as ``thoughts``).
* A tool's end (5) is its ``toolCalls`` entry's ``status``: ``success`` ok (a shell command failed when its output
  says ``Exit Code: N``, N not 0), ``error`` failed, ``cancelled`` failed as cancelled (unrecorded). The ``user``
  record of ``functionResponse`` parts that follows ends only a call the reply did not (never, as recorded).
* The CLI's own note (9) ``System: Potential loop detected…`` (its loop detection stops a prompt at the 5th
  identical call) is no prompt: it ends the open turn.
* A prompt ends at its final answer (:class:`~copilot_otel.loop.neutral.PromptEnded`, complete): a reply with
  text that asks for no tool. Its first copy cannot say so (the tool calls of a reply are written only when they
  end, in its later copy), so the end is held: a later copy with tool calls cancels it (the loop went on); the
  next prompt, or the log's end (:meth:`GeminiFramer.close`: replay's end of file, the daemon's close of a quiet
  log), ends the prompt there, dated at the answer. A reply with neither text nor a written tool call (the CLI
  stopped while its tool ran: nothing of the call is written) ends nothing: that prompt stays incomplete.
* ``$set`` lines are metadata; a ``$set`` of ``messages`` restates the conversation (start, resume, compression)
  and is no new work. A second header line (``--resume``) is the same session; the prompt it brings opens as any
  prompt does. ``$rewindTo`` is not read (unrecorded).

Loop rule C: a prompt is keyed by its ``user`` message's ``id``, so its trace is ``trace_id(sessionId, id)``.

Loop rule A: a sub-agent's log (``chats/<parent session id>/<agent id>.jsonl``) is folded alone, rooted under the
parent's ``invoke_agent`` tool span. Its own log does not say which call started it, nor in which prompt; the
parent's ``invoke_agent`` call names the sub-agent (``agentId``) once it has ended. :func:`seed` reads that from
the parent's log when the fold starts (:func:`~copilot_otel.sources.gemini.reader.spawn_of`). A fold that starts before
the parent's call has ended (live) finds no call: it roots in the trace of the prompt the parent runs then (its
own), under the root span of that prompt (the main agent's, not its ``invoke_agent`` call's). Its task is its first ``user`` message; its successful
``complete_task`` call ends it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...loop.neutral import (
    NEUTRAL,
    NO_DATA,
    Answered,
    CallUsage,
    PromptSubmitted,
    Rooted,
    RootEnded,
    SessionBegan,
    SubagentDone,
    ToolBegan,
    ToolEnded,
    TurnBegan,
    TurnEnded,
    end_held_at,
    prompt_end,
)
from ...model import ids
from ...model.inputs import Context, Event, ToolRequest, Usage
from .. import LoopSource, ToolOutcome
from .reader import (
    COMPLETE_TASK_TOOL,
    SOURCE,
    GeminiMessage,
    Header,
    Message,
    ToolCallRecord,
    UserKind,
    UserMessage,
    project_root,
    read_line,
    spawn_of,
    subagent_log,
)

__all__ = ["GEMINI", "PROVIDER", "GeminiFramer", "seed"]

# The provider of every model call Gemini CLI makes with an API key (gen_ai.provider.name of the semantic
# conventions: the Gemini API; Vertex AI would be gcp.vertex_ai, which the log does not tell apart).
PROVIDER = "gcp.gemini"
PRODUCER = "gemini"
# How many ended replies the framer remembers, so that a late copy of one is not a new call.
_DONE_KEPT = 8
_MESSAGE_CHARS = 200


def _first_line(text: str | None) -> str | None:
    if not text:
        return None
    line = text.strip().split("\n", 1)[0].strip()
    return line[:_MESSAGE_CHARS] or None


class GeminiFramer:
    """One Gemini CLI log's records → the loop's neutral events (see the module docstring).

    Pure: it reads only the views it is given, in order, and keeps only what the next record needs (the open
    prompt and reply, which of its tool calls began and ended, the last record's time), all in :meth:`snapshot`.

    Args:
        state: A :meth:`snapshot` to resume from.
    """

    __slots__ = (
        "began",
        "cwd",
        "done",
        "ended",
        "ending",
        "last_ns",
        "prompt_id",
        "prompt_ns",
        "seed",
        "started",
        "turn",
        "turn_last_ns",
        "usage_sent",
    )

    def __init__(self, state: Mapping[str, Any] | None = None) -> None:
        s = state or {}
        seed_ = dict(s["seed"]) if isinstance(s.get("seed"), Mapping) else {}
        # The project folder read beside a session's log (its ``.project_root``): where the session ran.
        cwd = seed_.pop("project_root", None) or s.get("cwd")
        self.cwd: str | None = cwd if isinstance(cwd, str) else None
        # A sub-agent's spawn, read from its parent's log (rule A); ``None``: a session's own log.
        self.seed: dict[str, Any] | None = seed_ or None
        self.started: bool = bool(s.get("started", False))
        self.prompt_id: str | None = s.get("prompt_id")
        self.prompt_ns: int = int(s.get("prompt_ns", 0))
        self.turn: str | None = s.get("turn")  # the open reply's id
        self.turn_last_ns: int = int(s.get("turn_last_ns", 0))
        self.usage_sent: bool = bool(s.get("usage_sent", False))
        self.began: list[str] = list(s.get("began", ()))  # the open reply's calls begun
        self.ended: list[str] = list(s.get("ended", ()))  # … and ended
        self.done: list[str] = list(s.get("done", ()))  # the last replies ended
        self.last_ns: int = int(s.get("last_ns", 0))
        # The open prompt's final answer, once a reply looks like one: its end, held (the module docstring).
        ending = s.get("ending")
        self.ending: dict[str, Any] | None = dict(ending) if isinstance(ending, Mapping) else None

    def close(self) -> list[Event]:
        """The log's content is over: a prompt whose last reply was an answer ended there. Nothing else is held:
        every reply is complete at its own line (the module docstring)."""
        out: list[Event] = []
        self._end_prompt(out)
        return out

    def snapshot(self) -> dict[str, Any]:
        """The framer's state, for a checkpoint's context (plain JSON values)."""
        return {
            "seed": self.seed,
            "started": self.started,
            "prompt_id": self.prompt_id,
            "prompt_ns": self.prompt_ns,
            "turn": self.turn,
            "turn_last_ns": self.turn_last_ns,
            "usage_sent": self.usage_sent,
            "began": list(self.began),
            "ended": list(self.ended),
            "done": list(self.done),
            "last_ns": self.last_ns,
            "ending": dict(self.ending) if self.ending is not None else None,
            **({"cwd": self.cwd} if self.cwd else {}),
        }

    def frame(self, view: Event) -> list[Event]:
        """The loop's events for one record (often none)."""
        out: list[Event] = []
        cls = view.__class__
        if cls is GeminiMessage:
            self._reply(view, out)  # type: ignore[arg-type]  # checked by class
        elif cls is UserMessage:
            self._user(view, out)  # type: ignore[arg-type]
        elif cls is Header:
            self._header(view, out)  # type: ignore[arg-type]
        if isinstance(view, Message) and view.time_ns:
            self.last_ns = view.time_ns
        return out

    # ------------------------------------------------------------------ records
    def _header(self, view: Header, out: list[Event]) -> None:
        if self.started:
            return  # a resume's header: the same session
        self.started = True
        if view.subagent or self.seed is not None:
            return  # a sub-agent's log is no session of its own (rule A)
        out.append(
            SessionBegan("gemini.session", f"session/{view.session_id}", view.time_ns, NO_DATA, None, view.offset,
                         view.end_offset, view.dropped, session_id=view.session_id, producer=PRODUCER,
                         start_time=None, context=Context(self.cwd, None, None, None, None) if self.cwd else None)
        )  # fmt: skip

    def _user(self, view: UserMessage, out: list[Event]) -> None:
        kind = view.kind
        if kind is UserKind.TOOL_RESULTS:
            self._results(view, out)
            return
        if view.id == self.prompt_id:
            return  # a copy of the prompt
        self._end_turn(view, out)
        self._end_prompt(out)  # the prompt before ended at its answer
        if kind is UserKind.HARNESS:
            return  # the CLI's note: the prompt is over, no new one
        self.prompt_id, self.prompt_ns = view.id, view.time_ns
        seed_ = self.seed
        if seed_ is not None:
            if seed_.get("rooted"):
                return  # a sub-agent roots once
            seed_["rooted"] = True
            parent, call = seed_.get("parent_session_id"), seed_.get("call_id")
            out.append(
                Rooted("gemini.subagent", f"subagent/{view.id}", view.time_ns, NO_DATA, None, view.offset,
                       view.end_offset, view.dropped, session_id=parent,
                       prompt_key=seed_.get("prompt_id") or view.id, agent_key=seed_.get("agent_id") or view.id,
                       parent_span_id=_spawn_parent(parent, call, seed_.get("prompt_id")),
                       task_call_id=call, name=seed_.get("agent_name"), content=view.plain_text or None)
            )  # fmt: skip
            return
        out.append(
            PromptSubmitted("gemini.prompt", view.id, view.time_ns, NO_DATA, None, view.offset, view.end_offset,
                            view.dropped, content=view.plain_text or None)
        )  # fmt: skip

    def _results(self, view: UserMessage, out: list[Event]) -> None:
        """The tool results sent back: the open reply's tools end here at the latest."""
        if self.turn is None:
            return
        for response in view.function_responses:
            call_id = response.id
            if call_id is None or call_id not in self.began or call_id in self.ended:
                continue
            self.ended.append(call_id)
            failed = response.error is not None
            out.append(
                ToolEnded("gemini.tool_result", f"{view.id}/{call_id}", view.time_ns, NO_DATA, None, view.offset,
                          view.end_offset, view.dropped, call_id=call_id, success=not failed,
                          error_message=_first_line(response.error) if failed else None,
                          result=response.output or response.error)
            )  # fmt: skip
        self.turn_last_ns = max(self.turn_last_ns, view.time_ns)

    def _reply(self, view: GeminiMessage, out: list[Event]) -> None:
        tokens = view.tokens
        calls = view.tool_calls
        if view.id == self.turn:
            self._usage(view, out)  # a later copy: only what is new in it
            self._tools(view, calls, out, again=True)
            return
        if view.id in self.done:
            return  # a late copy of a reply already ended
        if tokens is None and view.model is None and not calls:
            return  # the CLI's own record of an empty stream: no model call (unrecorded)
        self._end_turn(view, out)
        self.ending = None  # another call: the reply before was no final answer
        t = view.time_ns
        start = self.last_ns if self.last_ns and self.prompt_ns <= self.last_ns <= t else t
        self.turn, self.turn_last_ns, self.usage_sent = view.id, t, False
        self.began, self.ended = [], []
        out.append(
            TurnBegan("gemini.turn", f"turn/{view.id}", start, NO_DATA, None, view.offset, view.end_offset,
                      view.dropped, turn_id=view.id)
        )  # fmt: skip
        self._usage(view, out)
        text = view.plain_text
        out.append(
            Answered("gemini.reply", view.id, t, NO_DATA, None, view.offset, view.end_offset, view.dropped,
                     turn_id=view.id, model=view.model, content=text or None, reasoning_text=view.reasoning_text,
                     tool_requests=_requests(calls))
        )  # fmt: skip
        self._tools(view, calls, out, again=False)
        if not calls and text and self.seed is None and self.prompt_id is not None:
            self.ending = end_held_at(view)

    def _end_prompt(self, out: list[Event]) -> None:
        """The held final answer ends its prompt, at the answer."""
        ending = self.ending
        if ending is None:
            return
        self.ending = None
        out.append(prompt_end("gemini.prompt_end", ending))

    def _usage(self, view: GeminiMessage, out: list[Event]) -> None:
        tokens = view.tokens
        if tokens is None or self.usage_sent:
            return
        self.usage_sent = True
        usage = Usage(
            tokens.input + tokens.tool, tokens.output + tokens.thoughts, tokens.cached, None, None, 0.0, view.model,
            None, None, None, None, None, PROVIDER, tokens.thoughts,
        )  # fmt: skip
        out.append(
            CallUsage("gemini.usage", f"usage/{view.id}", view.time_ns, NO_DATA, None, view.offset, view.end_offset,
                      view.dropped, usage=usage)
        )  # fmt: skip

    def _tools(
        self, view: GeminiMessage, calls: tuple[ToolCallRecord, ...], out: list[Event], *, again: bool
    ) -> None:
        new = [c for c in calls if c.id is not None and c.id not in self.began]
        if new:
            self.ending = None  # the reply asked for tools: the loop goes on
        if new and again:
            # The requests of the open call, which its first copy could not list: the same model call.
            out.append(
                Answered("gemini.reply", f"{view.id}/requests", view.time_ns, NO_DATA, None, view.offset,
                         view.end_offset, view.dropped, turn_id=view.id, model=view.model,
                         tool_requests=_requests(tuple(new)))
            )  # fmt: skip
        for call in new:
            call_id: str = call.id  # type: ignore[assignment]  # filtered above
            self.began.append(call_id)
            out.append(
                ToolBegan("gemini.tool_call", call_id, view.time_ns, NO_DATA, None, view.offset, view.end_offset,
                          view.dropped, call_id=call_id, name=call.name, arguments=call.args)
            )  # fmt: skip
        finished = False
        for call in calls:
            outcome = call.outcome
            if call.id is None or outcome is None or call.id not in self.began or call.id in self.ended:
                continue
            self.ended.append(call.id)
            t = call.time_ns or view.time_ns
            self.turn_last_ns = max(self.turn_last_ns, t)
            ok = outcome is ToolOutcome.OK
            message = None if ok else _first_line(call.error_message) or "tool failed"
            if outcome is ToolOutcome.INTERRUPTED:
                message = "cancelled"
            out.append(
                ToolEnded("gemini.tool_end", f"{view.id}/{call.id}", t, NO_DATA, None, view.offset, view.end_offset,
                          view.dropped, call_id=call.id, success=ok, error_message=message,
                          exit_code=call.exit_code, result=call.result_text)
            )  # fmt: skip
            finished = finished or (ok and call.name == COMPLETE_TASK_TOOL)
            if call.agent_id is not None:  # an invoke_agent call names its sub-agent once that has ended
                out.append(
                    SubagentDone("gemini.subagent_done", f"subagent-done/{view.id}/{call.id}", t, NO_DATA, None,
                                 view.offset, view.end_offset, view.dropped, log=call.agent_id)
                )  # fmt: skip
        if finished and self.seed is not None:
            # A sub-agent's complete_task: its work is done.
            end = self.turn_last_ns
            self._end_turn(view, out)
            out.append(
                RootEnded("gemini.subagent_end", f"subagent-end/{view.id}", end, NO_DATA, None, view.offset,
                          view.end_offset, view.dropped)
            )  # fmt: skip

    def _end_turn(self, view: Event, out: list[Event]) -> None:
        turn = self.turn
        if turn is None:
            return
        self.turn = None
        self.done = [*self.done[-(_DONE_KEPT - 1) :], turn]
        out.append(
            TurnEnded("gemini.turn_end", f"turn-end/{turn}", self.turn_last_ns, NO_DATA, None, view.offset,
                      view.end_offset, view.dropped, turn_id=turn)
        )  # fmt: skip

    def may_open(self, view: Event) -> bool:
        """Whether ``view`` may open a prompt while one is open: a user message other than the prompt's (the
        pipeline keeps the state before such a line for a restart)."""
        return view.__class__ is UserMessage and view.id != self.prompt_id


def _requests(calls: tuple[ToolCallRecord, ...]) -> tuple[ToolRequest, ...]:
    return tuple([ToolRequest(c.id, c.name, c.args) for c in calls])


def _spawn_parent(parent: str | None, call: str | None, prompt_id: str | None) -> int:
    """The span a sub-agent hangs under: its parent's ``invoke_agent`` call's; before that call has ended (live:
    the parent's log does not name the sub-agent yet), the root span of the prompt the parent runs, so the sub-agent
    is still inside that prompt's tree; 0 (a root) when the parent's log says neither."""
    if parent and call:
        return ids.span_id(parent, "tool", call, call)
    if parent and prompt_id:
        return ids.span_id(parent, "root", prompt_id)
    return 0


def seed(path: Path) -> dict[str, Any] | None:
    """What a log needs from beside it: a session's own log, the project folder it ran in (``project_root``, from
    its ``.project_root``; ``None`` when unknown); a sub-agent's log, the spawn its parent's log names, to be rooted
    (rule A)."""
    spawn = spawn_of(path)
    if spawn is None:
        root = project_root(path)
        return {"project_root": root} if root else None
    return {
        "parent_session_id": spawn.parent_session_id,
        "agent_id": spawn.agent_id,
        "call_id": spawn.call_id,
        "prompt_id": spawn.prompt_id,
        "agent_name": spawn.agent_name,
    }


# Gemini CLI's log through the loop: its reader, this framer and the neutral events' translator.
GEMINI = LoopSource(SOURCE, read_line, GeminiFramer, NEUTRAL, seed, subagent_log)
