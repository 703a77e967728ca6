"""``report``'s cache of per-session figures (issue 34, point 6): a report over logs that did not change reads none of
them, and gives what a report without the cache gives, for every agent's fixtures.

Every test runs the real command (``main([...])``) or the library over real files copied into ``tmp_path``. That a
log was not read is shown by what a read would see: its bytes are changed with its size, mtime and inode kept
(the cache's signature), and the report still gives the figures of before; ``--no-cache`` then gives the new ones.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from datetime import timezone
from pathlib import Path
from typing import Any

import pytest

from copilot_otel.cli import main
from copilot_otel.commands import report as report_module
from copilot_otel.commands.report import SessionPart, make_cut, part_cache, session_part, tally_logs
from copilot_otel.commands.report_cache import CACHE_FILE, fingerprint
from copilot_otel.library import read_log, resolve_targets
from copilot_otel.loop.agentloop import FoldSettings
from copilot_otel.settings.config import load_config
from tests.conftest import CLI_GENERATED, FIXTURES

OTHER_AGENTS = FIXTURES / "other-agents"
# Every fixture a report reads: Copilot CLI's roots, and each other agent's scenario homes.
EVERY_AGENT = [
    CLI_GENERATED,
    FIXTURES / "cli-shapes",
    FIXTURES / "public",
    *sorted(
        p
        for agent in ("claude-code", "claude-code-2.1.332", "codex", "gemini")
        for p in (OTHER_AGENTS / agent).iterdir()
        if p.is_dir()
    ),
    *sorted(p for p in (OTHER_AGENTS / "recorded").glob("*/*") if p.is_dir()),
]


def _report(capsys: pytest.CaptureFixture[str], state: Path, *argv: str) -> dict[str, Any]:
    assert main(["report", *argv, "--json", "--tz", "UTC", "--state-dir", str(state)]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


def _copy(tmp_path: Path, *names: str) -> Path:
    root = tmp_path / "session-state"
    for name in names:
        shutil.copytree(CLI_GENERATED / name, root / name, ignore=shutil.ignore_patterns("_capture"))
    return root


def _change_in_place(log: Path) -> None:
    """Change a usage count's first digit, keeping the file's size, mtime and inode: what a cache that reads only
    changed logs cannot see, and a read of the log does."""
    before = log.stat()
    data = bytearray(log.read_bytes())
    at = data.index(b'"outputTokens":') + len(b'"outputTokens":')
    while not chr(data[at]).isdigit():
        at += 1
    data[at] = ord("8") if data[at] != ord("8") else ord("7")
    with log.open("r+b") as handle:  # in place: the same inode
        handle.write(data)
    os.utime(log, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = log.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (
        before.st_size,
        before.st_mtime_ns,
        before.st_ino,
    )


def test_a_second_report_over_unchanged_logs_reads_none_of_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _copy(tmp_path, "multi-tool", "failing-tool")
    state = tmp_path / "state"
    first = _report(capsys, state, "session", str(root))
    assert (state / CACHE_FILE).is_file()
    for log in root.glob("*/events.jsonl"):
        _change_in_place(log)
    assert (
        _report(capsys, state, "session", str(root)) == first
    )  # from the cache: the new bytes were not read
    fresh = _report(capsys, state, "session", str(root), "--no-cache")
    assert fresh["totals"]["output_tokens"] != first["totals"]["output_tokens"]  # a read sees the change
    # and the debug log says so
    assert (
        main(["report", "session", str(root), "--json", "--state-dir", str(state), "--log-level", "debug"])
        == 0
    )
    assert "2 of 2 sessions kept, 0 to read" in capsys.readouterr().err


def test_a_grown_log_is_read_again(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _copy(tmp_path, "multi-tool")
    log = root / "multi-tool" / "events.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(lines[: len(lines) // 2]))
    state = tmp_path / "state"
    half = _report(capsys, state, "daily", str(root))
    with log.open("ab") as handle:
        handle.write(b"".join(lines[len(lines) // 2 :]))
    whole = _report(capsys, state, "daily", str(root))
    assert whole != half
    assert whole["totals"]["tool_calls"] > half["totals"]["tool_calls"]
    assert whole == _report(capsys, state, "daily", str(root), "--no-cache")


def test_a_removed_log_leaves_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _copy(tmp_path, "multi-tool", "failing-tool")
    state = tmp_path / "state"
    both = _report(capsys, state, "session", str(root))
    assert both["totals"]["sessions"] == 2
    shutil.rmtree(root / "failing-tool")
    one = _report(capsys, state, "session", str(root))
    assert one["totals"]["sessions"] == 1
    assert one == _report(capsys, state, "session", str(root), "--no-cache")


def test_rows_of_logs_gone_are_deleted(tmp_path: Path) -> None:
    root = _copy(tmp_path, "multi-tool", "failing-tool")
    cache = part_cache(load_config({"state_dir": str(tmp_path / "state")}), FoldSettings())
    cut = make_cut("session", zone=timezone.utc, now_ns=0)
    tally_logs([root], cut, cache=cache)
    shutil.rmtree(root / "failing-tool")
    tally_logs([root], cut, cache=cache)  # the first prune of this cache: the gone log's row goes
    with sqlite3.connect(cache.path) as conn:
        paths = [row[0] for row in conn.execute("SELECT path FROM parts")]
    assert paths == [str(root / "multi-tool" / "events.jsonl")]


def test_other_fold_settings_read_every_log_again(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _copy(tmp_path, "multi-tool")
    state = tmp_path / "state"
    first = _report(capsys, state, "session", str(root))
    _change_in_place(root / "multi-tool" / "events.jsonl")
    assert _report(capsys, state, "session", str(root)) == first
    other = _report(capsys, state, "session", str(root), "--runaway-turns", "7")  # another fingerprint
    assert other["totals"]["output_tokens"] != first["totals"]["output_tokens"]  # every log read again
    assert other == _report(capsys, state, "session", str(root), "--runaway-turns", "7", "--no-cache")


def test_a_changed_source_file_reads_every_log_again(tmp_path: Path) -> None:
    """A development checkout edited in place: the package's files' sizes and mtimes are in the fingerprint (of a
    copy here: touching the package itself would empty the caches of tests running beside this one)."""
    package = tmp_path / "copilot_otel"
    shutil.copytree(
        Path(report_module.__file__).parent.parent, package, ignore=shutil.ignore_patterns("__pycache__")
    )
    settings = FoldSettings()
    before = fingerprint(settings, report_module.SessionPart, package=package)
    assert fingerprint(FoldSettings(), report_module.SessionPart, package=package) == before  # stable
    source = package / "commands" / "report.py"
    stat = source.stat()
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert fingerprint(settings, report_module.SessionPart, package=package) != before
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert fingerprint(settings, report_module.SessionPart, package=package) == before
    source.write_text(source.read_text() + "\n")
    assert fingerprint(settings, report_module.SessionPart, package=package) != before


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_a_damaged_cache_is_set_aside_and_rebuilt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    root = _copy(tmp_path, "multi-tool", "failing-tool")
    state = tmp_path / "state"
    expected = _report(capsys, state, "session", str(root), "--no-cache")
    assert not (state / CACHE_FILE).exists()  # --no-cache keeps nothing
    _report(capsys, state, "session", str(root))
    db = state / CACHE_FILE
    for companion in state.glob(f"{CACHE_FILE}-*"):
        companion.unlink()  # what a crash or a copy leaves: the database file alone
    if damage == "garbage":
        db.write_bytes(b"this is no database\n" * 500)
    else:
        with sqlite3.connect(db) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        data = db.read_bytes()
        db.write_bytes(data[: len(data) // 2])
    assert _report(capsys, state, "session", str(root)) == expected
    if damage == "garbage":
        assert [p.name.split(".corrupt-")[0] for p in state.glob(f"{CACHE_FILE}.corrupt-*")] == [CACHE_FILE]
    assert _report(capsys, state, "session", str(root)) == expected  # and the new one works


def test_a_cache_that_cannot_be_written_is_no_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _copy(tmp_path, "multi-tool")
    state = tmp_path / "state"
    state.write_text("a file where the state folder should be\n")
    expected = _report(capsys, tmp_path / "other", "session", str(root), "--no-cache")
    assert _report(capsys, state, "session", str(root)) == expected
    assert main(["report", "session", str(root), "--state-dir", str(state), "--log-level", "debug"]) == 0
    assert "report cache" in capsys.readouterr().err  # said once, at debug level


def test_a_row_that_does_not_decode_is_read_again(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _copy(tmp_path, "multi-tool")
    state = tmp_path / "state"
    expected = _report(capsys, state, "session", str(root))
    with sqlite3.connect(state / CACHE_FILE) as conn:
        conn.execute("UPDATE parts SET part = ?", (b'["not", "a part"',))
    assert _report(capsys, state, "session", str(root)) == expected


@pytest.mark.parametrize("period", ["session", "daily"])
def test_the_same_report_with_and_without_the_cache_for_every_agent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], period: str
) -> None:
    targets = [str(p) for p in EVERY_AGENT]
    state = tmp_path / "state"
    fresh = _report(capsys, state, period, *targets, "--no-cache")
    assert {"copilot", "claude-code", "codex", "gemini"} <= set(fresh["totals"]["agent"].split(","))
    assert _report(capsys, state, period, *targets) == fresh  # filling the cache
    assert _report(capsys, state, period, *targets) == fresh  # from it
    assert _report(capsys, state, period, *targets, "--breakdown") == _report(
        capsys, state, period, *targets, "--breakdown", "--no-cache"
    )


def test_every_fixture_part_comes_back_equal(tmp_path: Path) -> None:
    """What the cache keeps is what it gives back, field by field, for every agent's sessions."""
    cache = part_cache(load_config({"state_dir": str(tmp_path)}), FoldSettings())
    found = resolve_targets([str(p) for p in EVERY_AGENT], None, [])
    back: list[SessionPart] = []
    recalled = cache.recall(found, lambda part, lines: back.append(part))
    assert back == [] and recalled.kept == 0
    parts = {s.path: session_part(read_log(s)) for s in found}
    cache.keep((s, recalled.signatures[s.path], parts[s.path], 1) for s in found)
    again = cache.recall(found, lambda part, lines: back.append(part))
    assert again.todo == [] and again.kept == len(found)
    assert back == [parts[s.path] for s in found]


