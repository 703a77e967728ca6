"""Codex CLI's rollouts as the agent loop's inputs: a small pure state machine after the reader.

:class:`CodexFramer` turns the views of :mod:`.codex` (in the order written) into the neutral events of
:mod:`copilot_otel.loop.neutral`, which :data:`~copilot_otel.loop.neutral.NEUTRAL` folds with the same handlers as
Copilot CLI's events. Where Codex's loop differs from Copilot's, the difference is here (the numbers are those of
``docs/other-agents.md``):

3. a Codex "turn" (``task_started`` … ``task_complete`` / ``turn_aborted``) is our prompt; our turn is one model
   call (one ``token_usage_record``): the output items written before the record (assistant messages,
   ``function_call`` / ``custom_tool_call``) are that call's, the tool outputs after it its tools; the turn ends
   where the next call's first output item appears, or with the task;
4. tokens already have Copilot's meaning (OpenAI's ``input_tokens`` includes the cached ones): cache read
   (``cached_input_tokens``) and write apart, reasoning (``reasoning_output_tokens``) apart;
6. a model call lasts from the last record before its first output item to its ``token_usage_record`` (the log
   times no request); its tools start when it ends;
7. a call that asked for no tool is held back one record: followed by ``compacted`` it was the compaction's
   summarization, which the loop's compaction carries as its own model call (origin ``compaction``);
9. the CLI's own messages (``<environment_context>``, ``<subagent_notification>``, ``<turn_aborted>``, developer
   messages) are no prompt: the prompt is the task's first ``UserMessage`` item;
10. an interrupted tool (``aborted by user``) or ``turn_aborted`` is the loop's abort, which cancels what still
    runs; the command's ``CommandExecution`` written after ``turn_aborted`` changes nothing (tools end at their
    output, and the abort has ended every open one).

Also: denied (an execpolicy ``Rejected``) apart from failed (``ToolOutcome``); a task's end closes its prompt
(:class:`~copilot_otel.loop.neutral.PromptEnded`).

Loop rule C: a prompt is keyed by the task's ``turn_id`` (the envelope id of the prompt event), so its trace is
``trace_id(session, turn_id)``, which a sub-agent's rollout computes from its ``root_turn_id``.

Loop rule B: ``task_complete.error`` (no record of the failed request) is the loop's error, its kind
(``context_window_exceeded``, ``response_too_many_failed_attempts``) the error type unless an HTTP status is given;
the last turn is closed first, so the failed request gets no span.

Loop rule A, parent-emitted: the parent's ``spawn_agent`` item (``CollabAgentToolCall``) names the child thread:
:class:`~copilot_otel.loop.neutral.Spawned` opens the agent span under that tool call, with the id
``span_id(session, "agent", child thread)``; a ``wait`` / ``close_agent`` item saying the child ended, or the
``<subagent_notification>``, ends it. The child's rollout (``session_meta.parent_thread_id``) is folded alone:
rooted in the same trace (``root_turn_id``) under that same span id, it hands on no run of its own. The session
of both is the root thread's (``session_meta.session_id``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from ...loop.neutral import (
    NEUTRAL,
    NO_DATA,
    Aborted,
    Answered,
    CallUsage,
    Compacted,
    Failed,
    PromptEnded,
    PromptSubmitted,
    Rooted,
    RootEnded,
    SessionBegan,
    Spawned,
    SpawnEnded,
    SubagentDone,
    ToolBegan,
    ToolEnded,
    TurnBegan,
    TurnEnded,
)
from ...model import ids
from ...model.inputs import CompactionCall, Context, Event, ToolRequest, Usage
from .. import LoopSource, Source, ToolOutcome
from .reader import Compacted as CompactedRecord
from .reader import (
    FunctionCall,
    FunctionCallOutput,
    ItemCompleted,
    Message,
    SessionMeta,
    TaskComplete,
    TaskStarted,
    TokenCount,
    TokenUsage,
    TurnAborted,
    TurnContext,
    read_line,
    thread_log,
)

__all__ = ["CODEX", "PROVIDER", "CodexFramer"]

# The provider of every model call Codex makes (gen_ai.provider.name): the OpenAI Responses API.
PROVIDER = "openai"
# A failed tool's message is at most this long (the rest is the tool's output).
_MESSAGE_CHARS = 200
# Output items of a model call: the first one dates the call's start.
_OUTPUT_ITEMS = frozenset({"AgentMessage", "Reasoning"})
_REASONING = "response_item.reasoning"
_SPAWN = "spawn_agent"
_CLOSE = "close_agent"
_COMPLETED = "completed"


def _arguments(value: Any) -> Any:
    """A ``function_call``'s ``arguments`` (a JSON string) as the object it encodes; anything else as it is."""
    if isinstance(value, str) and value.startswith("{"):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def _failure(output: FunctionCallOutput, outcome: ToolOutcome) -> str | None:
    """A failed tool's message: the exit code a shell states, else the output's first line (at most 200
    characters); a denial only says so (its reason is the policy's text)."""
    if outcome is ToolOutcome.DENIED:
        return "denied by an execpolicy rule"
    if outcome is not ToolOutcome.FAILED:
        return None
    code = output.exit_code
    if code is not None:
        return f"Process exited with code {code}"
    line = output.plain_text.strip().split("\n", 1)[0].strip()
    return line[:_MESSAGE_CHARS] or "tool failed"


