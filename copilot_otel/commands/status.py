"""``copilot-otel status``: what the running daemon is doing, from the ``status.json`` in its state dir.

The daemon rewrites ``<state_dir>/status.json`` every few seconds with these keys: ``pid``, ``started_at``,
``updated_at``, ``last_export_ok_at`` (Unix seconds; the last may be null), ``files_tracked``,
``sessions_open_prompts``, ``backlog_spans``, ``spans_exported``, ``logs_exported``, ``dead_lettered``,
``retries``, ``unencodable`` (records dropped because a value could not be encoded), ``lines_read``,
``lines_dropped``, ``values_dropped`` (values dropped from events that were kept: a timestamp or a number out
of range), ``records_not_read`` (records of kinds their agent's reader does not read, one row per agent and CLI
version: ``agent``, ``cli_version``, ``kinds`` kind → count) and ``detections`` (reason → count), ``last_error``,
``endpoint_error`` (what to fix while the endpoint refuses us: credentials, path; empty otherwise), ``destination``, ``discovery`` (``inotify``, ``polling``, or
``polling (inotify watches exhausted)``), ``dead_letters`` and ``dead_letter_file`` (what the dead-letter file
holds now), ``open_files_cap``, ``reads_deferred_no_descriptor``, ``side_files_refused`` (files read beside a log
that were not: a FIFO or device in their place, too large, unreadable; by reason), ``state_flush_failures``,
``state_write_error`` and ``state_write_failed_at`` (the last failed write of the checkpoints: why, and when; kept
after writes succeed again), ``state_writes_failing`` (failures since the last write that succeeded) and
``open_prompts`` (session id, start, last event, turns and tool calls of each prompt still open). The file is read
here directly (it is informational, not a checkpoint) as the record the daemon writes
(:class:`~copilot_otel.daemon.statusfile.DaemonStatus`, its open prompts and records not read typed rows: a key an
older daemon did not write gets its default, and a count it did not write is shown as ``?``, never as 0), and a
daemon counts as running only while the process it names is alive.

A daemon that has just started has written no status yet (the first comes after a few seconds): when the
state dir's lock names a live process, it is reported as starting, not as gone. Run from a shell whose
settings differ from the service's (no ``COPILOT_OTEL_STATE_DIR`` there), ``status`` also looks in the state
dirs the installed services name.

After what it says of the daemon, ``status`` lists each agent's log folder (:func:`copilot_otel.settings.roots.agent_roots`):
found, not found (that agent never ran as this user), or switched off by the ``agents`` setting; ``--json`` adds
them to the status object as ``agent_logs`` (``agent``, ``folder``, ``setting``, ``enabled``, ``found``), and prints
that object even when no daemon wrote a status.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from .._platform import current, utf8_stdout
from ..common import display
from ..common.errors import StateError
from ..daemon.statusdoc import daemon_alive
from ..daemon.statusfile import (
    LOCK_FILE,
    STATUS_FILE,
    DaemonStatus,
    NotReadRow,
    OpenPrompt,
    read_daemon_status,
)
from ..daemon.statusfile import read_status as _read_status_file
from ..settings.config import Config
from ..settings.roots import AgentRoot, agent_roots, not_read_line

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

# Start-up time (issue 25: ``status`` imports in under 100 ms): ``rich`` (~30 ms) is imported only when there is
# something to draw or colour (a table, or any output to a terminal), the dead letters' module (which loads the
# checkpoint store, SQLite and ``filelock``, ~40 ms) only when the state dir holds a dead-letter file, and the
# services' files only when no daemon runs where configured. ``status.json`` and the lock's pid are read by the
# light :mod:`copilot_otel.daemon.statusfile`, the agents' log folders listed by the light :mod:`copilot_otel.settings.roots`.

__all__ = ["STATUS_FILE", "find_state_dir", "print_status", "read_status"]
# A running daemon rewrites its status every few seconds; older than this and it is probably stuck.
_STALE_AFTER_S = 120.0


def read_status(state_dir: Path) -> dict[str, Any] | None:
    """The daemon's last status, or ``None`` when it never wrote one.

    Raises:
        StateError: The file exists but cannot be read or is not a JSON object.
    """
    return _read_status_file(state_dir)


def print_status(config: Config, as_json: bool = False) -> int:
    """Print the daemon's status and each agent's log folder; 0 when a daemon is running, 1 when none is
    (showing its last status if any).

    Raises:
        StateError: ``status.json`` exists but is unreadable.
    """
    state_dir = find_state_dir(config)
    path = state_dir / STATUS_FILE
    raw = read_status(state_dir)
    # The typed status for what is shown; ``--json`` prints the document as the daemon wrote it.
    status = DaemonStatus.from_dict(raw) if raw is not None else None
    pid = status.pid if status is not None else None
    running = daemon_alive(pid)
    starting = None if running else _lock_owner(state_dir)
    if starting is not None:
        # Started a moment ago: the lock is held, the first status is not written yet.
        line = f"copilot-otel daemon starting (pid {starting}, state in {state_dir}); no status written yet"
        print(line, file=sys.stderr if as_json else sys.stdout)
        return 0
    roots = agent_roots(config)
    if as_json:
        # The daemon's status as it wrote it, and the agents' log folders beside it (an object even without one).
        doc = {**(raw or {}), "agent_logs": [_root_json(root) for root in roots]}
        out = utf8_stdout()  # JSON is UTF-8 bytes, whatever the console's code page
        out.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")
        out.flush()
        if not running:
            print(_not_running(path, status, pid), file=sys.stderr)
        return 0 if running else 1
    dead_letters = _dead_letters(config.state_dir)
    if not running and status is None and dead_letters is None and _plain_output():
        # Nothing to draw and no terminal to colour: the same characters rich would print, without its import.
        print(display.printable(_not_running(path, status, pid)))
        print(_ROOTS_HEADING)
        for _state, line in _root_rows(roots):
            print(display.printable(line))
        return 1
    from rich.console import Console  # start-up time: only when there is a table to draw or a terminal
    from rich.text import Text

    # No markup or emoji codes: a path's "[work]" or ":smile:" is text (rich took them for a style and an emoji).
    console = display.neutralise(Console(highlight=False, markup=False, emoji=False))
    now = time.time()
    if not running:
        console.print(display.printable(_not_running(path, status, pid)), style="yellow", soft_wrap=True)
        if status is not None:
            console.print("Last status it wrote:", style="dim")
            console.print(_table(status, now, dead_letters))
        elif dead_letters:
            console.print(f"{dead_letters} (copilot-otel dead-letters list / resend / clear)", style="red")
        _print_roots(console, roots)
        return 1
    assert status is not None
    heading = Text("copilot-otel daemon running", style="bold green")
    heading.append(f" (pid {pid}", style="")
    started = status.started_at
    if started:
        heading.append(f", up {_span(now - started)}")
    heading.append(")")
    console.print(heading)
    if state_dir != config.state_dir:
        console.print(f"(the installed service's state dir: {state_dir})", style="dim")
    updated = status.updated_at
    if updated and now - updated > _STALE_AFTER_S:
        console.print(
            f"its status was last written {_span(now - updated)} ago: the daemon may be stuck (see its log)",
            style="yellow",
        )
    console.print(_table(status, now, dead_letters))
    _print_open_prompts(console, status.open_prompts, now)
    _print_roots(console, roots)
    return 0


def _plain_output() -> bool:
    """Whether ``rich`` would print plain characters to stdout: not a terminal, and not told it is one
    (``TTY_COMPATIBLE=1``, ``FORCE_COLOR``; what its ``Console.is_terminal`` checks)."""
    if os.environ.get("TTY_COMPATIBLE") == "1" or os.environ.get("FORCE_COLOR"):
        return False
    try:
        return not sys.stdout.isatty()
    except (AttributeError, ValueError):  # no isatty, or closed: rich says "not a terminal" too
        return True


def _dead_letters(state_dir: Path) -> str | None:
    """What the dead-letter files hold (:func:`copilot_otel.deliver.deadletter.describe`), or ``None``.

    Every one of those files is named ``dead-letter*`` (``dead-letter.jsonl``, ``.1``, ``.resending``,
    ``dead-letter.discarded``): when the state dir has none, there is nothing to describe, and the module, which
    loads the checkpoint store, is not imported (start-up time).
    """
    try:
        with os.scandir(state_dir) as entries:
            if not any(entry.name.startswith("dead-letter") for entry in entries):
                return None
    except (FileNotFoundError, NotADirectoryError):
        return None  # no state dir yet: no dead letters either
    except OSError:
        pass  # unreadable: describe() says what it can (the state dir check is the doctor's)
    from ..deliver.deadletter import describe  # start-up time: only where dead letters may be

    return describe(state_dir)


_ROOTS_HEADING = "agent logs (the agents setting says which are read)"
_ROOT_STYLES = {"found": "green", "not found": "dim", "switched off": "yellow"}


def _root_rows(roots: list[AgentRoot]) -> list[tuple[str, str]]:
    """Each agent's log folder as ``(state, line)``: ``found``, ``not found`` (the agent never ran as this user)
    or ``switched off`` (not in ``agents``), and the line shown; the same characters on a terminal or not."""
    states = [("found" if root.found else "not found") if root.enabled else "switched off" for root in roots]
    agent_width = max(len(root.agent) for root in roots)
    state_width = max(len(state) for state in states)
    return [
        (state, f"  {root.agent:<{agent_width}}  {state:<{state_width}}  {root.logs}")
        for root, state in zip(roots, states, strict=True)
    ]


def _print_roots(console: Console, roots: list[AgentRoot]) -> None:
    from rich.text import Text

    console.print(Text(_ROOTS_HEADING, style="bold"), soft_wrap=True)
    for state, line in _root_rows(roots):
        # printable() first: rich drops some control characters (BEL) that the plain shortcut shows as ␇.
        console.print(Text(display.printable(line), style=_ROOT_STYLES[state]), soft_wrap=True)


def _root_json(root: AgentRoot) -> dict[str, Any]:
    return {
        "agent": root.agent,
        "folder": str(root.logs),
        "setting": root.setting,
        "enabled": root.enabled,
        "found": root.found,
    }


def _lock_owner(state_dir: Path) -> int | None:
    """The live process named by the state dir's lock (a daemon holds it from its first moment), if any."""
    lock = state_dir / LOCK_FILE
    try:
        written = lock.stat().st_mtime  # the daemon writes its pid there when it takes the lock
    except OSError:
        return None
    owner = current.read_lock_owner(lock)
    pid = int(owner) if owner.isdigit() else 0
    # The lock file stays after the daemon exits: a process that got its pid later is not it.
    return pid if pid > 0 and current.process_alive(pid, started_before=written) else None


