"""``copilot-otel report``: usage added up from the logs on disk (daily, weekly, monthly, per session, repo, model,
agent).

With no path it reads every enabled agent's folder (the ``agents`` setting: Copilot CLI's, Claude Code's and
Codex's logs, :func:`copilot_otel.library.discover`); each row says which agents added to it (``agent``), ``report
agent`` has a row per agent and ``--agent NAME`` counts one agent's sessions only. Every agent's records are added
up the same way: the loop gives each model call's usage in one meaning (input tokens include the cached ones), and
a Claude Code session's sub-agents are read with it. Every session log is read through the library (:func:`copilot_otel.library.read_session`: the same parse and
agent loop as ``replay``, ``run`` and ``show``, content capture off), and each record adds its figures to the
row its own timestamp (in the chosen time zone), session, repository or model falls in. Nothing is sent
anywhere; a log whose file was last written before ``since`` is not read at all.

Where each figure comes from (``docs/report.md`` says the same for users):

* ``prompts``: :class:`~copilot_otel.model.activity.PromptRun` records with ``human`` set, at their start.
* ``turns``: :class:`~copilot_otel.model.activity.Turn` records (sub-agents' included), at their start; in a log that
  writes turn events, the loop's synthetic turns (a message the CLI wrote with no model turn) are left out.
* ``tool_calls`` / ``failed_tool_calls``: :class:`~copilot_otel.model.activity.ToolCall` records; failed = completed
  with ``success`` false (a call cut short by an abort is counted, not as failed).
* tokens, ``premium_requests``, ``ai_units``: from the per-call usage records (``session.usage_record``,
  CLI >= 1.0.102) when the session has any: each :class:`~copilot_otel.model.activity.ModelCall`'s ``usage`` at its
  start; premium requests count a call's ``cost`` only when its ``initiator`` is ``user`` or absent (billing is
  per prompt, as the project's metric counts it). Otherwise from ``session.shutdown``'s cumulative totals, each
  shutdown adding what grew since the previous one of the same log (a resumed session is counted once), at the
  shutdown's time. A session with neither (older CLI, killed before its shutdown) has only the output tokens
  the model messages state: those rows are marked *estimated*.
* ``lines_added`` / ``lines_removed``: ``session.shutdown``'s ``codeChanges`` growth; a session without a
  shutdown has none, and its row is marked *estimated* for them.
* ``runaway_detections``: :class:`~copilot_otel.model.activity.Detection` records.
* ``wall_time_s``: each prompt's start to end, at its start.
* ``cost_usd``: each model call paid per token priced from its own tokens (Claude Code, Codex, Gemini CLI, and
  Copilot CLI's BYOK calls: :class:`~copilot_otel.projections.prices.PriceTable`, genai-prices' table or
  ``--price MODEL=...``), plus ``premium_requests`` x the price per premium request (Copilot CLI's own API).
  ``cost_source`` says which of these a row's cost came from; a call the table cannot price is counted in
  ``unpriced_calls`` (by model), never at 0.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import logging
import os
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import as_completed
from datetime import date, datetime, timedelta, timezone, tzinfo
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..common import display
from ..common.errors import ConfigError, PartialError, SourceError, UnreadableError
from ..library import (
    AGENT_TITLES,
    COPILOT,
    SessionRecords,
    discover,
    home_relative,
    read_log,
    resolve_targets,
)
from ..loop.agentloop import FoldSettings
from ..model.activity import Detection, ModelCall, PromptRun, SessionFacts, SessionShutdown, ToolCall, Turn
from ..pipeline import fold_settings
from ..pipeline.workers import by_size, log_bytes, process_pool
from ..projections.prices import OVERRIDE_SOURCE, Cost, PriceTable, Unpriced
from ..settings.config import Config, did_you_mean
from ..settings.content import ContentPolicy
from ..settings.moments import local_time as _local
from ..settings.moments import parse_window
from ..sources import AgentRoot, agent_roots
from ..sources.sessions import SessionFile, resolve
from .report_cache import CACHE_FILE, PartCache, fingerprint

__all__ = [
    "FIGURES",
    "PERIODS",
    "PREMIUM_REQUEST_PRICE_USD",
    "PRICE_SOURCE",
    "Cut",
    "Period",
    "Report",
    "Row",
    "SessionPart",
    "Tally",
    "build_report",
    "finish_report",
    "json_number",
    "make_cut",
    "parse_zone",
    "part_cache",
    "render_csv",
    "render_json",
    "render_table",
    "report",
    "report_sessions",
    "session_items",
    "session_part",
    "split_period",
    "tally_found",
    "tally_logs",
]

from ..settings.report_defaults import PERIODS, PREMIUM_REQUEST_PRICE_USD, Period, Prices
from ..settings.repos import RepoFilter

logger = logging.getLogger(__name__)

PRICE_SOURCE = (
    "GitHub Docs, 'GitHub Copilot premium requests': $0.04 USD per additional premium request "
    "(billing since 2025-06-18; read 2026-12-01)"
)

# The figures of a row, in the order the JSON, the CSV and the wide table give them.
FIGURES: tuple[str, ...] = (
    "sessions",
    "prompts",
    "turns",
    "tool_calls",
    "failed_tool_calls",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "premium_requests",
    "ai_units",
    "lines_added",
    "lines_removed",
    "runaway_detections",
    "wall_time_s",
    "cost_usd",
)
_FLOAT_FIGURES = frozenset({"premium_requests", "ai_units", "wall_time_s", "cost_usd"})
# session.shutdown's totalNanoAiu and the usage records' copilotUsage.totalNanoAiu are in billionths of an AIU.
_NANO = 1e9
_UNKNOWN = "(unknown)"
HOUR_NS = 3600 * 10**9
_QUARTER_HOUR_NS = HOUR_NS // 4
# The per-token cost is added up in whole billionths of a USD: integers add up the same in any order, so worker
# processes merging their rows give the very figure one process does (floats differed in the 6th decimal).
_COST_NANO_USD = "cost_nano_usd"
# A row's cost_source for its premium requests (the per-token ones name their table, or --price).
PREMIUM_SOURCE = "premium requests"


@dataclasses.dataclass
class Row:
    """One line of a report: a period, session, repository or model, and its figures.

    Attributes:
        key: What the row groups by: ``2026-12-01`` (daily), ``2026-W49`` (weekly, ISO week), ``2026-12``
            (monthly), a session id, ``owner/name`` or a folder (repo), a model name.
        figures: Each name of :data:`FIGURES` (but ``sessions`` and ``cost_usd``, computed) to its value.
        session_ids: The sessions that added to the row.
        estimated: The figures that are lower bounds or estimates for this row (see the module docstring).
        first_ns, last_ns: The earliest and latest record time in the row.
        repository, branch, cwd: The session's (session and repo rows).
        models: With ``--breakdown``, the row's figures again per model (each a row keyed by the model).
        agents: The coding agents whose sessions added to the row (``copilot``, ``claude-code``, ``codex``,
            ``gemini``).
        title, cli_cost_usd: The session's own title and the CLI's own cost of it, as its log says them
            (session rows; Claude Code's ``-n`` and ``cost-state``): beside our figures, never added to them.
        cost_sources: Where the per-token part of ``cost_usd`` came from (``genai-prices 0.2.5``, ``--price``).
        unpriced: Model calls paid per token that could not be priced, by model; ``unpriced_why``: why.
    """

    key: str
    figures: dict[str, float] = dataclasses.field(default_factory=dict)
    session_ids: set[str] = dataclasses.field(default_factory=set)
    estimated: set[str] = dataclasses.field(default_factory=set)
    first_ns: int = 0
    last_ns: int = 0
    repository: str | None = None
    branch: str | None = None
    cwd: str | None = None
    models: dict[str, Row] = dataclasses.field(default_factory=dict)
    agents: set[str] = dataclasses.field(default_factory=set)
    title: str | None = None
    cli_cost_usd: float | None = None
    cost_sources: set[str] = dataclasses.field(default_factory=set)
    unpriced: dict[str, int] = dataclasses.field(default_factory=dict)
    unpriced_why: dict[str, str] = dataclasses.field(default_factory=dict)

    def value(self, name: str, price: float) -> float:
        """A figure's value, ``sessions`` and ``cost_usd`` included."""
        if name == "sessions":
            return len(self.session_ids)
        if name == "cost_usd":
            per_token = self.figures.get(_COST_NANO_USD, 0.0) / _NANO
            return per_token + self.figures.get("premium_requests", 0.0) * price
        return self.figures.get(name, 0.0)

    def sources(self) -> list[str]:
        """Where the row's ``cost_usd`` came from: the per-token prices' sources, then premium requests."""
        premium = [PREMIUM_SOURCE] if self.figures.get("premium_requests", 0.0) else []
        return sorted(self.cost_sources) + premium

    def merge(self, other: Row) -> None:
        """Add another row of the same key (from another worker's share of the logs)."""
        for name, value in other.figures.items():
            self.figures[name] = self.figures.get(name, 0.0) + value
        self.session_ids |= other.session_ids
        self.agents |= other.agents
        self.title = self.title or other.title
        self.cli_cost_usd = self.cli_cost_usd if self.cli_cost_usd is not None else other.cli_cost_usd
        self.estimated |= other.estimated
        self.cost_sources |= other.cost_sources
        for model, calls in other.unpriced.items():
            self.unpriced[model] = self.unpriced.get(model, 0) + calls
        self.unpriced_why.update(other.unpriced_why)
        if other.first_ns:
            self.first_ns = other.first_ns if not self.first_ns else min(self.first_ns, other.first_ns)
        self.last_ns = max(self.last_ns, other.last_ns)
        _merge_rows(self.models, other.models)

    def by_model(self, price: float) -> list[Row]:
        """The ``--breakdown`` sub-rows, the model with the most premium requests (then input tokens) first."""
        return sorted(
            self.models.values(),
            key=lambda r: (-r.value("premium_requests", price), -r.value("input_tokens", price), r.key),
        )

    def _add_figures(self, figures: Iterable[tuple[str, float]], time_ns: int) -> None:
        """Add a record's figures at the record's time (all at once: a report over 100,000 events adds ~400,000
        figures, and a call for each was a third of the time a report over the cache takes)."""
        sums = self.figures
        for name, value in figures:
            sums[name] = sums.get(name, 0.0) + value
        if time_ns:
            self.first_ns = time_ns if not self.first_ns else min(self.first_ns, time_ns)
            if time_ns > self.last_ns:
                self.last_ns = time_ns


def _merge_rows(rows: dict[str, Row], others: dict[str, Row]) -> None:
    """Add rows keyed alike (a worker's rows to the parent's, a row's models to another's) into ``rows``."""
    for key, row in others.items():
        mine = rows.get(key)
        if mine is None:
            rows[key] = row
        else:
            mine.merge(row)


@dataclasses.dataclass
class Report:
    """A usage report: its rows (sorted, cut to ``limit``), the totals over every matching row, and the quota.

    Attributes:
        quota_used: Premium requests since the 1st of the current month, 00:00 UTC (when GitHub resets the
            allowance), whatever ``since`` / ``until`` say; ``None`` without a quota.
    """

    period: Period
    zone: str
    since_ns: int | None
    until_ns: int | None
    price: float
    rows: list[Row]
    totals: Row
    matched_rows: int
    quota: float | None = None
    quota_used: float | None = None
    quota_month: str | None = None
    breakdown: bool = False
    repo: str | None = None  # the --repo filter as given
    # The per-token prices' table and version (``genai-prices 0.2.5``), when any call was priced from it.
    price_table: str | None = None


def split_period(targets: Sequence[str], root: Path | None = None) -> tuple[Period, list[str]]:
    """``report [PERIOD] [SESSION|PATH ...]``: the period when the first word names one (default daily), and
    the sessions (paths, or ids and unique id prefixes under ``root``).

    A first word that is no period, no path and no session id under ``root``, and reads as a word (letters
    only: ``hourly``, ``dialy``), is a mistyped period, not a missing file.

    Raises:
        ConfigError: The first word is such a mistyped period (the message lists the periods).
    """
    if not targets:
        return "daily", []
    first = targets[0]
    for period in PERIODS:
        if first == period:
            return period, list(targets[1:])
    if _looks_like_a_period(first) and not _names_a_session(first, root):
        raise ConfigError(
            f"unknown period {first!r}; choose from {', '.join(PERIODS)} (then session ids, folders or "
            f"events.jsonl files){did_you_mean(first, PERIODS)}"
        )
    return "daily", list(targets)


def _looks_like_a_period(word: str) -> bool:
    """A bare word: letters only (a session id has digits, a path a separator or a dot)."""
    return word.isascii() and word.isalpha()


def _names_a_session(word: str, root: Path | None) -> bool:
    if os.path.lexists(os.path.expanduser(word)):
        return True
    if root is None or not root.is_dir():
        return False
    try:
        return bool(resolve([word], root))
    except SourceError:
        return False


# ------------------------------------------------------------------------------------------------ time
def parse_zone(name: str | None) -> tzinfo | None:
    """A time zone by IANA name (``UTC``, ``Europe/Paris``); ``None`` or ``local`` is the local zone (None).

    Raises:
        ConfigError: The name is not a known zone.
    """
    if name is None or name.lower() == "local":
        return None
    if name.upper() == "UTC":
        return timezone.utc
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ConfigError(
            f"Expected --tz to be an IANA time zone such as UTC or Europe/Paris, got {name!r}"
        ) from exc


def _zone_name(zone: tzinfo | None) -> str:
    if zone is None:
        return f"local time, {datetime.now().astimezone().tzname()}"  # titled "(local time, CET)", not nested
    return str(zone) if not isinstance(zone, timezone) else "UTC"


def _quota_month_start(now_ns: int) -> tuple[int, str]:
    """The 1st of the current month at 00:00 UTC: when GitHub resets the premium request allowance."""
    now = datetime.fromtimestamp(now_ns / 1e9, timezone.utc)
    start = datetime(now.year, now.month, 1, tzinfo=timezone.utc)
    return int(start.timestamp()) * 1_000_000_000, f"{now.year:04d}-{now.month:02d}"


# ------------------------------------------------------------------------------------------------ figures
@dataclasses.dataclass(slots=True)
class _Item:
    """One record's contribution: figures at a moment, for a model, in a prompt (trace)."""

    time_ns: int
    model: str | None
    trace_id: int | None
    figures: tuple[tuple[str, float], ...]
    estimated: tuple[str, ...] = ()
    cost: Cost | Unpriced | None = None  # a call paid per token: its cost (also in figures), or why none


def session_items(
    session: SessionRecords, prices: PriceTable | None = None
) -> tuple[list[_Item], dict[int, PromptRun]]:
    """What one session adds to a report, record by record (and its prompts by trace id).

    A log holds one or more runs of the CLI, each ended by a ``session.shutdown`` (but the last, if the CLI was
    killed). A run's tokens and premium requests come from its usage records when it has any, else from its
    shutdown's growth, else (a killed run of an older CLI) from the messages' output tokens, estimated. A call
    paid per token is priced from its own tokens by ``prices`` (default: the price table alone).
    """
    prices = prices or _default_prices()
    prompts = {p.trace_id: p for p in session.records if isinstance(p, PromptRun)}
    shutdowns = [r for r in session.records if isinstance(r, SessionShutdown)]
    ends = sorted(r.time_ns for r in shutdowns)
    # run i is what happened up to the i-th shutdown; run len(ends) is what came after the last one
    runs_with_usage = {
        bisect_left(ends, r.start_ns) for r in session.records if isinstance(r, ModelCall) and r.calls
    }
    has_turn_events = any(isinstance(r, Turn) and not r.synthetic for r in session.records)
    items: list[_Item] = []
    for record in session.records:
        if isinstance(record, PromptRun):
            figures: list[tuple[str, float]] = [
                ("wall_time_s", max(record.end_ns - record.start_ns, 0) / 1e9)
            ]
            if record.human:
                figures.append(("prompts", 1))
            items.append(_Item(record.start_ns, record.model, record.trace_id, tuple(figures)))
        elif isinstance(record, Turn):
            if record.synthetic and has_turn_events:
                continue  # a message the CLI wrote itself (no model turn), in a log that logs its turns
            items.append(_Item(record.start_ns, None, record.trace_id, (("turns", 1),)))
        elif isinstance(record, ToolCall):
            failed = 1 if record.completed and not record.success else 0
            items.append(
                _Item(
                    record.start_ns, None, record.trace_id, (("tool_calls", 1), ("failed_tool_calls", failed))
                )
            )
        elif isinstance(record, Detection):
            items.append(_Item(record.time_ns, None, record.trace_id, (("runaway_detections", 1),)))
        elif isinstance(record, ModelCall):
            items.extend(
                _model_call_items(record, bisect_left(ends, record.start_ns), ends, runs_with_usage, prices)
            )
    items.extend(_shutdown_items(shutdowns, runs_with_usage, prompts))
    if not shutdowns:
        # A killed CLI writes no shutdown: the code-change totals are missing, the rest came from the records.
        first = min((i.time_ns for i in items), default=0)
        items.append(_Item(first, None, None, (), ("lines_added", "lines_removed")))
    return items, prompts


_USAGE_FIGURES = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "premium_requests",
)


