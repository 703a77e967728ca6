"""``copilot-otel statusline``: one short line for Claude Code's ``statusLine`` hook.

Claude Code runs the hook's command after messages change (at most every 300 ms), passes it the session as JSON on
standard input (``session_id``, ``transcript_path``, ``model``, ``workspace``, the CLI's own ``cost``, …) and shows
the first line it prints. The line says the model, this session's cost, today's cost (every agent's, as ``report
daily`` counts it), the time left in the open 5-hour window (``report blocks``) and whether copilot-otel's daemon is
delivering. Configured once, in ``~/.claude/settings.json``::

    {"statusLine": {"type": "command", "command": "copilot-otel statusline"}}

It has to answer at once, so it never reads a log nor loads the price table (which alone takes longer than the
hook waits): it prints what the last *refresh* worked out (``statusline.json`` in the state directory) and, when
that is older than the session's transcript, than today or than :data:`FRESH_S`, starts one refresh in the
background (``statusline --refresh``, one at a time: it holds ``statusline.lock``), whose figures the next message
shows. A refresh reads as ``report`` reads (the same fold, prices and windows).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from .._platform import LockHeld, current
from ..common import display
from ..common.errors import CopilotOtelError, StateError
from ..daemon.statusdoc import daemon_alive, read_status
from ..settings.config import Config

__all__ = ["CACHE_FILE", "FRESH_S", "Hook", "line", "read_hook", "refresh", "statusline"]

CACHE_FILE = "statusline.json"
LOCK_FILE = "statusline.lock"
# Other sessions add to today's cost too: figures older than this are refreshed even if this session is idle.
FRESH_S = 60.0
# The hook's JSON is a few kB; more is not Claude Code's, and is not read.
MAX_INPUT_BYTES = 1 << 20
# Sessions whose cost the cache keeps (the most recently refreshed).
KEEP_SESSIONS = 50


@dataclass(frozen=True, slots=True)
class Hook:
    """What the statusLine hook said of the session (each part may be missing: an older CLI, a test)."""

    session_id: str | None = None
    transcript: str | None = None
    model: str | None = None
    cli_cost_usd: float | None = None


def read_hook(data: bytes) -> Hook:
    """The hook's JSON, read leniently: what is missing or of another type is ``None``, never an error (a status
    line that fails blanks the user's line)."""
    try:
        doc = orjson.loads(data[:MAX_INPUT_BYTES])
    except orjson.JSONDecodeError:
        return Hook()
    if not isinstance(doc, dict):
        return Hook()
    model = doc.get("model")
    cost = doc.get("cost")
    name = None
    if isinstance(model, dict):
        name = model.get("display_name") or model.get("id")
    elif isinstance(model, str):
        name = model
    spent = cost.get("total_cost_usd") if isinstance(cost, dict) else None
    return Hook(
        session_id=_text(doc.get("session_id")),
        transcript=_text(doc.get("transcript_path")),
        model=_text(name),
        cli_cost_usd=float(spent)
        if isinstance(spent, (int, float)) and not isinstance(spent, bool)
        else None,
    )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _signature(path: str | None) -> list[int] | None:
    """What says the transcript changed: its size and modification time."""
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


