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
5. a tool result is ok, failed or denied (``ToolResult.outcome``; denied: Copilot's ``error.code`` ``denied``); an
   error result whose record says ``permissionDecision`` ``reject`` (2.1.332) is denied, and says who refused
   (``UserRecord.refused_by``: plan mode, a hook, the auto-mode classifier, a rule, the user);
6. a model call lasts from the record its first block answers to that block (the log times no request);
7. (Codex only);
8. ``/compact`` is a prompt with no model call; ``compact_boundary`` is the loop's compaction, put in the prompt
   typed just before it (held until that prompt's first record names it);
9. the CLI's own records (``isMeta``, compaction summaries, ``<command-name>`` records, ``[Request interrupted
   by user…]``) are content of the prompt, never a prompt;
10. an interrupted tool (``ToolOutcome.INTERRUPTED``) or the interrupt note is the loop's abort, which cancels
    what still runs;
11. a failed attempt of a request (2.1.332: ``system`` ``api_error``, retried) is an ERROR model call of its own
    (``AttemptFailed``: ``error.type`` the HTTP status, its attempt number), from the attempt's ``api-request``
    record to the error, under the turn of the call it is an attempt of (that turn begins with its first attempt);
12. a prompt sent while a turn runs (2.1.332: an ``attachment`` ``queued_command`` after a tool result, no new
    ``promptId``) steers the running prompt, as Copilot CLI's steering messages do: a user message of that
    prompt, dated when delivered (the record before it), never by its enqueue time, and never its trace's name;
13. a forked session's log (``--fork-session``) opens with a copy of its parent's history (the parent's records,
    dates and uuids, the fork's ``sessionId`` and ``promptId``; copied replies say ``requestSessionId``): the copy
    is the parent's fold's, so it is counted and skipped; the fork starts at its first prompt of its own, whose
    root links to the parent's trace (:func:`seed` reads the parent's log beside it for its prompt ids);
14. the session's own word on itself: ``custom-title`` (``-n``) names the session (its facts' title, as Copilot
    CLI's workspace summary does), ``cost-state`` is the CLI's own accounting; both are handed on as
    ``SelfReported`` for ``show`` and ``report`` to set beside our figures, never as work;
15. a background sub-agent's report (2.1.332: a ``<task-notification>`` ``user`` record under a new ``promptId``,
    after a meta record with ``turnCompanion`` under the same id) is no human prompt: the prompt that started the
    sub-agent goes on with it (a message injected into it; the calls that answer it are its turns, counted by its
    runaway rules), and that prompt ends at the final answer once no background sub-agent of it still runs.

A prompt ends where the log says its loop ended (:class:`~copilot_otel.loop.neutral.PromptEnded`), complete:

* at its final answer: a model call that stopped on its own (``end_turn``, ``stop_sequence``, …) and asked for
  no tool, while no background sub-agent of the prompt still runs (an ``Agent`` call whose result says
  ``isAsync`` / ``async_launched``: the prompt waits for its ``<task-notification>``). The answer is written one
  record per content block, and ``-p`` writes the stop reason on every block of it, so the end is held until a
  record shows the loop is over: ``last-prompt``, a ``queue-operation``, the ``system`` ``turn_duration`` that
  interactive Claude Code writes after each loop, the next prompt's first record, or the log's end
  (:meth:`ClaudeCodeFramer.close`). It is dated at the answer. Another model call or a ``user`` record of the
  same prompt (a Stop hook that made the model go on) cancels it: the loop went on;
* at ``turn_duration`` when no final answer was seen (a reply whose blocks carry no stop reason, an abort):
  dated there; an aborted prompt stays aborted.

A prompt whose log stops in the middle (the CLI killed, retries exhausted) has neither: the log's end closes it
incomplete, with its reason, as before.

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

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...loop.neutral import (
    NEUTRAL,
    NO_DATA,
    Aborted,
    Answered,
    AttemptFailed,
    CallUsage,
    Compacted,
    Continued,
    Failed,
    PromptSubmitted,
    Rooted,
    RootEnded,
    SelfReported,
    SessionBegan,
    ToolBegan,
    ToolEnded,
    TurnBegan,
    TurnEnded,
    end_held_at,
    prompt_end,
)
from ...model import ids
from ...model import inputs as ev
from ...model.inputs import Event
from .. import LoopSource, Source, ToolOutcome
from .reader import (
    ApiError,
    ApiRequest,
    AssistantRecord,
    Attachment,
    CompactBoundary,
    CostState,
    CustomTitle,
    LastPrompt,
    QueueOperation,
    Record,
    SystemRecord,
    UserKind,
    UserRecord,
    _text_of,
    read_fork,
    read_line,
    read_meta,
)

