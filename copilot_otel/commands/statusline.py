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
background (``statusline --refresh``, one at a time: it holds ``statusline.lock``; a hook that finds one running
leaves its session to it as a request), whose figures the next message shows. A refresh reads as ``report`` reads
(the same fold, prices and windows).

The console script answers the hook without the CLI (:mod:`copilot_otel.entry` calls :func:`hook`): the state
directory found by the settings' rule without their table (:mod:`copilot_otel.settings.locate`), the platform's
three calls from :mod:`copilot_otel._platform._quick`, the standard library's JSON. What this module imports at its
top is the hook's whole cost (``tests/test_startup.py`` holds it); the refresh imports the rest when it runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from datetime import datetime
from pathlib import Path

from .._platform import _quick
from .._platform._console import utf8_stdout
from ..common import display
from ..common.errors import StateError
from ..daemon.statusdoc import daemon_alive, read_status
from ..settings import locate

# Not `from typing import TYPE_CHECKING`: the hook's path (see copilot_otel.entry) imports only what it runs.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

    from ..settings.config import Config

__all__ = ["CACHE_FILE", "FRESH_S", "Hook", "answer", "hook", "line", "read_hook", "refresh"]

CACHE_FILE = "statusline.json"
LOCK_FILE = "statusline.lock"
# Other sessions add to today's cost too: figures older than this are refreshed even if this session is idle.
FRESH_S = 60.0
# The hook's JSON is a few kB; more is not Claude Code's, and is not read.
MAX_INPUT_BYTES = 1 << 20
# Sessions whose cost the cache keeps (the most recently refreshed).
KEEP_SESSIONS = 50
# A refresh that took its lock longer ago than this is not waited for (it takes about a second; a pid that names
# another program by now is not taken for it).
REFRESH_MAX_S = 120.0
# How much of a settings problem the line shows (Claude Code shows one line; `copilot-otel config` says it all).
PROBLEM_CHARS = 100
# How many rounds a refresh reads while transcripts grow and requests come (the next message then shows the rest).
REFRESH_ROUNDS = 5
# How many times a refresh takes the lock again for requests left while it released it.
REFRESH_HOLDS = 3
# The files a hook leaves for the running refresh (one a session): ``statusline.request.<session id>.json``.
REQUEST_PREFIX = "statusline.request."
# A request that does not parse after this long was left half-written (its hook died): it is removed.
REQUEST_WRITE_S = 10.0


class Hook:
    """What the statusLine hook said of the session (each part may be missing: an older CLI, a test). A plain
    class: a dataclass would cost the hook's path the import of :mod:`dataclasses` (~8 ms)."""

    __slots__ = ("cli_cost_usd", "model", "session_id", "transcript")

    def __init__(
        self,
        session_id: str | None = None,
        transcript: str | None = None,
        model: str | None = None,
        cli_cost_usd: float | None = None,
    ) -> None:
        self.session_id = session_id
        self.transcript = transcript
        self.model = model
        self.cli_cost_usd = cli_cost_usd


