"""What Claude Code's statusLine hook waits for: ``copilot-otel statusline``, beside a bare interpreter.

    python benchmarks/statusline.py [--runs 21]

A home with a real Claude Code capture (the test fixtures'), its figures refreshed once (``statusline --refresh``,
what the background refresh does), then, alternating in one run so the machine's noise falls on all alike:

* ``python -c pass``: the interpreter's own start, the floor of any Python command;
* ``copilot-otel --version``: the CLI's start (its parser and settings);
* ``copilot-otel statusline`` with the hook's JSON on stdin and fresh figures (the hook's path: what Claude Code
  waits for after every message; no refresh is started);
* the same with stale figures (a message later: the transcript grew), which also starts the refresh in the
  background (not waited for).

Figures: each one's minimum, median and maximum in ms, and the statusline's median over the bare interpreter's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "tests" / "fixtures" / "other-agents" / "claude-code" / "multi-tool" / "projects"


def _timed(argv: list[str], env: dict[str, str], stdin: bytes = b"") -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, input=stdin, env=env, capture_output=True, check=False)
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{argv} failed: {done.stderr.decode(errors='replace')}")
    return took * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args(argv)
    script = Path(sys.executable).parent / "copilot-otel"
    cli = [str(script)] if script.is_file() else [sys.executable, "-m", "copilot_otel"]
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        (source,) = SCENARIO.glob("*/*.jsonl")
        log = home / ".claude" / "projects" / source.parent.name / source.name
        log.parent.mkdir(parents=True)
        shutil.copy(source, log)
        state = Path(tmp) / "state"
        # Bytecode written and used, as an installed package's is (compiled at install): with
        # PYTHONDONTWRITEBYTECODE set, a module edited since its last compile would be compiled again on every run.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | {"HOME": str(home)}
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", str(ROOT / "copilot_otel")], env=env, check=True
        )
        hook = json.dumps(
            {"session_id": source.stem, "transcript_path": str(log), "model": {"display_name": "Opus"}}
        ).encode()
        refresh = [*cli, "statusline", "--refresh", "--state-dir", str(state)]
        subprocess.run([*refresh, "--session-id", source.stem, "--transcript", str(log)], env=env, check=True)
        line = [*cli, "statusline", "--state-dir", str(state)]
        cache = state / "statusline.json"
        fresh = cache.read_bytes()
        cases: dict[str, Callable[[], float]] = {
            "python -c pass": lambda: _timed([sys.executable, "-c", "pass"], env),
            "copilot-otel --version": lambda: _timed([*cli, "--version"], env),
            "statusline, fresh figures": lambda: _timed(line, env, hook),
        }

        def stale() -> float:
            doc = json.loads(fresh)
            doc["refreshed_at"] = 0  # as old as can be: a refresh starts (in the background, not waited for)
            cache.write_text(json.dumps(doc))
            took = _timed(line, env, hook)
            cache.write_bytes(fresh)
            return took

        cases["statusline, stale figures"] = stale
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.runs):
            for name, run in cases.items():
                times[name].append(run())
    width = max(map(len, times))
    print(f"{'':{width}}  {'min':>7} {'median':>7} {'max':>7}  (ms, {args.runs} runs alternating)")
    for name, values in times.items():
        print(f"{name:{width}}  {min(values):7.1f} {statistics.median(values):7.1f} {max(values):7.1f}")
    floor = statistics.median(times["python -c pass"])
    hook_ms = statistics.median(times["statusline, fresh figures"])
    print(f"statusline over a bare interpreter: +{hook_ms - floor:.1f} ms (median), {hook_ms / floor:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