def _running_in(state_dir: Path) -> bool:
    try:
        status = read_daemon_status(state_dir)
    except StateError:
        return False
    return daemon_alive(status.pid if status else None) or _lock_owner(state_dir) is not None


def find_state_dir(config: Config) -> Path:
    """The configured state dir, unless it was not set explicitly, no daemon runs there and an installed
    service names another state dir in which one does."""
    if config.sources.get("state_dir", "default") != "default" or _running_in(config.state_dir):
        return config.state_dir
    from ..daemon.servicefiles import (
        installed_state_dirs,  # start-up time: only when no daemon runs where configured
    )

    for candidate in installed_state_dirs():
        if candidate != config.state_dir and _running_in(candidate):
            return candidate
    return config.state_dir


def _print_open_prompts(console: Console, prompts: list[OpenPrompt], now: float) -> None:
    if not prompts:
        return
    from rich.table import Table

    table = Table(box=None, pad_edge=False, title="open prompts", title_justify="left", title_style="bold")
    for column in ("session", "running for", "turns", "tool calls", "last event"):
        table.add_column(column, no_wrap=True)
    for row in prompts:
        started, last = row.started_at, row.last_event_at
        table.add_row(
            row.session_id or "?",
            _span(now - started) if started else "?",
            _count(row.turns),
            _count(row.tool_calls),
            f"{_span(now - last)} ago" if last else "?",
        )
    console.print(table)