def test_worker_processes_fill_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    targets = [str(p) for p in EVERY_AGENT]
    cut = make_cut("daily", zone=timezone.utc, now_ns=0)
    serial = report_module.finish_report(tally_logs(targets, cut, workers=1), now_ns=0)
    cache = part_cache(load_config({"state_dir": str(tmp_path)}), FoldSettings())
    monkeypatch.setattr(report_module, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(report_module, "CHUNK_BYTES", 256 * 1024)
    filled = report_module.finish_report(tally_logs(targets, cut, workers=2, cache=cache), now_ns=0)
    found = resolve_targets(targets, None, [])
    assert cache.recall(found, lambda part, lines: None).todo == []  # each worker kept its share
    warm = report_module.finish_report(tally_logs(targets, cut, workers=2, cache=cache), now_ns=0)
    render = report_module.render_json
    assert render(filled, timezone.utc) == render(serial, timezone.utc) == render(warm, timezone.utc)


def test_concurrent_reports_share_the_cache(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Reports started together (each filling the cache with every log) all answer, and leave a cache the next
    one reads whole."""
    targets = [str(p) for p in EVERY_AGENT]
    state = tmp_path / "state"
    expected = _report(capsys, tmp_path / "none", "session", *targets, "--no-cache")
    command = [sys.executable, "-m", "copilot_otel", "report", "session", *targets, "--json", "--tz", "UTC"]
    runs = [
        subprocess.Popen(
            [*command, "--state-dir", str(state)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=os.environ,
        )
        for _ in range(3)
    ]
    for run in runs:
        out, err = run.communicate(timeout=120)
        assert run.returncode == 0, err
        assert json.loads(out) == expected
    assert (
        main(["report", "session", *targets, "--json", "--state-dir", str(state), "--log-level", "debug"])
        == 0
    )
    kept = re.search(r"(\d+) of (\d+) sessions kept, 0 to read", capsys.readouterr().err)
    assert kept is not None and kept.group(1) == kept.group(2)


def test_a_report_with_its_own_prices_neither_reads_nor_fills_the_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--price MODEL=…`` prices calls at the user's rates of the day: kept, those costs would stand in for the
    table's in the next report."""
    home = OTHER_AGENTS / "claude-code" / "multi-tool"
    state = tmp_path / "state"
    table = _report(capsys, state, "session", str(home))
    model = _report(capsys, state, "model", str(home))["rows"][0]["key"]
    own = _report(capsys, state, "session", str(home), "--price", f"{model}=1000,1000")
    assert own["totals"]["cost_usd"] > table["totals"]["cost_usd"]  # the user's prices, not the cached part's
    assert _report(capsys, state, "session", str(home)) == table  # and the table's again after


def test_another_release_of_the_price_table_makes_every_part_stale() -> None:
    """The table's version is in the fingerprint: new prices are never hidden behind parts priced with old ones."""
    from importlib import metadata

    from copilot_otel.commands import report_cache
    from copilot_otel.pipeline import FoldSettings

    version = metadata.version("genai-prices")
    assert report_cache._price_table() == f"genai-prices {version}"
    now = report_cache.fingerprint(FoldSettings())
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(metadata, "version", lambda name: version + ".post1")
        assert report_cache.fingerprint(FoldSettings()) != now
