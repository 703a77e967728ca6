"""``copilot-otel live``: what is burning now, updated in place (as ccusage's ``blocks --live`` is for Claude Code).

One screen: this month's premium requests against the plan's allowance (``premium_quota``), today's figures and
sessions, and each running session's current prompt (turns, tool calls, tokens, premium requests) beside its
totals, plus what the daemon says (``status.json``) when one runs. ``--json`` prints the same as one JSON
object per refresh, one per line (:func:`burn_json`); off a terminal, or with ``--once``, one snapshot.

Every figure is ``report``'s, by construction: each log is read by :func:`copilot_otel.library.read_session`, or
followed with the same :class:`~copilot_otel.pipeline.Pipeline` (the one pipeline, content capture off), and
added up by :func:`copilot_otel.commands.report.session_part` and
:class:`copilot_otel.commands.report.Tally` (a daily cut, the quota counting from the 1st of the month, 00:00 UTC, when
GitHub resets it). A prompt still running is closed as ``incomplete`` at the end of what is written, as ``report``
and ``show`` close it, so its turns, tool calls and premium requests so far count.

What a refresh costs (:meth:`BurnWatch.refresh`; measured with ``benchmarks/live.py`` on a busy 2-core machine):

* one ``stat`` of the session-state folder, and one of each log written since the window opened (the 1st of
  the UTC month or the start of the local day, the earlier): the *hot* logs;
* every :data:`FULL_SWEEP_S` seconds, one ``stat`` of every other log too, so a log last written before the
  window (a *cold* one, never read) that a resumed CLI appends to is noticed within that time: 106,574 logs in
  0.5 s;
* when the folder's mtime changed (a session folder was created or removed), a new listing of it
  (:func:`copilot_otel.sources.sessions.scan_root`, as ``report`` lists it): 1.8 s for 100,000 folders;
* for each log whose size, mtime or inode changed: a running session's (a live CLI holds it) is *followed*: only
  what was appended since is read and folded (:class:`_Followed`), then its records are added up again, O(its
  records) in pure Python, no parsing (a 20 MB log grown by a line: 35 ms); any other log is read again whole,
  O(its size), about 70-90 MB/s (the same 20 MB log: 218 ms); every log that did not change costs nothing;
* adding up the hot logs' cached day rows (a few per log) and checking the ``inuse.<pid>.lock`` of each session
  active today: O(this month's sessions), no I/O but the locks.

So with 6,574 sessions this month (150,000 events, 270 MB) beside 100,000 older ones, the first refresh reads
the month (7-10 s, one process), then a refresh where nothing changed takes 35-50 ms, one where a log grew
that plus the log's share, and the sweep every 30 s 0.35-0.5 s.

A log's figures are kept (a few rows) between refreshes; when the day or the month changes, everything is read
again once (the window moved).
"""

from __future__ import annotations

import copy
import dataclasses
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timezone, tzinfo
from pathlib import Path
from typing import Any

from .._platform import current
from ..common import display
from ..common.errors import ConfigError, PartialError, SourceError, StateError
from ..library import SessionRecords, read_session
from ..loop.agentloop import FoldSettings
from ..model.activity import PromptRun, Record
from ..pipeline import MAX_LINE_BYTES, KeptLines, Pipeline, Step, fold_settings, read_chunks, split_lines
from ..settings.config import Config
from ..settings.content import ContentPolicy
from ..settings.moments import local_time
from ..settings.report_defaults import PREMIUM_REQUEST_PRICE_USD
from ..sources.sessions import SessionFile, owner_pids, pid_alive, read_workspace, scan_root, session_title
from .report import FIGURES, Cut, Row, Tally, json_number, make_cut, parse_zone, session_part
from .status import find_state_dir, read_status

__all__ = [
    "FULL_SWEEP_S",
    "Burn",
    "BurnWatch",
    "DaemonState",
    "SessionBurn",
    "burn_json",
    "live",
    "render_burn",
]

# Cold logs (last written before the window) are stat'ed this often: how late a resumed old session may show.
FULL_SWEEP_S = 30.0
# Today's sessions listed on screen at most (the JSON lists them all); the screen also crops to its height.
_SESSIONS_SHOWN = 15
# A running log that grew by more than this since the last refresh is read whole (in chunks) rather than held.
_FOLLOW_MAX_GROWTH_BYTES = 16 * 1024 * 1024
# While the first refresh reads a long month, its progress is redrawn at most this often.
_PROGRESS_S = 0.5
_QUIT_KEYS = frozenset("qQ\x04")  # q, or the terminal going away (EOF)