def _not_running(path: Path, status: DaemonStatus | None, pid: object) -> str:
    if status is None:
        return (
            f"No copilot-otel daemon is running (no status in {path}). Start one with 'copilot-otel run' "
            "or 'copilot-otel service install'."
        )
    return (
        f"No copilot-otel daemon is running (process {pid} named in {path} is gone). Start one with "
        "'copilot-otel run' or 'copilot-otel service install'."
    )


def _table(status: DaemonStatus, now: float, dead_letters: str | None = None) -> Table:
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, show_header=False, pad_edge=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    table.add_row("destination", status.destination or "?")
    table.add_row("files tracked", _count(status.files_tracked))
    discovery = status.discovery
    if discovery:
        # "polling (inotify watches exhausted)": new lines are found by polling; the limit should be raised.
        table.add_row("file watching", Text(discovery, style="yellow" if "(" in discovery else ""))
    table.add_row("open prompts", _count(status.sessions_open_prompts))
    backlog = status.backlog_spans
    waiting = "? spans" if backlog is None else display.count(backlog, "span")  # "1 span", never "1 spans"
    table.add_row("backlog", Text(f"{waiting} waiting", style="yellow" if backlog else ""))
    last_ok = status.last_export_ok_at
    if last_ok:
        table.add_row("last export", f"{_span(now - last_ok)} ago ({_when(last_ok)})")
    else:
        table.add_row("last export", Text("never", style="yellow"))
    table.add_row(
        "exported",
        f"{_count(status.spans_exported)} spans, {_count(status.logs_exported)} log events",
    )
    retries = status.retries
    table.add_row("retries", Text(_count(retries), style="yellow" if retries else ""))
    dead = status.dead_lettered
    table.add_row("dead-lettered", Text(_count(dead), style="red" if dead else ""))
    if dead_letters:
        table.add_row(
            "dead letters",
            Text(f"{dead_letters} (copilot-otel dead-letters list / resend / clear)", style="red"),
        )
    unencodable = status.unencodable
    if unencodable:
        table.add_row("unencodable", Text(f"{unencodable:,} records dropped", style="red"))
    endpoint = status.endpoint_error
    if endpoint:
        # The endpoint refuses us (credentials, path): the data is held, and this line says what to fix.
        table.add_row("endpoint", Text(f"{endpoint} (data held, retrying)", style="bold red"))
    error = status.last_error
    if error and error != endpoint:
        table.add_row("last error", Text(error, style="red"))
    state = _state_writes(status, now)
    if state is not None:
        table.add_row("state writes", state)
    table.add_row("lines read", _count(status.lines_read))
    table.add_row("lines dropped", _by_reason(status.lines_dropped, "yellow"))
    if status.values_dropped:
        table.add_row("values dropped", _by_reason(status.values_dropped, "yellow"))
    if status.side_files_refused:
        table.add_row("side files not read", _by_reason(status.side_files_refused, "yellow"))
    for line in _not_read_lines(status.records_not_read):
        table.add_row("record kinds", Text(line, style="yellow"))
    table.add_row("detections", _by_reason(status.detections, "bold red"))
    updated = status.updated_at
    if updated:
        table.add_row("updated", f"{_span(now - updated)} ago ({_when(updated)})")
    return table