class CodexFramer:
    """One Codex rollout's records → the loop's neutral events (see the module docstring).

    Pure: it reads only the views it is given, in order, and keeps only what the next record needs (the task
    waiting for its prompt, the model call being written, a call held back, the turn open, the sub-agents still
    running), all in :meth:`snapshot`.

    Args:
        state: A :meth:`snapshot` to resume from.
    """

    __slots__ = (
        "aborted",
        "agents",
        "calls",
        "child",
        "held",
        "last_ns",
        "model",
        "open",
        "session_id",
        "start_ns",
        "task",
        "texts",
        "thread_id",
        "turn",
    )

    def __init__(self, state: Mapping[str, Any] | None = None) -> None:
        s = state or {}
        self.thread_id: str | None = s.get("thread_id")
        self.session_id: str | None = s.get("session_id")  # the root thread's
        child = s.get("child")
        self.child: dict[str, Any] | None = dict(child) if isinstance(child, Mapping) else None
        self.model: str | None = s.get("model")
        task = s.get("task")
        self.task: dict[str, Any] | None = (
            dict(task) if isinstance(task, Mapping) else None
        )  # waiting for its prompt
        self.open: bool = bool(s.get("open", False))  # a prompt (or a child's rooted work) is open
        self.aborted: bool = bool(s.get("aborted", False))
        self.last_ns: int = int(s.get("last_ns", 0))
        self.start_ns: int | None = s.get("start_ns")  # the call being written: its start, texts, tool calls
        self.texts: list[str] = list(s.get("texts", ()))
        self.calls: list[dict[str, Any]] = [dict(c) for c in s.get("calls", ())]
        held = s.get("held")
        self.held: dict[str, Any] | None = dict(held) if isinstance(held, Mapping) else None
        self.turn: str | None = s.get("turn")  # the response id of the open turn
        self.agents: list[str] = list(s.get("agents", ()))  # sub-agent threads started and not ended

    def snapshot(self) -> dict[str, Any]:
        """The framer's state, for a checkpoint's context (plain JSON values)."""
        return {
            "thread_id": self.thread_id, "session_id": self.session_id, "child": self.child, "model": self.model,
            "task": self.task, "open": self.open, "aborted": self.aborted, "last_ns": self.last_ns,
            "start_ns": self.start_ns, "texts": list(self.texts), "calls": [dict(c) for c in self.calls],
            "held": self.held, "turn": self.turn, "agents": list(self.agents),
        }  # fmt: skip

    def frame(self, view: Event) -> list[Event]:
        """The loop's events for one record (often none)."""
        out: list[Event] = []
        cls = view.__class__
        if self.held is not None and cls is not TokenCount:
            self._release(view, out)
            if cls is CompactedRecord:
                self._tick(view)
                return out
        if cls is ItemCompleted:
            self._item(view, out)  # type: ignore[arg-type]  # checked by class
        elif cls is FunctionCall:
            self._output(view, out)
            self.calls.append(self._call(view))  # type: ignore[arg-type]
        elif cls is Message:
            self._message(view, out)  # type: ignore[arg-type]
        elif cls is TokenUsage:
            self._usage(view, out)  # type: ignore[arg-type]
        elif cls is FunctionCallOutput:
            self._tool_end(view, out)  # type: ignore[arg-type]
        elif cls is TaskStarted:
            self._task_started(view, out)  # type: ignore[arg-type]
        elif cls is TaskComplete:
            self._task_end(view, out, view)  # type: ignore[arg-type]
        elif cls is TurnAborted:
            self._abort(view, view.reason or "user", out)  # type: ignore[attr-defined]
            self._task_end(view, out, None)
        elif cls is CompactedRecord:
            out.append(self._compacted(view, view.time_ns, None))
        elif cls is TurnContext:
            self.model = view.model or self.model  # type: ignore[attr-defined]
        elif cls is SessionMeta:
            self._session(view, out)  # type: ignore[arg-type]
        elif view.type == _REASONING:
            self._output(view, out)
        self._tick(view)
        return out

    def _tick(self, view: Event) -> None:
        if view.time_ns:
            self.last_ns = view.time_ns

    # ------------------------------------------------------------------ session, prompts
    def _session(self, view: SessionMeta, out: list[Event]) -> None:
        if self.thread_id is not None:
            return  # one session_meta per rollout; a resume writes none
        self.thread_id = view.thread_id or view.id
        self.session_id = view.session_id or view.parent_thread_id or self.thread_id
        parent = view.parent_thread_id
        if parent is not None:  # a sub-agent's rollout: no session of its own (rule A)
            self.child = {"parent": parent, "nickname": view.nickname}
            return
        out.append(
            SessionBegan("codex.session", f"session/{view.id}", view.time_ns, NO_DATA, None, view.offset,
                         view.end_offset, view.dropped, session_id=self.session_id, copilot_version=view.cli_version,
                         producer="codex", context=Context(view.cwd, None, None, view.branch, view.commit))
        )  # fmt: skip

    def _task_started(self, view: TaskStarted, out: list[Event]) -> None:
        if self.open:  # the previous task never ended (its process was killed): its work stopped where it was
            self._flush_output(view, out)
            self._end_turn(view, self.last_ns or view.time_ns, out)
            self.open = False  # the next prompt closes it there, as a Copilot prompt with no end
        self.task = {
            "turn_id": view.turn_id or view.id, "root_turn_id": view.root_turn_id, "time_ns": view.time_ns,
            "offset": view.offset, "end_offset": view.end_offset,
        }  # fmt: skip
        self.aborted = False

    def _open(self, view: Event, out: list[Event], content: Any = None) -> None:
        """The waiting task's prompt (rule C: keyed by its ``turn_id``), at its ``task_started``; a child's
        task roots its work under the parent's agent span (rule A)."""
        task = self.task
        if task is None:
            return
        self.task = None
        self.open = True
        turn_id: str = task["turn_id"]
        args = (task["time_ns"], NO_DATA, None, task["offset"], task["end_offset"], view.dropped)
        child = self.child
        if child is None:
            out.append(PromptSubmitted("codex.prompt", turn_id, *args, content=content))
            return
        session, thread = self.session_id or "", self.thread_id or ""
        out.append(
            Rooted("codex.subagent", f"subagent/{turn_id}", *args, session_id=session,
                   prompt_key=task.get("root_turn_id") or turn_id, agent_key=thread,
                   parent_span_id=ids.span_id(session, "agent", thread), name=child.get("nickname"),
                   content=content)
        )  # fmt: skip

    def _task_end(self, view: Event, out: list[Event], complete: TaskComplete | None) -> None:
        """The task ended (``task_complete``, or after an abort): its last turn closes, then (rule B) its error,
        then the prompt."""
        if self.task is not None:
            self._open(view, out)
        if not self.open:
            return
        self._flush_output(view, out)
        end = view.time_ns
        self._end_turn(view, self.last_ns or end, out)
        if complete is not None and (complete.error_kind is not None or complete.error_message is not None):
            out.append(
                Failed("codex.error", f"error/{view.id}", end, NO_DATA, None, view.offset, view.end_offset,
                       view.dropped, error_type=complete.error_kind or "error", message=complete.error_message,
                       status_code=complete.error_status)
            )  # fmt: skip
        self._finish(view, end, out)

    def _finish(self, view: Event, end: int, out: list[Event]) -> None:
        self.open = False
        cls = PromptEnded if self.child is None else RootEnded
        out.append(
            cls("codex.task_end", f"task-end/{view.id}", end, NO_DATA, None, view.offset, view.end_offset)
        )

    # ------------------------------------------------------------------ model calls
    def _output(self, view: Event, out: list[Event]) -> None:
        """An output item of a model call: the first one dates the call and ends the previous turn."""
        if self.task is not None:
            self._open(view, out)
        if self.start_ns is None:
            self.start_ns = self.last_ns or view.time_ns
            self._end_turn(view, self.start_ns, out)

    def _message(self, view: Message, out: list[Event]) -> None:
        if view.role == "assistant":
            self._output(view, out)
            text = view.plain_text
            if text:
                self.texts.append(text)
            return
        notified = view.notified_thread
        if notified is not None:
            self._spawn_ended(view, notified[0], notified[1], out)

    def _call(self, view: FunctionCall) -> dict[str, Any]:
        return {"call_id": view.call_id, "name": view.name, "arguments": _arguments(view.arguments)}

    def close(self) -> list[Event]:
        """A rollout cut right after a call that asked for no tool (held back one record: was it the
        compaction's?): nothing follows, so it was an answer."""
        out: list[Event] = []
        if self.held is not None:
            call, self.held = self.held, None
            end = Event("codex.end", f"end/{call['id']}", call["time_ns"], NO_DATA, None, call["offset"],
                        call["end_offset"])  # fmt: skip
            self._emit_call(end, call, out)
        return out

    def _usage(self, view: TokenUsage, out: list[Event]) -> None:
        """One model call: emitted now when it asked for tools, else held back one record (compaction's?)."""
        if self.task is not None:
            self._open(view, out)
        start = self.start_ns if self.start_ns is not None else (self.last_ns or view.time_ns)
        self._end_turn(view, start, out)
        u = view.usage
        call = {
            "id": view.response_id or view.id, "time_ns": view.time_ns, "start_ns": min(start, view.time_ns),
            "offset": view.offset, "end_offset": view.end_offset, "texts": self.texts, "calls": self.calls,
            "usage": None if u is None else [u.input_tokens, u.output_tokens, u.cached_input_tokens,
                                             u.cache_write_input_tokens, u.reasoning_output_tokens],
        }  # fmt: skip
        self.start_ns, self.texts, self.calls = None, [], []
        if call["calls"]:
            self._emit_call(view, call, out)
        else:
            self.held = call

    def _release(self, view: Event, out: list[Event]) -> None:
        """The record after a held call says what it was: ``compacted``, the summarization; else an answer."""
        call, self.held = self.held, None
        assert call is not None
        if view.__class__ is CompactedRecord:
            duration = (call["time_ns"] - call["start_ns"]) / 1e6
            u = call["usage"] or [None] * 5
            out.append(
                self._compacted(view, call["time_ns"],
                                CompactionCall(u[0], u[1], u[2], u[3], self.model, duration))
            )  # fmt: skip
        else:
            self._emit_call(view, call, out)

    def _emit_call(self, view: Event, call: Mapping[str, Any], out: list[Event]) -> None:
        """A model call's turn: its start, usage, answer and tool requests; the tools start as it ends."""
        rid: str = call["id"]
        t, start = call["time_ns"], call["start_ns"]
        where = (NO_DATA, None, call["offset"], call["end_offset"], view.dropped)
        out.append(TurnBegan("codex.turn", f"turn/{rid}", start, *where, turn_id=rid))
        u = call["usage"]
        if u is not None:
            usage = Usage(u[0], u[1], u[2], u[3], None, 0.0, self.model, rid, None, None, None, None, PROVIDER,
                          u[4])  # fmt: skip
            out.append(CallUsage("codex.usage", f"usage/{rid}", t, *where, usage=usage))
        calls = call["calls"]
        requests = tuple([ToolRequest(c["call_id"], c["name"], c["arguments"]) for c in calls])
        out.append(
            Answered("codex.answer", f"answer/{rid}", t, *where, turn_id=rid, model=self.model, api_call_id=rid,
                     content="\n".join(call["texts"]) or None, tool_requests=requests)
        )  # fmt: skip
        self.turn = rid
        for c in calls:
            call_id = c["call_id"]
            out.append(
                ToolBegan("codex.tool", call_id or f"tool/{rid}", t, *where, call_id=call_id, name=c["name"],
                          arguments=c["arguments"])
            )  # fmt: skip
        if not calls:  # an answer: the turn ends with it
            self._end_turn(view, t, out)

    def _flush_output(self, view: Event, out: list[Event]) -> None:
        """Output items with no ``token_usage_record`` (the call was cut or failed, or its record is unreadable):
        a turn with no usage. Without tool calls it has no answer either, which the abort or error that follows
        settles; with some, the model did answer: they are its requests, and their tools start (their outputs may
        follow)."""
        if self.start_ns is None:
            return
        start, calls = self.start_ns, self.calls
        if calls:
            call = {
                "id": f"cut/{view.id}", "time_ns": max(self.last_ns, start), "start_ns": start,
                "offset": view.offset, "end_offset": view.end_offset, "texts": self.texts, "calls": calls,
                "usage": None,
            }  # fmt: skip
            self.start_ns, self.texts, self.calls = None, [], []
            self._emit_call(view, call, out)
            return
        self.start_ns, self.texts = None, []
        rid = f"cut/{view.id}"
        out.append(
            TurnBegan("codex.turn", f"turn/{rid}", start, NO_DATA, None, view.offset, view.end_offset, view.dropped,
                      turn_id=None)
        )  # fmt: skip
        self.turn = rid

    def _end_turn(self, view: Event, time_ns: int, out: list[Event]) -> None:
        if self.turn is None:
            return
        rid, self.turn = self.turn, None
        out.append(
            TurnEnded("codex.turn_end", f"turn-end/{rid}", time_ns, NO_DATA, None, view.offset, view.end_offset,
                      view.dropped, turn_id=rid)
        )  # fmt: skip

    def _compacted(self, view: Event, time_ns: int, call: CompactionCall | None) -> Compacted:
        return Compacted(
            "codex.compact", view.id, time_ns, NO_DATA, None, view.offset, view.end_offset, view.dropped,
            call=call,
        )  # fmt: skip

    # ------------------------------------------------------------------ tools, aborts, sub-agents
    def _tool_end(self, view: FunctionCallOutput, out: list[Event]) -> None:
        if self.calls:  # a tool's output while its call is still being written: its record was unreadable
            self._flush_output(view, out)
        outcome = view.outcome
        if outcome is ToolOutcome.INTERRUPTED:
            self._abort(view, "user", out)  # the abort cancels the tool, as Copilot's abort ends open work
            return
        message = _failure(view, outcome)
        out.append(
            ToolEnded("codex.tool_output", view.id, view.time_ns, NO_DATA, None, view.offset, view.end_offset,
                      view.dropped, call_id=view.call_id, success=outcome is ToolOutcome.OK,
                      error_code="denied" if outcome is ToolOutcome.DENIED else None, error_message=message,
                      exit_code=view.exit_code, result=view.plain_text or None)
        )  # fmt: skip

    def _abort(self, view: Event, reason: str, out: list[Event]) -> None:
        if self.aborted or not (self.open or self.task is not None):
            return
        if self.task is not None:
            self._open(view, out)
        self._flush_output(view, out)
        self.aborted = True
        out.append(
            Aborted("codex.abort", f"abort/{view.id}", view.time_ns, NO_DATA, None, view.offset, view.end_offset,
                    view.dropped, reason=reason)
        )  # fmt: skip

    def _item(self, view: ItemCompleted, out: list[Event]) -> None:
        kind = view.item_type
        if kind == "UserMessage":
            if self.task is not None:
                self._open(view, out, view.plain_text or None)
        elif kind in _OUTPUT_ITEMS:
            self._output(view, out)
        elif kind == "CollabAgentToolCall":
            self._collab(view, out)

    def _collab(self, view: ItemCompleted, out: list[Event]) -> None:
        """``spawn_agent`` starts the sub-agents it names; a ``wait`` or ``close_agent`` that saw one end, ends it."""
        if view.tool == _SPAWN:
            names = view.nicknames
            for thread in view.receiver_thread_ids:
                if thread in self.agents:
                    continue
                self.agents.append(thread)
                out.append(
                    Spawned("codex.spawn", f"spawn/{thread}", view.time_ns, NO_DATA, None, view.offset,
                            view.end_offset, view.dropped, agent_key=thread, task_call_id=view.item_id,
                            name=names.get(thread), model=view.model, content=view.prompt)
                )  # fmt: skip
            return
        states = view.final_states
        for thread in view.receiver_thread_ids:
            end = states.get(thread) or (_COMPLETED if view.tool == _CLOSE else None)
            if end is not None:
                self._spawn_ended(view, thread, end, out)

    def _spawn_ended(self, view: Event, thread: str, end: str, out: list[Event]) -> None:
        if thread not in self.agents:
            return
        self.agents.remove(thread)
        out.append(
            SpawnEnded("codex.spawn_end", f"spawn-end/{thread}", view.time_ns, NO_DATA, None, view.offset,
                       view.end_offset, view.dropped, agent_key=thread,
                       error_type=None if end == _COMPLETED else end)
        )  # fmt: skip
        out.append(
            SubagentDone("codex.subagent_done", f"subagent-done/{thread}", view.time_ns, NO_DATA, None,
                         view.offset, view.end_offset, view.dropped, log=thread)
        )  # fmt: skip  # its rollout holds its calls

    def may_open(self, view: Event) -> bool:
        """Whether ``view`` may open a prompt while one is open: any record once a task waits for its prompt, and
        the task's start (the pipeline keeps the state before such a line for a restart)."""
        return self.task is not None or view.__class__ is TaskStarted


# Codex CLI's rollout through the loop: its reader, this framer and the neutral events' translator (a rollout
# needs nothing from beside it: a sub-agent's says whose it is in its first record).
CODEX = LoopSource(Source.CODEX, read_line, CodexFramer, NEUTRAL, subagent_log=thread_log)
