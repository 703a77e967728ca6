"""Sub-agent files that vanish (issue 31, point 8).

Interactive Claude Code deletes a sub-agent's transcript (and an empty main transcript) within seconds of the
sub-agent finishing. The daemon reads a sub-agent's file as it is written; when the file is gone it keeps what it
read (and what it can still read from the file it holds open), says so once, and the parent's prompt never waits
for it. Here the real daemon follows a temp HOME where a recorded sub-agent's file is written line by line as the
CLI writes it, then deleted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FIXTURES, SERIAL
from tests.otlp_receiver import OtlpReceiver
from tests.test_daemon_other_agents import _as_replay_closes, _Cli, _daemon, _replayed, _status
from tests.waiting import until

SCENARIO = FIXTURES / "other-agents" / "recorded" / "claude-code" / "subagent-tools-fail" / "projects"


def _copy(src: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(src.read_bytes())


def _as_replay_ends(span: dict[str, Any]) -> dict[str, Any]:
    """A live span as replay gives it: what a log leaves open replay closes where the log ends (``file_ended``),
    the daemon once it idled out or its file was deleted (``file_deleted``)."""
    span = _as_replay_closes({k: v for k, v in span.items() if k != "resource"})
    attrs = span["attributes"]
    if attrs.get(INCOMPLETE) == "file_deleted":
        return {**span, "attributes": {**attrs, INCOMPLETE: "file_ended"}}
    return span


INCOMPLETE = "copilot_otel.incomplete.reason"
WRITTEN = ("whole", "half-read-then-rest", "half-only")


@SERIAL
@pytest.mark.parametrize("written", WRITTEN)
def test_a_subagent_file_deleted_by_its_cli_keeps_what_was_read_and_says_so_once(
    tmp_path: Path, _isolated_home: Path, receiver: OtlpReceiver, written: str
) -> None:
    """The parent's log up to its ``Agent`` call, then the sub-agent's ``.meta.json`` and file, then:

    * ``whole``: all of the sub-agent's file, read by the daemon, then the file and its ``.meta.json`` deleted (what
      interactive Claude Code does once a sub-agent has ended);
    * ``half-read-then-rest``: half of it read, then the rest written and the file deleted at once: the daemon still
      holds it open and reads the rest from there;
    * ``half-only``: half of it read, then deleted (a CLI that died; nothing more will come).

    Then the rest of the parent's log. Exported: what replay gives of the files as they were written, the sub-agent's
    file closed where it ended; the deletion said once in the daemon's log; no prompt left open (the parent's closed
    by the idle timeout, as a ``-p`` capture's last prompt is, never held for the sub-agent's file).
    """
    root = _isolated_home / ".claude" / "projects"
    root.mkdir(parents=True)
    (main_log,) = SCENARIO.glob("*/*.jsonl")
    (sub_log,) = SCENARIO.glob("*/*/subagents/*.jsonl")
    meta = sub_log.with_suffix(".meta.json")
    parent = _Cli(main_log, root / main_log.relative_to(SCENARIO))
    sub = _Cli(sub_log, root / sub_log.relative_to(SCENARIO))
    half = len(sub.lines) // 2
    # The files as the CLI wrote them, for replay: the sub-agent's as far as it got.
    written_copy = tmp_path / "as-written" / ".claude"
    projects = written_copy / "projects"
    _copy(main_log, projects / main_log.relative_to(SCENARIO))
    _copy(meta, projects / meta.relative_to(SCENARIO))
    (projects / sub_log.relative_to(SCENARIO)).write_bytes(
        b"".join(sub.lines[: half if written == "half-only" else None])
    )
    want = _replayed([written_copy], tmp_path)
    # the parent's root costs the sub-agent's calls (as far as its file got): live must too, from what it read
    assert any("copilot_otel.prompt.subagent_cost_usd" in s["attributes"] for s in want.values())

    daemon = _daemon(tmp_path, receiver).start()
    try:
        parent.write(parent.index_of(b'"name":"Agent"'))
        _copy(meta, sub.dest.with_suffix(".meta.json"))
        sub.write(None if written == "whole" else half)
        until(
            lambda: _status(tmp_path).get("lines_read", 0) >= parent.at + sub.at,
            30,
            "every line written to be read",
        )
        if written == "half-read-then-rest":
            sub.write()
        sub.dest.unlink()
        sub.dest.with_suffix(".meta.json").unlink()
        parent.write()
        receiver.wait_for(lambda r: {s["span_id"] for s in r.spans()} >= set(want), 60)
        until(
            lambda: bool(_status(tmp_path).get("prompts_closed")) and not _status(tmp_path)["open_prompts"],
            30,
            "the prompts closed",
        )
    finally:
        assert daemon.terminate() == 0
    assert {s["span_id"]: _as_replay_ends(s) for s in receiver.spans()} == {
        k: _as_replay_ends(v) for k, v in want.items()
    }
    # A sub-agent that had ended is exported as ended; one cut short says where: its file was deleted.
    cut = {s["name"] for s in receiver.spans() if s["attributes"].get(INCOMPLETE) == "file_deleted"}
    assert (written == "half-only") == ("invoke_agent general-purpose" in cut), cut
    out = daemon.output()
    size = len(b"".join(sub.lines[: sub.at]))
    said = [line for line in out.splitlines() if f"{sub.dest} was deleted" in line]
    assert len(said) == 1 and said[0].endswith(f"was deleted; the {size:,} bytes read of it are kept"), out
    assert "Traceback" not in out and " ERROR " not in out
