"""A log cut while its CLI wrote a reply (killed, disk full, a copy taken mid-session) loses nothing the framer
held for a line that never came: at the fold's close the framer gives it up (``Framer.close``), and the loop
closes it unfinished, as it closes a Copilot tool with no end.

Real captures cut after the line that leaves the framer holding something: Claude Code's framer holds a call's
``tool_use`` blocks until a record of another call (their tools start when the call's last block is read);
Codex's holds a call that asked for no tool one record back (a ``compacted`` after it would make it the
compaction's). Without the close, the cut log's last tool or model call has no span at all.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from copilot_otel.model.activity import ModelCall, Record, ToolCall
from copilot_otel.pipeline import FoldSettings, Pipeline
from copilot_otel.sources.sessions import SessionFile
from tests.conftest import FIXTURES

OTHER = FIXTURES / "other-agents"


def _fold(path: Path) -> list[Record]:
    fold = Pipeline.for_session(SessionFile.from_path(path), FoldSettings(), project=False)
    records = [r for step in fold.feed_file(path) for r in step.records]
    return [*records, *fold.close("file_ended").records]


def _cut_after(source: Path, tmp_path: Path, is_last: Callable[[bytes], bool]) -> Path:
    """``source`` cut after the last of its lines for which ``is_last(line)`` is true."""
    lines = source.read_bytes().splitlines(keepends=True)
    last = max(i for i, line in enumerate(lines) if is_last(line))
    cut = tmp_path / source.name
    cut.write_bytes(b"".join(lines[: last + 1]))
    return cut


def test_a_claude_code_log_cut_after_a_tool_use_block_still_has_that_tool(tmp_path: Path) -> None:
    (source,) = (OTHER / "claude-code" / "failing-tool" / "projects").glob("*/*.jsonl")
    cut = _cut_after(source, tmp_path, lambda line: b'"tool_use"' in line and b'"role":"assistant"' in line)
    tools = [r for r in _fold(cut) if isinstance(r, ToolCall)]
    whole = [r for r in _fold(source) if isinstance(r, ToolCall)]
    assert len(tools) == len(whole), "every tool the cut log started has a span"
    last = tools[-1]
    assert last.call_id == whole[-1].call_id
    assert last.incomplete_reason is not None, "it never ended in the cut log: closed unfinished"
    assert all(t.incomplete_reason is None for t in tools[:-1])


def test_cut_codex_rollout_after_an_answer_keeps_that_model_call(tmp_path: Path) -> None:
    (source,) = (OTHER / "codex" / "plain-question" / "sessions").rglob("rollout-*.jsonl")
    whole = [r for r in _fold(source) if isinstance(r, ModelCall)]
    assert len(whole) == 1
    cut = _cut_after(source, tmp_path, lambda line: b'"type":"token_usage_record"' in line)
    calls = [r for r in _fold(cut) if isinstance(r, ModelCall)]
    assert [c.span_id for c in calls] == [whole[0].span_id]
    assert calls[0].usage == whole[0].usage
