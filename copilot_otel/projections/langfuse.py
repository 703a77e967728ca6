"""Langfuse: the trace name and the observation level and message of failed work.

Langfuse reads GenAI and OpenInference attributes too; these are the few it needs in its own namespace: every
span that failed (a tool, a model call, an agent, a prompt) is an ERROR observation with its message. Spec:
Langfuse's OpenTelemetry attribute mapping (``langfuse.trace.*``, ``langfuse.observation.*``).
"""

from __future__ import annotations

from typing import Any, Final

from ..model.activity import HookRun, PromptRun

LEVEL: Final = "langfuse.observation.level"
OBSERVATION_TYPE: Final = "langfuse.observation.type"
STATUS_MESSAGE: Final = "langfuse.observation.status_message"


# A generation's cost in USD by usage type, as a JSON object (Langfuse's Python SDK,
# LangfuseOtelSpanAttributes.OBSERVATION_COST_DETAILS = "langfuse.observation.cost_details"): given, Langfuse
# takes it rather than inferring the cost from its own model prices.
COST_DETAILS: Final = "langfuse.observation.cost_details"


def cost(attrs: dict[str, Any], input_usd: float, output_usd: float) -> None:
    """A call's cost (:mod:`.prices`): ``{"input": ..., "output": ..., "total": ...}``."""
    total = input_usd + output_usd
    attrs[COST_DETAILS] = f'{{"input": {input_usd!r}, "output": {output_usd!r}, "total": {total!r}}}'


def failed(attrs: dict[str, Any], status_message: str) -> None:
    """Failed work shows as an ERROR observation with its message."""
    attrs[LEVEL] = "ERROR"
    attrs[STATUS_MESSAGE] = status_message


def prompt_run(attrs: dict[str, Any], rec: PromptRun, agent: str | None = None) -> None:
    """The trace's name: the session's title, else the main agent's name (a custom agent's, else the CLI's)."""
    # The session title is content (an LLM summary of the prompt): it names the trace only when captured.
    attrs["langfuse.trace.name"] = rec.facts.title or f"{rec.agent_name or agent or 'copilot'} prompt"


def hook_run(attrs: dict[str, Any], rec: HookRun) -> None:
    # A plain span observation (not a generation or a tool call).
    attrs[OBSERVATION_TYPE] = "span"
