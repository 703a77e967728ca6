"""Another agent's framer state is kept only before the lines that may open a prompt (``Framer.may_open``), not
before every line; every prompt of every fixture still gets the state at its first line (a restart re-reads it
from there: tests/test_daemon_other_agents.py restarts after every line)."""

from __future__ import annotations

from pathlib import Path

import pytest

from copilot_otel.loop.agentloop import FoldSettings
from copilot_otel.loop.foldstate import Prompt
from copilot_otel.pipeline import FRAME_KEY, Pipeline
from copilot_otel.sources.sessions import SessionFile
from tests.conftest import FIXTURES

LOGS = sorted(p for p in (FIXTURES / "other-agents").rglob("*.jsonl") if "_capture" not in p.parts)


@pytest.mark.parametrize("log", LOGS, ids=lambda p: str(p.relative_to(FIXTURES / "other-agents")))
def test_every_prompt_opens_on_a_line_its_framer_foresaw(log: Path) -> None:
    fold = Pipeline.for_session(SessionFile.from_path(log), FoldSettings())
    assert fold.source is not None
    opened: list[Prompt] = []
    for _ in fold.feed_file(log):
        opened.extend(fold.loop.prompts.values())
    assert fold.unforeseen_opens == 0
    assert all(FRAME_KEY in prompt.context_at_open for prompt in opened)
