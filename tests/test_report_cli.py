"""``copilot-otel report`` as a ccusage user drives it (issue 24, point 6) and the CLI's argument errors (point 10).

Each test runs the real program (``main([...])`` in-process, or the console script in a subprocess) over the real
fixtures and checks what it prints and the exit code. Expectations are read from the fixtures' raw JSON lines.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from datetime import timezone
from pathlib import Path
from typing import Any

import pytest

from copilot_otel.cli import main
from tests.conftest import CLI_GENERATED, FIXTURES, ROOT, read_events
from tests.test_report import _schema, _validate

ROOTS = [str(CLI_GENERATED), str(FIXTURES / "cli-shapes"), str(FIXTURES / "public")]
FAILING = CLI_GENERATED / "failing-tool"


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["report", *argv, "--json"]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


def _uuid_root(tmp_path: Path, names: tuple[str, ...]) -> Path:
    """A session-state root as the CLI writes it: each fixture in a folder named by its log's session id."""
    root = tmp_path / "session-state"
    for name in names:
        start = read_events(CLI_GENERATED / name / "events.jsonl")[0]
        shutil.copytree(
            CLI_GENERATED / name, root / start["data"]["sessionId"], ignore=shutil.ignore_patterns("_capture")
        )
    return root


# ------------------------------------------------------------------------------------------- --breakdown
def test_breakdown_gives_each_period_row_one_sub_row_per_model(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _json(capsys, "daily", str(CLI_GENERATED), "--tz", "UTC", "--breakdown")
    _validate(doc, _schema(), _schema())  # docs/report.schema.json: each row's optional "models"
    (row,) = doc["rows"]
    # the models the fixtures' usage records name, each with its own tokens
    tokens: dict[str, int] = defaultdict(int)
    for log in CLI_GENERATED.glob("*/events.jsonl"):
        for event in read_events(log):
            if event["type"] == "session.usage_record":
                tokens[event["data"]["usage"]["model"]] += event["data"]["usage"]["inputTokens"]
    models = {m["model"]: m for m in row["models"]}
    assert set(models) == set(tokens) == {"gpt-4.1", "claude-sonnet-4.5"}
    assert {name: m["input_tokens"] for name, m in models.items()} == tokens
    for figure in ("prompts", "tool_calls", "input_tokens", "output_tokens", "premium_requests"):
        assert sum(m[figure] for m in row["models"]) == pytest.approx(row[figure])
    assert row["models"][0]["model"] == "claude-sonnet-4.5"  # the most premium requests first
    assert "models" not in doc["totals"]
    # the table: the sub-rows under their row; the CSV: a model column
    assert main(["report", "daily", str(CLI_GENERATED), "--tz", "UTC", "--breakdown"]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("2026-11-29"))
    assert lines[at + 1].startswith("└ claude-sonnet-4.5") and lines[at + 2].startswith("└ gpt-4.1")
    assert lines[0].startswith("Copilot CLI usage, daily, by model")
    assert main(["report", "monthly", str(CLI_GENERATED), "--tz", "UTC", "--breakdown", "--csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(r["key"], r["model"]) for r in rows] == [
        ("2026-11", ""),
        ("2026-11", "claude-sonnet-4.5"),
        ("2026-11", "gpt-4.1"),
        ("total", ""),
    ]
    assert main(["report", "model", str(CLI_GENERATED), "--breakdown"]) == 2
    assert "rows are models already" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------- last active
def test_session_rows_show_their_last_activity_by_the_events_own_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A restored copy has today's (here: 2020's) mtime; the column is the day of the log's own last event."""
    root = tmp_path / "root"
    shutil.copytree(FAILING, root / "failing-tool", ignore=shutil.ignore_patterns("_capture"))
    os.utime(root / "failing-tool" / "events.jsonl", (1_577_836_800, 1_577_836_800))  # 2020-01-01
    last = max(e["timestamp"] for e in read_events(FAILING / "events.jsonl"))
    doc = _json(capsys, "session", str(root), "--tz", "UTC")
    assert doc["rows"][0]["last_seen"][:16] == last[:16]  # to the minute: the report's items, not the file
    assert main(["report", "session", str(root), "--tz", "UTC"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].split()[:3] == ["session", "last", "active"]
    assert out[2].split()[2] == last[:10] != "2020-01-01"
    assert main(["report", "session", str(root), "--tz", "UTC", "--wide"]) == 0
    assert capsys.readouterr().out.splitlines()[2].split()[2:4] == [last[:10], last[11:16]]


# ------------------------------------------------------------------------------------------- session ids
def test_session_ids_and_unique_prefixes_are_arguments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _uuid_root(tmp_path, ("failing-tool", "multi-tool", "plain-question"))
    ids = sorted(p.name for p in root.iterdir())
    failing = read_events(FAILING / "events.jsonl")[0]["data"]["sessionId"]
    assert failing == "0a000003-0000-4000-8000-000000000003"
    doc = _json(capsys, "session", "0a000003", "--session-state", str(root), "--tz", "UTC")
    assert [r["key"] for r in doc["rows"]] == [failing]
    assert doc["rows"][0]["failed_tool_calls"] == 3
    # no period: daily over the one session; the whole id works too, and several ids add up
    doc = _json(capsys, failing, "--session-state", str(root), "--tz", "UTC")
    assert doc["report"]["period"] == "daily" and doc["totals"]["sessions"] == 1
    doc = _json(capsys, "session", *ids, "--session-state", str(root))
    assert doc["totals"]["sessions"] == 3
    # a prefix two sessions share, and an id that is not there: one line each, exit 3 (what show says)
    shared = "0a0000"
    assert sum(i.startswith(shared) for i in ids) >= 2
    assert main(["report", "session", shared, "--session-state", str(root)]) == 3
    err = capsys.readouterr().err.strip()
    assert f"session id prefix {shared!r} is ambiguous" in err and "\n" not in err
    assert main(["report", "session", "0b000099", "--session-state", str(root)]) == 3
    assert "no such file, folder or session id: '0b000099'" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------- a typo'd period
def test_a_mistyped_period_is_named_with_the_choices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _uuid_root(tmp_path, ("plain-question",))
    assert main(["report", "hourly", "--session-state", str(root)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(
        "copilot-otel: error: unknown period 'hourly'; choose from daily, weekly, monthly, session, repo, model"
    )
    assert "\n" not in err and "no such file" not in err
    assert main(["report", "dialy", str(CLI_GENERATED)]) == 2
    assert "did you mean 'daily'?" in capsys.readouterr().err
    # a word that is a folder is a folder
    shutil.copytree(FAILING, tmp_path / "hourly", ignore=shutil.ignore_patterns("_capture"))
    monkeypatch.chdir(tmp_path)
    assert _json(capsys, "hourly")["totals"]["sessions"] == 1


# ------------------------------------------------------------------------------------------- width
HEADINGS = (
    "sess prompts turns tools failed input output cache rd cache wr reason premium AIU +lines -lines runaway "
    "wall cost $"
)


def test_piped_output_has_one_width_whatever_columns_says(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    outputs = []
    for columns in ("40", "200", None):
        if columns is None:
            monkeypatch.delenv("COLUMNS", raising=False)
        else:
            monkeypatch.setenv("COLUMNS", columns)
        assert main(["report", "session", *ROOTS, "--tz", "UTC"]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] == outputs[2]
    assert max(len(line) for line in outputs[0].splitlines()) <= 80
    # --wide: every figure, in the JSON's order, however wide that is
    monkeypatch.setenv("COLUMNS", "40")
    assert main(["report", "session", *ROOTS, "--tz", "UTC", "--wide"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert " ".join(lines[1].split()[3:]) == HEADINGS  # after "session last active"
    assert max(len(line) for line in lines) > 80 and not any("more figures" in line for line in lines)
    # --compact: the figures a glance needs, and no note about the others
    assert main(["report", "monthly", *ROOTS, "--tz", "UTC", "--compact"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == ["month", "sess", "prompts", "input", "output", "premium", "cost", "$"]
    assert not any("more figures" in line for line in lines)
    with pytest.raises(SystemExit) as exit_info:
        main(["report", "monthly", *ROOTS, "--compact", "--json"])  # a table layout, not a format
    assert exit_info.value.code == 2 and "not allowed with argument" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------- progress
def test_progress_goes_to_stderr_only_when_asked_or_on_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "monthly", *ROOTS, "--json"]) == 0
    quiet = capsys.readouterr()
    assert quiet.err == ""  # stderr is no terminal here: nothing unless --progress
    assert main(["report", "monthly", *ROOTS, "--json", "--progress"]) == 0
    loud = capsys.readouterr()
    assert loud.out == quiet.out  # --json unaffected
    lines = loud.err.splitlines()
    assert lines, "a final line at least"
    match = re.fullmatch(r"copilot-otel: read ([\d,]+) of ([\d,]+) sessions \(([\d,]+) events\)", lines[-1])
    assert match is not None, lines
    assert match.group(1) == match.group(2)
    events = sum(
        1
        for root in ROOTS
        for log in [*Path(root).glob("*/events.jsonl"), *Path(root).glob("*.jsonl")]
        for line in log.read_bytes().splitlines()
        if line.strip()
    )
    assert int(match.group(3).replace(",", "")) == events
    with pytest.raises(SystemExit) as exit_info:
        main(["report", "monthly", *ROOTS, "--progress", "--no-progress"])
    assert exit_info.value.code == 2


def test_the_terminal_progress_line_is_rate_limited_and_erased() -> None:
    from copilot_otel.commands.report import ProgressLine, ReadProgress

    now = [0.0]
    out = io.StringIO()
    line = ProgressLine(out, terminal=True, clock=lambda: now[0])
    progress = ReadProgress(0, 150_000, 0, 0)
    # times in binary fractions (exact): quiet for the first 0.5 s, then at most one line every 0.2 s
    for step, at in enumerate((0.25, 0.5, 0.625, 0.75, 0.875, 1.0), start=1):
        now[0] = at
        progress.sessions_read, progress.events_read = step * 20_000, step * 24_000
        line(progress)
    line.close()
    written = out.getvalue()
    shown = [part for part in written.split("\r\x1b[K") if part]
    assert shown == [
        "copilot-otel: read 40,000 of 150,000 sessions (48,000 events)",  # 0.5 s
        "copilot-otel: read 80,000 of 150,000 sessions (96,000 events)",  # 0.75 s
        "copilot-otel: read 120,000 of 150,000 sessions (144,000 events)",  # 1.0 s
    ]
    assert written.endswith("\r\x1b[K")  # erased before the table
    plain = io.StringIO()
    now[0] = 0.0
    line = ProgressLine(plain, terminal=False, clock=lambda: now[0])
    for at in (1.5, 2.5, 3.0):  # not a terminal: every 2 s, and the last
        now[0] = at
        line(ReadProgress(1 if at < 3 else 2, 2, 10, 0))
    assert plain.getvalue().splitlines() == [
        "copilot-otel: read 1 of 2 sessions (10 events)",
        "copilot-otel: read 2 of 2 sessions (10 events)",
    ]


# ------------------------------------------------------------------------------------------- argument errors
def test_a_bad_flag_prints_its_subcommands_usage_and_the_flag_it_meant(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["report", "--sinse", "7d"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: copilot-otel report ")
    assert "copilot-otel report: error: unrecognized arguments: --sinse" in err
    assert "did you mean '--since'?" in err
    with pytest.raises(SystemExit):
        main(["show", "--jsn"])
    err = capsys.readouterr().err
    assert err.startswith("usage: copilot-otel show ") and "did you mean '--json'?" in err
    with pytest.raises(SystemExit):
        main(["status", "--frobnicate"])  # nothing close: no guess
    err = capsys.readouterr().err
    assert err.startswith("usage: copilot-otel status ") and "did you mean" not in err
    with pytest.raises(SystemExit):
        main(["report", "--workers", "1"])  # replay's flag: no far-fetched guess ('--order')
    err = capsys.readouterr().err
    assert "unrecognized arguments: --workers" in err and "did you mean" not in err


def test_run_no_longer_offers_max_retry_time(capsys: pytest.CaptureFixture[str]) -> None:
    """The daemon never gives up on a batch, so the flag did nothing there; replay and resend keep it."""
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--max-retry-time", "5"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: copilot-otel run ") and "unrecognized arguments: --max-retry-time" in err
    for command in (["replay"], ["dead-letters", "list"]):
        with pytest.raises(SystemExit):
            main([*command, "--help"])
        assert "--max-retry-time" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert "--max-retry-time" not in capsys.readouterr().out


# A Ctrl-C while the CLI's modules load: the interpreter runs the console script's import, and a real SIGINT is
# raised in it at the moment the CLI imports its settings module (an import hook sends it; nothing is faked).
_INTERRUPT_WHILE_LOADING = """
import importlib.abc, os, signal, sys

class SigintOnImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "copilot_otel.settings.config":
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, SigintOnImport())
sys.argv = ["copilot-otel", *sys.argv[1:]]
from copilot_otel.cli import main
sys.exit(main())
"""


@pytest.mark.skipif(sys.platform == "win32", reason="os.kill(SIGINT) ends a Windows process outright")
@pytest.mark.parametrize(("command", "code"), [("report", 130), ("run", 0)])
def test_a_ctrl_c_while_loading_is_one_line(tmp_path: Path, command: str, code: int) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _INTERRUPT_WHILE_LOADING, command, "--state-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.stderr == "copilot-otel: interrupted\n", done.stderr
    assert done.returncode == code  # run: 0, as its Ctrl-C always does (README); the rest 130 = 128 + SIGINT


# ------------------------------------------------------------------------------------------- the worker pool
def test_report_workers_start_as_the_platform_seam_says(monkeypatch: pytest.MonkeyPatch) -> None:
    """macOS spawns (fork after Apple's frameworks started threads crashes): a report's workers under the
    darwin implementation are spawned interpreters, and add up the same report as one process."""
    from copilot_otel._platform import for_platform
    from copilot_otel.commands import report as report_module
    from copilot_otel.pipeline import workers

    # A forked child has the parent's memory (this mark on a module); a spawned interpreter starts without it.
    monkeypatch.setattr(io, "parent_was_here", True, raising=False)
    probe = "hasattr(__import__('io'), 'parent_was_here')"
    assert for_platform("darwin").worker_start_method("") == "spawn"
    for name in ("darwin", "linux"):  # linux forks (but in the no-POSIX run, where os has no fork)
        platform = for_platform(name)
        with workers.process_pool(1, platform=platform) as pool:
            forked = pool.submit(eval, probe).result()
        assert forked is (platform.worker_start_method("") == "fork"), name
    cut = report_module.make_cut("daily", zone=timezone.utc, now_ns=0)
    serial = report_module.finish_report(report_module.tally_logs(ROOTS, cut, workers=1), now_ns=0)
    monkeypatch.setattr(workers, "current", for_platform("darwin"))
    monkeypatch.setattr(report_module, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(report_module, "CHUNK_BYTES", 256 * 1024)
    spawned = report_module.finish_report(report_module.tally_logs(ROOTS, cut, workers=2), now_ns=0)
    render = report_module.render_json
    assert render(spawned, timezone.utc) == render(serial, timezone.utc)


def test_one_chunker_and_one_pool_for_replay_and_report() -> None:
    """Only the seam and the shared worker module choose how processes start, and only it cuts chunks."""
    package = ROOT / "copilot_otel"
    for path in package.rglob("*.py"):
        relative = path.relative_to(package).as_posix()
        if relative.startswith("_platform/") or relative == "pipeline/workers.py":
            continue
        text = path.read_text(encoding="utf-8")
        assert "get_context(" not in text and "ProcessPoolExecutor(" not in text, relative
        assert "def _chunks" not in text, relative


def test_the_ccusage_table_names_only_flags_report_has(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/reports-and-live.md's "`report` beside ccusage" names only flags and periods `report` has."""
    text = (ROOT / "docs" / "reports-and-live.md").read_text(encoding="utf-8")
    table = text.split("**`report` beside ccusage**", 1)[1].split("\n\n", 2)[1]
    ours = [line.split("|")[2] for line in table.splitlines()[2:]]
    flags = {flag for cell in ours for flag in re.findall(r"--[a-z-]+", cell)}
    assert {"--breakdown", "--compact", "--wide", "--since", "--tz", "--json"} <= flags
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    usage = capsys.readouterr().out
    for flag in flags:
        assert re.search(rf"{flag}\b", usage), flag
    for word in ("daily", "weekly", "monthly", "session", "repo", "model"):
        assert f"`report {word}" in table or f"/ `{word}`" in table or f"/ {word}" in table, word


def test_the_quota_setting_is_reports_default(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``premium_quota`` (set once for ``live``) is ``report``'s allowance too; ``--quota`` still wins."""
    monkeypatch.setenv("COPILOT_OTEL_PREMIUM_QUOTA", "300")
    quota = _json(capsys, "monthly", str(CLI_GENERATED))["report"]["quota"]
    assert quota["allowance"] == 300
    assert quota["left"] == 300 - quota["used"]
    assert _json(capsys, "monthly", str(CLI_GENERATED), "--quota", "50")["report"]["quota"]["allowance"] == 50
    monkeypatch.delenv("COPILOT_OTEL_PREMIUM_QUOTA")
    assert _json(capsys, "monthly", str(CLI_GENERATED))["report"].get("quota") is None


def test_the_estimated_footnote_explains_only_a_mark_on_the_screen(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A real capture whose usage records lack the cache-write count (as an older CLI's do): only that figure is
    # estimated, and the 100-column table does not draw its column.
    log = tmp_path / "events.jsonl"
    text = (CLI_GENERATED / "multi-tool" / "events.jsonl").read_text()
    log.write_text(re.sub(r',?"cacheWriteTokens":0', "", text))
    assert _json(capsys, "session", str(log))["totals"]["estimated"] == ["cache_write_tokens"]
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["report", str(log)]) == 0
    out = capsys.readouterr().out
    assert "~" not in out, out  # on main: "~ estimated: …" under a table with no "~" in it
    assert main(["report", str(log), "--wide"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"~\d", out) and "~ estimated:" in out, out


def test_the_local_zone_is_named_once_in_the_title(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["report", str(CLI_GENERATED / "multi-tool")]) == 0
    title = capsys.readouterr().out.splitlines()[0]
    assert "(local time, " in title and "((" not in title and "))" not in title, (
        title
    )  # on main: "(local (UTC))"
