"""The ``runaway_action`` setting's value: :class:`RunawayPolicy` (the action for each runaway reason) and its parsers.

A leaf module: the settings table (:mod:`copilot_otel.settings.config`) parses the setting at every start, and the action
module (:mod:`copilot_otel.daemon.act`) carries it out; neither imports the other for it. The policy reads
``interrupt:identical,errors;notify:turns`` (the action for each listed reason; a bare action is every other
reason's), or in the config file a table ``runaway_action = {identical = "interrupt", default = "notify"}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, get_args

__all__ = ["ACTIONS", "REASONS", "Action", "RunawayPolicy", "parse_policy", "parse_repositories"]

Action = Literal["none", "notify", "interrupt"]
ACTIONS: tuple[str, ...] = get_args(Action)
#: Reason names as the policy may spell them -> the detection's ``reason``.
REASONS: Mapping[str, str] = {
    "identical": "identical_tool_calls",
    "identical_tool_calls": "identical_tool_calls",
    "errors": "tool_errors",
    "tool_errors": "tool_errors",
    "turns": "turns",
    "burn": "burn_rate",
    "burn_rate": "burn_rate",
}
_SHORT = {"identical_tool_calls": "identical", "tool_errors": "errors", "turns": "turns", "burn_rate": "burn"}


@dataclass(frozen=True, slots=True)
class RunawayPolicy:
    """The action for each runaway reason (``default`` for those not listed)."""

    default: Action = "none"
    by_reason: tuple[tuple[str, Action], ...] = ()

    def action_for(self, reason: str) -> Action:
        return dict(self.by_reason).get(reason, self.default)

    @property
    def active(self) -> bool:
        """Whether any reason does more than report."""
        return self.default != "none" or any(a != "none" for _, a in self.by_reason)

    @property
    def interrupts(self) -> bool:
        return self.default == "interrupt" or any(a == "interrupt" for _, a in self.by_reason)

    def __str__(self) -> str:
        groups: dict[str, list[str]] = {}
        for reason, action in self.by_reason:
            groups.setdefault(action, []).append(_SHORT.get(reason, reason))
        parts = [f"{action}:{','.join(reasons)}" for action, reasons in groups.items()]
        if self.default != "none" or not parts:
            parts.append(self.default)
        return ";".join(parts)


def _action(text: object, where: str) -> Action:
    value = str(text).strip().lower()
    if value not in ACTIONS:
        raise ValueError(f"{where}: an action is one of {', '.join(ACTIONS)}")
    return value  # type: ignore[return-value]


def _reason(text: str) -> str:
    key = text.strip().lower().replace("-", "_")
    if key not in REASONS:
        raise ValueError(f"unknown reason {text.strip()!r} (reasons: identical, errors, turns, burn)")
    return REASONS[key]


def parse_policy(raw: object) -> RunawayPolicy:
    """``"interrupt"``, ``"interrupt:identical,errors;notify:turns"`` or a mapping ``{reason: action}`` (key
    ``default`` for the rest). Raises ``ValueError`` saying what is wrong."""
    default: Action = "none"
    by_reason: dict[str, Action] = {}
    if isinstance(raw, Mapping):
        for key, value in raw.items():
            if str(key).strip().lower() == "default":
                default = _action(value, "default")
            else:
                by_reason[_reason(str(key))] = _action(value, str(key))
        return RunawayPolicy(default, tuple(by_reason.items()))
    if not isinstance(raw, str) or not raw.strip():
        raise ValueError("none, notify, interrupt, or per reason: interrupt:identical,errors;notify:turns")
    for segment in raw.split(";"):
        if not segment.strip():
            continue
        action_text, sep, reasons = segment.partition(":")
        action = _action(action_text, repr(segment.strip()))
        if not sep:
            default = action
            continue
        for reason in reasons.split(","):
            if reason.strip():
                by_reason[_reason(reason)] = action
    return RunawayPolicy(default, tuple(by_reason.items()))


def parse_repositories(raw: object) -> tuple[str, ...]:
    """A TOML list or a comma-separated string of ``owner/name`` repositories and absolute folders."""
    items = raw if isinstance(raw, (list, tuple)) else str(raw).split(",")
    return tuple(str(item).strip() for item in items if str(item).strip())