def _model_call_items(
    record: ModelCall, run: int, ends: Sequence[int], runs_with_usage: set[int], prices: PriceTable
) -> list[_Item]:
    u = record.usage
    if record.calls:
        cost = prices.cost(record)
        nano_usd = round(cost.total_usd * _NANO) if isinstance(cost, Cost) else None
        premium = u.cost if record.initiator in (None, "user") else 0.0
        # Only what the call reported: a count the log did not give (None) adds nothing (unknown is not zero).
        given = (
            ("input_tokens", u.input),
            ("output_tokens", u.output),
            ("cache_read_tokens", u.cache_read),
            ("cache_write_tokens", u.cache_write),
            ("reasoning_tokens", u.reasoning),
            ("premium_requests", premium),
            ("ai_units", u.nano_aiu / _NANO),
            (_COST_NANO_USD, nano_usd),
        )
        figures = tuple((name, value) for name, value in given if value is not None)
        # A count the record lacked or held out of range makes the row's figure a lower bound: estimated.
        unknown = tuple(name for name, value in given[:4] if value is None)
        return [_Item(record.start_ns, record.model, record.trace_id, figures, unknown, cost)]
    if run < len(ends) or run in runs_with_usage:
        return []  # its run's shutdown totals (or the run's usage records) count it
    # A run with no usage record and no shutdown (older CLI, killed): only the output tokens the message states.
    return [
        _Item(
            record.start_ns,
            record.model,
            record.trace_id,
            (("output_tokens", u.output or 0),),
            (*_USAGE_FIGURES, "ai_units"),
        )
    ]