def read_hook(data: bytes) -> Hook:
    """The hook's JSON, read leniently: what is missing or of another type is ``None``, never an error (a status
    line that fails blanks the user's line). The standard library's parser: a few kB, and orjson's import alone
    would cost the hook ~15 ms."""
    try:
        doc = json.loads(data[:MAX_INPUT_BYTES])
    except (ValueError, RecursionError):  # not JSON, not UTF-8, nested too deep
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
        doc = json.loads((state_dir / CACHE_FILE).read_bytes())
    except (OSError, ValueError, RecursionError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _today() -> str:
    return datetime.now().astimezone().date().isoformat()


def stale(cache: dict[str, Any], hook: Hook, now_s: float) -> bool:
    """Whether the cached figures are older than what they are about."""
    if cache.get("day") != _today() or now_s - float(cache.get("refreshed_at") or 0) > FRESH_S:
        return True
    # A wrong setting (the refresh's word instead of figures) is asked about again after FRESH_S, not each time.
    if hook.session_id is None or cache.get("problem"):
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
    problem = cache.get("problem")
    if isinstance(problem, str) and problem:  # the refresh could not run: what to fix, not figures
        said = problem if len(problem) <= PROBLEM_CHARS else problem[: PROBLEM_CHARS - 1] + "…"
        return " · ".join([*parts[:1], f"copilot-otel settings: {said} (copilot-otel config)"])
    parts.append(f"otel {daemon}")
    return " · ".join(parts)


def hook(flags: dict[str, str]) -> int | None:
    """The hook's short path (:mod:`copilot_otel.entry`): the state directory ``flags`` and the environment select
    (:func:`copilot_otel.settings.locate.state_dir`), the hook's JSON from standard input, the line. ``None`` when
    the quick reading cannot settle the state directory: the CLI's path then loads every setting."""
    try:
        state_dir = locate.state_dir(flags)
    except locate.Unsettled:
        return None
    return answer(state_dir, flags.get(locate.CONFIG_FLAG), read_stdin())


def read_stdin() -> bytes:
    """What the hook passed on standard input (nothing from a terminal: a person trying the command)."""
    if sys.stdin is None or sys.stdin.isatty():
        return b""
    return sys.stdin.buffer.read(MAX_INPUT_BYTES)


def answer(state_dir: Path, config_file: str | None, data: bytes) -> int:
    """The hook's answer: the line from the cached figures, and a refresh asked for if they are stale. Always
    exits 0 with a line: Claude Code blanks the line of a command that fails.

    A stale line starts ``statusline --refresh`` in the background with the same state directory and
    ``config_file`` (the environment is inherited), unless a refresh runs already (one that took
    ``statusline.lock`` less than :data:`REFRESH_MAX_S` ago and whose process still runs, read from the lock file
    without the lock library's import): then this session is left as a request (:func:`_ask`) that the running
    refresh takes before it ends. Asked, then looked at again: a refresh that ended meanwhile is started anew.
    """
    hook = read_hook(data)
    now_s = time.time()
    cache = _read_cache(state_dir)
    if stale(cache, hook, now_s) and not _handed_over(state_dir, hook, now_s):
        # each value after "=": one that starts with "-" (a folder, a session id) is not taken for a flag
        argv = [sys.executable, "-m", "copilot_otel", "statusline", "--refresh", f"--state-dir={state_dir}"]
        argv += [f"--session-id={hook.session_id}"] if hook.session_id else []
        argv += [f"--transcript={hook.transcript}"] if hook.transcript else []
        argv += [f"{locate.CONFIG_FLAG}={config_file}"] if config_file else []
        # a refresh that cannot start: the line is still printed; the next message tries again
        with contextlib.suppress(OSError):
            _quick.spawn_detached(argv, windows=_quick.dirs_kind() == "windows")
    # UTF-8 whatever the console's code page, as --json is: the reader is Claude Code, not a terminal (a cp1252
    # pipe on Windows would otherwise get its "·" as byte 0xB7, or the CLI's ASCII spellings).
    try:
        out = utf8_stdout()
        out.write((display.printable(line(hook, cache, _daemon_word(state_dir), now_s)) + "\n").encode())
        out.flush()
    except BrokenPipeError:  # the reader went away: nothing to say to anyone
        pass
    return 0


def _running(state_dir: Path, now_s: float) -> bool:
    return _quick.recently_locked(state_dir / LOCK_FILE, now_s - REFRESH_MAX_S)


def _handed_over(state_dir: Path, hook: Hook, now_s: float) -> bool:
    """Whether a running refresh has this session's request (left by :func:`_ask`) and will price it."""
    if not _running(state_dir, now_s):
        return False
    _ask(state_dir, hook.session_id, hook.transcript)
    # The refresh looks for requests after it has marked its lock released: still running now, it will see this.
    return _running(state_dir, time.time())


def _request_name(session_id: str | None) -> str:
    key = "".join(c for c in (session_id or "") if c.isalnum() or c in "-_")[:64] or "any"
    return f"{REQUEST_PREFIX}{key}.json"


def _ask(state_dir: Path, session_id: str | None, transcript: str | None) -> None:
    """Leave a request for the running refresh: this session (and today's figures) to price. One file a session,
    replaced whole; the refresh removes each one it takes."""
    path = state_dir / _request_name(session_id)
    with contextlib.suppress(OSError):  # no request: the next message asks again
        # written in place, one small write (no rename: the platform's, with its Windows retries, is not imported
        # here); a refresh that reads it half-written leaves it for its next round
        path.write_text(json.dumps({"session_id": session_id, "transcript": transcript}))


def _requests(state_dir: Path) -> Iterator[Path]:
    """The requests hooks left (:func:`_ask`) and no refresh has taken yet."""
    return state_dir.glob(f"{REQUEST_PREFIX}*.json")


def _take_requests(state_dir: Path) -> dict[str, str | None]:
    """The sessions the requests ask for (``{session_id: transcript}``; ``""`` for today's figures alone), each
    request removed as it is read: one asked for again after that is read in the next round."""
    asked: dict[str, str | None] = {}
    for path in _requests(state_dir):
        try:
            doc = json.loads(path.read_bytes())
            path.unlink()
        except (ValueError, RecursionError):  # being written, or left half-written by a hook that died
            with contextlib.suppress(OSError):
                if time.time() - path.stat().st_mtime > REQUEST_WRITE_S:
                    path.unlink()
            continue
        except OSError:
            continue
        if isinstance(doc, dict):
            session = doc.get("session_id")
            transcript = doc.get("transcript")
            asked[session if isinstance(session, str) else ""] = (
                transcript if isinstance(transcript, str) else None
            )
    return asked


def refresh(config: Config, session_id: str | None, transcript: str | None) -> int:
    """Work out the figures the line shows and write them to :data:`CACHE_FILE` (atomically; one refresh at a
    time). Returns 0, or 0 at once when another refresh runs.

    Each round also prices what other hooks asked for while it ran (:func:`_ask`: another session, or the next
    message of this one), and a transcript that grew while it was read is read again, up to
    :data:`REFRESH_ROUNDS` rounds. Before the lock is released it is marked so
    (:func:`~copilot_otel._platform._quick.mark_released`): a hook from then on starts a refresh although this
    process has not exited yet, and a request left just before that is taken after the release, the lock taken
    again (up to :data:`REFRESH_HOLDS` times). A refresh that finds the lock held leaves its session as a request
    and looks once more, so the holder or itself prices it.
    """
    from .._platform import LockHeld, current

    state_dir = config.state_dir
    # the daemon's state directory, made as it makes it
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    lock_path = state_dir / LOCK_FILE
    wanted: dict[str, str | None] = {session_id or "": transcript}
    asked = False
    for _ in range(REFRESH_HOLDS):
        try:
            lock = current.lock_exclusive(lock_path)
        except LockHeld:
            if asked:  # still held after the request was left: its holder will see the request
                return 0
            _ask(state_dir, session_id, transcript)
            asked = True
            continue
        try:
            for _ in range(REFRESH_ROUNDS):
                wanted |= _take_requests(state_dir)
                read = {name: _signature(path) for name, path in wanted.items()}
                _write_figures(config, wanted)
                # what grew while it was read: read again
                wanted = {name: path for name, path in wanted.items() if _signature(path) != read[name]}
                if not wanted and not any(_requests(state_dir)):
                    break
        finally:
            _quick.mark_released(lock_path)
            lock.release()
        # A hook that saw the lock held just before it was marked released left a request: take it too.
        if not wanted and not any(_requests(state_dir)):
            break
    return 0


def record_problem(state_dir: Path, problem: str) -> None:
    """A refresh that could not run because a setting is wrong (one the hook's short path does not read: it
    answers from its cached figures whatever the others say) writes what is wrong where the line reads its figures,
    so the line says what to fix instead of showing ``$…`` forever. The next refresh that runs replaces it."""
    doc = {
        "day": _today(),
        "refreshed_at": time.time(),
        "problem": display.scrub(problem),
    }  # a URL's password
    with contextlib.suppress(OSError):  # no state directory to write in: the line keeps saying "$…"
        state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)  # as the refresh makes it
        _write_cache(state_dir, doc)


def _write_cache(state_dir: Path, doc: dict[str, Any]) -> None:
    """:data:`CACHE_FILE` replaced whole (a hook never reads half of it)."""
    import orjson

    from .._platform import current

    temporary = state_dir / f".{CACHE_FILE}.{os.getpid()}"
    temporary.write_bytes(orjson.dumps(doc))
    current.replace(temporary, state_dir / CACHE_FILE)


def _write_figures(config: Config, wanted: dict[str, str | None]) -> None:
    """One reading of the figures (today's cost, each ``wanted`` session's from its transcript, the open window),
    written to :data:`CACHE_FILE`."""
    from ..common.errors import CopilotOtelError
    from .blocks import BLOCK_NS, windows
    from .report import HOUR_NS, Cut, make_cut, read_tally

    state_dir = config.state_dir
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
    for session_id, transcript in wanted.items():
        if session_id and transcript is not None and os.path.isfile(transcript):
            # before reading: a line written meanwhile makes it stale again
            signature = _signature(transcript)
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
    _write_cache(state_dir, doc)