def _not_read_lines(rows: list[NotReadRow]) -> list[str]:
    """``records_not_read`` as lines, one per agent and CLI version (the daemon's log says the same)."""
    return [not_read_line(row.agent or "?", row.cli_version or None, row.kinds) for row in rows if row.kinds]


def _state_writes(status: DaemonStatus, now: float) -> Text | None:
    """How the checkpoints' writes go: failing now (what is held in memory is retried every second), or when the
    last one failed and why; ``None`` when none ever failed (or the daemon is older than these keys)."""
    from rich.text import Text

    error = status.state_write_error
    if not error:
        return None
    failed_at = status.state_write_failed_at
    when = f"{_span(now - failed_at)} ago ({_when(failed_at)})" if failed_at else "at an unknown time"
    failing = status.state_writes_failing
    if failing:
        return Text(
            f"failing ({failing:,} in a row, the last {when}): {error}; the checkpoints are held in memory and "
            "written again every second",
            style="bold red",
        )
    return Text(f"ok; the last failure {when}: {error}", style="yellow")


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _count(value: object) -> str:
    number = _number(value)
    return "?" if number is None else f"{int(number):,}"


def _by_reason(counts: Mapping[str, int] | None, style: str) -> Text:
    """Counts by reason: their total, and each reason's; ``?`` when the status lacks them (an older daemon's)."""
    from rich.text import Text

    if counts is None:
        return Text("?")
    if not counts:
        return Text("0")
    total = sum(counts.values())
    detail = ", ".join(f"{reason} {count:,}" for reason, count in sorted(counts.items()) if count)
    return Text(f"{total:,}" + (f" ({detail})" if detail else ""), style=style if total else "")


def _span(seconds: float) -> str:
    seconds = max(seconds, 0.0)
    if seconds < 60:
        return f"{seconds:.0f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m"
    return f"{hours // 24}d{hours % 24:02d}h"


def _when(unix_s: float) -> str:
    try:
        return datetime.fromtimestamp(unix_s).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
    except (OverflowError, OSError, ValueError):
        return "?"