@dataclasses.dataclass
class _Log:
    """One log as the last refresh left it: its stat key, and (hot only) its figures."""

    session: SessionFile
    path: str  # the log's path as text: os.stat of a str skips pathlib's parsing (100,000 a sweep)
    key: tuple[int, int, int] = (-1, -1, -1)  # (size, mtime_ns, inode)
    tally: Tally | None = None  # None: cold (written before the window), unreadable, or not read yet
    title: str = ""
    repository: str | None = None
    cwd: str | None = None
    prompt: PromptRun | None = None  # the latest prompt
    prompt_figures: Row | None = None  # what the latest prompt added
    problem: str = ""
    # Kept while a CLI holds the session: what it appends is read, not the whole log.
    follow: _Followed | None = None


@dataclasses.dataclass
class _Followed:
    """A running session's log folded up to its last complete line, so that a refresh reads what was appended.

    What the log holds so far is ``records`` plus what closing the loop now would give: a copy of the loop is
    closed (the prompt in progress, ``incomplete``, as :func:`~copilot_otel.library.read_session` closes it at the
    end of the file), so the figures are the same as a read of the whole log; the line still being written is
    left for the next refresh, as the daemon leaves it.
    """

    pipeline: Pipeline
    offset: int  # end of the last complete line folded
    inode: int
    records: list[Record] = dataclasses.field(default_factory=list)
    kept: KeptLines = dataclasses.field(default_factory=KeptLines)  # the lines dropped, and those read

    @classmethod
    def start(cls, session: SessionFile, settings: FoldSettings, inode: int) -> _Followed:
        """Fold the log from its start to its last complete line.

        Raises:
            OSError: it cannot be read.
        """
        followed = cls(Pipeline.for_session(session, settings, project=False), 0, inode)
        followed._take(followed.pipeline.feed_chunks(followed._complete(session.path)))
        return followed

    def grow(self, path: Path, size: int) -> bool:
        """Fold what was appended since; False when the log is no longer the one followed (shorter: rewritten).

        Raises:
            OSError: it cannot be read.
        """
        if size < self.offset:
            return False
        if size - self.offset > _FOLLOW_MAX_GROWTH_BYTES:
            return False  # a burst: read it whole, in chunks
        fd = current.open_shared(path)
        try:
            blob = current.pread(fd, size - self.offset, self.offset)
        finally:
            os.close(fd)
        end = blob.rfind(b"\n") + 1
        feed = self.pipeline.feed
        self._take(feed(item) for item in split_lines(blob[:end], self.offset))
        self.offset += end
        return True

    def session_records(self, session: SessionFile) -> SessionRecords:
        """What a read of the whole log would give now (its open work closed on a copy of the loop)."""
        closed = copy.deepcopy(self.pipeline.loop).close("file_ended")
        return SessionRecords(
            session, [*self.records, *closed], list(self.kept.bad_lines), self.kept.lines_read
        )

    def _take(self, steps: Iterable[Step]) -> None:
        """The steps taken where replay, the daemon and the library take them (:meth:`Pipeline.take`)."""

        def keep(step: Step) -> int:
            self.records.extend(step.records)
            return 0

        self.pipeline.take(steps, "", self.kept, keep)

    def _complete(self, path: Path) -> Iterator[bytes]:
        """The log's bytes in chunks, up to its last newline (``offset`` ends there)."""
        held = b""
        for chunk in read_chunks(path):
            data = held + chunk if held else chunk
            end = data.rfind(b"\n") + 1
            if end:
                self.offset += end
                yield data[:end]
                held = data[end:]
            elif len(data) > MAX_LINE_BYTES:  # a line too long to keep: feed_chunks keeps only its length
                self.offset += len(data)
                yield data
                held = b""
            else:
                held = data  # a line longer than a chunk so far


@dataclasses.dataclass(frozen=True, slots=True)
class SessionBurn:
    """One session in the view: what it did today, in all, and in its latest prompt.

    Attributes:
        running: A live Copilot CLI holds it (its ``inuse.<pid>.lock`` names a live process).
        today: Today's figures (a :class:`~copilot_otel.commands.report.Row`).
        total: Everything the log holds.
        prompt: Its latest prompt (``outcome`` ``incomplete`` while it runs), and ``prompt_figures`` what it added.
    """

    session_id: str
    path: Path
    title: str
    repository: str | None
    cwd: str | None
    running: bool
    last_ns: int
    today: Row
    total: Row
    prompt: PromptRun | None
    prompt_figures: Row | None


