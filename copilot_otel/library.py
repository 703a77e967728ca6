"""The library entry point: what a session did, as neutral records, for scripts, notebooks and reports.

    >>> import copilot_otel
    >>> session = copilot_otel.read_session("~/.copilot/session-state/<id>")
    >>> [p.outcome for p in session.prompts]
    >>> sum(c.usage.input or 0 for c in session.model_calls)  # None: a count the log did not give

The records are the agent loop's own (:mod:`copilot_otel.activity`): the same stages ``replay``, ``run`` and
``show`` run (:class:`copilot_otel.pipeline.Pipeline`), stopping before any vocabulary. Nothing is sent anywhere;
content is kept only as far as ``settings.content`` allows (by default none).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .activity import AgentRun, ModelCall, PromptRun, Record, SessionShutdown, ToolCall, Turn
from .agentloop import FoldSettings
from .errors import SourceError
from .pipeline import Pipeline
from .records import BadLine
from .sessions import SessionFile, resolve

__all__ = ["SessionRecords", "iter_sessions", "read_session"]


@dataclass
class SessionRecords:
    """Everything one session log says, as records in the order their work completed.

    Attributes:
        session: Which log (id, file, folder).
        records: Every activity record.
        drops: The lines that could not be read (each with its reason, offset and line number).
        lines: Lines with data in the file.
    """

    session: SessionFile
    records: list[Record] = field(default_factory=list)
    drops: list[BadLine] = field(default_factory=list)
    lines: int = 0

    @property
    def session_id(self) -> str:
        return self.session.session_id

    @property
    def prompts(self) -> list[PromptRun]:
        return [r for r in self.records if isinstance(r, PromptRun)]

    @property
    def model_calls(self) -> list[ModelCall]:
        return [r for r in self.records if isinstance(r, ModelCall)]

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [r for r in self.records if isinstance(r, ToolCall)]

    @property
    def turns(self) -> list[Turn]:
        return [r for r in self.records if isinstance(r, Turn)]

    @property
    def agents(self) -> list[AgentRun]:
        return [r for r in self.records if isinstance(r, AgentRun)]

    @property
    def shutdowns(self) -> list[SessionShutdown]:
        return [r for r in self.records if isinstance(r, SessionShutdown)]


def read_session(
    target: str | Path, settings: FoldSettings | None = None, *, root: str | Path | None = None
) -> SessionRecords:
    """Read one session log (a folder, its ``events.jsonl``, a legacy flat file, or an id under ``root``); a
    Claude Code session's ``.jsonl`` (or a sub-agent's file) is read through its own framer, into the same records.

    Raises:
        SourceError: the target is not a session log, or cannot be read.
    """
    sessions = resolve([os.path.expanduser(str(target))], Path(root).expanduser() if root else None)
    if len(sessions) != 1:
        raise SourceError(f"{target}: expected one session log, found {len(sessions)}")
    return _read(sessions[0], settings or FoldSettings())


def iter_sessions(
    targets: list[str | Path], settings: FoldSettings | None = None, *, root: str | Path | None = None
) -> Iterator[SessionRecords]:
    """Read every session log under ``targets`` (folders, files, session-state roots), one at a time."""
    settings = settings or FoldSettings()
    for session in resolve(
        [os.path.expanduser(str(t)) for t in targets], Path(root).expanduser() if root else None
    ):
        yield _read(session, settings)


def _read(session: SessionFile, settings: FoldSettings) -> SessionRecords:
    pipeline = Pipeline.for_session(session, settings, project=False)
    out = SessionRecords(session)
    for step in pipeline.feed_file(session.path):  # read in chunks: only the records are kept
        if step.drop is not None:
            out.drops.append(step.drop)
        out.records.extend(step.records)
    out.records.extend(pipeline.close("file_ended").records)
    out.lines = pipeline.lines
    return out
