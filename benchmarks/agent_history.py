"""Generate Claude Code's, Codex CLI's and Gemini CLI's session histories from their real fixture scenarios (the
per-agent replay benchmark's input, ``run.py``'s "replay per agent" rows).

Each agent's home gets copies of every scenario it was recorded in (``tests/fixtures/other-agents/<agent>/*`` and
``…/recorded/<agent>/*``: session logs, sub-agents' files and threads), each copy a set of new sessions: every UUID
in the files and their paths (session, thread, message and prompt ids) is replaced consistently within the copy
(its first 8 hex digits xor the copy's number, as in Gemini's file names, which carry only those), so a sub-agent
still names its parent and a Codex child thread its root; each copy's Gemini project gets a folder of its own. Bytes are rewritten by regex, never decoded. Timestamps are kept: the same times in every copy.

Usage::

    python benchmarks/agent_history.py OUT_HOME --agent claude-code --events 200000
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "other-agents"
# Each agent's log folder under its home (what ``copilot-otel replay HOME`` finds there).
AGENTS = {"claude-code": "projects", "codex": "sessions", "gemini": "tmp"}
_UUID = re.compile(rb"([0-9a-f]{8})-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# Gemini CLI names a session's file by its id's first 8 digits.
_SHORT_ID = re.compile(rb"(?<=-)([0-9a-f]{8})(?=\.jsonl$)")


@dataclass(frozen=True)
class Stats:
    files: int
    events: int
    bytes: int


def scenario_files(agent: str) -> list[tuple[str, bytes]]:
    """Every log of every scenario of ``agent``: (its path under the home, with the scenario's name as a prefix
    that keeps scenarios apart, its bytes)."""
    folder = AGENTS[agent]
    homes = [FIXTURES / agent, FIXTURES / "recorded" / agent]
    out = []
    for parent in homes:
        if not parent.is_dir():
            continue
        for scenario in sorted(p for p in parent.iterdir() if (p / folder).is_dir()):
            for log in sorted((scenario / folder).rglob("*.jsonl")):
                rel = log.relative_to(scenario / folder)
                if agent == "gemini":  # tmp/<project>/chats/…: a project per scenario
                    rel = Path(f"{parent.name}-{scenario.name}-{rel.parts[0]}", *rel.parts[1:])
                out.append((str(rel), log.read_bytes()))
    return out


def generate(home: Path, agent: str, events: int) -> Stats:
    """At least ``events`` lines of ``agent``'s logs under ``home/<its folder>``, in whole copies of the scenarios."""
    files = scenario_files(agent)
    per_copy = sum(blob.count(b"\n") for _, blob in files)
    copies = max(1, -(-events // per_copy))
    root = home / AGENTS[agent]
    written = lines = size = 0
    for copy in range(copies):

        def fresh(m: re.Match[bytes], copy: int = copy) -> bytes:
            return b"%08x" % (int(m.group(1), 16) ^ (copy + 1)) + m.group(0)[8:]

        for rel, blob in files:
            name = _SHORT_ID.sub(fresh, _UUID.sub(fresh, rel.encode())).decode()
            if agent == "gemini":  # its own project folder per copy
                first, _, rest = name.partition("/")
                name = f"{first}-{copy}/{rest}"
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            data = _UUID.sub(fresh, blob)
            path.write_bytes(data)
            written += 1
            lines += data.count(b"\n")
            size += len(data)
    return Stats(written, lines, size)


def log_files(home: Path, agent: str) -> list[Path]:
    return sorted((home / AGENTS[agent]).rglob("*.jsonl"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="agent_history.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("home", type=Path)
    parser.add_argument("--agent", choices=sorted(AGENTS), required=True)
    parser.add_argument("--events", type=int, default=200_000)
    args = parser.parse_args(argv)
    stats = generate(args.home, args.agent, args.events)
    print(f"{stats.files:,} files, {stats.events:,} events, {stats.bytes / 1e6:,.0f} MB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