def _shutdown_items(
    shutdowns: Sequence[SessionShutdown], runs_with_usage: set[int], prompts: dict[int, PromptRun]
) -> list[_Item]:
    """Each shutdown's growth over the previous one of the log (a resumed session's runs, counted once); the
    tokens and premium requests only for a run without usage records (CLI < 1.0.102)."""
    out: list[_Item] = []
    seen_tokens: dict[tuple[str, str], float] = {}
    seen_premium = 0.0
    for run, rec in enumerate(sorted(shutdowns, key=lambda r: r.time_ns)):
        out.append(
            _Item(
                rec.time_ns,
                None,
                rec.trace_id,
                (("lines_added", rec.lines_added_delta), ("lines_removed", rec.lines_removed_delta)),
            )
        )
        counted = run in runs_with_usage  # then the usage records have the figures; the totals are a baseline
        for totals in rec.models:
            figures: list[tuple[str, float]] = []
            for name, total in (
                ("input_tokens", totals.input_tokens),
                ("output_tokens", totals.output_tokens),
                ("cache_read_tokens", totals.cache_read_tokens),
                ("cache_write_tokens", totals.cache_write_tokens),
            ):
                if total is None:
                    continue
                grown = total - seen_tokens.get((totals.model, name), 0.0)
                seen_tokens[(totals.model, name)] = max(total, seen_tokens.get((totals.model, name), 0.0))
                if grown > 0:
                    figures.append((name, grown))
            if figures and not counted:
                out.append(_Item(rec.time_ns, totals.model, None, tuple(figures)))
        grown_premium = (rec.premium_requests or 0.0) - seen_premium
        if rec.premium_requests is not None:
            seen_premium = max(seen_premium, rec.premium_requests)
        if counted:
            continue
        # The fold reports per-model cost growth only while the log has had no usage record.
        for model, delta in rec.premium_delta:
            out.append(_Item(rec.time_ns, model, None, (("premium_requests", delta),)))
        for model, delta in rec.nano_aiu_delta:
            out.append(_Item(rec.time_ns, model, None, (("ai_units", delta / _NANO),)))
        if not rec.premium_delta and grown_premium > 0:
            # Only the session-wide totalPremiumRequests grew (no per-model cost): the prompt's model gets it.
            prompt = prompts.get(rec.trace_id) if rec.trace_id is not None else None
            out.append(
                _Item(
                    rec.time_ns,
                    prompt.model if prompt else None,
                    None,
                    (("premium_requests", grown_premium),),
                )
            )
    return out


# ------------------------------------------------------------------------------------------------ grouping
def _facts(prompts: dict[int, PromptRun]) -> SessionFacts | None:
    latest = max(prompts.values(), key=lambda p: p.start_ns, default=None)
    return latest.facts if latest is not None else None


def _repo_key(facts: SessionFacts | None) -> tuple[str, str | None, str | None, str | None]:
    """A repository row's key and labels: ``owner/name``, else the git root, else the working folder."""
    if facts is None:
        return _UNKNOWN, None, None, None
    where = facts.repository or facts.git_root or facts.cwd or _UNKNOWN
    key = f"{where}@{facts.branch}" if facts.branch else where
    return key, facts.repository, facts.branch, facts.cwd


@dataclasses.dataclass(slots=True)
class SessionPart:
    """What one session adds to a report: its contributions, each with its model resolved, and its labels."""

    session_id: str
    repo_key: str
    repository: str | None
    branch: str | None
    cwd: str | None
    items: list[_Item]
    agent: str = COPILOT
    title: str | None = None  # the log's own title of the session
    cli_cost_usd: float | None = None  # the CLI's own cost of it
    git_root: str | None = None  # with repository and cwd, what --repo matches


_PRICE_TABLES: dict[Prices, PriceTable] = {}


def _default_prices(prices: Prices | None = None) -> PriceTable:
    """One price table per ``--price`` (each process's own: its rates are worked out once, then reused)."""
    key = prices or Prices()
    table = _PRICE_TABLES.get(key)
    if table is None:
        table = _PRICE_TABLES[key] = PriceTable(dict(key.models))
    return table


def session_part(session: SessionRecords, prices: PriceTable | None = None) -> SessionPart:
    """A session's contributions (:func:`session_items`), each attributed to a model (its own, else its
    prompt's, else the session's first); ``prices`` prices the calls paid per token."""
    items, prompts = session_items(session, prices)
    repo_key, repository, branch, cwd = _repo_key(_facts(prompts))
    session_model = next((p.model for p in prompts.values() if p.model), None)
    for item in items:
        if item.model is None:
            prompt = prompts.get(item.trace_id) if item.trace_id is not None else None
            item.model = (prompt.model if prompt else None) or session_model
    own = session.own_accounting
    facts = _facts(prompts)
    return SessionPart(
        session.session_id, repo_key, repository, branch, cwd, items, session.agent, session.own_title,
        own.cost_usd if own is not None else None, facts.git_root if facts is not None else None,
    )  # fmt: skip


@dataclasses.dataclass(frozen=True, slots=True)
class Cut:
    """How records are cut into rows: the period, the zone days are cut in, the time window, and the start of
    the quota's month. Picklable: worker processes add up their share of the logs with it."""

    period: Period
    zone: tzinfo | None
    since_ns: int | None
    until_ns: int | None
    quota_start_ns: int
    breakdown: bool = False
    agent: str | None = None
    repo: RepoFilter | None = None
    prices: Prices = dataclasses.field(default_factory=Prices)  # --price: per-token prices over the table's


