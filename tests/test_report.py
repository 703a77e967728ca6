"""``copilot-otel report``: every figure checked against the raw logs.

Expectations are computed here from the fixtures' JSON lines with plain :mod:`json` (``session.usage_record``,
``session.shutdown``, ``tool.execution_*``, ...), never by calling the code under test; the report itself runs
through the CLI (``main([...])``) or the library. Sessions that span midnight, that were killed before their
shutdown, or that were resumed are real fixtures copied into ``tmp_path`` with their timestamps shifted or their
shutdown line dropped.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from copilot_otel.cli import main
from copilot_otel.commands.report import Period, build_report, render_json, report_sessions
from copilot_otel.model.timestamps import parse_timestamp
from tests.conftest import CLI_GENERATED, FIXTURES, ROOT, read_events

SCHEMA = ROOT / "docs" / "report.schema.json"
SHAPES = FIXTURES / "cli-shapes"
PUBLIC = FIXTURES / "public"
GENERATED = sorted(p for p in CLI_GENERATED.iterdir() if (p / "events.jsonl").is_file())
SHAPE_DIRS = sorted(p for p in SHAPES.iterdir() if (p / "events.jsonl").is_file())
OLD_CLI = PUBLIC / "qiaolei81__copilot-session-viewer__1.0.55-1-subagent-hooks.jsonl"
NO_USAGE = PUBLIC / "microsoft__vscode-copilot-chat__0.0.354-two-questions.jsonl"


def _report(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["report", *argv, "--json"]) == 0
    out = capsys.readouterr().out
    doc: dict[str, Any] = json.loads(out)
    _validate(doc, _schema(), _schema())
    return doc


def _schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(SCHEMA.read_text(encoding="utf-8"))
    return schema


# ----------------------------------------------------------------------------------------- raw expectations
def _time(event: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00"))


def _imported(start: dict[str, Any]) -> bool:
    started = start["data"].get("startTime")
    return isinstance(started, str) and parse_timestamp(start["timestamp"]) - parse_timestamp(started) > 60e9


def _raw(events: list[dict[str, Any]]) -> dict[str, float]:
    """The figures of one log, from its raw events (the report's documented sources).

    An imported transcript (``copilot sessions import``: the log opens with a ``session.start`` whose ``startTime``
    is the transcript's, days before the event) ran elsewhere: its tool calls, up to the next CLI process, are
    not this session's work.
    """
    if events and events[0]["type"] == "session.start" and _imported(events[0]):
        resume = next((i for i, e in enumerate(events) if e["type"] == "session.resume"), len(events))
        events = events[:1] + events[resume:]
    usage = [e["data"]["usage"] for e in events if e["type"] == "session.usage_record"]
    # A compaction's own model call has no usage record; its tokens are in compactionTokensUsed (no cost).
    usage += [
        e["data"]["compactionTokensUsed"]
        for e in events
        if e["type"] == "session.compaction_complete"
        and isinstance(e["data"].get("compactionTokensUsed"), dict)
    ]
    # A count beyond 2**53 (usage-out-of-range) is unknown: the report leaves it out (and marks it estimated).
    usage = [{k: v for k, v in u.items() if not (isinstance(v, int) and v >= 2**53)} for u in usage]
    shutdowns = [e["data"] for e in events if e["type"] == "session.shutdown"]
    last = shutdowns[-1] if shutdowns else {}
    return {
        "turns": sum(1 for e in events if e["type"] == "assistant.turn_start"),
        "tool_calls": sum(1 for e in events if e["type"] == "tool.execution_start"),
        "failed_tool_calls": sum(
            1 for e in events if e["type"] == "tool.execution_complete" and e["data"].get("success") is False
        ),
        "input_tokens": sum(u.get("inputTokens", 0) for u in usage),
        "output_tokens": sum(u.get("outputTokens", 0) for u in usage),
        "cache_read_tokens": sum(u.get("cacheReadTokens", 0) for u in usage),
        "cache_write_tokens": sum(u.get("cacheWriteTokens", 0) for u in usage),
        # billing is per user prompt: only user-initiated calls' cost counts
        "premium_requests": sum(u.get("cost", 0) for u in usage if u.get("initiator") in (None, "user")),
        "ai_units": sum((u.get("copilotUsage") or {}).get("totalNanoAiu", 0) for u in usage) / 1e9,
        # cumulative over a log's runs: the last shutdown holds the session's total
        "lines_added": last.get("codeChanges", {}).get("linesAdded", 0),
        "lines_removed": last.get("codeChanges", {}).get("linesRemoved", 0),
    }


def _byok_cost(events: list[dict[str, Any]]) -> float:
    """What a log's BYOK calls (``isByok``: paid per token to the user's provider) cost, by the price table's own
    calculation (genai-prices' ``calc_price``) over each usage record's own tokens, at its time."""
    import genai_prices

    total = 0.0
    for event in events:
        if event["type"] != "session.usage_record" or not event["data"]["usage"].get("isByok"):
            continue
        u = event["data"]["usage"]
        usage = genai_prices.Usage(
            input_tokens=u["inputTokens"],
            output_tokens=u["outputTokens"],
            cache_read_tokens=u.get("cacheReadTokens", 0),
            cache_write_tokens=u.get("cacheWriteTokens", 0),
        )
        price = genai_prices.calc_price(
            usage, u["model"], provider_id=u["providerType"], genai_request_timestamp=_time(event)
        )
        total += float(price.total_price)
    return total


def _human_prompts(events: list[dict[str, Any]]) -> int:
    """cli-generated: every main-agent user.message is a prompt (sub-agents' task prompts carry agentId)."""
    return sum(1 for e in events if e["type"] == "user.message" and not e.get("agentId"))


# ----------------------------------------------------------------------------------------- figures
@pytest.mark.parametrize("folder", GENERATED, ids=lambda p: p.name)
def test_session_figures_equal_the_raw_log(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = read_events(folder / "events.jsonl")
    doc = _report(capsys, "session", str(folder), "--tz", "UTC")
    (row,) = doc["rows"]
    expected = _raw(events)
    for name, value in expected.items():
        assert row[name] == pytest.approx(value), name
    assert row["prompts"] == _human_prompts(events)
    assert row["sessions"] == 1
    # premium requests at their price, and the BYOK calls at the table's prices for their own tokens
    assert row["cost_usd"] == pytest.approx(
        expected["premium_requests"] * 0.04 + _byok_cost(events), abs=2e-6
    )
    assert row["estimated"] == []
    # the usage records agree with the CLI's own session.shutdown totals (premium requests, tokens per model)
    last = [e["data"] for e in events if e["type"] == "session.shutdown"][-1]
    assert row["premium_requests"] == pytest.approx(last.get("totalPremiumRequests", 0))
    metrics = last["modelMetrics"].values()
    assert row["input_tokens"] == sum(m["usage"]["inputTokens"] for m in metrics)
    assert row["output_tokens"] == sum(m["usage"]["outputTokens"] for m in metrics)
    assert doc["totals"] == {**row, "key": "total", "cwd": None}  # the total has no folder


@pytest.mark.parametrize("folder", SHAPE_DIRS, ids=lambda p: p.name)
def test_shape_figures_equal_the_raw_log(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """More shapes (autopilot, compaction, fleet, MCP, steering, denied tools): the usage and tool figures."""
    events = read_events(folder / "events.jsonl")
    row = _report(capsys, "session", str(folder), "--tz", "UTC")["totals"]
    for name, value in _raw(events).items():
        assert row[name] == pytest.approx(value), name


def test_all_fixtures_add_up(capsys: pytest.CaptureFixture[str]) -> None:
    """One report over two roots: the total is the sum of the logs, each session counted once."""
    doc = _report(capsys, "daily", str(CLI_GENERATED), str(SHAPES), "--tz", "UTC")
    folders = [*GENERATED, *SHAPE_DIRS]
    sums: dict[str, float] = defaultdict(float)
    for folder in folders:
        for name, value in _raw(read_events(folder / "events.jsonl")).items():
            sums[name] += value
    totals = doc["totals"]
    assert totals["sessions"] == len(folders) == 41
    for name, value in sums.items():
        assert totals[name] == pytest.approx(value), name
    assert totals["premium_requests"] == 3.0  # the three capi-* sessions: one user prompt each, multiplier 1
    assert sum(r["sessions"] for r in doc["rows"]) >= totals["sessions"]
    for name in ("prompts", "turns", "tool_calls", "input_tokens", "premium_requests"):
        assert sum(r[name] for r in doc["rows"]) == pytest.approx(totals[name])


def test_a_resumed_session_is_counted_once(capsys: pytest.CaptureFixture[str]) -> None:
    """`resumed` has two shutdowns, each with cumulative totals: the report adds the growth, not both."""
    events = read_events(CLI_GENERATED / "resumed" / "events.jsonl")
    shutdowns = [e["data"] for e in events if e["type"] == "session.shutdown"]
    assert len(shutdowns) == 2
    assert [s["codeChanges"]["linesAdded"] for s in shutdowns] == [1, 1]
    assert [s["modelMetrics"]["gpt-4.1"]["requests"]["count"] for s in shutdowns] == [2, 4]
    row = _report(capsys, "session", str(CLI_GENERATED / "resumed"), "--tz", "UTC")["totals"]
    assert row["lines_added"] == 1
    assert row["prompts"] == 2
    usage = [e for e in events if e["type"] == "session.usage_record"]
    assert row["input_tokens"] == sum(e["data"]["usage"]["inputTokens"] for e in usage) == 4800


def test_an_older_cli_is_counted_from_its_shutdown_totals(capsys: pytest.CaptureFixture[str]) -> None:
    """CLI 1.0.55 writes no usage records: tokens, premium requests and AI units come from its shutdown's
    per-model totals (two models: the main agent's and a sub-agent's)."""
    events = read_events(OLD_CLI)
    assert not any(e["type"] == "session.usage_record" for e in events)
    shutdowns = [e["data"] for e in events if e["type"] == "session.shutdown"]
    assert len(shutdowns) == 1
    last = shutdowns[-1]
    row = _report(capsys, "model", str(OLD_CLI), "--tz", "UTC")["totals"]
    metrics = last["modelMetrics"].values()
    assert row["input_tokens"] == sum(m["usage"]["inputTokens"] for m in metrics)
    assert row["output_tokens"] == sum(m["usage"]["outputTokens"] for m in metrics)
    assert row["cache_read_tokens"] == sum(m["usage"]["cacheReadTokens"] for m in metrics)
    assert row["premium_requests"] == pytest.approx(sum(m["requests"]["cost"] for m in metrics))
    assert row["premium_requests"] == pytest.approx(last["totalPremiumRequests"])
    assert row["ai_units"] == pytest.approx(last["totalNanoAiu"] / 1e9)
    assert row["estimated"] == []
    rows = {r["key"]: r for r in _report(capsys, "model", str(OLD_CLI), "--tz", "UTC")["rows"]}
    for model, m in last["modelMetrics"].items():
        assert rows[model]["input_tokens"] == m["usage"]["inputTokens"]
        assert rows[model]["premium_requests"] == m["requests"]["cost"]


def test_a_log_without_usage_or_shutdown_is_marked_estimated(capsys: pytest.CaptureFixture[str]) -> None:
    events = read_events(NO_USAGE)
    assert not any(e["type"] in ("session.usage_record", "session.shutdown") for e in events)
    row = _report(capsys, "daily", str(NO_USAGE), "--tz", "UTC")["totals"]
    assert row["prompts"] == sum(1 for e in events if e["type"] == "user.message") == 2
    assert row["output_tokens"] == sum(
        e["data"].get("outputTokens", 0) for e in events if e["type"] == "assistant.message"
    )
    for name in ("input_tokens", "premium_requests", "ai_units", "lines_added", "lines_removed"):
        assert name in row["estimated"]


def test_a_killed_session_is_counted_from_its_usage_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A CLI killed before it wrote its shutdown: premium requests and tokens still come from the usage
    records; only the code-change lines (shutdown-only) are missing, and marked."""
    folder = tmp_path / "killed"
    shutil.copytree(CLI_GENERATED / "capi-multi-tool", folder)
    lines = (folder / "events.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    kept = [line for line in lines if '"type":"session.shutdown"' not in line.replace(" ", "")]
    assert len(kept) == len(lines) - 1
    (folder / "events.jsonl").write_text("".join(kept), encoding="utf-8")
    events = read_events(folder / "events.jsonl")
    row = _report(capsys, "session", str(folder), "--tz", "UTC")["totals"]
    expected = _raw(events)
    assert expected["premium_requests"] == 1
    for name in ("input_tokens", "output_tokens", "premium_requests", "tool_calls", "turns"):
        assert row[name] == expected[name], name
    assert row["lines_added"] == 0
    assert row["estimated"] == ["lines_added", "lines_removed"]


# ----------------------------------------------------------------------------------------- time zones
def _shift(src: Path, dst: Path, delta: timedelta) -> Path:
    """A copy of a real session folder with every envelope timestamp moved by ``delta``."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("_capture"))
    out = []
    for event in read_events(src / "events.jsonl"):
        moved = _time(event) + delta
        event["timestamp"] = (
            moved.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        )
        out.append(json.dumps(event, separators=(",", ":")))
    (dst / "events.jsonl").write_text("\n".join(out) + "\n", encoding="utf-8")
    return dst


TOKYO = ZoneInfo("Asia/Tokyo")


def _resumed_across_midnight(tmp_path: Path) -> Path:
    """`resumed`, moved so that midnight in Tokyo (2026-11-30) falls between its first shutdown and the resume."""
    events = read_events(CLI_GENERATED / "resumed" / "events.jsonl")
    first_end = _time(next(e for e in events if e["type"] == "session.shutdown"))
    resume = _time(next(e for e in events if e["type"] == "session.resume"))
    midnight = datetime(2026, 11, 30, tzinfo=TOKYO)
    return _shift(
        CLI_GENERATED / "resumed", tmp_path / "resumed", midnight - (first_end + (resume - first_end) / 2)
    )


def test_a_session_spanning_midnight_is_split_by_its_own_timestamps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`resumed` moved so that midnight in Tokyo falls between its first shutdown and the resume: each day
    gets what its events say, in that zone; in UTC (9 hours behind) all of it is one day."""
    folder = _resumed_across_midnight(tmp_path)
    shifted = read_events(folder / "events.jsonl")

    by_day: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for event in shifted:
        by_day[_time(event).astimezone(TOKYO).date().isoformat()].append(event)
    assert sorted(by_day) == ["2026-11-29", "2026-11-30"]
    doc = _report(capsys, "daily", str(folder), "--tz", "Asia/Tokyo")
    rows = {r["key"]: r for r in doc["rows"]}
    assert sorted(rows) == ["2026-11-29", "2026-11-30"]
    for day, day_events in by_day.items():
        row = rows[day]
        assert row["sessions"] == 1
        assert row["prompts"] == _human_prompts(day_events) == 1
        for name in ("turns", "tool_calls", "input_tokens", "output_tokens"):
            assert row[name] == _raw(day_events)[name], (day, name)
    # lines: the first run's shutdown says 1 on the 29th; the second (cumulative 1 again) adds nothing
    assert rows["2026-11-29"]["lines_added"] == 1 and rows["2026-11-30"]["lines_added"] == 0
    assert doc["totals"]["sessions"] == 1
    assert rows["2026-11-29"]["first_seen"].endswith("+09:00")

    utc = _report(capsys, "daily", str(folder), "--tz", "UTC")
    assert [r["key"] for r in utc["rows"]] == ["2026-11-29"]
    assert utc["totals"] == {
        **doc["totals"],
        "first_seen": utc["totals"]["first_seen"],
        "last_seen": utc["totals"]["last_seen"],
    }

    weekly = _report(capsys, "weekly", str(folder), "--tz", "Asia/Tokyo")
    # Sunday 29 November and Monday 30 November 2026 are in different ISO weeks
    assert [r["key"] for r in weekly["rows"]] == ["2026-W48", "2026-W49"]
    monthly = _report(capsys, "monthly", str(folder), "--tz", "Asia/Tokyo")
    assert [r["key"] for r in monthly["rows"]] == ["2026-11"]


def test_since_and_until_cut_by_the_day_in_the_zone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _resumed_across_midnight(tmp_path)
    late = _report(capsys, "daily", str(folder), "--tz", "Asia/Tokyo", "--since", "2026-11-30")
    assert [r["key"] for r in late["rows"]] == ["2026-11-30"]
    assert late["totals"]["prompts"] == 1 and late["totals"]["lines_added"] == 0
    assert late["report"]["since"] == "2026-11-30T00:00:00+09:00"
    early = _report(capsys, "daily", str(folder), "--tz", "Asia/Tokyo", "--until", "2026-11-29")
    assert [r["key"] for r in early["rows"]] == ["2026-11-29"]
    assert early["report"]["until"] == "2026-11-30T00:00:00+09:00"
    none = _report(capsys, "daily", str(folder), "--tz", "Asia/Tokyo", "--since", "2026-12")
    assert none["rows"] == [] and none["totals"]["sessions"] == 0


def test_bad_values_are_one_line_errors(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, quoted in (
        (["--since", "last-tuesday"], "'last-tuesday'"),
        (["--tz", "Mars/Olympus"], "'Mars/Olympus'"),
        (["--sort", "tokens"], "'tokens'"),
    ):
        assert main(["report", str(CLI_GENERATED), *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("copilot-otel: error: Expected") and quoted in err and "\n" not in err


# ----------------------------------------------------------------------------------------- sort, limit, quota
def test_sort_and_limit(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _report(
        capsys, "session", str(CLI_GENERATED), "--tz", "UTC", "--sort", "tool_calls", "--limit", "3"
    )
    assert [r["tool_calls"] for r in doc["rows"]] == [5, 5, 4]
    assert doc["report"]["rows_matched"] == len(GENERATED)
    assert doc["totals"]["sessions"] == len(GENERATED)  # the total counts the rows left out too
    asc = _report(capsys, "session", str(CLI_GENERATED), "--sort", "key", "--order", "desc")
    keys = [r["key"] for r in asc["rows"]]
    assert keys == sorted(keys, reverse=True)
    default = _report(capsys, "model", str(CLI_GENERATED))
    assert [r["key"] for r in default["rows"]] == ["claude-sonnet-4.5", "gpt-4.1"]  # by premium requests


def test_quota_counts_the_current_utc_month() -> None:
    now = int(datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc).timestamp() * 1e9)
    report = build_report(
        report_sessions([CLI_GENERATED]), "monthly", zone=timezone.utc, now_ns=now, quota=300
    )
    doc = render_json(report, timezone.utc)
    assert doc["report"]["quota"] == {"month": "2026-11", "allowance": 300, "used": 3.0, "left": 297.0}
    # a month later nothing of it is this month's
    later = build_report(
        report_sessions([CLI_GENERATED]), "monthly", now_ns=now + 31 * 86_400 * 10**9, quota=300
    )
    assert render_json(later, None)["report"]["quota"]["used"] == 0.0


def test_csv_has_the_json_figures_and_a_total_row(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _report(capsys, "model", str(CLI_GENERATED), "--tz", "UTC")
    assert main(["report", "model", str(CLI_GENERATED), "--tz", "UTC", "--csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["key"] for r in rows] == [*(r["key"] for r in doc["rows"]), "total"]
    for parsed, expected in zip(rows, [*doc["rows"], doc["totals"]], strict=True):
        assert list(parsed) == list(expected)
        for name in ("prompts", "input_tokens", "premium_requests", "cost_usd"):
            assert float(parsed[name]) == pytest.approx(expected[name])


# ----------------------------------------------------------------------------------------- schema
def test_every_period_over_every_fixture_matches_the_schema(capsys: pytest.CaptureFixture[str]) -> None:
    for period in ("daily", "weekly", "monthly", "session", "repo", "model"):
        doc = _report(capsys, period, str(CLI_GENERATED), str(SHAPES), str(PUBLIC), "--quota", "300")
        assert doc["report"]["period"] == period
        assert doc["rows"]
        assert doc["totals"]["sessions"] > 28


def test_the_validator_rejects_what_the_schema_forbids() -> None:
    schema = _schema()
    good: dict[str, Any] = {"report": {}, "rows": [], "totals": {}}
    with pytest.raises(AssertionError):
        _validate(good, schema, schema)  # report and totals lack their required keys
    with pytest.raises(AssertionError):
        _validate({"rows": [], "totals": {}, "report": {}, "extra": 1}, schema, schema)


def _validate(value: Any, schema: dict[str, Any], root: dict[str, Any], where: str = "$") -> None:
    """A small JSON Schema validator for what docs/report.schema.json uses (type, enum, minimum, required,
    properties, additionalProperties: false, items, $ref to #/$defs)."""
    if "$ref" in schema:
        name = schema["$ref"].removeprefix("#/$defs/")
        _validate(value, root["$defs"][name], root, where)
        return
    if "enum" in schema:
        assert value in schema["enum"], f"{where}: {value!r} not in {schema['enum']}"
    kinds = schema.get("type")
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else kinds
        checks = {
            "object": lambda v: isinstance(v, dict),
            "array": lambda v: isinstance(v, list),
            "string": lambda v: isinstance(v, str),
            "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
            "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
            "null": lambda v: v is None,
        }
        assert any(checks[k](value) for k in kinds), f"{where}: {value!r} is not {kinds}"
    if "minimum" in schema and isinstance(value, (int, float)):
        assert value >= schema["minimum"], f"{where}: {value} < {schema['minimum']}"
    if isinstance(value, dict):
        for key in schema.get("required", []):
            assert key in value, f"{where}: missing {key}"
        props = schema.get("properties", {})
        if schema.get("additionalProperties") is False:
            extra = set(value) - set(props)
            assert not extra, f"{where}: unexpected {sorted(extra)}"
        for key, item in value.items():
            if key in props:
                _validate(item, props[key], root, f"{where}.{key}")
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            _validate(item, schema["items"], root, f"{where}[{index}]")


@pytest.mark.parametrize("period", ["daily", "session", "model"])
def test_worker_processes_give_the_same_report(monkeypatch: pytest.MonkeyPatch, period: Period) -> None:
    """Over 32 MB the logs are shared among worker processes, each adding up its share: the same report as
    one process (and as build_report over the library's records)."""
    from copilot_otel.commands import report as report_module

    roots = [CLI_GENERATED, SHAPES, PUBLIC]
    cut = report_module.make_cut(period, zone=timezone.utc, now_ns=0)
    serial = report_module.finish_report(report_module.tally_logs(roots, cut, workers=1), now_ns=0)
    monkeypatch.setattr(report_module, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(report_module, "CHUNK_BYTES", 64 * 1024)  # several chunks
    parallel = report_module.finish_report(report_module.tally_logs(roots, cut, workers=2), now_ns=0)
    assert render_json(parallel, timezone.utc) == render_json(serial, timezone.utc)
    direct = build_report(report_sessions(roots), period, zone=timezone.utc, now_ns=0)
    assert render_json(direct, timezone.utc) == render_json(serial, timezone.utc)
    assert parallel.totals.value("sessions", 0.04) == 45


def test_reads_nothing_over_the_network(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("report opened a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    doc = _report(capsys, "monthly", str(CLI_GENERATED), "--quota", "300")
    assert doc["totals"]["sessions"] == len(GENERATED)


def test_without_any_agents_folder_it_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report"]) == 3  # the test HOME has no ~/.copilot, ~/.claude, ~/.codex
    err = capsys.readouterr().err.strip()
    assert err.startswith(
        "copilot-otel: error: no session logs found: ~/.copilot/session-state does not exist"
    )
    assert "~/.claude/projects does not exist" in err and "~/.codex/sessions does not exist" in err
    assert "~/.gemini/tmp does not exist" in err
    assert "--session-state, --claude-code-home, --codex-home or --gemini-home" in err and "\n" not in err


def test_a_log_last_written_before_since_is_not_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Logs are only appended to: a file whose mtime is before --since cannot hold a later event, so it is
    skipped unopened (shown here by a copy whose mtime was set back: its November events are not counted)."""
    import os

    root = tmp_path / "root"
    for name in ("plain-question", "capi-multi-tool"):
        shutil.copytree(CLI_GENERATED / name, root / name, ignore=shutil.ignore_patterns("_capture"))
    old = datetime(2026, 1, 1, tzinfo=timezone.utc).timestamp()
    os.utime(root / "plain-question" / "events.jsonl", (old, old))
    doc = _report(capsys, "session", str(root), "--tz", "UTC", "--since", "2026-11-01")
    assert [r["key"] for r in doc["rows"]] == ["capi-multi-tool"]
    doc = _report(capsys, "session", str(root), "--tz", "UTC", "--since", "2025-12-31")
    assert sorted(r["key"] for r in doc["rows"]) == ["capi-multi-tool", "plain-question"]


@pytest.mark.parametrize(
    "zone", ["UTC", "Europe/Paris", "Asia/Kolkata", "Asia/Kathmandu", "America/St_Johns", "Australia/Eucla"]
)
@pytest.mark.parametrize("period", ["daily", "weekly", "monthly"])
def test_a_records_day_by_its_quarter_hour_is_its_own_day(zone: str, period: Period) -> None:
    """Days are looked up by quarter hour of UTC time (a cached report adds up 100,000 records without a time
    zone conversion each): every minute around the local midnights of a year (DST changes included), and of 1900
    (local mean times: Paris +0:09:21), lands in the day its own time says."""
    from zoneinfo import ZoneInfo

    from copilot_otel.commands.report import Tally, make_cut

    tz = ZoneInfo(zone)
    for year in (2026, 1900):
        cut = make_cut(period, zone=tz, now_ns=1_796_000_000 * 10**9)
        by_quarter, direct = Tally(cut), Tally(cut)
        for day in range(0, 366, 7):
            midnight = datetime(year, 1, 1, tzinfo=tz) + timedelta(days=day)
            start = int(midnight.timestamp()) * 10**9
            for minute in range(-20, 21):
                t = start + minute * 60 * 10**9 + 7 * 10**9
                assert by_quarter._quarter_key(t) == direct._day_key(t), (zone, year, day, minute)
