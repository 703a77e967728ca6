"""Profile ``copilot-otel replay`` of a generated history into the subprocess OTLP receiver.

    python benchmarks/profile_replay.py [--events N] [--history DIR] [--top 30] [--pyinstrument]

cProfile (default) writes ``replay.prof`` in the work folder and prints the top functions by own time and by
cumulative time; ``--pyinstrument`` uses pyinstrument instead (``pip install pyinstrument``), whose sampling
overhead is lower and whose call tree shows where the time of the main thread goes. The environment is the
benchmark's: throw-away HOME, ``OTEL_METRIC_EXPORT_INTERVAL=600000``, ``--no-progress``.
"""

from __future__ import annotations

import argparse
import pstats
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import history  # noqa: E402
from run import Receiver, clean_env, run_measured  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="profile_replay.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=200_000, help="history size (default 200000)")
    parser.add_argument("--history", type=Path, default=None, help="replay this session-state root instead")
    parser.add_argument("--top", type=int, default=30, help="functions to list (default 30)")
    parser.add_argument("--pyinstrument", action="store_true", help="profile with pyinstrument")
    parser.add_argument("--metrics", choices=["on", "off"], default="on", help="COPILOT_OTEL_METRICS")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (profile, history)")
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="copilot-otel-profile-"))
    home = work / "home"
    home.mkdir()
    try:
        root = args.history
        if root is None:
            root = work / "history"
            stats = history.generate(root, args.events)
            print(f"generated {stats.events:,} events in {stats.sessions:,} sessions", file=sys.stderr)
        env = clean_env(
            home,
            OTEL_METRIC_EXPORT_INTERVAL="600000",
            COPILOT_OTEL_METRICS="true" if args.metrics == "on" else "false",
        )
        prof = work / ("replay.html" if args.pyinstrument else "replay.prof")
        with Receiver(work, clean_env(home), "profile") as receiver:
            replay_args = [
                "replay",
                str(root),
                "--endpoint",
                receiver.endpoint,
                "--protocol",
                "http/protobuf",
                "--no-progress",
            ]
            if args.pyinstrument:
                profiler = [
                    sys.executable,
                    "-m",
                    "pyinstrument",
                    "--show-all",
                    "-r",
                    "text",
                    "-o",
                    str(prof.with_suffix(".txt")),
                    "-m",
                    "copilot_otel",
                ]
            else:
                profiler = [sys.executable, "-m", "cProfile", "-o", str(prof), "-m", "copilot_otel"]
            result = run_measured([*profiler, *replay_args], env, work).check("profiled replay")
        print(result.stdout.strip())
        print(f"wall {result.wall_s:.1f}s, CPU {result.cpu_s:.1f}s (profiler overhead included)")
        if args.pyinstrument:
            print(prof.with_suffix(".txt").read_text())
        else:
            stats_ = pstats.Stats(str(prof))
            stats_.sort_stats("tottime").print_stats(args.top)
            stats_.sort_stats("cumulative").print_stats(args.top)
        if args.keep:
            print(f"kept {work}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
