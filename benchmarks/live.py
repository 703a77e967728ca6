"""What a refresh of ``copilot-otel live`` costs on a large history (:class:`copilot_otel.commands.live.BurnWatch`).

    python benchmarks/live.py [--events 150000] [--cold 20000] [--repeat 5]

The history is :mod:`history`'s (copies of the real fixture sessions), all written now: every log is *hot* (read
at the first refresh, stat'ed at each). ``--cold N`` adds N logs dated last year (their mtime set so), which
only the full sweep, every 30 s, stats. Figures: the first refresh (every hot log read), a refresh with nothing
changed (the median of ``--repeat``), one after a single log grew by one line, and one that is also a sweep.
Then a running session: one ``--running-mb`` log that grows by one line, held by a live process (its growth is
read) and not held (read whole).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import history  # noqa: E402

from copilot_otel.commands.live import FULL_SWEEP_S, BurnWatch  # noqa: E402

_YEAR_NS = 365 * 24 * 3600 * 10**9


def _timed(watch: BurnWatch, now_ns: int) -> tuple[float, int]:
    started = time.perf_counter()
    burn = watch.refresh(now_ns)
    return time.perf_counter() - started, burn.logs_read


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=150_000, help="events in the hot history")
    parser.add_argument("--cold", type=int, default=20_000, help="logs last written a year ago")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--running-mb", type=int, default=20, help="size of the running session's log")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="live-bench-") as scratch:
        root = Path(scratch) / "session-state"
        history.generate(root, events=args.events)
        hot = len(list(root.iterdir()))
        old_ns = time.time_ns() - _YEAR_NS
        for index in range(args.cold):
            folder = root / f"cold-{index:06d}"
            folder.mkdir()
            log = folder / "events.jsonl"
            log.write_bytes(b"")
            os.utime(log, ns=(old_ns, old_ns))
        now = time.time_ns()
        watch = BurnWatch(root)
        first, read = _timed(watch, now)
        print(f"first refresh: {first:.2f} s ({read:,} hot logs read, {args.cold:,} cold)")
        unchanged = [_timed(watch, now + (i + 1) * 10**9)[0] for i in range(args.repeat)]
        print(f"nothing changed: {statistics.median(unchanged) * 1e3:.1f} ms (median of {args.repeat})")
        grown = next(p for p in root.glob("*/events.jsonl") if not p.parent.name.startswith("cold-"))
        with grown.open("ab") as out:
            out.write(b"\n")
        one, read = _timed(watch, now + (args.repeat + 1) * 10**9)
        print(f"one log grew: {one * 1e3:.1f} ms ({read} read)")
        sweep, _ = _timed(watch, now + int((args.repeat + 2 + FULL_SWEEP_S) * 1e9))
        print(f"with the full sweep ({hot + args.cold:,} logs stat'ed): {sweep * 1e3:.1f} ms")
        _running(Path(scratch) / "running", args.running_mb)
    return 0


def _running(root: Path, megabytes: int) -> None:
    history.generate(root, 0, sessions=1, only="capi-multi-tool", session_bytes=megabytes * 1024 * 1024)
    (folder,) = root.iterdir()
    log = folder / "events.jsonl"
    line = log.read_bytes().splitlines(keepends=True)[2]  # a system.message: folds to nothing new
    for held in (True, False):
        lock = folder / f"inuse.{os.getpid()}.lock"
        if held:
            lock.write_text(str(os.getpid()))
        else:
            lock.unlink()
        watch = BurnWatch(root)
        now = time.time_ns()
        watch.refresh(now)
        times = []
        for i in range(3):
            with log.open("ab") as out:
                out.write(line)
            times.append(_timed(watch, now + (i + 1) * 10**9)[0])
        how = "held by a CLI: its growth read" if held else "not held: read whole"
        print(f"a {megabytes} MB log grew by a line, {how}: {statistics.median(times) * 1e3:.1f} ms")


if __name__ == "__main__":
    raise SystemExit(main())