@dataclasses.dataclass(frozen=True, slots=True)
class DaemonState:
    """What the daemon's ``status.json`` says (``running``: the process it names is alive)."""

    running: bool
    pid: int | None = None
    open_prompts: int = 0
    backlog_spans: int = 0
    last_export_ok_at: float | None = None
    problem: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class Burn:
    """One refresh of the view.

    Attributes:
        day: Today in ``zone`` (``2026-12-02``); ``month``: the quota's UTC month (``2026-12``).
        premium_used: Premium requests since the 1st of the UTC month, 00:00 (``report``'s quota figure).
        today: Today's figures over every session.
        sessions: The sessions active today, the running ones first, then the most recent first.
        logs_known, logs_read: Logs in the folder, and those this refresh (re-)read.
        skipped: Why each log that could not be read was left out.
    """

    time_ns: int
    zone: str
    day: str
    month: str
    quota: int | None
    price: float
    premium_used: float
    today: Row
    sessions: tuple[SessionBurn, ...]
    daemon: DaemonState | None
    logs_known: int
    logs_read: int
    skipped: tuple[str, ...]

    @property
    def running(self) -> tuple[SessionBurn, ...]:
        return tuple(s for s in self.sessions if s.running)


class BurnWatch:
    """The session logs under ``root``, kept between refreshes; :meth:`refresh` re-reads only what changed.

    Args:
        root: The session-state folder.
        settings: The fold's settings (content capture is turned off: nothing is shown of it).
        zone: The time zone "today" is cut in (``None``: the local zone).
        quota: The monthly premium request allowance, if known.
        state_dir: Where a daemon's ``status.json`` is (``None``: not shown).
    """

    def __init__(
        self,
        root: Path,
        settings: FoldSettings | None = None,
        *,
        zone: tzinfo | None = None,
        quota: int | None = None,
        price: float = PREMIUM_REQUEST_PRICE_USD,
        state_dir: Path | None = None,
    ) -> None:
        self.root = root
        self.settings = dataclasses.replace(settings or FoldSettings(), content=ContentPolicy())
        self.zone = zone
        self.quota = quota
        self.price = price
        self.state_dir = state_dir
        self._logs: dict[Path, _Log] = {}
        self._period: tuple[str, str] | None = None
        self._cut: Cut | None = None
        self._window_ns = 0
        self._root_mtime_ns: int | None = None
        self._swept_ns: int | None = None

    def refresh(self, now_ns: int, on_read: Callable[[int, int], None] | None = None) -> Burn:
        """Look at the logs again (see the module docstring for what it costs) and return the view.

        Args:
            on_read: Called after each log read with how many were read so far and how many logs there are (the
                first refresh of a long month reads thousands).
        """
        day = local_time(now_ns, self.zone)
        cut = make_cut("daily", zone=self.zone, now_ns=now_ns)
        period = (day.date().isoformat(), _month(cut.quota_start_ns))
        if period != self._period:  # a new day or month: the window moved, every log is looked at again
            self._period, self._cut = period, cut
            start_of_day = int(day.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()) * 10**9
            self._window_ns = min(cut.quota_start_ns, start_of_day)
            for log in self._logs.values():
                log.key, log.tally = (-1, -1, -1), None
            self._swept_ns = None
        assert self._cut is not None
        sweep = self._sweep_due(now_ns)
        read = 0
        for log in self._logs.values():
            if (sweep or log.tally is not None) and self._look(log, self._cut):
                read += 1
                if on_read is not None:
                    on_read(read, len(self._logs))
        return self._view(now_ns, period, read)

    def _sweep_due(self, now_ns: int) -> bool:
        """Whether this refresh stats the cold logs too; the folder is listed again only when its mtime changed
        (a session folder was created or removed: the CLI writes nothing else there)."""
        try:
            root_mtime: int | None = os.stat(self.root).st_mtime_ns
        except OSError:
            root_mtime = None
        listing = self._swept_ns is None or root_mtime != self._root_mtime_ns
        due = (
            listing
            or self._swept_ns is None
            or now_ns - self._swept_ns >= FULL_SWEEP_S * 1e9
            or now_ns < self._swept_ns  # the clock went back
        )
        if due:
            self._swept_ns = now_ns
        if listing:
            self._root_mtime_ns = root_mtime
            found = {s.path: s for s in scan_root(self.root)} if root_mtime is not None else {}
            for path in list(self._logs):
                if path not in found:
                    del self._logs[path]  # the session folder was removed
            for path, session in found.items():
                if path not in self._logs:
                    self._logs[path] = _Log(session, str(path))
        return due

    def _look(self, log: _Log, cut: Cut) -> int:
        """Stat one log; re-read it when it changed and was written in the window. Returns 1 when read."""
        try:
            st = os.stat(log.path)
        except FileNotFoundError:  # the session was removed: the next sweep (the folder changed) drops it
            log.key, log.tally, log.problem = (-1, -1, -1), None, ""
            return 0
        except OSError as exc:
            log.key, log.tally, log.problem = (-1, -1, -1), None, f"cannot read {log.session.path}: {exc}"
            return 0
        key = (st.st_size, st.st_mtime_ns, st.st_ino)
        if key == log.key:
            return 0
        log.key = key
        if st.st_mtime_ns < self._window_ns:
            log.tally, log.problem = None, ""  # cold: nothing in it counts now
            return 0
        try:
            records = self._records(log, st.st_size, st.st_ino)
        except (SourceError, OSError) as exc:
            log.tally, log.follow = None, None
            log.problem = (
                str(exc) if isinstance(exc, SourceError) else f"cannot read {log.session.path}: {exc}"
            )
            return 1
        part = session_part(records)
        tally = Tally(cut)
        tally.add(part)
        log.tally, log.problem = tally, ""
        log.repository, log.cwd = part.repository, part.cwd
        log.title = session_title(read_workspace(log.session.folder)) or ""
        log.prompt = max(records.prompts, key=lambda p: p.start_ns, default=None)
        log.prompt_figures = None
        if log.prompt is not None:
            trace_id = log.prompt.trace_id
            mine = Tally(cut)
            mine.add(dataclasses.replace(part, items=[i for i in part.items if i.trace_id == trace_id]))
            log.prompt_figures = mine.totals
        return 1

    def _records(self, log: _Log, size: int, inode: int) -> SessionRecords:
        """The log's records now: a running session's from what was appended (:class:`_Followed`), any other's
        from a read of the whole log (:func:`~copilot_otel.library.read_session`, kept no longer)."""
        followed = log.follow
        if followed is not None and followed.inode == inode and followed.grow(log.session.path, size):
            return followed.session_records(log.session)
        if not _held_by_live_cli(log.session.folder):
            log.follow = None
            return read_session(log.session.path, self.settings)
        log.follow = _Followed.start(log.session, self.settings, inode)
        return log.follow.session_records(log.session)

    def _view(self, now_ns: int, period: tuple[str, str], read: int) -> Burn:
        day, month = period
        today = Row("today")
        premium = 0.0
        sessions: list[SessionBurn] = []
        for log in self._logs.values():
            tally = log.tally
            if tally is None:
                continue
            premium += tally.quota_used
            row = tally.rows.get(day)
            if row is None:
                continue  # nothing today (a CLI left open since yesterday, idle, is not looked for)
            today.merge(row)
            running = _held_by_live_cli(log.session.folder)
            if not running:
                log.follow = None  # its CLI is gone: if the log changes again, it is read whole
            sessions.append(
                SessionBurn(
                    session_id=log.session.session_id,
                    path=log.session.path,
                    title=log.title,
                    repository=log.repository,
                    cwd=log.cwd,
                    running=running,
                    last_ns=tally.totals.last_ns,
                    today=row,
                    total=tally.totals,
                    prompt=log.prompt,
                    prompt_figures=log.prompt_figures,
                )
            )
        sessions.sort(key=lambda s: (s.running, s.last_ns), reverse=True)
        return Burn(
            time_ns=now_ns,
            zone=_zone_label(self.zone, now_ns),
            day=day,
            month=month,
            quota=self.quota,
            price=self.price,
            premium_used=premium,
            today=today,
            sessions=tuple(sessions),
            daemon=_daemon(self.state_dir) if self.state_dir is not None else None,
            logs_known=len(self._logs),
            logs_read=read,
            skipped=tuple(log.problem for log in self._logs.values() if log.problem),
        )


