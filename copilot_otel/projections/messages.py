"""GenAI message JSON for captured content: the shapes backends parse, built from text that was already captured.

``gen_ai.input.messages``, ``gen_ai.output.messages`` and ``gen_ai.system_instructions`` follow the GenAI
semantic conventions' message schemas (``{"role", "parts": [{"type": "text" | "tool_call" | "tool_call_response" |
"reasoning", ...}]}``), as the Copilot CLI's own export writes them; OpenInference's ``input.value`` /
``output.value`` carry the same text for Phoenix. Kept apart from the fold, which decides *which* captured texts
belong to which call or agent: here is only *how* they are written, under the names :mod:`.genai` and
:mod:`.openinference` declare. Every text passed in is already scrubbed and
cut (:mod:`copilot_otel.settings.content`), so each part is bounded and the JSON always valid.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from . import genai
from . import openinference as oi

Message = dict[str, Any]
Part = dict[str, Any]


def dumps(value: Any) -> str:
    """Compact JSON text, as attribute values carry it."""
    return orjson.dumps(value).decode()


def user_message(text: str) -> Message:
    """What the user (or, for a sub-agent, its caller) sent."""
    return {"role": "user", "parts": [{"type": "text", "content": text}]}


def tool_result_message(call_id: str, text: str) -> Message:
    """A tool's result as the model receives it in its next call."""
    return {"role": "tool", "parts": [{"type": "tool_call_response", "id": call_id, "response": text}]}


def tool_call_part(call_id: str | None, name: str | None, arguments_json: str | None) -> Part:
    """A tool call the assistant requested; captured arguments (valid JSON text) are embedded as JSON, as the
    CLI's own export does."""
    part: Part = {"type": "tool_call"}
    if call_id is not None:
        part["id"] = call_id
    if name is not None:
        part["name"] = name
    if arguments_json is not None:
        part["arguments"] = orjson.loads(arguments_json)
    return part


def chat_attributes(
    input_messages: Sequence[Message],
    reasoning: Sequence[str],
    text: str | None,
    tool_calls: Sequence[Part],
    finish_reason: str | None,
) -> dict[str, str]:
    """A model call's captured content as span (or details event) attributes; empty when nothing was captured.

    Args:
        input_messages: What the call sent that the agent's previous call did not (the prompt, tool results).
        reasoning: Reasoning blocks of the answer.
        text: The answer's text.
        tool_calls: The ``tool_call`` parts the answer requested.
        finish_reason: Why the answer ended, when known.
    """
    attrs: dict[str, str] = {}
    if input_messages:
        attrs[oi.INPUT_VALUE] = "\n\n".join(
            part.get("content") or part.get("response") or ""
            for message in input_messages
            for part in message["parts"]
        )
        attrs[oi.INPUT_MIME_TYPE] = oi.TEXT
        attrs[genai.INPUT_MESSAGES] = dumps(list(input_messages))
    parts: list[Part] = [{"type": "reasoning", "content": block} for block in reasoning]
    if text is not None:
        attrs[oi.OUTPUT_VALUE] = text
        parts.append({"type": "text", "content": text})
    parts.extend(tool_calls)
    if parts:
        answer: Message = {"role": "assistant", "parts": parts}
        if finish_reason:
            answer["finish_reason"] = finish_reason
        attrs[genai.OUTPUT_MESSAGES] = dumps([answer])
    return attrs


def agent_attributes(
    input_text: str | None, output_text: str | None, system_text: str | None
) -> dict[str, str]:
    """An ``invoke_agent`` span's content: the prompt it was given, its last answer and its system prompt.

    Backends that build a trace's input and output from the root span's messages (Langfuse, the GenAI views) then
    show the conversation without opening the chat spans.
    """
    attrs: dict[str, str] = {}
    if system_text is not None:
        attrs[genai.SYSTEM_INSTRUCTIONS] = dumps([{"type": "text", "content": system_text}])
    if input_text is not None:
        attrs[genai.INPUT_MESSAGES] = dumps([user_message(input_text)])
    if output_text is not None:
        attrs[genai.OUTPUT_MESSAGES] = dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": output_text}]}]
        )
    return attrs
