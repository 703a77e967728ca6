"""Claude Code's records as the agent loop's inputs: a small pure state machine after the reader.

:class:`ClaudeCodeFramer` turns the views of :mod:`.claude_code` (in the order written) into the neutral events of
:mod:`copilot_otel.loop.neutral`, which :data:`~copilot_otel.loop.neutral.NEUTRAL` folds with the same handlers as
Copilot CLI's events. Where Claude Code's loop differs from Copilot's, the difference is here (the numbers are
those of ``docs/other-agents.md``):

1. a model reply is written as one ``assistant`` record per content block: one model call per ``message.id``,
   its ``message.usage`` read once (every record repeats it);
2. a ``<synthetic>`` assistant record is no model call (one with ``isApiErrorMessage`` is an error, rule B);
3. a turn per model call: it begins at the call (dated by the record its first block answers, ``parentUuid``)
   and ends where the next call begins, at the prompt's end, or at the answer itself when the model asked for
   no tool; a call's tools start once its last block is read (the first record that is not another block of it),
   so a parallel call's later ``tool_use`` blocks are among the call's tool requests too (the loop hands the call
   on at its first tool's start);
4. tokens to Copilot's meaning: input **includes** the cache's (``input_tokens + cache_creation_input_tokens +
   cache_read_input_tokens``), cache read and write apart;
5. a tool result is ok, failed or denied (``ToolResult.outcome``; denied: Copilot's ``error.code`` ``denied``);
6. a model call lasts from the record its first block answers to that block (the log times no request);
7. (Codex only);
8. ``/compact`` is a prompt with no model call; ``compact_boundary`` is the loop's compaction, put in the prompt
   typed just before it (held until that prompt's first record names it);
9. the CLI's own records (``isMeta``, compaction summaries, ``<command-name>`` records, ``[Request interrupted
   by user…]``) are content of the prompt, never a prompt;
10. an interrupted tool (``ToolOutcome.INTERRUPTED``) or the interrupt note is the loop's abort, which cancels
    what still runs.

Loop rule C: a prompt is keyed by Claude Code's own ``promptId`` (the envelope id of the prompt event), so its
trace is ``trace_id(sessionId, promptId)``, which a sub-agent's file can compute too.

Loop rule A: a sub-agent's file (``<session>/subagents/agent-<id>.jsonl``) is folded alone, rooted under the
parent's ``Agent`` tool span: :func:`seed` reads the ``.meta.json`` beside it (the ``toolUseId`` that started it),
and the framer opens the file's work with :class:`~copilot_otel.loop.neutral.Rooted` instead of a prompt: in the
trace ``trace_id(sessionId, promptId)`` (its records carry the parent's ids), under the span
``span_id(sessionId, "tool", toolUseId, toolUseId)`` that the parent's fold gives that call (the framer makes a
tool call's id its start event's id). Its final answer ends it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .. import events as ev
from .. import ids
from ..events import Event
from ..loop.neutral import (
    NEUTRAL,
    NO_DATA,
    Aborted,
    Answered,
    CallUsage,
    Compacted,
    Failed,
    PromptSubmitted,
    Rooted,
    RootEnded,
    SessionBegan,
    ToolBegan,
    ToolEnded,
    TurnBegan,
    TurnEnded,
)
from . import LoopSource, Source, ToolOutcome
from .claude_code import (
    AssistantRecord,
    CompactBoundary,
    QueueOperation,
    Record,
    UserKind,
    UserRecord,
    _text_of,
    read_line,
    read_meta,
)

__all__ = ["CLAUDE_CODE", "PROVIDER", "ClaudeCodeFramer", "seed"]

# The provider of every model call Claude Code makes (gen_ai.provider.name of the semantic conventions).
PROVIDER = "anthropic"
# Anthropic's stop reasons in the semantic conventions' finish reasons (others are kept as they are).
_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls", "max_tokens": "length"}
# Stop reasons after which the model asked for nothing more: its turn ends with the answer.
_FINAL = frozenset({"end_turn", "stop_sequence", "max_tokens", "refusal"})
# A failed tool's message is the first line of its result, at most this long (the rest is the tool's output).
_MESSAGE_CHARS = 200
_EXIT_CODE = "Exit code "


def _first_line(text: str) -> str | None:
    line = text.strip().split("\n", 1)[0].strip()
    return line[:_MESSAGE_CHARS] or None


def _exit_code(message: str | None) -> int | None:
    """``Exit code N`` (a Bash call that failed) → N."""
    if message is None or not message.startswith(_EXIT_CODE):
        return None
    digits = message[len(_EXIT_CODE) :].split(None, 1)[0] if message[len(_EXIT_CODE) :] else ""
    return int(digits) if digits.lstrip("-").isdigit() else None


class ClaudeCodeFramer:
    """One Claude Code session log's records → the loop's neutral events (see the module docstring).

    Pure: it reads only the views it is given, in order, and keeps only what the next record needs (the prompt
    and model call open, whether the prompt was aborted, the last record's id and time, a compaction waiting for
    its prompt), all in :meth:`snapshot`.

    Args:
        state: A :meth:`snapshot` to resume from.
    """

    __slots__ = (
        "aborted",
        "held",
        "last_ns",
        "last_uuid",
        "message_id",
        "prompt_id",
        "prompt_ns",
        "queued",
        "seed",
        "started",
        "starts",
        "turn_open",
    )

    def __init__(self, state: Mapping[str, Any] | None = None) -> None:
        s = state or {}
        self.started: bool = bool(s.get("started", False))
        seed_ = s.get("seed")
        self.seed: dict[str, Any] | None = dict(seed_) if isinstance(seed_, Mapping) else None
        self.prompt_id: str | None = s.get("prompt_id")
        self.prompt_ns: int = int(s.get("prompt_ns", 0))
        self.queued: str | None = s.get("queued")  # the prompt as typed, until its first record
        self.message_id: str | None = s.get("message_id")
        self.turn_open: bool = bool(s.get("turn_open", False))
        self.aborted: bool = bool(s.get("aborted", False))
        self.last_uuid: str | None = s.get("last_uuid")
        self.last_ns: int = int(s.get("last_ns", 0))
        self.held: list[Compacted] = [
            Compacted("claude-code.compact", h["id"], h["time_ns"], NO_DATA, None, h["offset"], h["end_offset"],
                      trigger=h.get("trigger"), pre_tokens=h.get("pre_tokens"))
            for h in s.get("held", ())
        ]  # fmt: skip
        # The open call's tool_use blocks, started once its last block is read (see the module docstring, 3).
        self.starts: list[dict[str, Any]] = [dict(t) for t in s.get("starts", ())]

    def snapshot(self) -> dict[str, Any]:
        """The framer's state, for a checkpoint's context (plain JSON values)."""
        return {
            "seed": self.seed,
            "started": self.started,
            "prompt_id": self.prompt_id,
            "prompt_ns": self.prompt_ns,
            "queued": self.queued,
            "message_id": self.message_id,
            "turn_open": self.turn_open,
            "aborted": self.aborted,
            "last_uuid": self.last_uuid,
            "last_ns": self.last_ns,
            "held": [
                {"id": h.id, "time_ns": h.time_ns, "offset": h.offset, "end_offset": h.end_offset,
                 "trigger": h.trigger, "pre_tokens": h.pre_tokens}
                for h in self.held
            ],
            "starts": [dict(t) for t in self.starts],
        }  # fmt: skip

    def frame(self, view: Event) -> list[Event]:
        """The loop's events for one record (often none)."""
        out: list[Event] = []
        cls = view.__class__
        if self.starts and not (cls is AssistantRecord and self._same_call(view)):  # type: ignore[arg-type]
            self._start_tools(view, out)
        if not self.started and isinstance(view, Record) and view.session_id is not None:
            if self.seed is None:  # a sub-agent's file is no session of its own
                self._session(view, out)
            self.started = True
        if cls is UserRecord:
            self._user(view, out)  # type: ignore[arg-type]  # checked by class
        elif cls is AssistantRecord:
            self._assistant(view, out)  # type: ignore[arg-type]
        elif cls is QueueOperation:
            text = view.prompt  # type: ignore[attr-defined]
            if text is not None:
                self.queued = text
        elif cls is CompactBoundary:
            self._compaction(view, out)  # type: ignore[arg-type]
        if isinstance(view, Record) and view.time_ns:
            self.last_uuid, self.last_ns = view.id, view.time_ns
        return out

    def close(self) -> list[Event]:
        """A log cut after a call's ``tool_use`` blocks (the CLI killed while writing or running them): the tools
        start, so the loop closes them unfinished, as it does a Copilot tool with no end."""
        out: list[Event] = []
        if self.starts:
            last = self.starts[-1]
            end = Event("claude-code.end", f"end/{last['id']}", last["time_ns"], NO_DATA, None, last["offset"],
                        last["end_offset"])  # fmt: skip
            self._start_tools(end, out)
        return out

    # ------------------------------------------------------------------ records
    def _session(self, view: Record, out: list[Event]) -> None:
        self.started = True
        context = ev.Context(view.cwd, None, None, view.git_branch, None)
        out.append(
            SessionBegan("claude-code.session", f"session/{view.id}", view.time_ns, NO_DATA, None,
                         view.offset, view.end_offset, view.dropped,
                         session_id=view.session_id, copilot_version=view.version, producer="claude-code",
                         context=context)
        )  # fmt: skip

    def _user(self, view: UserRecord, out: list[Event]) -> None:
        prompt_id = view.prompt_id
        kind = view.kind
        if prompt_id is not None and prompt_id != self.prompt_id:
            self._open_prompt(view, prompt_id, kind, out)
        if kind is UserKind.TOOL_RESULTS:
            for result in view.tool_results:
                self._tool_result(view, result.tool_use_id, result.outcome, result.content, out)
        elif kind is UserKind.INTERRUPT:
            self._abort(view, out)

    def _open_prompt(self, view: UserRecord, prompt_id: str, kind: UserKind, out: list[Event]) -> None:
        """A new ``promptId``: a human prompt (rule C: keyed by that id), whatever record of it comes first."""
        self._end_turn(view, self.last_ns or view.time_ns, out)
        text: Any = self.queued
        if text is None and kind in (UserKind.PROMPT, UserKind.COMMAND):
            text = view.plain_text
        self.prompt_id, self.prompt_ns, self.queued, self.aborted = prompt_id, view.time_ns, None, False
        self.message_id = None
        seed_ = self.seed
        if seed_ is not None:
            if seed_.get("rooted"):
                return  # a sub-agent's file roots once: what it writes later is its work
            seed_["rooted"] = True
            call = seed_.get("tool_use_id")
            session_id = view.session_id or ""
            out.append(
                Rooted("claude-code.subagent", f"subagent/{view.id}", view.time_ns, NO_DATA, None, view.offset,
                       view.end_offset, view.dropped, session_id=view.session_id, prompt_key=prompt_id,
                       agent_key=seed_.get("agent_id") or view.agent_id or view.id,
                       parent_span_id=ids.span_id(session_id, "tool", call, call) if call else 0,
                       task_call_id=call, name=seed_.get("agent_type"), description=seed_.get("description"),
                       content=view.plain_text or None)
            )  # fmt: skip
            return
        out.append(
            PromptSubmitted("claude-code.prompt", prompt_id, view.time_ns, NO_DATA, None, view.offset,
                            view.end_offset, view.dropped, content=text)
        )  # fmt: skip
        out.extend(self.held)  # a /compact's compaction, written before its prompt's first record
        self.held.clear()

    def _tool_result(
        self, view: UserRecord, call_id: str | None, outcome: ToolOutcome, content: Any, out: list[Event]
    ) -> None:
        if outcome is ToolOutcome.INTERRUPTED:
            self._abort(view, out)  # the abort cancels the tool, as Copilot's abort ends open work
            return
        text = _text_of(content)
        message = None
        if outcome is ToolOutcome.DENIED:
            message = "denied by a permission rule"
        elif outcome is ToolOutcome.FAILED:
            message = _first_line(text) or "tool failed"
        out.append(
            ToolEnded("claude-code.tool_result", f"{view.id}/{call_id}", view.time_ns, NO_DATA, None, view.offset,
                      view.end_offset, view.dropped, call_id=call_id, success=outcome is ToolOutcome.OK,
                      error_code="denied" if outcome is ToolOutcome.DENIED else None, error_message=message,
                      exit_code=_exit_code(message), result=text or None)
        )  # fmt: skip

    def _abort(self, view: UserRecord, out: list[Event]) -> None:
        if self.aborted:
            return
        self.aborted = True
        out.append(
            Aborted("claude-code.interrupt", f"abort/{view.id}", view.time_ns, NO_DATA, None, view.offset,
                    view.end_offset, view.dropped, reason="user")
        )  # fmt: skip

    def _assistant(self, view: AssistantRecord, out: list[Event]) -> None:
        t = view.time_ns
        if view.synthetic:
            if view.api_error:
                # Rule B: the failed request is in no log and gets no span: close the last turn first.
                self._end_turn(view, t, out)
                out.append(
                    Failed("claude-code.api_error", view.id, t, NO_DATA, None, view.offset, view.end_offset,
                           view.dropped, error_type=view.error or "api_error",
                           message=_first_line(_text_of(view.content)), status_code=view.api_error_status)
                )  # fmt: skip
            return
        message_id = view.message_id or view.id
        if message_id != self.message_id:
            start = self.last_ns if view.parent_uuid == self.last_uuid and self.last_ns else t
            start = max(min(start, t), self.prompt_ns) if self.prompt_ns <= t else t
            self._end_turn(view, start, out)
            self.message_id, self.turn_open = message_id, True
            out.append(
                TurnBegan("claude-code.turn", f"turn/{message_id}", start, NO_DATA, None, view.offset,
                          view.end_offset, view.dropped, turn_id=message_id)
            )  # fmt: skip
            usage = view.usage
            if usage is not None:
                cache_read, cache_write = usage.cache_read_input_tokens, usage.cache_creation_input_tokens
                stop = view.stop_reason
                out.append(
                    CallUsage("claude-code.usage", f"usage/{message_id}", t, NO_DATA, None, view.offset,
                              view.end_offset, view.dropped,
                              usage=ev.Usage(usage.input_tokens + cache_read + cache_write, usage.output_tokens,
                                             cache_read, cache_write, None, 0.0, view.model, view.request_id,
                                             _FINISH.get(stop, stop) if stop else None, None, None, None,
                                             PROVIDER))
                )  # fmt: skip
        uses = view.tool_uses
        text = _text_of(view.content)
        out.append(
            Answered("claude-code.assistant", view.id, t, NO_DATA, None, view.offset, view.end_offset,
                     view.dropped, turn_id=message_id, model=view.model, api_call_id=view.request_id,
                     content=text or None,
                     tool_requests=tuple([ev.ToolRequest(u.id, u.name, u.input) for u in uses]))
        )  # fmt: skip
        self.starts.extend(
            {"id": use.id or view.id, "time_ns": t, "offset": view.offset, "end_offset": view.end_offset,
             "call_id": use.id, "name": use.name, "arguments": use.input}
            for use in uses
        )  # fmt: skip
        if not uses and view.stop_reason in _FINAL:
            self._end_turn(view, t, out)
            if self.seed is not None:  # a sub-agent's final answer: its work is done
                out.append(
                    RootEnded("claude-code.subagent_end", f"subagent-end/{view.id}", t, NO_DATA, None, view.offset,
                              view.end_offset, view.dropped)
                )  # fmt: skip

    def _same_call(self, view: AssistantRecord) -> bool:
        """Another block of the open call (same ``message.id``): its tools wait for the call's last block."""
        return not view.synthetic and (view.message_id or view.id) == self.message_id

    def _start_tools(self, view: Event, out: list[Event]) -> None:
        """The open call's last block was read: its tools start, each at its own block's time."""
        for t in self.starts:
            out.append(
                ToolBegan("claude-code.tool_use", t["id"], t["time_ns"], NO_DATA, None, t["offset"], t["end_offset"],
                          view.dropped, call_id=t["call_id"], name=t["name"], arguments=t["arguments"])
            )  # fmt: skip
        self.starts = []

    def _compaction(self, view: CompactBoundary, out: list[Event]) -> None:
        compacted = Compacted(
            "claude-code.compact", view.id, view.time_ns, NO_DATA, None, view.offset, view.end_offset,
            view.dropped, trigger=view.trigger, pre_tokens=view.pre_tokens,
        )  # fmt: skip
        if self.queued is not None:
            self.held.append(compacted)  # /compact was typed: its prompt's first record comes next
        else:
            out.append(compacted)

    def _end_turn(self, view: Event, time_ns: int, out: list[Event]) -> None:
        if not self.turn_open:
            return
        self.turn_open = False
        out.append(
            TurnEnded("claude-code.turn_end", f"turn-end/{self.message_id}", time_ns, NO_DATA, None, view.offset,
                      view.end_offset, view.dropped, turn_id=self.message_id)
        )  # fmt: skip

    def may_open(self, view: Event) -> bool:
        """Whether ``view`` may open a prompt while one is open: a user record of a new ``promptId`` (the pipeline
        keeps the state before such a line for a restart)."""
        return isinstance(view, UserRecord) and view.prompt_id not in (None, self.prompt_id)


def seed(path: Path) -> dict[str, Any] | None:
    """What a sub-agent's file needs from beside it to be rooted (rule A): its ``.meta.json`` (the tool call that
    started it, its type and description) and its agent id (the file's name); ``None`` for a session's own log."""
    name = path.name
    if path.parent.name != "subagents" or not name.startswith("agent-") or not name.endswith(".jsonl"):
        return None
    meta = read_meta(path)
    return {
        "agent_id": name[len("agent-") : -len(".jsonl")],
        "tool_use_id": meta.tool_use_id if meta is not None else None,
        "agent_type": meta.agent_type if meta is not None else None,
        "description": meta.description if meta is not None else None,
    }


# Claude Code's log through the loop: its reader, this framer and the neutral events' translator.
CLAUDE_CODE = LoopSource(Source.CLAUDE_CODE, read_line, ClaudeCodeFramer, NEUTRAL, seed)
