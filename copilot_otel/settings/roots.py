"""Where each coding agent's session logs are, and whether the settings read them: light enough for ``status``.

:func:`agent_roots` is what ``replay``, ``run``, ``show`` and ``report`` look in when given no path, and what
``doctor`` and ``status`` list. It lives with the settings, not in :mod:`copilot_otel.sources` (which re-exports it), because that package loads the log readers' machinery (``orjson``, the
event views, the parser): ``status`` must start in under 100 ms (issue 25) and reads no log.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .config import Agent, Config

__all__ = ["AGENT_TITLES", "AgentRoot", "Source", "agent_roots", "not_read_line"]


class Source(enum.Enum):
    """A coding agent whose session logs we read (the value is the name users and attributes see)."""

    CLAUDE_CODE = "claude-code"
    CODEX = "codex"
    GEMINI = "gemini"


# How each agent is named in what users read.
AGENT_TITLES = {
    "copilot": "Copilot CLI",
    Source.CLAUDE_CODE.value: "Claude Code",
    Source.CODEX.value: "Codex CLI",
    Source.GEMINI.value: "Gemini CLI",
}


def not_read_line(agent: str, cli_version: str | None, kinds: Iterable[str], more: bool = False) -> str:
    """Drift in one line, the same in the daemon's log, ``status`` and ``doctor``: ``Claude Code 2.1.332: 24 record
    kinds not read: agent-name, api-request, …`` (every kind, sorted; a log that names no version says so;
    ``more``: kinds that version had not shown before)."""
    names = sorted(kinds)
    title = AGENT_TITLES.get(agent, agent)
    who = f"{title} {cli_version}" if cli_version else f"{title} (its log names no version)"
    what = "record kind" if len(names) == 1 else "record kinds"
    return f"{who}: {len(names)} {'more ' if more else ''}{what} not read: {', '.join(names)}"


@dataclass(frozen=True, slots=True)
class AgentRoot:
    """Where one coding agent's session logs are looked for by default (``replay``, ``run``, ``show``, ``report``
    with no path), and whether the settings read it.

    Attributes:
        agent: The agent's name in the ``agents`` setting (``copilot``, ``claude-code``, ``codex``, ``gemini``).
        logs: The folder of its session logs: Copilot's ``session-state``, Claude Code's ``projects``, Codex's
            ``sessions``, Gemini's ``tmp``. Missing: the agent is not installed (not an error).
        setting: The setting that moves it (``session_state``, ``claude_code_home``, ``codex_home``,
            ``gemini_home``).
        enabled: Whether ``agents`` names it.
    """

    agent: Agent
    logs: Path
    setting: str
    enabled: bool

    @property
    def source(self) -> Source | None:
        """The reader of its logs; ``None``: Copilot CLI's."""
        return None if self.agent == "copilot" else Source(self.agent)

    @property
    def found(self) -> bool:
        """Whether the folder is there (the agent has run as this user)."""
        return self.logs.is_dir()


def agent_roots(config: Config) -> list[AgentRoot]:
    """Every supported agent's log folder under ``config``, in the ``agents`` setting's order (the ones switched
    off included, ``enabled`` false, so ``doctor`` and ``status`` can say so)."""
    folders: dict[Agent, tuple[Path, str]] = {
        "copilot": (config.session_state, "session_state"),
        "claude-code": (config.claude_code_home / "projects", "claude_code_home"),
        "codex": (config.codex_home / "sessions", "codex_home"),
        "gemini": (config.gemini_home / "tmp", "gemini_home"),
    }
    return [
        AgentRoot(agent, logs, setting, agent in config.agents) for agent, (logs, setting) in folders.items()
    ]