def _month(start_ns: int) -> str:
    start = datetime.fromtimestamp(start_ns / 1e9, timezone.utc)
    return f"{start.year:04d}-{start.month:02d}"


def _zone_label(zone: tzinfo | None, now_ns: int) -> str:
    return (local_time(now_ns, zone).tzname() or "local") if zone is None else str(zone)


def _held_by_live_cli(folder: Path | None) -> bool:
    """Whether a Copilot CLI holds the session (as the daemon's housekeeping decides it)."""
    return folder is not None and any(pid_alive(pid) for pid in owner_pids(folder))


def _daemon(state_dir: Path) -> DaemonState:
    try:
        status = read_status(state_dir)
    except StateError as exc:
        return DaemonState(False, problem=str(exc))
    if status is None:
        return DaemonState(False)
    pid = status.get("pid")
    pid = pid if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 else None
    prompts = status.get("open_prompts")
    backlog = status.get("backlog_spans")
    last_ok = status.get("last_export_ok_at")
    return DaemonState(
        running=pid is not None and pid_alive(pid),
        pid=pid,
        open_prompts=len(prompts) if isinstance(prompts, list) else 0,
        backlog_spans=backlog if isinstance(backlog, int) and not isinstance(backlog, bool) else 0,
        last_export_ok_at=float(last_ok) if isinstance(last_ok, int | float) else None,
    )