def _read_cache(state_dir: Path) -> dict[str, Any]:
    try:
        doc = orjson.loads((state_dir / CACHE_FILE).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _today() -> str:
    return datetime.now().astimezone().date().isoformat()


def stale(cache: dict[str, Any], hook: Hook, now_s: float) -> bool:
    """Whether the cached figures are older than what they are about."""
    if cache.get("day") != _today() or now_s - float(cache.get("refreshed_at") or 0) > FRESH_S:
        return True
    if hook.session_id is None:
        return False
    session = (cache.get("sessions") or {}).get(hook.session_id)
    return not isinstance(session, dict) or session.get("signature") != _signature(hook.transcript)


def _daemon_word(state_dir: Path) -> str:
    """``delivering``, ``retrying``, ``held``, ``not running``: what the daemon's status file says of it (four of
    its fields, read from the JSON: the typed status costs its record types' creation, ~15 ms a call)."""
    try:
        status = read_status(state_dir)
    except StateError:  # a status being written, damaged: the line is no place to say why (`status` says it)
        return "?"
    if status is None or not daemon_alive(status.get("pid")):  # as `status` decides it
        return "not running"
    if status.get("endpoint_error"):
        return "held (endpoint)"
    if status.get("backlog_spans") and status.get("last_error"):
        return "retrying"
    return "delivering"


def _usd(value: object) -> str:
    return f"${value:.2f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "$…"


def line(hook: Hook, cache: dict[str, Any], daemon: str, now_s: float) -> str:
    """The status line: model, session cost, today's cost, the open window's time left, the daemon's state."""
    parts = [hook.model or "?"]
    session = (cache.get("sessions") or {}).get(hook.session_id) if hook.session_id else None
    parts.append(f"{_usd(session.get('cost_usd') if isinstance(session, dict) else None)} session")
    parts.append(f"{_usd(cache.get('today_cost_usd') if cache.get('day') == _today() else None)} today")
    end = cache.get("window_end")
    if isinstance(end, (int, float)) and end > now_s:
        parts.append(f"{display.duration(end - now_s)} left in 5h window")
    parts.append(f"otel {daemon}")
    return " · ".join(parts)


def statusline(config: Config, data: bytes) -> int:
    """The hook's answer (the fast path): the line from the cached figures, and a refresh started if they are
    stale. Always exits 0 with a line: Claude Code blanks the line of a command that fails."""
    hook = read_hook(data)
    state_dir = config.state_dir
    now_s = time.time()
    cache = _read_cache(state_dir)
    if stale(cache, hook, now_s) and not _refreshing(state_dir):
        argv = [
            sys.executable,
            "-m",
            "copilot_otel",
            "statusline",
            "--refresh",
            "--state-dir",
            str(state_dir),
        ]
        argv += ["--session-id", hook.session_id] if hook.session_id else []
        argv += ["--transcript", hook.transcript] if hook.transcript else []
        # the settings the refresh reads as this process did (the environment is inherited; a default file that
        # is not there is no flag to give)
        argv += ["--config", str(config.config_file)] if config.config_file.is_file() else []
        # a refresh that cannot start: the line is still printed from what is cached; the next message tries again
        with contextlib.suppress(OSError):
            current.spawn_detached(argv)
    sys.stdout.write(display.printable(line(hook, cache, _daemon_word(state_dir), now_s)) + "\n")
    return 0


def _refreshing(state_dir: Path) -> bool:
    """Whether a refresh holds the lock now (so no second one is started)."""
    try:
        lock = current.lock_exclusive(state_dir / LOCK_FILE)
    except LockHeld:
        return True
    except OSError:
        return False  # no state directory yet: the refresh makes it
    lock.release()
    return False


def refresh(config: Config, session_id: str | None, transcript: str | None) -> int:
    """Work out the figures the line shows and write them to :data:`CACHE_FILE` (atomically; one refresh at a
    time). Returns 0, or 0 at once when another refresh runs."""
    from .blocks import BLOCK_NS, windows
    from .report import HOUR_NS, Cut, make_cut, read_tally

    state_dir = config.state_dir
    state_dir.mkdir(
        mode=0o700, parents=True, exist_ok=True
    )  # the daemon's state directory, made as it makes it
    try:
        lock = current.lock_exclusive(state_dir / LOCK_FILE)
    except LockHeld:
        return 0
    try:
        now_ns = time.time_ns()
        today = datetime.now().astimezone().replace(hour=0, minute=0, second=0, microsecond=0)
        today_ns = int(today.timestamp()) * 10**9
        cache = _read_cache(state_dir)
        sessions = cache.get("sessions") if cache.get("day") == _today() else None
        sessions = dict(sessions) if isinstance(sessions, dict) else {}

        def cost(cut: Cut, paths: list[str], since_ns: int | None) -> float | None:
            try:
                tally = read_tally(config, cut, paths, read_since_ns=since_ns, progress="never")
            except CopilotOtelError:  # no agent's folder, a transcript gone: unknown, said as "$…"
                return None
            return tally.totals.value("cost_usd", cut.prices.premium_request)

        daily = make_cut("daily", since_ns=today_ns, now_ns=now_ns)
        today_cost = cost(daily, [], today_ns)
        if session_id is not None and transcript is not None and os.path.isfile(transcript):
            signature = _signature(
                transcript
            )  # before reading: a line written meanwhile makes it stale again
            whole = make_cut("session", now_ns=now_ns)
            sessions[session_id] = {"cost_usd": cost(whole, [transcript], None), "signature": signature}
        window = make_cut("blocks", since_ns=now_ns - BLOCK_NS - HOUR_NS, now_ns=now_ns, agent="claude-code")
        try:
            tally = read_tally(config, window, [], read_since_ns=window.since_ns, progress="never")
            open_windows = [b for b in windows(tally, now_ns) if b.active]
        except CopilotOtelError:
            open_windows = []
        kept = dict(list(sessions.items())[-KEEP_SESSIONS:])
        doc = {
            "day": _today(),
            "refreshed_at": now_ns / 1e9,
            "today_cost_usd": today_cost,
            "sessions": kept,
            "window_end": open_windows[-1].end_ns / 1e9 if open_windows else None,
        }
        temporary = state_dir / f".{CACHE_FILE}.{os.getpid()}"
        temporary.write_bytes(orjson.dumps(doc))
        current.replace(temporary, state_dir / CACHE_FILE)
    finally:
        lock.release()
    return 0
