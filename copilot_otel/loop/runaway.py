"""Runaway detection: the rules that decide when an open prompt counts as running away.

The rules are kept apart from :class:`~copilot_otel.loop.agentloop.AgentLoop` so that what fires, and when, can be read
(and tested) without the span, metric and log plumbing. Each check is called by the fold at the event that can
trip it, updates the prompt's runaway counters (streaks, the once-per-prompt ``fired`` set, the re-arm flags,
the token window) and returns a :class:`~copilot_otel.model.activity.Detection` when the rule fires, else ``None``. The checks do no I/O and
read no clock: times come from the events, so a replay detects exactly what the live daemon did. The loop hands
each detection on; the projections make it a span event on the root span, a counter increment and a WARN log event.

Streak rules (``identical_tool_calls``, ``tool_errors``) fire once per streak and re-arm when it breaks; the
``turns`` and ``burn_rate`` rules fire at most once per prompt.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model.activity import Detection
from .foldstate import Prompt

_MINUTE_NS = 60_000_000_000


@dataclass(frozen=True, slots=True)
class RunawayThresholds:
    """When a prompt counts as running away (0 disables a check)."""

    turns: int = 25
    identical_tool_calls: int = 5
    tool_errors: int = 5
    tokens_per_minute: int = 2_000_000


def check_turns(prompt: Prompt, limits: RunawayThresholds, time_ns: int) -> Detection | None:
    """Called when a turn begins: fires once per prompt when its turns (all agents) reach the limit."""
    limit = limits.turns
    if limit and prompt.turns_total >= limit and "turns" not in prompt.fired:
        prompt.fired.add("turns")
        return Detection("turns", time_ns, limit)
    return None


def check_identical(
    prompt: Prompt, limits: RunawayThresholds, time_ns: int, name: str, args_hash: str
) -> Detection | None:
    """Called when a tool starts: fires when one tool call (name and arguments hash) repeats ``limit`` times.

    The calls must follow one another; a different call resets the streak and re-arms the rule.
    """
    key = (name, args_hash)
    if key == prompt.last_call:
        prompt.identical_streak += 1
    else:
        prompt.last_call = key
        prompt.identical_streak = 1
        prompt.identical_armed = True
    limit = limits.identical_tool_calls
    if limit and prompt.identical_streak >= limit and prompt.identical_armed:
        prompt.identical_armed = False
        return Detection("identical_tool_calls", time_ns, limit, tool_name=name, arguments_hash=args_hash)
    return None


def check_errors(prompt: Prompt, limits: RunawayThresholds, time_ns: int, success: bool) -> Detection | None:
    """Called when a tool completes: fires when ``limit`` tool calls in a row failed; a success re-arms it."""
    if success:
        prompt.error_streak = 0
        prompt.errors_armed = True
        return None
    prompt.error_streak += 1
    limit = limits.tool_errors
    if limit and prompt.error_streak >= limit and prompt.errors_armed:
        prompt.errors_armed = False
        return Detection("tool_errors", time_ns, limit)
    return None


def check_burn(prompt: Prompt, limits: RunawayThresholds, time_ns: int, tokens: int) -> Detection | None:
    """Called on each usage record: fires once per prompt when its last minute's tokens reach the limit.

    Input + output tokens over a sliding minute of event time, so a replay measures what the live daemon did.
    """
    limit = limits.tokens_per_minute
    if not limit or not tokens:
        return None
    window = prompt.token_window
    window.append((time_ns, tokens))
    prompt.token_window_sum += tokens
    horizon = time_ns - _MINUTE_NS
    while window and window[0][0] < horizon:
        prompt.token_window_sum -= window.popleft()[1]
    if prompt.token_window_sum >= limit and "burn_rate" not in prompt.fired:
        prompt.fired.add("burn_rate")
        return Detection("burn_rate", time_ns, limit, tokens_last_minute=prompt.token_window_sum)
    return None