# ------------------------------------------------------------------------------------------------ JSON
def _figures(row: Row, price: float) -> dict[str, float | int]:
    """A row's figures as ``report --json`` gives them (counts as integers)."""
    return {name: json_number(name, row.value(name, price)) for name in FIGURES}


def _iso(time_ns: int, zone: tzinfo | None) -> str | None:
    return local_time(time_ns, zone).isoformat(timespec="seconds") if time_ns else None


def burn_json(burn: Burn, zone: tzinfo | None = None) -> dict[str, Any]:
    """One refresh as a JSON object (``live --json`` prints one per line):

    ``time``, ``time_zone``, ``day``; ``quota`` ``{month, allowance, used, left}`` (``allowance``/``left`` null
    without ``premium_quota``); ``today`` (``report``'s figures over every session); ``sessions`` (today's, the
    running ones first, then the most recent: ``session_id``, ``path``, ``title``, ``repository``, ``cwd``,
    ``running``, ``last_seen``, ``today``, ``total``, ``prompt`` ``{started, outcome, figures}`` or null);
    ``daemon`` (``running``, ``pid``, ``open_prompts``, ``backlog_spans``, ``last_export_ok_at``, ``problem``);
    ``logs`` ``{known, read, skipped}`` (``read``: re-read by this refresh; ``skipped``: why each was left out).
    """

    def session(s: SessionBurn) -> dict[str, Any]:
        prompt = None
        if s.prompt is not None and s.prompt_figures is not None:
            prompt = {
                "started": _iso(s.prompt.start_ns, zone),
                "outcome": s.prompt.outcome,
                "figures": _figures(s.prompt_figures, burn.price),
            }
        return {
            "session_id": s.session_id,
            "path": str(s.path),
            "title": s.title or None,
            "repository": s.repository,
            "cwd": s.cwd,
            "running": s.running,
            "last_seen": _iso(s.last_ns, zone),
            "today": _figures(s.today, burn.price),
            "total": _figures(s.total, burn.price),
            "prompt": prompt,
        }

    daemon = None if burn.daemon is None else dataclasses.asdict(burn.daemon)
    return {
        "time": _iso(burn.time_ns, zone),
        "time_zone": burn.zone,
        "day": burn.day,
        "quota": {
            "month": burn.month,
            "allowance": burn.quota,
            "used": round(burn.premium_used, 6),
            "left": None if burn.quota is None else round(burn.quota - burn.premium_used, 6),
        },
        "today": _figures(burn.today, burn.price),
        "sessions": [session(s) for s in burn.sessions],
        "daemon": daemon,
        "logs": {"known": burn.logs_known, "read": burn.logs_read, "skipped": list(burn.skipped)},
    }


# ------------------------------------------------------------------------------------------------ screen
def _where(s: SessionBurn) -> str:
    """The repository, else the folder (from home), else the title; as text a terminal shows, never obeys (they
    come from the log)."""
    where = s.repository or s.cwd or ""
    home = os.path.expanduser("~")
    if not s.repository and home not in ("", "/") and (where == home or where.startswith(home + os.sep)):
        where = "~" + where[len(home) :]
    return display.printable(where or s.title, lines=False)


