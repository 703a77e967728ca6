"""Claude Code's records as the agent loop's inputs: a small pure state machine after the reader.

:class:`ClaudeCodeFramer` turns the views of :mod:`.claude_code` (in the order written) into the neutral events of
:mod:`copilot_otel.loop.neutral`, which :data:`~copilot_otel.loop.neutral.NEUTRAL` folds with the same handlers as
Copilot CLI's events. Where Claude Code's loop differs from Copilot's, the difference is here (the numbers are
those of ``docs/other-agents.md``; the concerns with state of their own are in the modules beside this one:
:mod:`.retries` 11, :mod:`.steering` 12, :mod:`.forks` 13, :mod:`.selfreport` 14, :mod:`.subagents` 15 and rule A,
each held by the framer and saved in its one snapshot):

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

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...loop.neutral import (
    NEUTRAL,
    NO_DATA,
    Aborted,
    Answered,
    CallUsage,
    Compacted,
    Failed,
    PromptSubmitted,
    RootEnded,
    SessionBegan,
    ToolBegan,
    ToolEnded,
    TurnBegan,
    TurnEnded,
    end_held_at,
    prompt_end,
)
from ...model.inputs import Context, Event, Usage
from .. import LoopSource, Source, ToolOutcome
from .forks import ForkCopy, fork_seed
from .reader import (
    SYNTHETIC_MODEL,
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
    read_line,
    tool_requests_of,
)
from .retries import Retries
from .selfreport import SelfReport
from .steering import Queue
from .subagents import Background, is_subagent_file, rooted, subagent_log, subagent_seed

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
# The ``system`` record interactive Claude Code writes when a loop is over (``durationMs``: the loop's length).
_TURN_DURATION = "turn_duration"


def _first_line(text: str) -> str | None:
    line = text.strip().split("\n", 1)[0].strip()
    return line[:_MESSAGE_CHARS] or None


def _exit_code(message: str | None) -> int | None:
    """``Exit code N`` (a Bash call that failed) → N."""
    if message is None or not message.startswith(_EXIT_CODE):
        return None
    digits = message[len(_EXIT_CODE) :].split(None, 1)[0] if message[len(_EXIT_CODE) :] else ""
    return int(digits) if digits.lstrip("-").isdigit() else None


def _tool_ended(
    view: UserRecord, call_id: str | None, outcome: ToolOutcome, content: Any, refused_by: str | None
) -> ToolEnded:
    """A tool call's end: ok, failed (the first line of its result, an exit code) or denied (rule 5)."""
    text = _text_of(content)
    message = None
    if outcome is ToolOutcome.DENIED:
        # The refusal's own words when the record says who refused (the reason a hook or mode gave).
        message = (_first_line(text) if refused_by else None) or "denied by a permission rule"
    elif outcome is ToolOutcome.FAILED:
        message = _first_line(text) or "tool failed"
    denied = outcome is ToolOutcome.DENIED
    # Positional, in the fields' order (call_id, success, error_code, error_message, exit_code, user_requested,
    # result, sandboxed, file_edits, denied_by): one per tool call, and keywords cost more than the record.
    return ToolEnded("claude-code.tool_result", f"{view.id}/{call_id}", view.time_ns, NO_DATA, None, view.offset,
                     view.end_offset, view.dropped, call_id, outcome is ToolOutcome.OK, "denied" if denied else None,
                     message, _exit_code(message), False, text or None, None, None,
                     refused_by if denied else None)  # fmt: skip


