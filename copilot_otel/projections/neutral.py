"""What another agent's spans say where Copilot CLI's spans use the CLI's own names (``github.copilot.*``).

The Copilot CLI's vocabulary (:mod:`.copilot`) is kept for dashboards built on that CLI's native export; a span of
Claude Code or Codex CLI must not look like the Copilot CLI wrote it, so the same facts go under general semantic
conventions where they have a name (``vcs.*`` for the session's git facts, ``http.response.status_code`` for a
failed request's status) and under ours (``copilot_otel.*``) otherwise. Each function has the signature of its
namesake in :mod:`.copilot`, so :mod:`.vendors` can put either in a vocabulary.
"""

from __future__ import annotations

from typing import Any, Final

from opentelemetry.semconv._incubating.attributes.vcs_attributes import (
    VCS_REF_HEAD_NAME,
    VCS_REF_HEAD_REVISION,
    VCS_REPOSITORY_NAME,
)
from opentelemetry.semconv.attributes.http_attributes import HTTP_RESPONSE_STATUS_CODE

from ..model.activity import (
    Abort,
    AgentRun,
    Compaction,
    ModelCall,
    PromptRun,
    SessionError,
    ToolCall,
    Turn,
    UserMessage,
)
from . import ours

STATUS_CODE: Final = HTTP_RESPONSE_STATUS_CODE


def _put(attrs: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        attrs[key] = value


def model_call(attrs: dict[str, Any], rec: ModelCall) -> None:
    _put(attrs, ours.TURN_ID, rec.turn_id)


def tool_call(attrs: dict[str, Any], rec: ToolCall) -> None:
    """Nothing: a tool's outcome is ``error.type`` already (``denied`` apart from a failure)."""


def turn(attrs: dict[str, Any], rec: Turn) -> None:
    _put(attrs, ours.TURN_ID, rec.turn_id)


def agent_run(attrs: dict[str, Any], rec: AgentRun) -> None:
    attrs[ours.AGENT_TURN_COUNT] = rec.turn_count


def prompt_run(attrs: dict[str, Any], rec: PromptRun) -> None:
    attrs[ours.AGENT_TURN_COUNT] = rec.turn_count
    facts = rec.facts
    _put(attrs, VCS_REPOSITORY_NAME, facts.repository)
    _put(attrs, VCS_REF_HEAD_NAME, facts.branch)
    _put(attrs, VCS_REF_HEAD_REVISION, facts.head_commit)


def user_message(rec: UserMessage) -> dict[str, Any]:
    return {ours.USER_MESSAGE_SOURCE: rec.source}


def abort(rec: Abort) -> dict[str, Any]:
    return {ours.ABORT_REASON: rec.reason}


def compaction(rec: Compaction) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    prefix = "copilot_otel.compaction."
    for name, value in (
        ("trigger", rec.trigger),
        ("success", rec.success),
        ("pre_tokens", rec.pre_tokens),
        ("post_tokens", rec.post_tokens),
        ("tokens_removed", rec.tokens_removed),
        ("messages_removed", rec.messages_removed),
        ("current_tokens", rec.current_tokens),
        ("token_limit", rec.token_limit),
    ):
        _put(attrs, prefix + name, value)
    return attrs


def error(attrs: dict[str, Any], rec: SessionError) -> None:
    """The failed request's HTTP status (its type is ``exception.type`` / ``error.type`` already)."""
    _put(attrs, STATUS_CODE, rec.status_code)
