"""``copilot-otel report`` on a large history, against ccusage's approach: a plain JSONL reader.

    python benchmarks/report.py [--events 200000 | --history DIR] [--repeat 3]

ccusage (the Claude Code usage reporter) reads each JSONL line with ``JSON.parse`` and sums the usage fields it
finds, grouped by the line's date; the baseline here does the same for Copilot CLI logs: stdlib ``json`` (and
``orjson`` for reference) on every line, summing ``session.usage_record`` tokens and user-initiated cost per
UTC day. It knows nothing of prompts, turns, tool failures, resumed sessions or older CLIs. Ours is the real
command (``copilot-otel report daily --json --tz UTC``) in a subprocess, so start-up and imports are included,
and in-process (:func:`copilot_otel.commands.report.tally_logs`, with worker processes as the command uses them over
32 MB, and in one process).
Both must agree on the totals they share (tokens, premium requests): the script exits 1 when they do not.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import history  # noqa: E402

from copilot_otel.commands.report import finish_report, make_cut, render_json, tally_logs  # noqa: E402

_SHARED = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "premium_requests")


def plain_reader(root: Path, loads: Callable[[bytes], Any]) -> tuple[dict[str, float], int]:
    """ccusage's way: every line decoded, usage summed per UTC day. Returns (totals, events)."""
    days: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    events = 0
    for folder in sorted(root.iterdir()):
        path = folder / "events.jsonl"
        if not path.is_file():
            continue
        with path.open("rb") as handle:
            for line in handle:
                if not line.strip():
                    continue
                events += 1
                event = loads(line)
                if event.get("type") != "session.usage_record":
                    continue
                usage = event["data"]["usage"]
                day = days[event["timestamp"][:10]]
                day["input_tokens"] += usage.get("inputTokens", 0)
                day["output_tokens"] += usage.get("outputTokens", 0)
                day["cache_read_tokens"] += usage.get("cacheReadTokens", 0)
                day["cache_write_tokens"] += usage.get("cacheWriteTokens", 0)
                if usage.get("initiator") in (None, "user"):
                    day["premium_requests"] += usage.get("cost", 0)
    totals: dict[str, float] = defaultdict(float)
    for day in days.values():
        for name, value in day.items():
            totals[name] += value
    return dict(totals), events


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="report.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--history", type=Path, default=None, help="an existing session-state root")
    parser.add_argument("--repeat", type=int, default=3, help="runs per variant; the best is shown")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="copilot-otel-report-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "COPILOT_"))}
    env["HOME"] = str(work / "home")
    try:
        root = args.history
        if root is None:
            root = work / "history"
            history.generate(root, args.events)
        size = sum(p.stat().st_size for p in root.glob("*/events.jsonl"))
        script = Path(sys.executable).parent / "copilot-otel"
        command = [str(script), "report", "daily", str(root), "--json", "--tz", "UTC"]

        def cli() -> dict[str, Any]:
            done = subprocess.run(command, capture_output=True, check=True, env=env, timeout=600)
            doc: dict[str, Any] = json.loads(done.stdout)
            return doc

        def in_process(workers: int | None) -> dict[str, Any]:
            now = time.time_ns()
            cut = make_cut("daily", zone=timezone.utc, now_ns=now)
            report = finish_report(tally_logs([root], cut, workers=workers), now_ns=now)
            return render_json(report, timezone.utc)

        empty = work / "empty"
        (empty / "none").mkdir(parents=True)
        (empty / "none" / "events.jsonl").write_bytes(b"")

        def startup() -> None:
            subprocess.run(
                [str(script), "report", str(empty), "--json"], capture_output=True, check=True, env=env
            )

        variants: dict[str, Callable[[], Any]] = {
            "cli": cli,
            "workers": lambda: in_process(None),
            "serial": lambda: in_process(1),
            "json": lambda: plain_reader(root, json.loads),
            "orjson": lambda: plain_reader(root, orjson.loads),
            "startup": startup,
        }
        # Round-robin, best of each: the machine is shared, so load changes hit every variant alike.
        best = dict.fromkeys(variants, float("inf"))
        results: dict[str, Any] = {}
        for _ in range(args.repeat):
            for name, run in variants.items():
                started = time.perf_counter()
                results[name] = run()
                best[name] = min(best[name], time.perf_counter() - started)
        doc, serial, (plain, events) = results["cli"], results["serial"], results["json"]
        cli_s, lib_s, serial_s = best["cli"], best["workers"], best["serial"]
        json_s, orjson_s, startup_s = best["json"], best["orjson"], best["startup"]
    finally:
        shutil.rmtree(work, ignore_errors=True)

    totals = doc["totals"]
    assert serial["totals"] == totals, "one process and worker processes disagree"
    sessions = totals["sessions"]
    print(
        f"history: {events:,} events, {sessions:,} sessions, {size / 1e6:.0f} MB "
        f"({datetime.now(timezone.utc):%Y-%m-%d}, {os.cpu_count()} CPUs, Python {sys.version.split()[0]})\n"
    )
    print(f"| variant | seconds (best of {args.repeat}) | events/s |\n|---|---|---|")
    for name, seconds in (
        ("copilot-otel report daily --json (subprocess, start-up included)", cli_s),
        ("in-process, worker processes (default over 32 MB)", lib_s),
        ("in-process, one process (the same fold as replay/show)", serial_s),
        ("plain JSONL reader, json.loads (ccusage's approach)", json_s),
        ("plain JSONL reader, orjson.loads", orjson_s),
        ("copilot-otel report on an empty root (start-up + imports)", startup_s),
    ):
        print(f"| {name} | {seconds:.2f} | {events / seconds:,.0f} |")
    print()
    ok = True
    for name in _SHARED:
        same = abs(totals[name] - plain.get(name, 0.0)) < 1e-6
        ok = ok and same
        print(
            f"{name}: report {totals[name]:,} / plain reader {plain.get(name, 0.0):,.0f} {'ok' if same else 'DIFFER'}"
        )
    print(
        f"report only: {totals['prompts']:,} prompts, {totals['turns']:,} turns, {totals['tool_calls']:,} tool "
        f"calls ({totals['failed_tool_calls']:,} failed), {totals['lines_added']:,} lines added"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