def _short_id(s: SessionBurn) -> str:
    return display.printable(s.session_id[:8], lines=False)  # a folder name: anything but a slash


def _work(row: Row, price: float) -> str:
    """turns, tool calls, tokens and premium requests of a row, in one phrase."""
    failed = round(row.value("failed_tool_calls", price))
    return (
        f"{display.count(round(row.value('turns', price)), 'turn')}, "
        f"{display.count(round(row.value('tool_calls', price)), 'tool call')}"
        + (f" ({failed:,} failed)" if failed else "")
        + f", {display.tokens(row.value('input_tokens', price))} in / {display.tokens(row.value('output_tokens', price))} out"
        + f" tokens, {row.value('premium_requests', price):,.2f} premium"
    )


def render_burn(
    burn: Burn,
    width: int,
    *,
    interval_s: float | None = None,
    zone: tzinfo | None = None,
    unicode: bool = True,
) -> Any:
    """One refresh as a renderable no wider than ``width`` (``interval_s``: say it updates, and how to quit;
    ``unicode``: the stream can encode the quota bar's blocks, else it is drawn in ASCII)."""
    from rich.console import Group
    from rich.text import Text

    clock = local_time(burn.time_ns, zone).strftime("%H:%M:%S")
    heading = Text("copilot-otel live", style="bold")
    heading.append(f"  {burn.day} {clock} {burn.zone}", style="")
    if interval_s is not None:
        heading.append(f"  every {interval_s:g}s, q to quit", style="dim")
    parts: list[Any] = [heading]

    used = burn.premium_used
    quota = Text(f"Premium requests in {burn.month} (UTC month): ", style="bold")
    if burn.quota:
        left = burn.quota - used
        share = used / burn.quota
        cells = 20
        filled = min(cells, round(share * cells))
        quota.append(f"{used:,.2f} of {burn.quota:,} ", style="bold red" if left < 0 else "bold")
        full, empty = ("█", "░") if unicode else ("#", "-")
        quota.append(full * filled, style="red" if share >= 0.9 else "yellow" if share >= 0.75 else "green")
        quota.append(empty * (cells - filled), style="dim")
        quota.append(f" {share:.0%}, ")
        if left >= 0:
            quota.append(f"{left:,.2f} left")
        else:
            quota.append(
                f"{-left:,.2f} over (${-left * burn.price:,.2f} at ${burn.price:g})", style="bold red"
            )
    elif burn.quota == 0:
        quota.append(f"{used:,.2f} (allowance 0: all billed, ${used * burn.price:,.2f})")
    else:
        quota.append(f"{used:,.2f}")
        quota.append(" (set premium_quota / --quota to see what is left)", style="dim")
    parts.append(quota)

    t = burn.today
    today = Text(f"Today ({burn.day}): ", style="bold")
    today.append(
        f"{display.count(round(t.value('sessions', burn.price)), 'session')}, "
        f"{display.count(round(t.value('prompts', burn.price)), 'prompt')}, " + _work(t, burn.price)
    )
    parts.append(today)
    parts.append(_daemon_line(burn.daemon))

    running = burn.running
    if running:
        parts.append(Text(""))
        parts.append(Text("Running now", style="bold green"))
        for s in running:
            line = Text(f"  {_short_id(s)}  ", style="bold")
            line.append(_where(s))
            parts.append(line)
            if s.prompt is not None and s.prompt_figures is not None:
                open_now = s.prompt.outcome == "incomplete"
                since = (burn.time_ns - s.prompt.start_ns) / 1e9 if open_now else None
                what = f"prompt running for {display.duration(since)}" if since is not None else "last prompt"
                phrase = Text(f"    {what}: ", style="yellow" if open_now else "dim")
                phrase.append(_work(s.prompt_figures, burn.price), style="")
                parts.append(phrase)
            parts.append(Text(f"    session: {_work(s.total, burn.price)}", style="dim"))

    parts.append(Text(""))
    if not burn.sessions:
        parts.append(
            Text(f"No Copilot CLI session has been active today ({burn.logs_known:,} logs).", style="dim")
        )
    else:
        parts.append(_sessions_table(burn, width, zone))
        if len(burn.sessions) > _SESSIONS_SHOWN:
            parts.append(Text(f"{len(burn.sessions) - _SESSIONS_SHOWN:,} more with --json", style="dim"))
    if burn.skipped:
        parts.append(
            Text(
                f"{display.count(len(burn.skipped), 'log')} could not be read and not counted", style="yellow"
            )
        )
    return Group(*parts)


