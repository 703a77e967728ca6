"""Generate a large Copilot CLI session history from the real fixture sessions (the benchmarks' input).

Every copy of a fixture session becomes a new session: a new session id (folder name, ``session.start``
``sessionId``, ``workspace.yaml`` ``id``), fresh event ``id``/``parentId``, ``interactionId``, ``messageId``,
``toolCallId`` and ``apiCallId`` values (consistently within the copy, so ``parentId`` chains and tool
start/complete pairs still match), and timestamps shifted so that copies follow each other in time.

Fast path: each fixture is compiled once into a template of literal byte chunks and *tokens* (UUIDs, tool call
ids, ``chatcmpl-…`` ids, ISO timestamps, found by regex on the raw bytes); a copy is then just a join of the
chunks with per-copy replacements — no JSON decode/encode per copy (~1 µs per event). ``--check`` decodes the
result with orjson and verifies that every event id is unique across the whole history.

Usage::

    python benchmarks/history.py OUT_DIR --events 200000 [--prompts-per-session 1] [--seed 1] [--check]
    python benchmarks/history.py OUT_DIR --sessions 1 --session-mb 1024 --only multi-tool   # one 1 GiB log

``OUT_DIR`` becomes a ``session-state`` root: ``OUT_DIR/<sessionId>/events.jsonl`` + ``workspace.yaml``.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FIXTURES = ROOT / "tests" / "fixtures" / "cli-generated"

# Copies start this far apart in time (every fixture session lasts well under a minute).
_COPY_STRIDE_NS = 120 * 1_000_000_000
# Repeated prompts inside one session start this long after the previous repetition's first event.
_PROMPT_GAP_NS = 90 * 1_000_000_000
# 2026-01-01T00:00:00Z: the generated history starts here (deterministic output for a given seed).
_BASE_NS = 1_767_225_600 * 1_000_000_000

_TOKEN = re.compile(
    rb"(?P<uuid>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"
    rb"|(?P<call>\bcall_[A-Za-z0-9]+(?:_[0-9]+)+)"
    rb"|(?P<api>\bchatcmpl-[0-9a-zA-Z]+)"
    rb"|(?P<ts>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}(?:Z|[+-]\d{2}:\d{2}))"
)
# Session lifecycle events appear once per generated session, not once per repeated prompt.
_SESSION_EVENTS = frozenset({"session.start", "session.resume", "session.shutdown"})


@dataclass(frozen=True, slots=True)
class _Line:
    """One template line: literal chunks interleaved with tokens (``parts[0] tok[0] parts[1] …``)."""

    parts: tuple[bytes, ...]
    tokens: tuple[tuple[str, bytes, int], ...]  # (kind, original text, original ns for timestamps)
    type: str  # the event type ("" for workspace.yaml)


@dataclass(frozen=True, slots=True)
class Template:
    """A fixture session compiled for fast copying."""

    name: str
    session_id: bytes
    lines: tuple[_Line, ...]
    workspace: _Line | None
    first_ns: int
    last_ns: int

    @property
    def events(self) -> int:
        return len(self.lines)


def _parse_ts(text: bytes) -> int:
    dt = datetime.fromisoformat(text.decode().replace("Z", "+00:00"))
    return int(dt.timestamp()) * 1_000_000_000 + dt.microsecond * 1_000


def _compile_line(raw: bytes, kind: str = "") -> _Line:
    parts: list[bytes] = []
    tokens: list[tuple[str, bytes, int]] = []
    pos = 0
    for match in _TOKEN.finditer(raw):
        kind = match.lastgroup or ""
        text = match.group()
        parts.append(raw[pos : match.start()])
        tokens.append((kind, text, _parse_ts(text) if kind == "ts" else 0))
        pos = match.end()
    parts.append(raw[pos:])
    return _Line(tuple(parts), tuple(tokens), kind)


def load_templates(fixtures: Path = DEFAULT_FIXTURES) -> list[Template]:
    """Compile every ``<fixture>/events.jsonl`` under ``fixtures``."""
    templates = []
    for events in sorted(fixtures.glob("*/events.jsonl")):
        raw_lines = [line for line in events.read_bytes().splitlines() if line.strip()]
        first = orjson.loads(raw_lines[0])
        session_id = (first.get("data") or {}).get("sessionId") or events.parent.name
        lines = tuple(_compile_line(line, orjson.loads(line).get("type", "")) for line in raw_lines)
        stamps = [t[2] for line in lines for t in line.tokens if t[0] == "ts"]
        ws_path = events.parent / "workspace.yaml"
        workspace = _compile_line(ws_path.read_bytes()) if ws_path.is_file() else None
        templates.append(
            Template(events.parent.name, session_id.encode(), lines, workspace, min(stamps), max(stamps))
        )
    if not templates:
        raise SystemExit(f"history.py: no fixture sessions (*/events.jsonl) under {fixtures}")
    return templates


def new_uuid(rng: random.Random) -> bytes:
    """A version-4 UUID from ``rng`` (deterministic for a seed)."""
    return str(uuid.UUID(int=rng.getrandbits(128), version=4)).encode()


class _Copy:
    """The replacement table of one generated session (ids are consistent within it)."""

    def __init__(self, rng: random.Random, session_id: bytes, template_session: bytes) -> None:
        self.rng = rng
        self._session = (template_session, session_id)
        self.ids: dict[bytes, bytes] = {template_session: session_id}
        self.shift_ns = 0
        self._ts_cache: dict[tuple[int, bytes], bytes] = {}

    def reset_ids(self) -> None:
        """A new prompt repetition in the same session: fresh ids except the session's own."""
        self.ids = dict([self._session])

    def token(self, kind: str, text: bytes, ns: int) -> bytes:
        if kind == "ts":
            shifted = ns + self.shift_ns
            suffix = b"Z" if text.endswith(b"Z") else text[-6:]  # keep the fixture's own spelling
            key = (shifted, suffix)
            out = self._ts_cache.get(key)
            if out is None:
                dt = datetime.fromtimestamp(shifted // 1_000_000_000, timezone.utc)
                ms = (shifted // 1_000_000) % 1000
                out = dt.strftime("%Y-%m-%dT%H:%M:%S").encode() + b".%03d" % ms + suffix
                if len(self._ts_cache) > 4096:
                    self._ts_cache.clear()
                self._ts_cache[key] = out
            return out
        new = self.ids.get(text)
        if new is None:
            if kind == "uuid":
                new = new_uuid(self.rng)
            elif kind == "call":
                new = b"call_%032x" % self.rng.getrandbits(128)
            else:  # api
                new = b"chatcmpl-%032x" % self.rng.getrandbits(128)
            self.ids[text] = new
        return new

    def render(self, line: _Line) -> bytes:
        parts = line.parts
        out = [parts[0]]
        for i, (kind, text, ns) in enumerate(line.tokens):
            out.append(self.token(kind, text, ns))
            out.append(parts[i + 1])
        return b"".join(out)


@dataclass
class HistoryStats:
    """What :func:`generate` wrote."""

    sessions: int = 0
    events: int = 0
    bytes: int = 0
    seconds: float = 0.0


def generate(
    out_dir: Path,
    events: int,
    *,
    prompts_per_session: int = 1,
    seed: int = 1,
    fixtures: Path = DEFAULT_FIXTURES,
    sessions: int | None = None,
    only: str | None = None,
    session_bytes: int | None = None,
) -> HistoryStats:
    """Write at least ``events`` events as new sessions under ``out_dir`` (a session-state root).

    Args:
        out_dir: Created if missing; existing sessions in it are left alone (ids never collide).
        events: Minimum number of events (lines) to write; the last session is written whole.
        prompts_per_session: Repeat each fixture's prompts this many times inside one session (long sessions).
        seed: Seeds the id generator: the same arguments give byte-identical output.
        fixtures: The folder of real fixture sessions.
        sessions: Write exactly this many sessions instead (``events`` is then ignored).
        only: Copy only the fixture of this name (e.g. ``plain-question``).
        session_bytes: Repeat each session's prompts until its log holds at least this many bytes
            (``prompts_per_session`` is then ignored): one big log, for replay's memory bound.

    Each log is written as it is generated, a line at a time, so a log of any size costs the generator one
    prompt's lines of memory.
    """
    started = time.monotonic()
    templates = load_templates(fixtures)
    if only is not None:
        templates = [t for t in templates if t.name == only]
        if not templates:
            raise SystemExit(f"history.py: no fixture named {only!r} under {fixtures}")
    rng = random.Random(seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    stats = HistoryStats()
    copy_index = 0
    strides = 0  # prompt repetitions written so far: copies follow each other in time
    while (stats.sessions < sessions) if sessions is not None else (stats.events < events):
        template = templates[copy_index % len(templates)]
        session_id = new_uuid(rng)
        copy = _Copy(rng, session_id, template.session_id)
        base_shift = _BASE_NS + strides * _COPY_STRIDE_NS - template.first_ns
        lines = template.lines
        repeated = session_bytes is not None or prompts_per_session > 1
        # With repeated prompts, a final session.shutdown moves to the very end of the session.
        trailer = lines[-1:] if repeated and lines[-1].type == "session.shutdown" else ()
        folder = out_dir / session_id.decode()
        folder.mkdir()
        written = lines_written = rep = 0
        with open(folder / "events.jsonl", "wb") as out:
            while (written < session_bytes) if session_bytes is not None else (rep < prompts_per_session):
                copy.shift_ns = base_shift + rep * _PROMPT_GAP_NS
                if rep == 0:
                    chunk = [copy.render(line) for line in lines[: len(lines) - len(trailer)]]
                else:
                    copy.reset_ids()
                    chunk = [copy.render(line) for line in lines if line.type not in _SESSION_EVENTS]
                body = b"".join(line + b"\n" for line in chunk)
                out.write(body)
                written += len(body)
                lines_written += len(chunk)
                rep += 1
            body = b"".join(copy.render(line) + b"\n" for line in trailer)
            out.write(body)
            written += len(body)
            lines_written += len(trailer)
        if template.workspace is not None:
            copy.shift_ns = base_shift
            (folder / "workspace.yaml").write_bytes(copy.render(template.workspace))
        stats.sessions += 1
        stats.events += lines_written
        stats.bytes += written
        strides += rep
        copy_index += 1
    stats.seconds = time.monotonic() - started
    return stats


def check(out_dir: Path) -> tuple[int, int]:
    """Decode every generated line with orjson; returns ``(events, sessions)``.

    Raises:
        SystemExit: a line is not JSON, an event id repeats, or a folder is not named by its session id.
    """
    seen: set[str] = set()
    events = sessions = 0
    for events_file in sorted(out_dir.glob("*/events.jsonl")):
        sessions += 1
        for number, line in enumerate(events_file.read_bytes().splitlines(), 1):
            obj = orjson.loads(line)
            events += 1
            if obj["id"] in seen:
                raise SystemExit(f"history.py: duplicate event id {obj['id']} at {events_file}:{number}")
            seen.add(obj["id"])
            if obj["type"] == "session.start" and obj["data"]["sessionId"] != events_file.parent.name:
                raise SystemExit(
                    f"history.py: {events_file}: sessionId {obj['data']['sessionId']} does not "
                    f"match its folder"
                )
    return events, sessions


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="history.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", type=Path, metavar="OUT_DIR", help="session-state root to write into")
    parser.add_argument(
        "--events", type=int, default=200_000, help="minimum number of events (default 200000)"
    )
    parser.add_argument(
        "--prompts-per-session",
        type=int,
        default=1,
        help="repeat each fixture's prompts N times in one session (default 1)",
    )
    parser.add_argument(
        "--sessions", type=int, default=None, help="write exactly this many sessions (--events is ignored)"
    )
    parser.add_argument(
        "--session-mb",
        type=float,
        default=None,
        help="repeat each session's prompts until its log holds this many MiB (one big log: --sessions 1)",
    )
    parser.add_argument("--only", default=None, help="copy only the fixture of this name (e.g. multi-tool)")
    parser.add_argument("--seed", type=int, default=1, help="id generator seed (default 1)")
    parser.add_argument("--fixtures", type=Path, default=DEFAULT_FIXTURES, help="fixture sessions folder")
    parser.add_argument("--check", action="store_true", help="decode the result and verify unique ids")
    args = parser.parse_args(argv)
    stats = generate(
        args.out_dir,
        args.events,
        prompts_per_session=args.prompts_per_session,
        seed=args.seed,
        fixtures=args.fixtures,
        sessions=args.sessions,
        only=args.only,
        session_bytes=int(args.session_mb * 1024 * 1024) if args.session_mb is not None else None,
    )
    print(
        f"history.py: wrote {stats.sessions} sessions, {stats.events} events, {stats.bytes / 1e6:.1f} MB "
        f"in {stats.seconds:.1f}s ({stats.events / max(stats.seconds, 1e-9):,.0f} events/s) → {args.out_dir}"
    )
    if args.check:
        events, sessions = check(args.out_dir)
        print(f"history.py: check ok: {sessions} sessions, {events} events, all event ids unique")
    return 0


if __name__ == "__main__":
    sys.exit(main())
