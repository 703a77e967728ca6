"""What the loop's entity modules share: its state, the ids and times they stamp, and each other's operations.

:class:`LoopState` is the whole of the loop's memory between events (besides the per-prompt records of
:mod:`copilot_otel.loop.foldstate`, which hang off it). The entity modules (:mod:`.prompts`, :mod:`.turns`,
:mod:`.tools`, :mod:`.agents`, :mod:`.session`, :mod:`.notes`) are plain functions over it; they import this
module and no sibling. What one entity does for another (a closing prompt closes its agents, a tool's start ends
the model call before it) is an operation declared here and bound by the shell
(:class:`~copilot_otel.loop.agentloop.AgentLoop` assigns each entity's function to its name), so a call costs what a
method call costs and the modules stay acyclic.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..model import ids
from ..model.activity import Detection, IncompleteReason, Outcome, Record, SkillInvoked, Usage
from ..model.inputs import Envelope, Event, SubagentEndInput, ToolEndInput
from ..model.inputs import Usage as UsageInfo
from ..model.records import DropReason
from ..settings.content import ContentGate, ContentKind, ContentPolicy
from .foldstate import Agent, Hook, Prompt, SessionContext, Tool
from .foldstate import Turn as OpenTurn
from .runaway import RunawayThresholds

__all__ = ["COPILOT_AGENT", "OWN_API", "FoldSettings", "Handler", "LoopState", "Translator", "agent_of"]

# The provider of model calls when no usage record has said otherwise: the CLI's own model API.
OWN_API = "github"

# The coding agent that writes a log, by the producer its session start names (SessionContext.producer, which the
# checkpoint keeps): Copilot CLI's ``session.start`` says ``copilot-agent`` (its other producers start with
# "copilot" too); the other sources' framers name their CLI as the agent is called.
COPILOT_AGENT = "copilot"
_AGENT_OF_PRODUCER = {"claude-code": "claude-code", "codex": "codex"}


def agent_of(producer: str | None) -> str | None:
    """The agent (``copilot``, ``claude-code``, ``codex``) a session start's producer names; ``None``: none (no
    start read yet, as in a sub-agent's own file, or a producer not known)."""
    if producer is None:
        return None
    named = _AGENT_OF_PRODUCER.get(producer)
    if named is not None:
        return named
    return COPILOT_AGENT if producer.startswith(COPILOT_AGENT) else None


# Events read only for their content (the system prompt, 20-50 KB a line, and reasoning): parse skips them
# without decoding unless their capture switch is on.
_CONTENT_ONLY_TYPES = {
    ContentKind.SYSTEM_PROMPT: b"system.message",
    ContentKind.REASONING: b"assistant.reasoning",
}
# :attr:`FoldSettings.undecoded_types` by the content kinds captured.
_UNDECODED: dict[frozenset[ContentKind], frozenset[bytes]] = {}


@dataclass(frozen=True, slots=True)
class FoldSettings:
    """Everything the loop and the projections need besides the events; injected so both stay pure."""

    content: ContentPolicy = field(default_factory=ContentPolicy)
    runaway: RunawayThresholds = field(default_factory=RunawayThresholds)

    @property
    def undecoded_types(self) -> frozenset[bytes]:
        """Event types parse may skip without decoding: those read only for content that is not captured (worked
        out once per set of captured kinds: every log's pipeline asks)."""
        enabled = self.content.enabled
        types = _UNDECODED.get(enabled)
        if types is None:
            types = _UNDECODED[enabled] = frozenset(
                event_type for kind, event_type in _CONTENT_ONLY_TYPES.items() if kind not in enabled
            )
        return types


# A handler folds one event of its class into the loop's state (see :class:`Translator`).
Handler = Callable[["LoopState", Any], None]


@dataclass(frozen=True, slots=True)
class Translator:
    """How one source's typed events drive the loop: the handler of each event class it reads.

    Copilot CLI's is :data:`copilot_otel.sources.copilot.translator.COPILOT`, the other sources' framers' is
    :data:`copilot_otel.loop.neutral.NEUTRAL`: each over the same entity modules, which name no event class.

    Attributes:
        handlers: The handler of each event class (any other class is read for its time only).
        keeps_unanswered: Classes that may follow a turn that ended unanswered without settling its model call
            (the error or abort that says why, and what the CLI writes in between); any other settles it.
        aside: Reads an event that is not part of the loop's work while the context says so (Copilot's imported
            transcripts); returns whether it took the event.
    """

    handlers: Mapping[type[Event], Handler]
    keeps_unanswered: frozenset[type[Event]] = frozenset()
    aside: Callable[[LoopState, Event], bool] | None = None