# The session table's figure columns, most wanted first: those that do not fit the terminal are left out.
_SESSION_COLUMNS: tuple[tuple[str, str, Callable[[float], str]], ...] = (
    ("premium_requests", "premium", lambda v: f"{v:,.2f}"),
    ("prompts", "prompts", lambda v: f"{round(v):,}"),
    ("tool_calls", "tools", lambda v: f"{round(v):,}"),
    ("turns", "turns", lambda v: f"{round(v):,}"),
    ("input_tokens", "input", display.tokens),
    ("output_tokens", "output", display.tokens),
)
_MIN_WHERE = 12  # the folder's last characters: the telling part


def _sessions_table(burn: Burn, width: int, zone: tzinfo | None) -> Any:
    from rich.table import Table
    from rich.text import Text

    shown = burn.sessions[:_SESSIONS_SHOWN]
    used = len("session ") + len("hh:mm ")
    columns = []
    for column in _SESSION_COLUMNS:
        name, heading, fmt = column
        size = 1 + max(len(heading), *(len(fmt(s.today.value(name, burn.price))) for s in shown))
        if used + size <= width:
            used += size
            columns.append(column)
    columns.sort(key=lambda c: FIGURES.index(c[0]))
    where_width = width - used - 1
    table = Table(
        title=f"Today's sessions ({len(burn.sessions):,})",
        title_justify="left",
        title_style="bold",
        box=None,
        header_style="bold",
        pad_edge=False,
        padding=(0, 0, 0, 1),
    )
    table.add_column("session", no_wrap=True)
    if where_width >= _MIN_WHERE:
        table.add_column("where", no_wrap=True, max_width=where_width)
    table.add_column("last", no_wrap=True)
    for _, heading, _fmt in columns:
        table.add_column(heading, justify="right", no_wrap=True)
    for s in shown:
        cells: list[Any] = [Text(_short_id(s), style="bold green" if s.running else "")]
        if where_width >= _MIN_WHERE:
            where = _where(s)
            cells.append(where if len(where) <= where_width else "…" + where[-(where_width - 1) :])
        cells.append(local_time(s.last_ns, zone).strftime("%H:%M") if s.last_ns else "")
        cells.extend(fmt(s.today.value(name, burn.price)) for name, _, fmt in columns)
        table.add_row(*cells)
    return table


def _daemon_line(daemon: DaemonState | None) -> Any:
    from rich.text import Text

    line = Text("Daemon: ", style="bold")
    if daemon is None:
        return line.append("not looked at", style="dim")
    if daemon.problem:
        return line.append(daemon.problem, style="yellow")
    if not daemon.running:
        return line.append("not running (copilot-otel run, or service install)", style="dim")
    line.append(f"running (pid {daemon.pid}), ", style="green")
    line.append(
        f"{display.count(daemon.open_prompts, 'open prompt')}, backlog {display.count(daemon.backlog_spans, 'span')}"
    )
    if daemon.last_export_ok_at:
        line.append(f", last export {display.duration(time.time() - daemon.last_export_ok_at)} ago")
    return line


# ------------------------------------------------------------------------------------------------ command
def live(
    config: Config,
    *,
    interval_s: float = 2.0,
    as_json: bool = False,
    once: bool = False,
    tz: str | None = None,
    clock: Callable[[], int] = time.time_ns,
) -> int:
    """Show what is burning now: redrawn in place on a terminal until q or Ctrl-C; one snapshot off a terminal
    or with ``once``; with ``as_json`` one JSON object per refresh, one per line (:func:`burn_json`).

    Returns:
        The exit code: 0; 8 (:class:`~copilot_otel.common.errors.PartialError`) when a snapshot left out logs that
        could not be read.

    Raises:
        ConfigError: A bad ``interval_s`` or ``tz``.
        SourceError: The session-state folder is missing or is not a folder.
    """
    if not interval_s > 0:
        raise ConfigError(f"Expected --interval to be a number of seconds > 0, got {interval_s!r}")
    zone = parse_zone(tz)
    root = config.session_state
    if not root.is_dir():
        raise SourceError(
            f"no Copilot CLI sessions: {root} does not exist (has the Copilot CLI run as this user? set "
            "--session-state or COPILOT_OTEL_SESSION_STATE)"
            if not root.exists()
            else f"cannot read session folder {root}: not a directory"
        )
    # Where a daemon runs, as `status` finds it: the configured state dir, else an installed service's (looked
    # for once: a service's unit files are read only when no daemon runs where configured).
    state_dir = find_state_dir(config)
    watch = BurnWatch(root, fold_settings(config), zone=zone, quota=config.premium_quota, state_dir=state_dir)
    if as_json:
        return _json_lines(watch, interval_s, once, zone, clock)
    if once or not sys.stdout.isatty():
        return _snapshot(watch, zone, clock)
    return _terminal(watch, interval_s, zone, clock)


