"""The daemon follows Claude Code's and Codex CLI's logs as it follows Copilot CLI's (issue 26).

First the resume model at the pipeline's level: a fold stopped after any line of a real Claude Code log and rebuilt
from the checkpoint the daemon keeps (the start of the oldest open prompt with the context saved there, the framer's
state included) gives, after that line, exactly what one uninterrupted read gives. Then a real daemon over a temp
HOME whose logs are written line by line as the CLIs write them, exporting to a real OTLP receiver.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from copilot_otel.pipeline import FoldSettings, Pipeline, split_lines
from copilot_otel.records import Emission
from copilot_otel.sessions import SessionFile
from tests.conftest import FIXTURES

OTHER = FIXTURES / "other-agents"


def _other_logs(agent: str) -> list[Path]:
    """Every session log and sub-agent file of one agent's fixtures (the shared and the recorded scenarios)."""
    return [
        p
        for base in (OTHER / agent, OTHER / "recorded" / agent)
        for p in sorted(base.rglob("*.jsonl"))
        if "_capture" not in p.parts
    ]


def _line_ends(blob: bytes) -> list[int]:
    return [i + 1 for i, byte in enumerate(blob) if byte == 0x0A]


def _fold_whole(session: SessionFile) -> list[Emission]:
    fold = Pipeline.for_session(session, FoldSettings())
    out = [e for step in fold.feed_file(session.path) for e in step.emissions]
    return out + list(fold.close("file_ended").emissions)


def _fold_restarted(session: SessionFile, blob: bytes, cut: int) -> list[Emission]:
    """Fold up to byte ``cut`` and stop there keeping only what the daemon checkpoints (the resume point, or the
    context between prompts, as JSON), then rebuild the fold from it and read on to the end, suppressing what the
    first run delivered (lines ending at or before ``cut``), as :class:`~copilot_otel.live.followed.FollowedFile`
    does after a restart."""
    first = Pipeline.for_session(session, FoldSettings())
    out = [e for step in first.feed_blob(blob[:cut]) for e in step.emissions]
    resume = first.resume_point()
    safe, context = resume if resume is not None else (cut, first.context_snapshot())
    second = Pipeline.for_session(session, FoldSettings(), context=orjson.loads(orjson.dumps(context)))
    for item in split_lines(blob[safe:], base_offset=safe):
        out.extend(e for e in second.feed(item).emissions if e.source_offset > cut)
    return out + list(second.close("file_ended").emissions)  # a closing is never suppressed (force)


@pytest.mark.parametrize(
    "path", _other_logs("claude-code"), ids=lambda p: f"{p.parents[2].name}/{p.name[:12]}"
)
def test_a_restart_after_any_line_gives_one_uninterrupted_read(path: Path) -> None:
    session = SessionFile.from_path(path)
    whole = _fold_whole(session)
    blob = path.read_bytes()
    restarted_inside_a_prompt = 0
    for cut in _line_ends(blob):
        first = Pipeline.for_session(session, FoldSettings())
        list(first.feed_blob(blob[:cut]))
        restarted_inside_a_prompt += first.resume_point() is not None
        assert _fold_restarted(session, blob, cut) == whole, f"stopped after byte {cut}"
    assert restarted_inside_a_prompt, "some cut falls inside an open prompt"