def make_cut(
    period: Period,
    *,
    zone: tzinfo | None = None,
    since_ns: int | None = None,
    until_ns: int | None = None,
    now_ns: int,
    breakdown: bool = False,
    agent: str | None = None,
    repo: RepoFilter | None = None,
    prices: Prices | None = None,
) -> Cut:
    """A :class:`Cut` (``now_ns`` only says which month the quota counts).

    Args:
        breakdown: Each row's figures again per model (``--breakdown``, as ccusage's): not for ``model`` rows,
            which are models already.
        agent: Only this agent's sessions count (``--agent``); the quota still counts Copilot's month.
        repo: Only this repository's sessions count (``--repo``); the quota, again, counts every session.
        prices: ``--price``: models priced per token at the user's prices rather than the table's.

    Raises:
        ConfigError: ``period`` is not one of :data:`PERIODS`, or ``breakdown`` with ``model`` rows.
    """
    if period not in PERIODS:
        raise ConfigError(f"Expected period to be one of {', '.join(PERIODS)}, got {period!r}")
    if breakdown and period == "model":
        raise ConfigError("--breakdown splits each row by model; 'report model' rows are models already")
    return Cut(
        period,
        zone,
        since_ns,
        until_ns,
        _quota_month_start(now_ns)[0],
        breakdown,
        agent,
        prices=prices or Prices(),
        repo=repo,
    )


@dataclasses.dataclass
class Tally:
    """Rows being added up (by :func:`build_report`, or by each worker process, merged after)."""

    cut: Cut
    rows: dict[str, Row] = dataclasses.field(default_factory=dict)
    totals: Row = dataclasses.field(default_factory=lambda: Row("total"))
    quota_used: float = 0.0
    # Sessions that could not be read (why, one line each): left out of the rows, said on stderr, exit 8.
    skipped: list[str] = dataclasses.field(default_factory=list)
    # How much was read (for the progress line): sessions tried, lines with data in them.
    sessions_read: int = 0
    events_read: int = 0
    _day_keys: dict[date, str] = dataclasses.field(default_factory=dict)
    # A period's key by quarter hour of UTC time: today's zones' offsets are whole quarter hours, so their days
    # (and DST changes) begin on one and a quarter hour falls in one day: no astimezone a record (0.3 s of a cached
    # report over 100,000 events).
    _quarter_keys: dict[int, str] = dataclasses.field(default_factory=dict)

    def _quarter_key(self, time_ns: int) -> str:
        """The period key of the quarter hour ``time_ns`` is in, kept when all of that quarter hour has one (a zone
        whose day began inside it, an old local mean time, is worked out a record at a time)."""
        quarter = time_ns // _QUARTER_HOUR_NS
        first = self._day_key(quarter * _QUARTER_HOUR_NS)
        if self._day_key((quarter + 1) * _QUARTER_HOUR_NS - 1) != first:
            return self._day_key(time_ns)
        self._quarter_keys[quarter] = first
        return first

    def _day_key(self, time_ns: int) -> str:
        day = _local(time_ns, self.cut.zone).date()
        return self._day_keys.get(day) or self._day_keys.setdefault(day, _period_key(day, self.cut.period))

    def add(self, part: SessionPart) -> None:
        """Add one session's contributions to the rows they fall in."""
        cut = self.cut
        period = cut.period
        wanted = (cut.agent is None or part.agent == cut.agent) and (
            cut.repo is None or cut.repo.matches(part.repository, part.git_root, part.cwd)
        )
        for item in part.items:
            if item.time_ns >= cut.quota_start_ns:
                for name, value in item.figures:
                    if name == "premium_requests":
                        self.quota_used += value
            if not wanted:
                continue
            if cut.since_ns is not None and item.time_ns < cut.since_ns:
                continue
            if cut.until_ns is not None and item.time_ns >= cut.until_ns:
                continue
            if period == "session":
                key = part.session_id
            elif period == "repo":
                key = part.repo_key
            elif period == "model":
                key = item.model or _UNKNOWN
            elif period == "agent":
                key = part.agent
            elif (
                period == "blocks"
            ):  # an hour of one agent's use; commands.blocks joins the hours into windows
                key = f"{part.agent} {item.time_ns // HOUR_NS}"
            else:
                key = self._quarter_keys.get(item.time_ns // _QUARTER_HOUR_NS) or self._quarter_key(
                    item.time_ns
                )
            row = self.rows.get(key)
            if row is None:
                row = self.rows[key] = Row(key)
                if period in ("session", "repo"):
                    row.repository, row.branch = part.repository, part.branch
                    row.cwd = part.cwd if period == "session" or not part.repository else None
                if period == "session":
                    row.title, row.cli_cost_usd = part.title, part.cli_cost_usd
            targets: tuple[Row, ...] = (row, self.totals)
            if cut.breakdown and item.figures:  # an empty item (a figure unknown) names no model
                model = item.model or _UNKNOWN
                sub = row.models.get(model) or row.models.setdefault(model, Row(model))
                targets = (row, sub, self.totals)
            for target in targets:
                target.session_ids.add(part.session_id)
                target.agents.add(part.agent)
                if item.estimated:
                    target.estimated.update(item.estimated)
                if item.figures:
                    target._add_figures(item.figures, item.time_ns)
                cost = item.cost
                if isinstance(cost, Cost):
                    target.cost_sources.add(cost.source)
                elif cost is not None:
                    target.unpriced[cost.model] = target.unpriced.get(cost.model, 0) + 1
                    target.unpriced_why[cost.model] = cost.reason

    def merge(self, other: Tally) -> None:
        """Add another tally of the same cut (a worker's share of the logs)."""
        _merge_rows(self.rows, other.rows)
        self.totals.merge(other.totals)
        self.quota_used += other.quota_used
        self.skipped.extend(other.skipped)
        self.sessions_read += other.sessions_read
        self.events_read += other.events_read


def build_report(
    sessions: Iterable[SessionRecords | SessionPart],
    period: Period = "daily",
    *,
    zone: tzinfo | None = None,
    since_ns: int | None = None,
    until_ns: int | None = None,
    now_ns: int,
    price: float = PREMIUM_REQUEST_PRICE_USD,
    quota: float | None = None,
    sort: str | None = None,
    descending: bool | None = None,
    limit: int | None = None,
    breakdown: bool = False,
    prices: Prices | None = None,
) -> Report:
    """Add up sessions' records into a report's rows.

    Args:
        sessions: The sessions' records (:func:`copilot_otel.library.iter_sessions`), or their
            :func:`session_part`.
        period: What a row is.
        zone: The time zone days, weeks and months are cut in (``None``: the local zone).
        since_ns, until_ns: Only records at or after ``since_ns`` and before ``until_ns`` count.
        now_ns: "Now", for the quota's month (injected so the same logs give the same report).
        price, quota, sort, descending, limit: As :func:`finish_report`.
        breakdown: Each row's figures again per model (:func:`make_cut`).
        prices: ``--price``'s per-token prices (:func:`make_cut`); ``price`` stays the premium request's.

    Raises:
        ConfigError: An unknown period or sort key.
    """
    cut = make_cut(
        period, zone=zone, since_ns=since_ns, until_ns=until_ns, now_ns=now_ns, breakdown=breakdown,
        prices=prices,
    )  # fmt: skip
    tally = Tally(cut)
    table = _default_prices(cut.prices)
    for one in sessions:
        tally.add(one if isinstance(one, SessionPart) else session_part(one, table))
    return finish_report(
        tally, now_ns=now_ns, price=price, quota=quota, sort=sort, descending=descending, limit=limit
    )


def finish_report(
    tally: Tally,
    *,
    now_ns: int,
    price: float = PREMIUM_REQUEST_PRICE_USD,
    quota: float | None = None,
    sort: str | None = None,
    descending: bool | None = None,
    limit: int | None = None,
) -> Report:
    """Sort a tally's rows into a report.

    Args:
        tally: The rows added up.
        now_ns: "Now", for the quota's month.
        price: USD per premium request.
        quota: The monthly premium request allowance; the report says how much of it this month used.
        sort: ``key`` or a figure name (default: ``key`` for periods, ``premium_requests`` otherwise).
        descending: Sort order (default: ascending for ``key``, descending for a figure).
        limit: Keep this many rows after sorting (the totals still count every row).

    Raises:
        ConfigError: ``sort`` is neither ``key`` nor a figure name.
    """
    cut = tally.cut
    sort = sort or ("key" if cut.period in ("daily", "weekly", "monthly") else "premium_requests")
    if sort != "key" and sort not in FIGURES:
        raise ConfigError(f"Expected --sort to be key or one of {', '.join(FIGURES)}, got {sort!r}")
    descending = (sort != "key") if descending is None else descending
    ordered = sorted(tally.rows.values(), key=lambda r: r.key)  # ties keep the key order
    if sort != "key":
        ordered.sort(key=lambda r: r.value(sort, price), reverse=descending)
    elif descending:
        ordered.reverse()
    matched = len(ordered)
    if limit is not None and limit >= 0:
        ordered = ordered[:limit]
    return Report(
        period=cut.period,
        zone=_zone_name(cut.zone),
        since_ns=cut.since_ns,
        until_ns=cut.until_ns,
        price=price,
        rows=ordered,
        totals=tally.totals,
        matched_rows=matched,
        quota=quota,
        quota_used=tally.quota_used if quota is not None else None,
        quota_month=_quota_month_start(now_ns)[1] if quota is not None else None,
        breakdown=cut.breakdown,
        repo=cut.repo.given if cut.repo is not None else None,
        price_table=next((s for s in sorted(tally.totals.cost_sources) if s != OVERRIDE_SOURCE), None),
    )