def _exit_code(burn: Burn) -> int:
    return PartialError.exit_code if burn.skipped else 0


def _json_lines(
    watch: BurnWatch, interval_s: float, once: bool, zone: tzinfo | None, clock: Callable[[], int]
) -> int:
    import orjson

    from .._platform import utf8_stdout

    out = utf8_stdout()  # JSON is UTF-8 bytes, whatever the console's code page
    idle = threading.Event()  # never set: an interruptible wait between refreshes
    try:
        while True:
            burn = watch.refresh(clock())
            out.write(orjson.dumps(burn_json(burn, zone)) + b"\n")
            out.flush()
            if once:
                return _exit_code(burn)
            idle.wait(interval_s)
    except KeyboardInterrupt:
        print("copilot-otel: live view stopped", file=sys.stderr)
        return 0


def _console() -> Any:
    from rich.console import Console

    return display.neutralise(Console(highlight=False, markup=False, emoji=False, soft_wrap=False))


def _unicode(console: Any) -> bool:
    return str(console.encoding).lower().startswith("utf")


def _snapshot(watch: BurnWatch, zone: tzinfo | None, clock: Callable[[], int]) -> int:
    console = _console()
    burn = watch.refresh(clock())
    console.print(render_burn(burn, console.width, zone=zone, unicode=_unicode(console)))
    return _exit_code(burn)


def _terminal(watch: BurnWatch, interval_s: float, zone: tzinfo | None, clock: Callable[[], int]) -> int:
    """Redraw on the alternate screen (the terminal's own screen comes back after) until q or Ctrl-C; a
    resize redraws at once (the size is looked at every quarter second: no signal, which Windows lacks)."""
    from rich.live import Live
    from rich.text import Text

    from .._platform import single_keys

    console = _console()
    burn: Burn | None = None
    try:
        with (
            single_keys(sys.stdin) as wait,
            Live(
                Text("copilot-otel live: reading this month's session logs…"),
                console=console,
                screen=True,
                auto_refresh=False,
            ) as view,
        ):
            view.refresh()
            shown = [0.0]

            def reading(done: int, total: int) -> None:
                # The first refresh of a long month: say how far it is, and let q stop it.
                if _QUIT_KEYS.intersection(wait(0)):
                    raise _Quit
                if time.monotonic() - shown[0] >= _PROGRESS_S:
                    shown[0] = time.monotonic()
                    view.update(Text(f"copilot-otel live: reading session logs… {done:,} of {total:,}"))
                    view.refresh()

            while True:
                burn = watch.refresh(clock(), reading)
                size = console.size
                view.update(
                    render_burn(
                        burn, size.width, interval_s=interval_s, zone=zone, unicode=_unicode(console)
                    ),
                    refresh=True,
                )
                deadline = time.monotonic() + interval_s
                while (left := deadline - time.monotonic()) > 0:
                    if _QUIT_KEYS.intersection(wait(min(left, 0.25))):
                        raise _Quit
                    if console.size != size:
                        size = console.size
                        view.update(
                            render_burn(
                                burn, size.width, interval_s=interval_s, zone=zone, unicode=_unicode(console)
                            ),
                            refresh=True,
                        )
    except (_Quit, KeyboardInterrupt):
        pass
    print(_closing_line(burn))
    return 0


class _Quit(Exception):
    """q was pressed."""


def _closing_line(burn: Burn | None) -> str:
    if burn is None:
        return "copilot-otel: live view closed"
    used = f"{burn.premium_used:,.2f}" + (f" of {burn.quota:,}" if burn.quota is not None else "")
    return f"copilot-otel: live view closed; premium requests in {burn.month}: {used}"
