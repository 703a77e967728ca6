"""OpenInference (Phoenix, Arize): span kinds, ``llm.*`` token counts, ``tool.*`` and ``input``/``output``.

No installed package defines these names (``openinference-semantic-conventions`` would, for a few strings), so
they are declared here once. Spec: OpenInference semantic conventions (span kinds LLM, TOOL, AGENT, CHAIN).
"""

from __future__ import annotations

from typing import Any, Final

from ..model.activity import AgentRun, HookRun, ModelCall, PromptRun, ToolCall, Turn

SPAN_KIND: Final = "openinference.span.kind"
INPUT_VALUE: Final = "input.value"
INPUT_MIME_TYPE: Final = "input.mime_type"
OUTPUT_VALUE: Final = "output.value"
OUTPUT_MIME_TYPE: Final = "output.mime_type"
TOOL_CALL_ID: Final = "tool_call.id"
JSON: Final = "application/json"
TEXT: Final = "text/plain"


def model_call(attrs: dict[str, Any], rec: ModelCall) -> None:
    attrs[SPAN_KIND] = "LLM"
    attrs["llm.model_name"] = rec.model
    attrs["llm.provider"] = rec.provider
    u = rec.usage
    # Unknown counts are absent (never 0), and so is a total missing a part.
    for key, value in (
        ("llm.token_count.prompt", u.input),
        ("llm.token_count.completion", u.output),
        ("llm.token_count.total", None if u.input is None or u.output is None else u.input + u.output),
        ("llm.token_count.prompt_details.cache_read", u.cache_read),
        ("llm.token_count.prompt_details.cache_write", u.cache_write),
        ("llm.token_count.completion_details.reasoning", u.reasoning),
    ):
        if value is not None:
            attrs[key] = value


# The cost of an LLM span in USD (openinference-semantic-conventions, SpanAttributes.LLM_COST_PROMPT,
# LLM_COST_COMPLETION, LLM_COST_TOTAL: "llm.cost.prompt", "llm.cost.completion", "llm.cost.total").
COST_PROMPT: Final = "llm.cost.prompt"
COST_COMPLETION: Final = "llm.cost.completion"
COST_TOTAL: Final = "llm.cost.total"


def cost(attrs: dict[str, Any], input_usd: float, output_usd: float) -> None:
    """A call's cost (:mod:`.prices`), which Phoenix shows and sums per trace."""
    attrs[COST_PROMPT] = input_usd
    attrs[COST_COMPLETION] = output_usd
    attrs[COST_TOTAL] = input_usd + output_usd


def tool_call(attrs: dict[str, Any], rec: ToolCall, result_on_spans: bool) -> None:
    attrs[SPAN_KIND] = "TOOL"
    attrs["tool.name"] = rec.name
    attrs[TOOL_CALL_ID] = rec.call_id
    if rec.arguments_json is not None:
        attrs[INPUT_VALUE] = rec.arguments_json
        attrs["tool.parameters"] = rec.arguments_json
        attrs[INPUT_MIME_TYPE] = JSON
    if result_on_spans and rec.result_text is not None:
        attrs[OUTPUT_VALUE] = rec.result_text
        attrs[OUTPUT_MIME_TYPE] = TEXT


def turn(attrs: dict[str, Any], rec: Turn) -> None:
    attrs[SPAN_KIND] = "CHAIN"


def agent_run(attrs: dict[str, Any], rec: AgentRun) -> None:
    attrs[SPAN_KIND] = "AGENT"
    if rec.input_text is not None:
        attrs[INPUT_VALUE] = rec.input_text
    if rec.output_text is not None:
        attrs[OUTPUT_VALUE] = rec.output_text


def hook_run(attrs: dict[str, Any], rec: HookRun) -> None:
    # A step of the agent's own pipeline, not a tool the model called: CHAIN (a tool hook sits under its TOOL).
    attrs[SPAN_KIND] = "CHAIN"


def prompt_run(attrs: dict[str, Any], rec: PromptRun) -> None:
    attrs[SPAN_KIND] = "AGENT"
    if rec.agent_name is not None:
        attrs["agent.name"] = rec.agent_name
    if rec.input_text is not None:
        attrs[INPUT_VALUE] = rec.input_text
        attrs[INPUT_MIME_TYPE] = TEXT
    if rec.output_text is not None:
        attrs[OUTPUT_VALUE] = rec.output_text