class LoopState:
    """The loop's state between events, and the operations its entities call of one another.

    Attributes:
        settings, gate: Content policy and runaway thresholds; the gate every kept piece of content passes.
        ctx: The session's facts (the only state that outlives a prompt, checkpointed).
        prompts: The prompts still open, by key; ``current`` the one new activity belongs to.
        by_agent_id, by_task_call: Where sub-agents' events go (envelope ``agentId``, spawning ``toolCallId``).
        tool_owner: The prompt of each open tool call.
        notified, cli_calls: Agents told by a notification that background work finished (the CLI's next
            message for them is its own, not a model call), and the tool calls such messages asked for.
        pending_hooks, pending_notes, pending_at: What came before the prompt it belongs to (hooks, a
            user-invoked skill), and where the first of them was read with the context then (a restart
            re-folds from there).
        unanswered: Turns that ended with no answer and no usage (the model call failed or was cut); what
            follows says which.
        out: The records completed by the event being folded.
        dropped: The values dropped while folding this log: what events lose as they are parsed and read (the
            pipeline parses each line into this list) and what the loop drops itself (an end clamped to its
            start); the pipeline returns them with the step.
        offset: The end offset of the event's line (each record's ``source_offset``).
    """

    __slots__ = (
        "by_agent_id",
        "by_task_call",
        "cli_calls",
        "ctx",
        "current",
        "dropped",
        "gate",
        "notified",
        "offset",
        "out",
        "pending_at",
        "pending_hooks",
        "pending_notes",
        "prompts",
        "settings",
        "tool_owner",
        "unanswered",
    )

    def __init__(self, settings: FoldSettings, ctx: SessionContext) -> None:
        self.settings = settings
        self.gate = ContentGate(settings.content)
        self.ctx = ctx
        self.prompts: dict[str, Prompt] = {}
        self.current: Prompt | None = None
        self.by_agent_id: dict[str, tuple[Prompt, Agent]] = {}
        self.by_task_call: dict[str, tuple[Prompt, Agent]] = {}
        self.tool_owner: dict[str, Prompt] = {}
        self.notified: set[str | None] = set()
        self.cli_calls: set[str] = set()
        self.pending_hooks: dict[str, Hook] = {}
        self.pending_notes: list[tuple[int, SkillInvoked]] = []  # (offset of its line, note)
        self.pending_at: tuple[int, dict[str, Any]] | None = None
        self.unanswered: list[tuple[Prompt, Agent, OpenTurn, int]] = []
        self.out: list[Record] = []
        self.dropped: list[tuple[DropReason, str]] = []
        self.offset = 0

    @property
    def agent(self) -> str | None:
        """Which coding agent wrote the log (:func:`agent_of` its producer): a neutral fact, named on every signal
        by the projections; derived from the checkpointed producer, so the context's schema stays as it is."""
        return agent_of(self.ctx.producer)

    # ------------------------------------------------------------------ ids and times, from the events only
    def sid(self, *parts: str) -> int:
        """The span id of ``parts`` in this session (deterministic)."""
        return ids.span_id(self.ctx.session_id, *parts)

    def unique_sid(self, prompt: Prompt, *parts: str) -> int:
        """A span id from ``parts``, made unique within the prompt if a log repeats ids (deterministic: the
        prompt is always re-folded from its first line)."""
        key = "\x1f".join(parts)
        seen = prompt.used_keys.get(key, 0)
        prompt.used_keys[key] = seen + 1
        return self.sid(*parts) if seen == 0 else self.sid(*parts, f"#{seen}")

    def not_before(self, end_ns: int, start_ns: int) -> int:
        """An end dated before its start (the clock stepped back between the two events) becomes the start,
        and is noted as a dropped value (``end_before_start``); an unknown end (0) is not one."""
        if end_ns >= start_ns:
            return end_ns
        if end_ns:
            self.dropped.append(
                (DropReason.END_BEFORE_START, f"an end {(start_ns - end_ns) / 1e9:.3f} s before its start")
            )
        return start_ns

    @staticmethod
    def ended(prompt: Prompt, end_ns: int) -> None:
        """Work of ``prompt`` ended at ``end_ns``: the prompt lasts at least until then."""
        if end_ns > prompt.end_ns:
            prompt.end_ns = end_ns

    @staticmethod
    def touch(prompt: Prompt, agent: Agent, time_ns: int) -> None:
        """Activity of ``agent`` at ``time_ns``: its prompt, itself and its open turn last at least until then."""
        if time_ns > prompt.last_ns:
            prompt.last_ns = time_ns
        if time_ns > agent.last_ns:
            agent.last_ns = time_ns
        if agent.turn is not None and time_ns > agent.turn.last_ns:
            agent.turn.last_ns = time_ns

    def detect(self, prompt: Prompt, detection: Detection | None) -> None:
        """Hand on a runaway rule's detection, if it fired (:mod:`copilot_otel.loop.runaway`), noted on the prompt."""
        if detection is None:
            return
        detection.session_id = self.ctx.session_id
        detection.trace_id = prompt.trace_id
        detection.span_id = prompt.root.span_id
        detection.turns_total = prompt.turns_total
        detection.tool_calls = prompt.tool_calls
        detection.source_offset = self.offset
        prompt.add_note(detection)
        self.out.append(detection)

    # ------------------------------------------------------------------ operations of one entity for another
    # Each is the function of the same name in the entity module named, bound by the shell (AgentLoop).

    # prompts
    def ensure_prompt(self, event: Envelope) -> Prompt:
        raise NotImplementedError

    def close_prompt(
        self, prompt: Prompt, time_ns: int, reason: IncompleteReason | None, incomplete: bool
    ) -> None:
        raise NotImplementedError

    def maybe_close_lingering(self, prompt: Prompt) -> None:
        raise NotImplementedError

    def adopt_pending(self, event: Envelope | None) -> None:
        raise NotImplementedError

    def hold(self, event: Envelope) -> None:
        raise NotImplementedError

    # agents
    def route(self, event: Envelope) -> tuple[Prompt, Agent]:
        raise NotImplementedError

    def close_agent(
        self,
        prompt: Prompt,
        agent: Agent,
        time_ns: int,
        reason: IncompleteReason | None,
        incomplete: bool,
        ended: SubagentEndInput | None = None,
    ) -> None:
        raise NotImplementedError

    # turns and model calls
    def end_turn(
        self, prompt: Prompt, agent: Agent, end_ns: int, incomplete: IncompleteReason | None = None
    ) -> None:
        raise NotImplementedError

    def emit_chat(
        self,
        prompt: Prompt,
        agent: Agent,
        turn: OpenTurn,
        end_ns: int,
        outcome: Outcome,
        error_type: str | None,
        message: str | None,
        *,
        parent: int | None = None,
        span_id: int | None = None,
        origin: str | None = None,
    ) -> None:
        raise NotImplementedError

    def standalone_chat(
        self,
        prompt: Prompt,
        agent: Agent,
        event: Envelope,
        usage: Usage,
        model: str | None,
        duration_ms: float | None,
        origin: str,
        record: UsageInfo | None = None,
    ) -> None:
        raise NotImplementedError

    def flush_unanswered(
        self,
        prompt: Prompt | None = None,
        outcome: Outcome = Outcome.ERROR,
        error_type: str | None = None,
        message: str | None = None,
    ) -> None:
        raise NotImplementedError

    # tools, permissions, hooks
    def end_tool(
        self,
        prompt: Prompt,
        tool: Tool,
        end_ns: int,
        *,
        success: bool,
        error_type: str | None,
        message: str | None,
        incomplete: IncompleteReason | None = None,
        completion: ToolEndInput | None = None,
    ) -> None:
        raise NotImplementedError

    def emit_hook(self, prompt: Prompt, hook: Hook, end_ns: int, incomplete: IncompleteReason | None) -> None:
        raise NotImplementedError

    def end_permission(
        self,
        prompt: Prompt,
        request_id: str,
        end_ns: int,
        result: str | None,
        incomplete: IncompleteReason | None,
    ) -> None:
        raise NotImplementedError