class ClaudeCodeFramer:
    """One Claude Code session log's records → the loop's neutral events (see the module docstring).

    Pure: it reads only the views it is given, in order, and keeps only what the next record needs (the prompt
    and model call open, whether the prompt was aborted, the last record's id and time, a compaction waiting for
    its prompt, and the state of each concern's module), all in :meth:`snapshot`: one flat mapping, whose keys
    checkpoints written before the concerns had modules of their own hold as well.

    Args:
        state: A :meth:`snapshot` to resume from.
    """

    __slots__ = (
        "aborted",
        "background",
        "ended",
        "ending",
        "fork",
        "held",
        "last_ns",
        "last_uuid",
        "message_id",
        "prompt_id",
        "prompt_ns",
        "queue",
        "retries",
        "seed",
        "self_report",
        "started",
        "starts",
        "turn_open",
    )

    def __init__(self, state: Mapping[str, Any] | None = None) -> None:
        s = state or {}
        self.started: bool = bool(s.get("started", False))
        seed_ = s.get("seed")
        # None is the common value here (a new log): tested first, the Mapping check (an ABC's) is the costlier.
        self.seed: dict[str, Any] | None = (
            dict(seed_) if seed_ is not None and isinstance(seed_, Mapping) else None
        )
        fork = s.get("fork")
        if self.seed is not None and "fork" in self.seed:
            fork, self.seed = self.seed["fork"], None  # a session's own log that is a fork: no sub-agent's
        self.fork = ForkCopy(fork, s)
        self.queue = Queue(s)
        self.retries = Retries(s)
        self.background = Background(s)
        self.self_report = SelfReport(s)
        self.prompt_id: str | None = s.get("prompt_id")
        self.prompt_ns: int = int(s.get("prompt_ns", 0))
        self.message_id: str | None = s.get("message_id")
        self.turn_open: bool = bool(s.get("turn_open", False))
        self.aborted: bool = bool(s.get("aborted", False))
        # The open prompt's loop end, once seen: held until a record shows the loop is over (the module
        # docstring), then whether it was handed on.
        ending = s.get("ending")
        self.ending: dict[str, Any] | None = (
            dict(ending) if ending is not None and isinstance(ending, Mapping) else None
        )
        self.ended: bool = bool(s.get("ended", False))
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
        state = {
            "seed": self.seed,
            "started": self.started,
            "prompt_id": self.prompt_id,
            "prompt_ns": self.prompt_ns,
            "message_id": self.message_id,
            "turn_open": self.turn_open,
            "aborted": self.aborted,
            "ending": dict(self.ending) if self.ending is not None else None,
            "ended": self.ended,
            "last_uuid": self.last_uuid,
            "last_ns": self.last_ns,
            "held": [
                {"id": h.id, "time_ns": h.time_ns, "offset": h.offset, "end_offset": h.end_offset,
                 "trigger": h.trigger, "pre_tokens": h.pre_tokens}
                for h in self.held
            ] if self.held else [],
            "starts": [dict(t) for t in self.starts] if self.starts else [],
        }  # fmt: skip
        self.queue.snapshot(state)
        self.retries.snapshot(state)
        self.fork.snapshot(state)
        self.background.snapshot(state)
        self.self_report.snapshot(state)
        return state

    def frame(self, view: Event) -> list[Event]:
        """The loop's events for one record (often none), in the order a record is handled: a fork's copied
        history skipped, the tools of the call read last started, a held end settled, the session begun, then the
        record itself."""
        out: list[Event] = []
        cls = view.__class__
        if (
            self.prompt_id is None
            and self.seed is None
            and self.fork.skips(view, self.queue.queued, self.queue.enqueue_ns)
        ):
            return out
        if self.starts and not (cls is AssistantRecord and self._same_call(view)):  # type: ignore[arg-type]
            self._start_tools(view, out)
        if cls is SystemRecord and view.subtype == _TURN_DURATION and view.pending_background:  # type: ignore[attr-defined]
            self.background.still_running(view)  # type: ignore[arg-type]  # checked by class
            self.ending = None
        if self.ending is not None:
            self._settle_end(view, cls, out)
        is_record = isinstance(view, Record)
        if not self.started and is_record and view.session_id is not None:  # type: ignore[attr-defined]
            if self.seed is None:  # a sub-agent's file is no session of its own
                self._session(view, out)  # type: ignore[arg-type]
            self.started = True
        if cls is UserRecord:
            self._user(view, out)  # type: ignore[arg-type]  # checked by class
        elif cls is AssistantRecord:
            self._assistant(view, out)  # type: ignore[arg-type]
        elif cls is QueueOperation:
            self.queue.operation(view)  # type: ignore[arg-type]
        elif cls is Attachment and view.queued_prompt is not None:  # type: ignore[attr-defined]
            self.queue.steer(view, self.last_ns, out)  # type: ignore[arg-type]
            self.last_uuid = view.id  # the next record answers it, but it is dated when enqueued (12)
            return out
        elif cls is CompactBoundary:
            self._compaction(view, out)  # type: ignore[arg-type]
        elif cls is ApiRequest:
            self.retries.requested(view)  # type: ignore[arg-type]
        elif cls is ApiError:
            self.retries.failed(view, self.last_ns)  # type: ignore[arg-type]
        elif cls is CustomTitle:
            if self.seed is None:
                self.self_report.titled(view, self.last_ns, out)  # type: ignore[arg-type]
        elif cls is CostState:
            if self.seed is None:
                self.self_report.accounted(view, self.last_ns, out)  # type: ignore[arg-type]
        elif cls is SystemRecord and view.subtype == _TURN_DURATION:  # type: ignore[attr-defined]
            self._loop_over(view, out)
        if is_record and view.time_ns:
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
        self.retries.hand_on(out)  # cut while the CLI retried: the attempts failed all the same
        if self.ending is not None:
            self._end_prompt(out)
        return out

    def may_open(self, view: Event) -> bool:
        """Whether ``view`` may open a prompt while one is open: a user record of a new ``promptId`` (the pipeline
        keeps the state before such a line for a restart)."""
        return view.__class__ is UserRecord and view.prompt_id not in (None, self.prompt_id)

    # ------------------------------------------------------------------ records
    def _session(self, view: Record, out: list[Event]) -> None:
        self.started = True
        context = Context(view.cwd, None, None, view.git_branch, None)
        out.append(
            SessionBegan("claude-code.session", f"session/{view.id}", view.time_ns, NO_DATA, None,
                         view.offset, view.end_offset, view.dropped,
                         session_id=view.session_id, copilot_version=view.version, producer="claude-code",
                         context=context)
        )  # fmt: skip

    def _own(self, prompt_id: str | None) -> bool:
        """Whether a record of ``prompt_id`` is the open prompt's (its own id, or a background task's report's)."""
        return prompt_id is None or prompt_id == self.prompt_id or prompt_id in self.background.aliases

    def _user(self, view: UserRecord, out: list[Event]) -> None:
        prompt_id = view.prompt_id
        kind, results = view.kind_and_results()
        if not self._own(prompt_id):
            if self.seed is None and view.meta and view.turn_companion:
                self.background.companion = prompt_id  # goes with the next record of its promptId (15)
                return
            if self.seed is None and self.prompt_id is not None and view.task_notification:
                self.background.notified(view, prompt_id, out)  # type: ignore[arg-type]  # not None: not own
                return
            self._open_prompt(view, prompt_id, kind, out)  # type: ignore[arg-type]
        if kind is UserKind.TOOL_RESULTS:
            refused_by = view.refused_by
            for result in results:
                outcome = result.outcome
                if refused_by is not None and result.is_error:
                    outcome = ToolOutcome.DENIED  # 2.1.332 says who refused (plan mode, a hook, …): rule 5
                if outcome is ToolOutcome.INTERRUPTED:
                    self._abort(view, out)  # the abort cancels the tool, as Copilot's abort ends open work
                else:
                    out.append(_tool_ended(view, result.tool_use_id, outcome, result.content, refused_by))
            self.background.launched(view, out)
        elif kind is UserKind.INTERRUPT:
            self._abort(view, out)

    def _open_prompt(self, view: UserRecord, prompt_id: str, kind: UserKind, out: list[Event]) -> None:
        """A new ``promptId``: a human prompt (rule C: keyed by that id), whatever record of it comes first."""
        self.background.reset(view, out)  # before the prompt opens: what still ran is the last prompt's
        self._end_turn(view, self.last_ns or view.time_ns, out)
        text: Any = self.queue.take()
        if text is None and kind in (UserKind.PROMPT, UserKind.COMMAND):
            text = view.plain_text
        self.prompt_id, self.prompt_ns, self.aborted = prompt_id, view.time_ns, False
        self.message_id, self.ended = None, False
        seed_ = self.seed
        if seed_ is not None:
            if not seed_.get("rooted"):  # a sub-agent's file roots once: what it writes later is its work
                seed_["rooted"] = True
                out.append(rooted(view, seed_, prompt_id))
            return
        out.append(
            PromptSubmitted("claude-code.prompt", prompt_id, view.time_ns, NO_DATA, None, view.offset,
                            view.end_offset, view.dropped, content=text)
        )  # fmt: skip
        if self.fork.pending:
            self.fork.continued(view, out)
        out.extend(self.held)  # a /compact's compaction, written before its prompt's first record
        self.held.clear()

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
        # Each field read once: a record's fields are read from its JSON on every access.
        model, content = view.reply()
        if model == SYNTHETIC_MODEL:
            if view.api_error:
                # Rule B: the failed request is in no log and gets no span: close the last turn first. Its
                # failed attempts (11) were the call's that failed for good: under the agent.
                self._end_turn(view, t, out)
                self.retries.hand_on(out)
                out.append(
                    Failed("claude-code.api_error", view.id, t, NO_DATA, None, view.offset, view.end_offset,
                           view.dropped, error_type=view.error or "api_error",
                           message=_first_line(_text_of(content)), status_code=view.api_error_status)
                )  # fmt: skip
            return
        message_id, stop = view.call_ids()
        message_id = message_id or view.id
        request = view.request
        if message_id != self.message_id:
            start = self.last_ns if view.parent_uuid == self.last_uuid and self.last_ns else t
            start = self.retries.began(start)  # the call began with its first failed attempt (11)
            start = max(min(start, t), self.prompt_ns) if self.prompt_ns <= t else t
            self._end_turn(view, start, out)
            self.message_id, self.turn_open = message_id, True
            out.append(
                TurnBegan("claude-code.turn", f"turn/{message_id}", start, NO_DATA, None, view.offset,
                          view.end_offset, view.dropped, message_id)
            )  # fmt: skip
            self.retries.hand_on(out)
            usage = view.usage
            if usage is not None:
                cache_read, cache_write = usage.cache_read_input_tokens, usage.cache_creation_input_tokens
                out.append(
                    CallUsage("claude-code.usage", f"usage/{message_id}", t, NO_DATA, None, view.offset,
                              view.end_offset, view.dropped,
                              Usage(usage.input_tokens + cache_read + cache_write, usage.output_tokens,
                                       cache_read, cache_write, None, 0.0, model, request,
                                       _FINISH.get(stop, stop) if stop else None, None, None, None, PROVIDER))
                )  # fmt: skip
        uses = tool_requests_of(content)
        text = _text_of(content)
        # Positional, in the fields' order (turn_id, model, api_call_id, output_tokens, content, reasoning_text,
        # tool_requests): one per assistant record.
        out.append(
            Answered("claude-code.assistant", view.id, t, NO_DATA, None, view.offset, view.end_offset,
                     view.dropped, message_id, model, request, None, text or None, None, uses)
        )  # fmt: skip
        if uses:
            self.starts.extend(
                {"id": use.call_id or view.id, "time_ns": t, "offset": view.offset, "end_offset": view.end_offset,
                 "call_id": use.call_id, "name": use.name, "arguments": use.arguments}
                for use in uses
            )  # fmt: skip
        elif stop in _FINAL:
            self._end_turn(view, t, out)
            if self.seed is not None:  # a sub-agent's final answer: its work is done
                out.append(
                    RootEnded("claude-code.subagent_end", f"subagent-end/{view.id}", t, NO_DATA, None, view.offset,
                              view.end_offset, view.dropped)
                )  # fmt: skip
            elif self._may_end():
                # The final answer: the loop is over once its last block is read (the module docstring).
                self.ending = end_held_at(view)

    def _compaction(self, view: CompactBoundary, out: list[Event]) -> None:
        compacted = Compacted(
            "claude-code.compact", view.id, view.time_ns, NO_DATA, None, view.offset, view.end_offset,
            view.dropped, trigger=view.trigger, pre_tokens=view.pre_tokens,
        )  # fmt: skip
        if self.queue.queued is not None:
            self.held.append(compacted)  # /compact was typed: its prompt's first record comes next
        else:
            out.append(compacted)

    # ------------------------------------------------------------------ turns and tools
    def _same_call(self, view: AssistantRecord) -> bool:
        """Another block of the open call (same ``message.id``): its tools wait for the call's last block."""
        return not view.synthetic and (view.message_id or view.id) == self.message_id

    def _start_tools(self, view: Event, out: list[Event]) -> None:
        """The open call's last block was read: its tools start, each at its own block's time."""
        for t in self.starts:
            out.append(
                ToolBegan("claude-code.tool_use", t["id"], t["time_ns"], NO_DATA, None, t["offset"], t["end_offset"],
                          view.dropped, t["call_id"], t["name"], t["arguments"])
            )  # fmt: skip
        self.starts = []

    # ------------------------------------------------------------------ the prompt's end
    def _may_end(self) -> bool:
        """Whether the open prompt's loop can end now: a prompt of this log (not a sub-agent's file), not ended
        yet, with no tool waiting to start and no background sub-agent still running."""
        return (
            self.seed is None
            and self.prompt_id is not None
            and not self.ended
            and not self.starts
            and not self.background.background
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
            if not self._own(view.prompt_id):  # type: ignore[attr-defined]
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

    def _end_turn(self, view: Event, time_ns: int, out: list[Event]) -> None:
        if not self.turn_open:
            return
        self.turn_open = False
        out.append(
            TurnEnded("claude-code.turn_end", f"turn-end/{self.message_id}", time_ns, NO_DATA, None, view.offset,
                      view.end_offset, view.dropped, self.message_id)
        )  # fmt: skip


def seed(path: Path) -> dict[str, Any] | None:
    """What a log needs from beside it: a sub-agent's file, to be rooted (rule A, :func:`.subagents.
    subagent_seed`); a session's own log that is a fork, its origin (13, :func:`.forks.fork_seed`); else ``None``."""
    return subagent_seed(path) if is_subagent_file(path) else fork_seed(path)


# Claude Code's log through the loop: its reader, this framer and the neutral events' translator.
CLAUDE_CODE = LoopSource(Source.CLAUDE_CODE, read_line, ClaudeCodeFramer, NEUTRAL, seed, subagent_log)