__all__ = ["CLAUDE_CODE", "PROVIDER", "ClaudeCodeFramer", "seed"]

logger = logging.getLogger(__name__)

# The provider of every model call Claude Code makes (gen_ai.provider.name of the semantic conventions).
PROVIDER = "anthropic"
# Anthropic's stop reasons in the semantic conventions' finish reasons (others are kept as they are).
_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls", "max_tokens": "length"}
# Stop reasons after which the model asked for nothing more: its turn ends with the answer.
_FINAL = frozenset({"end_turn", "stop_sequence", "max_tokens", "refusal"})
# A failed tool's message is the first line of its result, at most this long (the rest is the tool's output).
_MESSAGE_CHARS = 200
_EXIT_CODE = "Exit code "
# The ``system`` record interactive Claude Code writes when a loop is over (``durationMs``: the loop's length).
_TURN_DURATION = "turn_duration"
# The source of a background task's report, injected into the prompt that started the task (15).
_NOTIFICATION_SOURCE = "task-notification"
# ``toolUseResult.status`` of an ``Agent`` call that started its sub-agent in the background.
_ASYNC_LAUNCHED = "async_launched"


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
        "aliases",
        "attempts",
        "background",
        "companion",
        "copied",
        "copied_prompt",
        "ended",
        "ending",
        "enqueue_ns",
        "fork",
        "held",
        "last_ns",
        "last_uuid",
        "message_id",
        "prompt_id",
        "prompt_ns",
        "queued",
        "request",
        "seed",
        "started",
        "starts",
        "title",
        "turn_open",
    )

    def __init__(self, state: Mapping[str, Any] | None = None) -> None:
        s = state or {}
        self.started: bool = bool(s.get("started", False))
        seed_ = s.get("seed")
        self.seed: dict[str, Any] | None = dict(seed_) if isinstance(seed_, Mapping) else None
        # A fork's origin (13): the parent session and its prompts by record uuid, until the fork's first prompt.
        fork = s.get("fork")
        if self.seed is not None and "fork" in self.seed:
            fork, self.seed = self.seed["fork"], None  # a session's own log that is a fork: no sub-agent's
        self.fork: dict[str, Any] | None = dict(fork) if isinstance(fork, Mapping) else None
        self.copied: int = int(s.get("copied", 0))  # records of the parent's history skipped so far
        self.copied_prompt: str | None = s.get("copied_prompt")  # the last copied prompt record's uuid
        self.enqueue_ns: int = int(s.get("enqueue_ns", 0))  # when the prompt waiting to open was enqueued
        self.title: str | None = s.get("title")  # the session's title as last said (14)
        # The open prompt's other promptIds (its background tasks' reports, 15), and a companion record's promptId
        # waiting for the record it goes with.
        self.aliases: list[str] = list(s.get("aliases", ()))
        self.companion: str | None = s.get("companion")
        self.prompt_id: str | None = s.get("prompt_id")
        self.prompt_ns: int = int(s.get("prompt_ns", 0))
        self.queued: str | None = s.get("queued")  # the prompt as typed, until its first record
        self.message_id: str | None = s.get("message_id")
        self.turn_open: bool = bool(s.get("turn_open", False))
        self.aborted: bool = bool(s.get("aborted", False))
        # The open prompt's loop end, once seen: held until a record shows the loop is over (the module
        # docstring), then whether it was handed on; and its background sub-agents not reported back yet.
        ending = s.get("ending")
        self.ending: dict[str, Any] | None = dict(ending) if isinstance(ending, Mapping) else None
        self.ended: bool = bool(s.get("ended", False))
        self.background: int = int(s.get("background", 0))
        self.last_uuid: str | None = s.get("last_uuid")
        self.last_ns: int = int(s.get("last_ns", 0))
        self.held: list[Compacted] = [
            Compacted("claude-code.compact", h["id"], h["time_ns"], NO_DATA, None, h["offset"], h["end_offset"],
                      trigger=h.get("trigger"), pre_tokens=h.get("pre_tokens"))
            for h in s.get("held", ())
        ]  # fmt: skip
        # The open call's tool_use blocks, started once its last block is read (see the module docstring, 3).
        self.starts: list[dict[str, Any]] = [dict(t) for t in s.get("starts", ())]
        # The last ``api-request`` (its time and model): the start of the attempt an ``api_error`` ends (11).
        request = s.get("request")
        self.request: dict[str, Any] | None = dict(request) if isinstance(request, Mapping) else None
        # Failed attempts of the next model call, until its turn begins (or the CLI gives up on it).
        self.attempts: list[dict[str, Any]] = [dict(a) for a in s.get("attempts", ())]

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
            "ending": dict(self.ending) if self.ending is not None else None,
            "ended": self.ended,
            "background": self.background,
            "last_uuid": self.last_uuid,
            "last_ns": self.last_ns,
            "held": [
                {"id": h.id, "time_ns": h.time_ns, "offset": h.offset, "end_offset": h.end_offset,
                 "trigger": h.trigger, "pre_tokens": h.pre_tokens}
                for h in self.held
            ],
            "starts": [dict(t) for t in self.starts],
            "request": self.request,
            "attempts": [dict(a) for a in self.attempts],
            "fork": self.fork,
            "copied": self.copied,
            "copied_prompt": self.copied_prompt,
            "enqueue_ns": self.enqueue_ns,
            "title": self.title,
            "aliases": list(self.aliases),
            "companion": self.companion,
        }  # fmt: skip

    def frame(self, view: Event) -> list[Event]:
        """The loop's events for one record (often none)."""
        out: list[Event] = []
        cls = view.__class__
        if self.prompt_id is None and self.seed is None and self._copied(view):
            return out
        if self.starts and not (cls is AssistantRecord and self._same_call(view)):  # type: ignore[arg-type]
            self._start_tools(view, out)
        if cls is SystemRecord and view.subtype == _TURN_DURATION and view.pending_background:  # type: ignore[attr-defined]
            # The CLI says background sub-agents of the loop still run (15): the prompt waits for their reports,
            # whatever the framer counted of their launches.
            self.background = max(self.background, view.pending_background)  # type: ignore[attr-defined]
            self.ending = None
        if self.ending is not None:
            self._settle_end(view, cls, out)
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
                self.queued, self.enqueue_ns = text, view.time_ns
            elif self.queued is not None and view.removed == self.queued:  # type: ignore[attr-defined]
                self.queued = None  # delivered into the running prompt (12): it names no prompt
        elif cls is Attachment and view.queued_prompt is not None:  # type: ignore[attr-defined]
            self._steer(view, out)  # type: ignore[arg-type]
            self.last_uuid = view.id  # the next record answers it, but it is dated when enqueued (12)
            return out
        elif cls is CompactBoundary:
            self._compaction(view, out)  # type: ignore[arg-type]
        elif cls is ApiRequest:
            self.request = {"time_ns": view.time_ns, "model": view.model}  # type: ignore[attr-defined]
        elif cls is ApiError:
            self._attempt(view)  # type: ignore[arg-type]
        elif cls is CustomTitle:
            self._titled(view, out)  # type: ignore[arg-type]
        elif cls is CostState:
            self._accounted(view, out)  # type: ignore[arg-type]
        elif cls is SystemRecord and view.subtype == _TURN_DURATION:  # type: ignore[attr-defined]
            self._loop_over(view, out)
        if isinstance(view, Record) and view.time_ns:
            self.last_uuid, self.last_ns = view.id, view.time_ns
        return out

    def close(self) -> list[Event]:
        """The log's content is over. A log cut after a call's ``tool_use`` blocks (the CLI killed while writing
        or running them): the tools start, so the loop closes them unfinished, as it does a Copilot tool with no
        end. A log that ends with a final answer: its prompt ended there (the end held for the next record)."""
        out: list[Event] = []
        if self.starts:
            last = self.starts[-1]
            end = Event("claude-code.end", f"end/{last['id']}", last["time_ns"], NO_DATA, None, last["offset"],
                        last["end_offset"])  # fmt: skip
            self._start_tools(end, out)
        self._attempts_failed(out)  # cut while the CLI retried: the attempts failed all the same
        if self.ending is not None:
            self._end_prompt(out)
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
        if prompt_id is not None and prompt_id != self.prompt_id and prompt_id not in self.aliases:
            if self.seed is None and view.meta and view.turn_companion:
                self.companion = prompt_id  # goes with the next record of its promptId: that one decides (15)
                return
            if self.seed is None and self.prompt_id is not None and view.task_notification:
                self._notified(view, prompt_id, out)
                return
            self._open_prompt(view, prompt_id, kind, out)
        if kind is UserKind.TOOL_RESULTS:
            refused_by = view.refused_by
            for result in view.tool_results:
                outcome = result.outcome
                if refused_by is not None and result.is_error:
                    outcome = ToolOutcome.DENIED  # 2.1.332 says who refused (plan mode, a hook, …): rule 5
                self._tool_result(view, result.tool_use_id, outcome, result.content, out, refused_by)
            if _launched_async(view.tool_use_result):
                self.background += 1  # the prompt waits for that sub-agent's report
        elif kind is UserKind.INTERRUPT:
            self._abort(view, out)

    def _notified(self, view: UserRecord, prompt_id: str, out: list[Event]) -> None:
        """A background task's report (15): no human prompt, though under a new ``promptId``. The prompt that
        started the sub-agent goes on with it (its trace, its turns, its runaway counters): the report is a
        message injected into it, and its ``promptId`` (and its companion's) an alias of that prompt's."""
        self.aliases.append(prompt_id)
        self.companion = None
        if self.background:
            self.background -= 1  # one background sub-agent reported back
        out.append(
            PromptSubmitted("claude-code.task_notification", f"notification/{view.id}", view.time_ns, NO_DATA, None,
                            view.offset, view.end_offset, view.dropped, content=view.plain_text or None,
                            source=_NOTIFICATION_SOURCE)
        )  # fmt: skip

    def _open_prompt(self, view: UserRecord, prompt_id: str, kind: UserKind, out: list[Event]) -> None:
        """A new ``promptId``: a human prompt (rule C: keyed by that id), whatever record of it comes first."""
        self.aliases, self.companion = [], None
        self._end_turn(view, self.last_ns or view.time_ns, out)
        text: Any = self.queued
        if text is None and kind in (UserKind.PROMPT, UserKind.COMMAND):
            text = view.plain_text
        self.prompt_id, self.prompt_ns, self.queued, self.aborted = prompt_id, view.time_ns, None, False
        self.message_id, self.ended, self.background = None, False, 0
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
        if self.copied or self.fork is not None:
            self._continued(view, out)
        out.extend(self.held)  # a /compact's compaction, written before its prompt's first record
        self.held.clear()

    def _tool_result(
        self,
        view: UserRecord,
        call_id: str | None,
        outcome: ToolOutcome,
        content: Any,
        out: list[Event],
        refused_by: str | None = None,
    ) -> None:
        if outcome is ToolOutcome.INTERRUPTED:
            self._abort(view, out)  # the abort cancels the tool, as Copilot's abort ends open work
            return
        text = _text_of(content)
        message = None
        if outcome is ToolOutcome.DENIED:
            # The refusal's own words when the record says who refused (the reason a hook or mode gave).
            message = (_first_line(text) if refused_by else None) or "denied by a permission rule"
        elif outcome is ToolOutcome.FAILED:
            message = _first_line(text) or "tool failed"
        out.append(
            ToolEnded("claude-code.tool_result", f"{view.id}/{call_id}", view.time_ns, NO_DATA, None, view.offset,
                      view.end_offset, view.dropped, call_id=call_id, success=outcome is ToolOutcome.OK,
                      error_code="denied" if outcome is ToolOutcome.DENIED else None, error_message=message,
                      exit_code=_exit_code(message), result=text or None,
                      denied_by=refused_by if outcome is ToolOutcome.DENIED else None)
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
                # Rule B: the failed request is in no log and gets no span: close the last turn first. Its
                # failed attempts (11) were the call's that failed for good: under the agent.
                self._end_turn(view, t, out)
                self._attempts_failed(out)
                out.append(
                    Failed("claude-code.api_error", view.id, t, NO_DATA, None, view.offset, view.end_offset,
                           view.dropped, error_type=view.error or "api_error",
                           message=_first_line(_text_of(view.content)), status_code=view.api_error_status)
                )  # fmt: skip
            return
        message_id = view.message_id or view.id
        if message_id != self.message_id:
            start = self.last_ns if view.parent_uuid == self.last_uuid and self.last_ns else t
            if self.attempts:  # the call began with its first failed attempt (11)
                start = min(start, self.attempts[0]["start_ns"])
            start = max(min(start, t), self.prompt_ns) if self.prompt_ns <= t else t
            self._end_turn(view, start, out)
            self.message_id, self.turn_open = message_id, True
            out.append(
                TurnBegan("claude-code.turn", f"turn/{message_id}", start, NO_DATA, None, view.offset,
                          view.end_offset, view.dropped, turn_id=message_id)
            )  # fmt: skip
            self._attempts_failed(out)
            usage = view.usage
            if usage is not None:
                cache_read, cache_write = usage.cache_read_input_tokens, usage.cache_creation_input_tokens
                stop = view.stop_reason
                out.append(
                    CallUsage("claude-code.usage", f"usage/{message_id}", t, NO_DATA, None, view.offset,
                              view.end_offset, view.dropped,
                              usage=ev.Usage(usage.input_tokens + cache_read + cache_write, usage.output_tokens,
                                             cache_read, cache_write, None, 0.0, view.model, view.request,
                                             _FINISH.get(stop, stop) if stop else None, None, None, None,
                                             PROVIDER))
                )  # fmt: skip
        uses = view.tool_uses
        text = _text_of(view.content)
        out.append(
            Answered("claude-code.assistant", view.id, t, NO_DATA, None, view.offset, view.end_offset,
                     view.dropped, turn_id=message_id, model=view.model, api_call_id=view.request,
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
            elif self._may_end():
                # The final answer: the loop is over once its last block is read (the module docstring).
                self.ending = end_held_at(view)

    # ------------------------------------------------------------------ the prompt's end
    def _may_end(self) -> bool:
        """Whether the open prompt's loop can end now: a prompt of this log (not a sub-agent's file), not ended
        yet, with no tool waiting to start and no background sub-agent still running."""
        return (
            self.seed is None
            and self.prompt_id is not None
            and not self.ended
            and not self.starts
            and not self.background
        )

    def _settle_end(self, view: Event, cls: type, out: list[Event]) -> None:
        """A record after the final answer: another block of it changes nothing; a record that shows the loop is
        over ends the prompt; more of the loop (another call, a ``user`` record of the same prompt) cancels the
        end; anything else (attachments, the CLI's other notes) leaves it held."""
        if cls is AssistantRecord:
            if not self._same_call(view) and not view.synthetic:  # type: ignore[arg-type, attr-defined]
                self.ending = None  # the model was called again: the loop went on
            return
        if cls is UserRecord:
            prompt_id = view.prompt_id  # type: ignore[attr-defined]
            if prompt_id is not None and prompt_id != self.prompt_id and prompt_id not in self.aliases:
                self._end_prompt(out)  # the next prompt's first record
            else:
                self.ending = None  # e.g. a Stop hook's feedback: the loop goes on
            return
        over = cls is SystemRecord and view.subtype == _TURN_DURATION  # type: ignore[attr-defined]
        if over or cls is LastPrompt or cls is QueueOperation:
            self._end_prompt(out)

    def _loop_over(self, view: Event, out: list[Event]) -> None:
        """``turn_duration``: the CLI says the loop is over; a prompt still open (no final answer seen) ends
        here."""
        if self._may_end():
            self.ending = end_held_at(view, view.time_ns or self.last_ns)
            self._end_prompt(out)

    def _end_prompt(self, out: list[Event]) -> None:
        ending = self.ending
        self.ending = None
        if ending is None or self.ended:
            return
        self.ended = True
        out.append(prompt_end("claude-code.prompt_end", ending))

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

    def _copied(self, view: Event) -> bool:
        """Part of a fork's copy of its parent's history (13), before the fork's first prompt: a reply made in
        another session (``requestSessionId``), or a conversation record dated before the prompt enqueued last
        (the copy keeps the parent's dates). Counted and skipped: the parent's fold has it."""
        if not isinstance(view, Record):
            return False
        made_in = view.request_session_id if isinstance(view, AssistantRecord) else None
        if not (made_in and made_in != view.session_id) and not (
            self.queued is not None and 0 < view.time_ns < self.enqueue_ns
        ):
            return False
        self.copied += 1
        if isinstance(view, UserRecord) and view.kind is UserKind.PROMPT:
            self.copied_prompt = view.id
        return True

    def _continued(self, view: UserRecord, out: list[Event]) -> None:
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

    def _titled(self, view: CustomTitle, out: list[Event]) -> None:
        """The session's title (14), said again after each loop: handed on when it changes."""
        title = view.title
        if title and title != self.title and self.seed is None:
            self.title = title
            out.append(
                SelfReported("claude-code.title", f"title/{view.offset}", view.time_ns or self.last_ns, NO_DATA, None,
                             view.offset, view.end_offset, view.dropped, title=title)
            )  # fmt: skip

    def _accounted(self, view: CostState, out: list[Event]) -> None:
        """The CLI's own accounting of the session so far (14), dated by the record before it (it has no date)."""
        if self.seed is not None:
            return
        out.append(
            SelfReported("claude-code.cost", f"cost/{view.offset}", view.time_ns or self.last_ns, NO_DATA, None,
                         view.offset, view.end_offset, view.dropped, cost_usd=view.cost_usd,
                         api_duration_ms=view.api_duration_ms,
                         api_duration_without_retries_ms=view.api_duration_without_retries_ms,
                         tool_duration_ms=view.tool_duration_ms, duration_ms=view.duration_ms,
                         model_costs=view.model_costs)
        )  # fmt: skip

    def _steer(self, view: Attachment, out: list[Event]) -> None:
        """A prompt delivered into the running one (``queued_command``): steering of it, dated when delivered (the
        record before it; its own date is when it was enqueued, 12)."""
        text = view.queued_prompt
        if self.queued == text:
            self.queued = None
        out.append(
            PromptSubmitted("claude-code.queued", f"queued/{view.id}", self.last_ns or view.time_ns, NO_DATA, None,
                            view.offset, view.end_offset, view.dropped, content=text, delivery="steering")
        )  # fmt: skip

    def _attempt(self, view: ApiError) -> None:
        """A failed attempt (``system`` ``api_error``): held until the turn of the call it is an attempt of
        begins, so that its span hangs there (11); from its ``api-request`` (else the record before) to itself."""
        request = self.request or {}
        start = request.get("time_ns") or self.last_ns or view.time_ns
        status = view.status
        self.attempts.append(
            {"id": view.id, "time_ns": view.time_ns, "start_ns": min(start, view.time_ns), "offset": view.offset,
             "end_offset": view.end_offset, "model": request.get("model"), "status": status,
             "error_type": str(status) if status is not None else view.connection_code or "api_error",
             "message": view.formatted, "attempt": view.retry_attempt}
        )  # fmt: skip
        self.request = None

    def _attempts_failed(self, out: list[Event]) -> None:
        for a in self.attempts:
            out.append(
                AttemptFailed("claude-code.api_error", a["id"], a["time_ns"], NO_DATA, None, a["offset"],
                              a["end_offset"], start_ns=a["start_ns"], model=a["model"],
                              error_type=a["error_type"], message=a["message"], status_code=a["status"],
                              attempt=a["attempt"])
            )  # fmt: skip
        self.attempts = []

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


def _launched_async(result: Any) -> bool:
    """An ``Agent`` call's result that says its sub-agent runs on in the background (``toolUseResult``)."""
    return isinstance(result, Mapping) and (
        result.get("isAsync") is True or result.get("status") == _ASYNC_LAUNCHED
    )


def seed(path: Path) -> dict[str, Any] | None:
    """What a sub-agent's file needs from beside it to be rooted (rule A): its ``.meta.json`` (the tool call that
    started it, its type and description) and its agent id (the file's name). For a session's own log that is a
    fork (13): its parent session and that log's prompts (``{"fork": …}``); else ``None``."""
    name = path.name
    if path.parent.name != "subagents" or not name.startswith("agent-") or not name.endswith(".jsonl"):
        origin = read_fork(path)
        if origin is None:
            return None
        logger.debug(
            "%s is a fork of session %s: the history it copied from there is skipped, its first prompt links there",
            name, origin.parent_session_id,
        )  # fmt: skip
        return {"fork": {"parent": origin.parent_session_id, "prompts": origin.prompts}}
    meta = read_meta(path)
    return {
        "agent_id": name[len("agent-") : -len(".jsonl")],
        "tool_use_id": meta.tool_use_id if meta is not None else None,
        "agent_type": meta.agent_type if meta is not None else None,
        "description": meta.description if meta is not None else None,
    }


# Claude Code's log through the loop: its reader, this framer and the neutral events' translator.
CLAUDE_CODE = LoopSource(Source.CLAUDE_CODE, read_line, ClaudeCodeFramer, NEUTRAL, seed)