def _period_key(day: date, period: Period) -> str:
    if period == "daily":
        return day.isoformat()
    if period == "weekly":
        year, week, _ = day.isocalendar()
        return f"{year:04d}-W{week:02d}"
    return f"{day.year:04d}-{day.month:02d}"


def report_sessions(
    targets: Sequence[str | Path], settings: FoldSettings | None = None, *, since_ns: int | None = None
) -> Iterator[SessionRecords]:
    """Read the session logs under ``targets`` (in-process), skipping files last written before ``since_ns``
    and files that cannot be read.

    Raises:
        SourceError: A target is neither a readable path nor a session log folder.
    """
    settings = settings or FoldSettings()
    for session in _wanted(targets, since_ns):
        try:
            yield read_log(session, settings)
        except SourceError:
            continue


# A history smaller than this is read in-process: starting worker processes costs more than it saves (as
# replay decides).
PARALLEL_MIN_BYTES = 32 * 1024 * 1024
# Unreadable sessions named one by one on stderr; past this, a count (a broken disk can make thousands).
_SKIPPED_SHOWN = 5
# Sessions go to workers in chunks of about this many bytes (balance vs. per-chunk overhead).
CHUNK_BYTES = 8 * 1024 * 1024
_MAX_WORKERS = 4


def tally_logs(
    targets: Sequence[str | Path],
    cut: Cut,
    settings: FoldSettings | None = None,
    *,
    read_since_ns: int | None = None,
    workers: int | None = None,
    root: Path | None = None,
    on_progress: Callable[[ReadProgress], None] | None = None,
    others: Sequence[AgentRoot] = (),
    cache: PartCache[SessionPart] | None = None,
) -> Tally:
    """Read and add up the session logs under ``targets``.

    Each log is folded (:func:`copilot_otel.library.read_session`) and added to the tally; a history over
    :data:`PARALLEL_MIN_BYTES` is shared among worker processes (sessions are independent, the fold is pure),
    ``workers`` of them (default: the CPUs, at most 4), each handing back its tally (a few rows, not records).

    Args:
        read_since_ns: Skip logs last written before this (default: the cut's ``since``).
        root: The session-state root a target that is no path is looked up in, as a session id or a unique
            prefix of one (the resolver ``show`` and ``replay`` use).
        on_progress: Called as sessions are read (each one in-process; each chunk with worker processes).
        others: Other agents' folders a session id is looked up in too (Claude Code's, Codex's).
        cache: The sessions' parts kept from earlier reports (:func:`part_cache`): only the logs that changed
            since are read.

    Raises:
        SourceError: A target is neither a readable path, a session log folder nor a known session id.
    """
    settings = settings or FoldSettings()
    skipped: list[UnreadableError] = []
    found = resolve_targets([os.path.expanduser(str(t)) for t in targets], root, skipped, others=others)
    return tally_found(
        found,
        cut,
        settings,
        read_since_ns=read_since_ns,
        skipped=skipped,
        on_progress=on_progress,
        workers=workers,
        cache=cache,
    )


def tally_found(
    found: Sequence[SessionFile],
    cut: Cut,
    settings: FoldSettings,
    *,
    read_since_ns: int | None = None,
    skipped: Sequence[Exception] = (),
    workers: int | None = None,
    on_progress: Callable[[ReadProgress], None] | None = None,
    cache: PartCache[SessionPart] | None = None,
) -> Tally:
    """Add up session logs already found (:func:`tally_logs`; ``report`` with no path: every enabled agent's),
    those last written before ``read_since_ns`` (default: the cut's ``since``) left unopened; ``skipped``: the
    sessions found but unreadable, said as left out; ``cache``: as :func:`tally_logs`'s."""
    kept = _written_since(found, cut.since_ns if read_since_ns is None else read_since_ns)
    tally = _tally_found(kept, cut, settings, workers, on_progress, cache)
    tally.skipped[:0] = [str(exc) for exc in skipped]
    return tally


def _tally_found(
    found: list[SessionFile],
    cut: Cut,
    settings: FoldSettings,
    workers: int | None,
    on_progress: Callable[[ReadProgress], None] | None = None,
    cache: PartCache[SessionPart] | None = None,
) -> Tally:
    tally = Tally(cut)
    signatures: dict[Path, str] = {}
    if cache is not None:  # the logs that did not change are added from the cache; the others read below

        def add(kept: SessionPart, lines: int) -> None:
            tally.add(kept)
            tally.sessions_read += 1
            tally.events_read += lines

        recalled = cache.recall(found, add)
        found, signatures = recalled.todo, recalled.signatures
    sizes = [log_bytes(session) for session in found]
    progress = ReadProgress(
        tally.sessions_read, tally.sessions_read + len(found), tally.events_read, sum(sizes)
    )
    if on_progress is not None and tally.sessions_read:
        on_progress(progress)  # what the cache gave (all of it, when no log changed)
    count = workers if workers is not None else min(os.cpu_count() or 1, _MAX_WORKERS)
    if count <= 1 or progress.bytes_total < PARALLEL_MIN_BYTES:
        tally.merge(_tally_chunk(found, settings, cut, progress, on_progress, cache, signatures))
        return tally
    # Started the way the platform seam says is safe (fork only on Linux; spawn on macOS and Windows).
    with process_pool(count) as pool:
        futures = [
            pool.submit(_tally_chunk, chunk, settings, cut, None, None, cache, _of(signatures, chunk))
            for chunk in by_size(found, CHUNK_BYTES)
        ]
        try:
            for future in as_completed(futures):
                part = future.result()
                tally.merge(part)
                if on_progress is not None:
                    progress.sessions_read += part.sessions_read
                    progress.events_read += part.events_read
                    on_progress(progress)
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    return tally


@dataclasses.dataclass
class ReadProgress:
    """How far a report has read the history: given to the progress callback as sessions are read."""

    sessions_read: int
    sessions_total: int
    events_read: int
    bytes_total: int


class ProgressLine:
    """How far a report has read, on stderr (never stdout: the table, JSON and CSV stay what they are).

    On a terminal one line rewritten in place, at most every :attr:`TERMINAL_INTERVAL_S`, starting only once the
    reading has taken :attr:`TERMINAL_DELAY_S` (a small history says nothing), and erased at the end. Elsewhere
    (``--progress`` into a file or a pipe) a plain line every :attr:`PLAIN_INTERVAL_S` and one at the end.
    """

    TERMINAL_DELAY_S = 0.5
    TERMINAL_INTERVAL_S = 0.2
    PLAIN_INTERVAL_S = 2.0

    def __init__(self, stream: Any, *, terminal: bool, clock: Callable[[], float] | None = None) -> None:
        import time

        self._stream = stream
        self._terminal = terminal
        self._clock = clock or time.monotonic
        self._started = self._clock()
        self._last = float("-inf") if terminal else self._started
        self._shown = False

    def __call__(self, progress: ReadProgress) -> None:
        now = self._clock()
        finished = progress.sessions_read >= progress.sessions_total
        if self._terminal:
            if now - self._started < self.TERMINAL_DELAY_S or now - self._last < self.TERMINAL_INTERVAL_S:
                return
            self._stream.write("\r\x1b[K" + self.text(progress))
            self._shown = True
        elif finished or now - self._last >= self.PLAIN_INTERVAL_S:
            self._stream.write(self.text(progress) + "\n")
        else:
            return
        self._last = now
        self._stream.flush()

    def close(self) -> None:
        """Erase the terminal's line (the report comes next)."""
        if self._shown:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
            self._shown = False

    @staticmethod
    def text(progress: ReadProgress) -> str:
        """``copilot-otel: read 1,200 of 1,500 sessions (120,000 events)``."""
        return (
            f"copilot-otel: read {progress.sessions_read:,} of {display.count(progress.sessions_total, 'session')} "
            f"({display.count(progress.events_read, 'event')})"
        )


