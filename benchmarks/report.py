"""``copilot-otel report`` on a large history, against ccusage's approach (a plain JSONL reader), and against the
real ccusage on Claude Code logs.

    python benchmarks/report.py [--events 200000 | --history DIR] [--repeat 3]
    python benchmarks/report.py --ccusage [--events 100000] [--repeat 5] [--ccusage-version 20.0.24]

``--ccusage`` installs ccusage from the npm registry (``npm install`` into ``.cache/ccusage-<version>/`` under the
repository, once; the version ``npm view ccusage version`` names, or the newest whose native package for this
platform the registry has) and times, round-robin in one run, on one generated home of Claude Code logs
(:func:`claude_home`): ``ccusage daily --json --offline`` (``--offline``: its bundled prices, no fetch), and
``copilot-otel report daily --json`` with ``--no-cache`` (every log read), with an empty cache (every log read and
kept), and with the cache filled (no log changed: the figures read back). Medians of ``--repeat`` runs; the
script exits 1 when ccusage's token totals and ours differ (ours count cached input in ``input_tokens``).

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
import platform
import re
import shutil
import statistics
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

import agent_history  # noqa: E402
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
    parser.add_argument("--events", type=int, default=None, help="default 200,000 (100,000 with --ccusage)")
    parser.add_argument("--history", type=Path, default=None, help="an existing session-state root")
    parser.add_argument(
        "--repeat", type=int, default=None, help="runs per variant (default 3; 5 with --ccusage)"
    )
    parser.add_argument(
        "--ccusage", action="store_true", help="against the real ccusage, on Claude Code logs"
    )
    parser.add_argument("--ccusage-version", default=None, help="default: what the npm registry serves")
    args = parser.parse_args(argv)
    if args.ccusage:
        return against_ccusage(args.events or 100_000, args.repeat or 5, args.ccusage_version)
    args.events = args.events or 200_000
    args.repeat = args.repeat or 3
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
        command = [str(script), "report", "daily", str(root), "--json", "--tz", "UTC", "--no-cache"]

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


# ------------------------------------------------------------------------------------------ the real ccusage
ROOT = HERE.parent
# Claude Code's message and request ids (``msg_…``, ``req_…``): ccusage counts a message once per id pair.
_MESSAGE_ID = re.compile(rb'"(msg|req)_')


# Scenarios ccusage 20 counts otherwise than the logs say, left out so that both count the same work: a message
# written over several lines without a request id (an aborted one) counted once per line, a resumed session's
# earlier messages counted again.
_CCUSAGE_DIFFERS = ("abort-mid-tool", "resumed", "subagent-tools-fail")


def _differs(name: str) -> bool:
    return any(f"-{scenario}-" in name for scenario in _CCUSAGE_DIFFERS)


def claude_home(home: Path, events: int) -> agent_history.Stats:
    """Claude Code's ``~/.claude/projects`` made of copies of its recorded scenarios (:mod:`agent_history`: UUIDs
    replaced per copy) but :data:`_CCUSAGE_DIFFERS`, the message and request ids made unique per copy too: ccusage
    counts a message once per (message id, request id), so copies sharing them would be one message to it and
    several to us."""
    files = agent_history.scenario_files("claude-code")
    every = sum(blob.count(b"\n") for _, blob in files)
    kept = sum(blob.count(b"\n") for name, blob in files if not _differs(name.split("/")[0]))
    agent_history.generate(home / ".claude", "claude-code", -(-events * every // kept))
    projects = home / ".claude" / "projects"
    for folder in list(projects.iterdir()):
        if _differs(folder.name):
            shutil.rmtree(folder)
    logs = sorted(projects.rglob("*.jsonl"))
    lines = size = 0
    for log in logs:
        session = log.parent.parent.name if log.parent.name == "subagents" else log.stem  # its session's id
        unique = b'"\\1_' + session.replace("-", "").encode() + b"_"
        data = _MESSAGE_ID.sub(unique, log.read_bytes())
        log.write_bytes(data)
        lines += data.count(b"\n")
        size += len(data)
    return agent_history.Stats(len(logs), lines, size)


def _npm(*args: str) -> str:
    return subprocess.run(
        ["npm", *args], capture_output=True, text=True, check=True, timeout=600
    ).stdout.strip()


def install_ccusage(version: str | None) -> tuple[Path, str]:
    """ccusage from the npm registry into ``.cache/ccusage-<version>/`` (once), and its version. Its launcher runs
    a native binary from ``@ccusage/ccusage-<platform>-<arch>``: when the registry lacks that package for the newest
    ccusage, the newest version it has one for."""
    if version is None:
        version = _npm("view", "ccusage", "version")
        arch = {"x86_64": "x64", "aarch64": "arm64", "arm64": "arm64", "AMD64": "x64"}.get(
            platform.machine(), "x64"
        )
        system = {"linux": "linux", "darwin": "darwin", "win32": "win32"}.get(sys.platform, sys.platform)
        try:
            native = _npm("view", f"@ccusage/ccusage-{system}-{arch}@{version}", "version")
        except subprocess.CalledProcessError:
            native = _npm("view", f"@ccusage/ccusage-{system}-{arch}", "version")
            print(
                f"npm serves ccusage {version} but no native package of it for {system}-{arch}: using {native}"
            )
        version = native or version
    prefix = ROOT / ".cache" / f"ccusage-{version}"
    binary = prefix / "node_modules" / ".bin" / "ccusage"
    if not binary.exists():
        prefix.mkdir(parents=True, exist_ok=True)
        _npm("install", "--prefix", str(prefix), "--no-audit", "--no-fund", f"ccusage@{version}")
    said = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, check=True
    ).stdout.strip()
    return binary, said


def against_ccusage(events: int, repeat: int, version: str | None) -> int:
    """The real ccusage and ``copilot-otel report`` side by side on one generated home of Claude Code logs."""
    ccusage, said = install_ccusage(version)
    work = Path(tempfile.mkdtemp(prefix="copilot-otel-ccusage-"))
    home, state = work / "home", work / "state"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "COPILOT_", "CLAUDE_", "XDG_"))}
    env.update(HOME=str(home), TZ="UTC", NO_COLOR="1")
    script = Path(sys.executable).parent / "copilot-otel"
    ours = [
        str(script),
        "report",
        "daily",
        "--json",
        "--tz",
        "UTC",
        "--agents",
        "claude-code",
        "--state-dir",
        str(state),
    ]
    cache = state / "report-cache.db"

    def run(command: list[str]) -> dict[str, Any]:
        done = subprocess.run(command, capture_output=True, check=True, env=env, timeout=900)
        doc: dict[str, Any] = json.loads(done.stdout)
        return doc

    def empty_cache() -> dict[str, Any]:
        for stale in state.glob("report-cache.db*"):
            stale.unlink()
        return run(ours)

    try:
        stats = claude_home(home, events)
        variants: dict[str, Callable[[], dict[str, Any]]] = {
            f"ccusage daily --json --offline ({said})": lambda: run(
                [str(ccusage), "daily", "--json", "--offline", "--timezone", "UTC"]
            ),
            "copilot-otel report daily --json --no-cache (every log read)": lambda: run(
                [*ours, "--no-cache"]
            ),
            "copilot-otel report daily --json, empty cache (every log read and kept)": empty_cache,
            "copilot-otel report daily --json, cache filled (no log changed)": lambda: run(ours),
        }
        times: dict[str, list[float]] = {name: [] for name in variants}
        results: dict[str, dict[str, Any]] = {}
        run(ours)  # warm-up: byte-code compiled, the cache filled, the files in the page cache
        for _ in range(repeat):  # round-robin: the machine is shared, a load change hits every variant alike
            for name, variant in variants.items():
                if name.endswith("(no log changed)") and not cache.exists():
                    run(ours)
                started = time.perf_counter()
                results[name] = variant()
                times[name].append(time.perf_counter() - started)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    names = list(variants)
    theirs, cold, filled, warm = (results[n] for n in names)
    assert cold == filled == warm, "the cache changed the report"
    median = {name: statistics.median(values) for name, values in times.items()}
    base = median[names[0]]
    sessions = cold["totals"]["sessions"]
    print(
        f"home: {stats.events:,} events, {sessions:,} sessions ({stats.files:,} files with sub-agents'), "
        f"{stats.bytes / 1e6:.0f} MB of Claude Code logs ({datetime.now(timezone.utc):%Y-%m-%d}, {os.cpu_count()} CPUs, "
        f"Python {sys.version.split()[0]}, node {subprocess.run(['node', '--version'], capture_output=True, text=True).stdout.strip()})\n"
    )
    # Each round's ratio to ccusage's time in the same round, and their median: a load change hits a round alike.
    print(
        f"| command | median s ({repeat} runs) | runs | x ccusage (medians) | x ccusage (median of each round's) |\n"
        "|---|---|---|---|---|"
    )
    for name in names:
        runs = ", ".join(f"{t:.2f}" for t in times[name])
        paired = statistics.median(t / c for t, c in zip(times[name], times[names[0]], strict=True))
        print(f"| {name} | {median[name]:.2f} | {runs} | {median[name] / base:.2f} | {paired:.2f} |")
    print()
    totals, their = cold["totals"], theirs["totals"]
    pairs = (
        (
            "input tokens (ours count cached input in them)",
            totals["input_tokens"],
            their["inputTokens"] + their["cacheReadTokens"] + their["cacheCreationTokens"],
        ),
        ("output tokens", totals["output_tokens"], their["outputTokens"]),
        ("cache read tokens", totals["cache_read_tokens"], their["cacheReadTokens"]),
        ("cache write tokens", totals["cache_write_tokens"], their["cacheCreationTokens"]),
    )
    ok = True
    for name, mine, other in pairs:
        ok = ok and mine == other
        print(f"{name}: copilot-otel {mine:,} / ccusage {other:,} {'ok' if mine == other else 'DIFFER'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