def _tally_chunk(
    sessions: list[SessionFile],
    settings: FoldSettings,
    cut: Cut,
    progress: ReadProgress | None = None,
    on_progress: Callable[[ReadProgress], None] | None = None,
    cache: PartCache[SessionPart] | None = None,
    signatures: dict[Path, str] | None = None,
) -> Tally:
    """Read and add up ``sessions``; with a ``cache``, keep the part of each log whose signature was taken."""
    tally = Tally(cut)
    keep: list[tuple[SessionFile, str, SessionPart, int]] = []
    for session in sessions:
        lines = 0
        try:
            records = read_log(session, settings)
        except SourceError as exc:  # unreadable now (removed, permissions): the report is about the rest
            tally.skipped.append(str(exc))
        else:
            part = session_part(records, _default_prices(cut.prices))
            tally.add(part)
            lines = records.lines
            if signatures and session.path in signatures:
                keep.append((session, signatures[session.path], part, lines))
        tally.sessions_read += 1
        tally.events_read += lines
        if progress is not None and on_progress is not None:
            progress.sessions_read += 1
            progress.events_read += lines
            on_progress(progress)
    if cache is not None:
        cache.keep(keep)
    return tally


def _of(signatures: dict[Path, str], chunk: list[SessionFile]) -> dict[Path, str]:
    """A chunk's share of the signatures (a worker process is sent only its own)."""
    return {s.path: signatures[s.path] for s in chunk if s.path in signatures}


def part_cache(config: Config, settings: FoldSettings) -> PartCache[SessionPart]:
    """The cache of sessions' parts in ``config``'s state directory (:mod:`copilot_otel.commands.report_cache`),
    valid for ``settings`` and this code."""
    return PartCache(
        config.state_dir / CACHE_FILE,
        fingerprint(settings, SessionPart, _Item, Cost, Unpriced),
        SessionPart,
        _Item,
        (Cost, Unpriced),
    )


def _wanted(
    targets: Sequence[str | Path],
    since_ns: int | None,
    skipped: list[UnreadableError] | None = None,
    root: Path | None = None,
) -> list[SessionFile]:
    """The session logs under ``targets``, but those last written before ``since_ns`` (:func:`_written_since`).
    Sessions there but unreadable go to ``skipped`` when it is given."""
    found = resolve_targets([os.path.expanduser(str(t)) for t in targets], root, skipped)
    return _written_since(found, since_ns)


def _written_since(found: Sequence[SessionFile], since_ns: int | None) -> list[SessionFile]:
    """The logs written at or after ``since_ns``: a log is only ever appended to, so a file whose modification
    time is before ``since`` holds no event after it: it is not opened."""
    if since_ns is None:
        return list(found)
    kept = []
    for session in found:
        try:
            if session.path.stat().st_mtime_ns >= since_ns:
                kept.append(session)
        except OSError:
            continue
    return kept


# ------------------------------------------------------------------------------------------------ output
def _iso(time_ns: int, zone: tzinfo | None) -> str | None:
    return _local(time_ns, zone).isoformat(timespec="seconds") if time_ns else None


def json_number(name: str, value: float) -> float | int:
    """A figure as the JSON document writes it: amounts rounded to 6 places, counts to integers."""
    if name in _FLOAT_FIGURES:
        return round(value, 6)
    return round(value)


def row_json(row: Row, report: Report, zone: tzinfo | None) -> dict[str, Any]:
    """One row as the JSON document's (and the CSV's) flat dict: see ``docs/report.schema.json``."""
    out: dict[str, Any] = {"key": row.key}
    if report.period in ("session", "repo"):
        out["repository"] = row.repository
        out["branch"] = row.branch
        out["cwd"] = row.cwd
    out["first_seen"] = _iso(row.first_ns, zone)
    out["last_seen"] = _iso(row.last_ns, zone)
    for name in FIGURES:
        out[name] = json_number(name, row.value(name, report.price))
    out["estimated"] = sorted(row.estimated)
    out["agent"] = ",".join(sorted(row.agents))  # added last: a CSV read by column position keeps its columns
    if report.period == "session":  # the log's own words (none for the total), after the columns above
        out["title"] = row.title
        out["cli_cost_usd"] = round(row.cli_cost_usd, 6) if row.cli_cost_usd is not None else None
    _cost_json(out, row)
    if report.breakdown and row.key != "total":
        out["models"] = [_model_json(sub, report, zone) for sub in row.by_model(report.price)]
    return out


def _cost_json(out: dict[str, Any], row: Row) -> None:
    """Where ``cost_usd`` came from, and the calls left out of it (by model), after every other column: a CSV
    read by column position keeps its columns."""
    out["cost_source"] = row.sources()
    out["unpriced_calls"] = dict(sorted(row.unpriced.items()))


def _model_json(row: Row, report: Report, zone: tzinfo | None) -> dict[str, Any]:
    """A ``--breakdown`` sub-row: the model (its key) and the row's figures for that model alone."""
    out: dict[str, Any] = {
        "model": row.key,
        "first_seen": _iso(row.first_ns, zone),
        "last_seen": _iso(row.last_ns, zone),
    }
    for name in FIGURES:
        out[name] = json_number(name, row.value(name, report.price))
    out["estimated"] = sorted(row.estimated)
    _cost_json(out, row)
    return out


def render_json(report: Report, zone: tzinfo | None) -> dict[str, Any]:
    """The report as one JSON document ``{"report": {...}, "rows": [...], "totals": {...}}``."""
    quota = None
    if report.quota is not None and report.quota_used is not None:
        quota = {
            "month": report.quota_month,
            "allowance": report.quota,
            "used": round(report.quota_used, 6),
            "left": round(report.quota - report.quota_used, 6),
        }
    return {
        "report": {
            "period": report.period,
            "time_zone": report.zone,
            "since": _iso(report.since_ns, zone) if report.since_ns else None,
            "until": _iso(report.until_ns, zone) if report.until_ns else None,
            "price_per_premium_request_usd": report.price,
            "repo": report.repo,
            "price_table": report.price_table,
            "rows_matched": report.matched_rows,
            "quota": quota,
        },
        "rows": [row_json(row, report, zone) for row in report.rows],
        "totals": row_json(report.totals, report, zone),
    }


def render_csv(report: Report, zone: tzinfo | None) -> str:
    """The rows and a last ``total`` row as CSV, with the JSON rows' keys as the header.

    With ``--breakdown`` a ``model`` column follows ``key``: each row (``model`` empty) is followed by one row
    per model with the same key.
    """
    rows: list[dict[str, Any]] = []
    for row in [*report.rows, report.totals]:
        doc = row_json(row, report, zone)
        models = doc.pop("models", [])
        rows.append({"key": doc.pop("key"), "model": "", **doc} if report.breakdown else doc)
        rows.extend({"key": row.key, **model} for model in models)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n", restval="")
    writer.writeheader()
    for one in rows:
        writer.writerow({k: _csv_value(v) for k, v in one.items()})
    return buffer.getvalue()


def _csv_value(value: Any) -> Any:
    """A JSON value as one CSV cell: a list's items and a mapping's ``key=value`` pairs joined by ``;``."""
    if isinstance(value, list):
        return ";".join(value)
    if isinstance(value, dict):
        return ";".join(f"{k}={v}" for k, v in value.items())
    return "" if value is None else value


# Table columns: (figure, heading, width, formatter), in the order they are dropped last-first when the
# terminal is narrow: the first eight fit 80 columns with a 10-character key.
def _count(value: float) -> str:
    return f"{round(value):,}"


def _float(value: float) -> str:
    return f"{value:,.2f}" if value < 1000 else f"{value:,.0f}"


_COLUMNS: tuple[tuple[str, str, Callable[[float], str]], ...] = (
    ("sessions", "sess", _count),
    ("prompts", "prompts", _count),
    ("tool_calls", "tools", _count),
    ("input_tokens", "input", display.tokens),
    ("output_tokens", "output", display.tokens),
    ("premium_requests", "premium", _float),
    ("cost_usd", "cost $", _float),
    ("failed_tool_calls", "failed", _count),
    ("turns", "turns", _count),
    ("cache_read_tokens", "cache rd", display.tokens),
    ("cache_write_tokens", "cache wr", display.tokens),
    ("reasoning_tokens", "reason", display.tokens),
    ("ai_units", "AIU", _float),
    ("lines_added", "+lines", _count),
    ("lines_removed", "-lines", _count),
    ("runaway_detections", "runaway", _count),
    ("wall_time_s", "wall", display.duration),
)
_KEY_HEADING = {
    "daily": "date",
    "weekly": "week",
    "monthly": "month",
    "session": "session",
    "repo": "repository",
    "model": "model",
    "agent": "agent",
}
# The key column is at least this wide (a date, a week, a month; a session id's 8 characters and the end of its
# folder, beside its "last active" day) and takes what the figures leave.
_MIN_KEY_WIDTH = {"daily": 10, "weekly": 8, "monthly": 7, "session": 20, "repo": 24, "model": 18, "agent": 11}


Layout = Literal["fit", "compact", "wide"]
# --compact: the figures a glance needs (ccusage's compact table: tokens and cost), whatever the width.
_COMPACT = frozenset({"sessions", "prompts", "input_tokens", "output_tokens", "premium_requests", "cost_usd"})
# Piped (no terminal to measure), the table is this wide whatever COLUMNS says: the same bytes in every shell.
PIPED_WIDTH = 80
# ``report session``'s "last active" column: the day of the row's latest event, in --tz (with the time: --wide).
_LAST_ACTIVE = "last active"
_AGENT = "agent"


def _min_key_width(report: Report) -> int:
    """The key column's least width: the period's, and with ``--breakdown`` room for the models' names (up to
    the width of a session's key)."""
    least = max(_MIN_KEY_WIDTH[report.period], len("total"))
    if report.breakdown:
        names = [2 + len(sub.key) for row in report.rows for sub in row.models.values()]
        least = max(least, min(max(names, default=0), _MIN_KEY_WIDTH["repo"]))
    return least


def _table_rows(report: Report) -> list[Row]:
    """Every row a table shows (sub-rows included), for the column widths."""
    rows = [*report.rows, report.totals]
    if report.breakdown:
        rows += [sub for row in report.rows for sub in row.models.values()]
    return rows


def _figure_width(report: Report, column: tuple[str, str, Callable[[float], str]]) -> int:
    name, heading, fmt = column
    return max(len(heading), *(len(fmt(r.value(name, report.price))) + 1 for r in _table_rows(report)))


def table_columns(
    report: Report, width: int, layout: Layout = "fit"
) -> list[tuple[str, str, Callable[[float], str]]]:
    """The figure columns that fit ``width`` (1 space between columns), most wanted first; ``compact``: only the
    figures a glance needs; ``wide``: every figure, whatever the width."""
    chosen: list[tuple[str, str, Callable[[float], str]]] = []
    used = _min_key_width(report) + _extra_width(report, layout)
    for column in _COLUMNS:
        if layout == "compact" and column[0] not in _COMPACT:
            continue
        size = _figure_width(report, column)
        if layout != "wide" and used + 1 + size > width:
            continue
        used += 1 + size
        chosen.append(column)
    order = {name: i for i, (name, _, _) in enumerate(sorted(_COLUMNS, key=lambda c: FIGURES.index(c[0])))}
    return sorted(chosen, key=lambda c: order[c[0]])


def _extra_width(report: Report, layout: Layout) -> int:
    """Columns beside the key that are always shown: ``report session``'s last activity, and its agent when the
    report holds more than one agent's sessions (:func:`_agent_column`)."""
    if report.period != "session":
        return 0
    agent = (
        1 + max(len(_AGENT), *(len(name) for name in report.totals.agents)) if _agent_column(report) else 0
    )
    return 1 + max(len(_LAST_ACTIVE), len(_last_active(1, None, layout))) + agent


def _agent_column(report: Report) -> bool:
    """``report session`` says each session's agent when the rows are not all one agent's (the title says whose
    they are otherwise)."""
    return report.period == "session" and len(report.totals.agents) > 1


def table_width(report: Report, layout: Layout) -> int:
    """How wide the table is with every figure ``layout`` keeps and the key column as wide as its longest key
    (what ``--wide`` prints, whatever the terminal)."""
    columns = table_columns(report, 10**6, layout)
    keys = [len(_key_label(row, report.period, 10**6)) for row in [*report.rows, report.totals]]
    keys += [2 + len(sub.key) for row in report.rows for sub in row.models.values()]
    key_width = max([_min_key_width(report), *keys])
    return key_width + _extra_width(report, layout) + sum(1 + _figure_width(report, c) for c in columns)


def render_table(report: Report, width: int, zone: tzinfo | None, layout: Layout = "fit") -> Any:
    """The report as a :class:`rich.table.Table` no wider than ``width`` (figures that do not fit are left out;
    ``layout`` as :func:`table_columns`)."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    columns = table_columns(report, width, layout)
    figure_width = sum(1 + _figure_width(report, c) for c in columns) + _extra_width(report, layout)
    key_width = max(width - figure_width, _min_key_width(report))
    title = f"{_whose(report)} usage, {report.period}"
    span = _span_label(report, zone)
    if span:
        title += f", {span}"
    if report.repo:
        title += f", repo {report.repo}"
    if report.breakdown:
        title += ", by model"
    table = Table(
        title=f"{title} ({report.zone})",
        title_justify="left",
        box=None,
        header_style="bold",
        pad_edge=False,
        padding=(0, 0, 0, 1),
        show_footer=False,
    )
    table.add_column(_KEY_HEADING[report.period], no_wrap=True, overflow="ellipsis", max_width=key_width)
    last_active = report.period == "session"
    if last_active:
        table.add_column(_LAST_ACTIVE, no_wrap=True)
    agent_column = _agent_column(report)
    if agent_column:
        table.add_column(_AGENT, no_wrap=True)
    for _, heading, _fmt in columns:
        table.add_column(heading, justify="right", no_wrap=True)

    marked = False  # whether a drawn cell carries "~": the footnote explains only what is on the screen

    def cells(row: Row, style: str | None, label: str) -> list[Any]:
        nonlocal marked
        out: list[Any] = [Text(label, style=style or "")]
        if last_active:
            text = _last_active(row.last_ns, zone, layout) if row.key != "total" and row.last_ns else ""
            out.append(Text(text, style=style or ""))
        if agent_column:
            out.append(Text(",".join(sorted(row.agents)) if row.key != "total" else "", style=style or ""))
        for name, _, fmt in columns:
            text = fmt(row.value(name, report.price))
            if name in row.estimated or (name == "cost_usd" and "premium_requests" in row.estimated):
                out.append(Text("~" + text, style="yellow"))
                marked = True
            elif name == "failed_tool_calls" and row.value(name, report.price):
                out.append(Text(text, style="red"))
            elif name == "runaway_detections" and row.value(name, report.price):
                out.append(Text(text, style="bold red"))
            else:
                out.append(Text(text, style=style or ""))
        return out

    for row in report.rows:
        table.add_row(*cells(row, None, _key_label(row, report.period, key_width)))
        if report.breakdown:
            for sub in row.by_model(report.price):
                table.add_row(*cells(sub, "dim", "└ " + sub.key))
    table.add_section()
    table.add_row(*cells(report.totals, "bold", "total"))
    parts: list[Any] = [table]
    notes: list[str] = []
    if report.matched_rows > len(report.rows):
        notes.append(f"{len(report.rows)} of {report.matched_rows} rows shown; the total counts all.")
    if marked:
        notes.append(
            "~ estimated: an older CLI's log, a killed session or a count out of range lacks the exact figure."
        )
    if report.totals.unpriced:
        notes.append(_unpriced_note(report.totals))
    left_out = [n for n, _, _ in _COLUMNS if n not in {c[0] for c in columns}]
    if left_out and layout != "compact":
        notes.append(f"{len(left_out)} more figures with a wider terminal, --wide or --json.")
    for note in notes:
        parts.append(Text(note, style="dim"))
    if report.quota is not None and report.quota_used is not None:
        left = report.quota - report.quota_used
        parts.append(
            Text(
                f"Premium requests in {report.quota_month} (UTC month): {report.quota_used:,.2f} of "
                f"{report.quota:,.0f} used, {left:,.2f} left",
                style="bold red" if left < 0 else "bold",
            )
        )
    return Group(*parts)


def _unpriced_note(totals: Row) -> str:
    """``unpriced: 3 calls of model-x (not in genai-prices 0.2.5); cost $ leaves them out.``"""
    said = ", ".join(
        f"{display.count(calls, 'call')} of {model} ({totals.unpriced_why.get(model, 'no price')})"
        for model, calls in sorted(totals.unpriced.items())
    )
    unknown = any(why.startswith("not in") for why in totals.unpriced_why.values())
    hint = " (--price MODEL=INPUT,OUTPUT prices a model)" if unknown else ""
    return f"unpriced: {said}; cost $ leaves them out{hint}."


def _whose(report: Report) -> str:
    """Whose usage the table is: one agent's name, or "Coding agents'" when several added to it."""
    agents = report.totals.agents or {COPILOT}
    return AGENT_TITLES.get(next(iter(agents)), "Coding agents'") if len(agents) == 1 else "Coding agents'"


def _last_active(time_ns: int, zone: tzinfo | None, layout: Layout) -> str:
    return _local(time_ns, zone).strftime("%Y-%m-%d %H:%M" if layout == "wide" else "%Y-%m-%d")


def _key_label(row: Row, period: Period, width: int) -> str:
    """A row's first cell: a session's short id and the end of its folder; a folder's end (the telling part)."""
    if period == "session" and row.key != "total":
        where = row.repository or (home_relative(row.cwd) if row.cwd else "")
        return row.key[:8] + (" " + _tail(where, width - 9) if where else "")
    if period == "repo" and row.key != "total":
        return _tail(row.key if row.repository else home_relative(row.key), width)
    return row.key


def _tail(text: str, limit: int) -> str:
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


def _span_label(report: Report, zone: tzinfo | None) -> str:
    since = _local(report.since_ns, zone).date().isoformat() if report.since_ns else None
    until = (
        (_local(report.until_ns, zone) - timedelta(seconds=1)).date().isoformat() if report.until_ns else None
    )
    if since and until:
        return f"{since} to {until}"
    if since:
        return f"since {since}"
    if until:
        return f"until {until}"
    return ""


def read_tally(
    config: Config,
    cut: Cut,
    paths: Sequence[str] = (),
    *,
    read_since_ns: int | None = None,
    progress: Literal["terminal", "always", "never"] = "terminal",
    cache: bool = True,
) -> Tally:
    """Read and add up what a report command asks for: the logs under ``paths``, or with none every enabled
    agent's folder (only the cut's agent's when it names one), with how far reading has got on stderr (only on a
    terminal, always, or never). ``cache``: the parts of logs that did not change are taken from the state
    directory's cache (:func:`part_cache`); never with ``--price`` models, whose costs are the user's of the day
    and would stand in for the table's in a later report.

    Raises:
        SourceError: A path is not a session log, or (no path) no enabled agent's folder is there.
    """
    import sys

    settings = dataclasses.replace(fold_settings(config), content=ContentPolicy())
    terminal = sys.stderr.isatty()
    line = (
        ProgressLine(sys.stderr, terminal=terminal)
        if progress == "always" or (progress == "terminal" and terminal)
        else None
    )
    kept = part_cache(config, settings) if cache and not cut.prices.models else None
    try:
        if paths:
            others = [root for root in agent_roots(config) if root.enabled]
            return tally_logs(
                paths, cut, settings, read_since_ns=read_since_ns, root=config.session_state, on_progress=line,
                others=others, cache=kept,
            )  # fmt: skip
        found = discover(config, agent=cut.agent)
        if not found.read:
            raise SourceError(found.nothing_found())
        found.warn_unfolded()
        return tally_found(
            found.sessions,
            cut,
            settings,
            read_since_ns=read_since_ns,
            skipped=found.unreadable,
            on_progress=line,
            cache=kept,
        )
    finally:
        if line is not None:
            line.close()  # before the table: both may share one terminal


def report(
    config: Config,
    period: Period = "daily",
    *,
    paths: Sequence[str] = (),
    since: str | None = None,
    until: str | None = None,
    tz: str | None = None,
    sort: str | None = None,
    order: Literal["asc", "desc"] | None = None,
    limit: int | None = None,
    price: float = PREMIUM_REQUEST_PRICE_USD,
    quota: float | None = None,
    prices: Prices | None = None,
    output: Literal["table", "json", "csv"] = "table",
    now_ns: int,
    breakdown: bool = False,
    layout: Layout = "fit",
    progress: Literal["terminal", "always", "never"] = "terminal",
    agent: str | None = None,
    repo: str | None = None,
    cache: bool = True,
) -> int:
    """Print a usage report of the session logs under ``paths`` (default: every enabled agent's folder, the
    ``agents`` setting; ``agent``: only that agent's sessions count; ``repo``: only that repository's, by name or
    path, :class:`~copilot_otel.settings.repos.RepoFilter`).

    ``paths`` are session folders, ``events.jsonl`` files, session-state roots, another agent's folder
    (``~/.claude``, ``~/.codex``, ``~/.gemini``), or session ids (and unique id prefixes) of any enabled agent, as ``show`` and
    ``replay`` take them. The table is as wide as the
    terminal, :data:`PIPED_WIDTH` when stdout is no terminal, and every figure wide with ``layout="wide"``.
    ``progress``: how far reading has got, on stderr (:class:`ProgressLine`): only when stderr is a terminal,
    always, or never. ``price`` is the premium request's; ``prices`` (``--price``) may also price models per token
    instead of the price table. ``cache``: keep each session's figures in the state directory and read again only
    the logs that changed since (:mod:`copilot_otel.commands.report_cache`); ``False`` reads every log and keeps
    nothing.

    Returns:
        The exit code: 0, or 8 (:class:`~copilot_otel.common.errors.PartialError`) when sessions that could not be
        read were left out (each named on stderr).

    Raises:
        ConfigError: A bad ``since`` / ``until`` / ``tz`` / ``sort`` value.
        SourceError: A path is not a session log, or (no path) no enabled agent's folder is there.
    """
    import sys

    import orjson
    from rich.console import Console

    zone = parse_zone(tz)
    since_ns, until_ns = parse_window(since, until, now_ns=now_ns, zone=zone)
    # The quota counts this month whatever --since says, so the files of this month must be read too.
    read_since = since_ns
    if quota is not None and read_since is not None:
        read_since = min(read_since, _quota_month_start(now_ns)[0])
    cut = make_cut(
        period,
        zone=zone,
        since_ns=since_ns,
        until_ns=until_ns,
        now_ns=now_ns,
        breakdown=breakdown,
        agent=agent,
        repo=RepoFilter.parse(repo) if repo else None,
        prices=prices,
    )
    tally = read_tally(config, cut, paths, read_since_ns=read_since, progress=progress, cache=cache)
    built = finish_report(
        tally,
        now_ns=now_ns,
        price=price,
        quota=quota,
        sort=sort,
        descending=None if order is None else order == "desc",
        limit=limit,
    )
    if output == "json":
        sys.stdout.write(orjson.dumps(render_json(built, zone), option=orjson.OPT_INDENT_2).decode() + "\n")
    elif output == "csv":
        sys.stdout.write(display.printable(render_csv(built, zone)))  # a folder name's ESC is no CSV data
    else:
        console = display.neutralise(Console(highlight=False, markup=False, emoji=False, soft_wrap=False))
        if layout == "wide":
            console.width = max(table_width(built, layout), len(f"{_whose(built)} usage, {period}"))
        elif not console.is_terminal:
            console.width = PIPED_WIDTH  # not COLUMNS: a pipe has no width, and the same bytes in every shell
        console.print(render_table(built, console.width, zone, layout))
    sys.stdout.flush()
    if not tally.skipped:
        return 0
    for reason in tally.skipped[:_SKIPPED_SHOWN]:
        logger.warning("left out of the totals: %s", reason)
    more = len(tally.skipped) - _SKIPPED_SHOWN
    logger.warning(
        "%s could not be read and %s not counted%s",
        display.count(len(tally.skipped), "session"),
        "is" if len(tally.skipped) == 1 else "are",
        f" ({more:,} more not listed)" if more > 0 else "",
    )
    return PartialError.exit_code
