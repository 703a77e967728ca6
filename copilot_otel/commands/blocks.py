"""``copilot-otel report blocks``: usage in the 5-hour windows the agents' plans meter, and the active one's burn.

Claude Code's subscription plans (and ChatGPT's, which Codex CLI uses) limit use per 5-hour window that starts with
the first message after the last window ended. So a window is drawn as ccusage draws Claude Code's "session blocks":
it starts at the hour of its first record and lasts five hours; the first record after it starts the next. Each agent
has its own windows (its own provider meters it). The active window (now inside it) gets its burn rate (tokens a
minute and cost an hour over its activity so far), its projection to the window's end at that rate, and the time
left; ``--live`` redraws it until Ctrl-C.

The figures are ``report``'s (:class:`~copilot_otel.commands.report.Tally`, an hour of one agent's use a row), joined
into windows here: an hour belongs to the window its start falls in, and a window's bounds are whole hours, so the
join is exact.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable
from datetime import tzinfo
from typing import Any, Literal

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from ..common import display
from ..settings.config import Config
from ..settings.moments import local_time, parse_window
from ..settings.report_defaults import Prices
from ..settings.repos import RepoFilter
from .report import HOUR_NS, Row, Tally, make_cut, parse_zone, read_tally

__all__ = ["BLOCK_NS", "Block", "blocks", "blocks_json", "windows"]

BLOCK_NS = 5 * HOUR_NS
_MINUTE_NS = 60 * 10**9


@dataclasses.dataclass
class Block:
    """One agent's 5-hour window.

    Attributes:
        start_ns, end_ns: Its bounds (whole hours, five apart).
        row: Its figures, first and last record times (``row.first_ns``, ``row.last_ns``) included.
        active: Now falls inside it.
    """

    agent: str
    start_ns: int
    end_ns: int
    row: Row
    active: bool = False

    def tokens(self) -> float:
        """Input (cached included, as the report counts them) and output tokens: what plans meter."""
        return self.row.value("input_tokens", 0.0) + self.row.value("output_tokens", 0.0)

    def burn(self, price: float) -> tuple[float, float] | None:
        """Tokens a minute and cost an hour over its activity so far (its first to its last record); ``None``
        when it has lasted under a minute (no rate to speak of)."""
        lasted = self.row.last_ns - self.row.first_ns
        if lasted < _MINUTE_NS:
            return None
        minutes = lasted / _MINUTE_NS
        return self.tokens() / minutes, self.row.value("cost_usd", price) / minutes * 60

    def projection(self, now_ns: int, price: float) -> tuple[float, float] | None:
        """Tokens and cost at the window's end if it burns on at its rate; ``None`` for a closed window or no rate."""
        rate = self.burn(price)
        if not self.active or rate is None:
            return None
        left_min = max(self.end_ns - now_ns, 0) / _MINUTE_NS
        return self.tokens() + rate[0] * left_min, self.row.value("cost_usd", price) + rate[1] * left_min / 60


def windows(tally: Tally, now_ns: int) -> list[Block]:
    """The tally's hours (a ``blocks`` cut) joined into each agent's windows, oldest first."""
    hours: dict[str, list[tuple[int, Row]]] = {}
    for key, row in tally.rows.items():
        agent, hour = key.rsplit(" ", 1)
        hours.setdefault(agent, []).append((int(hour) * HOUR_NS, row))
    found: list[Block] = []
    for agent, rows in hours.items():
        block: Block | None = None
        for start, row in sorted(rows, key=lambda item: item[0]):
            if block is None or start >= block.end_ns:
                block = Block(agent, start, start + BLOCK_NS, Row(f"{agent} {start}"))
                found.append(block)
            block.row.merge(row)
    for block in found:
        block.active = block.start_ns <= now_ns < block.end_ns
    found.sort(key=lambda b: (b.start_ns, b.agent))
    return found


def blocks(
    config: Config,
    paths: list[str],
    *,
    since: str | None = None,
    until: str | None = None,
    tz: str | None = None,
    agent: str | None = None,
    repo: str | None = None,
    prices: Prices | None = None,
    output: Literal["table", "json"] = "table",
    live: bool = False,
    interval_s: float = 5.0,
    now: Callable[[], int] = time.time_ns,
    progress: Literal["terminal", "always", "never"] = "terminal",
) -> int:
    """Print the windows (``--live``: the active ones, redrawn every ``interval_s`` until Ctrl-C; off a terminal,
    one snapshot). Returns the exit code (0).

    Raises:
        ConfigError: A bad ``since`` / ``until`` / ``tz``.
        SourceError: As ``report``'s.
    """
    import orjson

    prices = prices or Prices()
    price = prices.premium_request
    zone = parse_zone(tz)
    console = display.neutralise(Console(highlight=False, markup=False, emoji=False, soft_wrap=False))
    repo_filter = RepoFilter.parse(repo) if repo else None

    def read(now_ns: int) -> list[Block]:
        since_ns, until_ns = parse_window(since, until, now_ns=now_ns, zone=zone)
        if live:  # only what can still be in an active window: logs written in the last five hours
            since_ns = max(since_ns or 0, now_ns - BLOCK_NS - HOUR_NS)
        cut = make_cut(
            "blocks",
            zone=zone,
            since_ns=since_ns,
            until_ns=until_ns,
            now_ns=now_ns,
            agent=agent,
            repo=repo_filter,
            prices=prices,
        )
        found = windows(read_tally(config, cut, paths, progress="never" if live else progress), now_ns)
        return [b for b in found if b.active] if live else found

    if output == "json":
        now_ns = now()
        sys.stdout.write(
            orjson.dumps(blocks_json(read(now_ns), now_ns, price), option=orjson.OPT_INDENT_2).decode()
        )
        sys.stdout.write("\n")
        return 0
    if not live or not console.is_terminal:
        now_ns = now()
        console.print(render(read(now_ns), now_ns, zone, price, live))
        return 0
    from rich.live import Live

    with Live(console=console, auto_refresh=False, transient=False) as screen:
        try:
            while True:
                now_ns = now()
                screen.update(render(read(now_ns), now_ns, zone, price, live), refresh=True)
                time.sleep(interval_s)  # the refresh period, as `live` redraws
        except KeyboardInterrupt:
            pass
    return 0


def _clock(ns: int, zone: tzinfo | None, with_day: bool = True) -> str:
    return local_time(ns, zone).strftime("%Y-%m-%d %H:%M" if with_day else "%H:%M")


def render(found: list[Block], now_ns: int, zone: tzinfo | None, price: float, live: bool) -> Any:
    """The windows as a table, the active ones marked with their time left, rate and projection."""
    if not found:
        return Text("No active 5-hour window: no agent has used a model in the last five hours." if live else
                    "No usage in the logs read.")  # fmt: skip
    table = Table(
        title="5-hour windows" + (" (active)" if live else ""),
        title_justify="left",
        box=None,
        header_style="bold",
        pad_edge=False,
        padding=(0, 0, 0, 1),
    )
    for name, justify in (
        ("window", "left"), ("agent", "left"), ("state", "left"), ("tokens", "right"), ("cost $", "right"),
        ("tokens/min", "right"), ("$/h", "right"), ("at end: tokens", "right"), ("$", "right"),
    ):  # fmt: skip
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for block in found:
        rate = block.burn(price)
        projected = block.projection(now_ns, price)
        if block.active:
            state = Text(
                f"active, {display.duration((block.end_ns - now_ns) / 1e9)} left", style="bold green"
            )
        else:
            state = Text(f"ended (last {_clock(block.row.last_ns, zone, with_day=False)})", style="dim")
        table.add_row(
            f"{_clock(block.start_ns, zone)}-{_clock(block.end_ns, zone, with_day=False)}",
            block.agent,
            state,
            display.tokens(block.tokens()),
            f"{block.row.value('cost_usd', price):.2f}",
            f"{rate[0]:,.0f}" if rate else "-",
            f"{rate[1]:.2f}" if rate else "-",
            display.tokens(projected[0]) if projected else "",
            f"{projected[1]:.2f}" if projected else "",
        )
    return Group(table)


def blocks_json(found: list[Block], now_ns: int, price: float) -> dict[str, Any]:
    """The windows as one JSON document (times in Unix seconds and ISO 8601 UTC)."""
    from datetime import datetime, timezone

    def iso(ns: int) -> str:
        return datetime.fromtimestamp(ns / 1e9, timezone.utc).isoformat()

    out = []
    for block in found:
        rate = block.burn(price)
        projected = block.projection(now_ns, price)
        out.append(
            {
                "agent": block.agent,
                "start": iso(block.start_ns),
                "end": iso(block.end_ns),
                "first_activity": iso(block.row.first_ns),
                "last_activity": iso(block.row.last_ns),
                "active": block.active,
                "seconds_left": round((block.end_ns - now_ns) / 1e9) if block.active else None,
                "sessions": len(block.row.session_ids),
                "input_tokens": block.row.value("input_tokens", price),
                "output_tokens": block.row.value("output_tokens", price),
                "cache_read_tokens": block.row.value("cache_read_tokens", price),
                "cache_write_tokens": block.row.value("cache_write_tokens", price),
                "tokens": block.tokens(),
                "cost_usd": round(block.row.value("cost_usd", price), 6),
                "tokens_per_minute": round(rate[0], 3) if rate else None,
                "cost_per_hour_usd": round(rate[1], 6) if rate else None,
                "projected_tokens": round(projected[0]) if projected else None,
                "projected_cost_usd": round(projected[1], 6) if projected else None,
                "estimated": sorted(block.row.estimated),
            }
        )
    return {"now": iso(now_ns), "window_hours": BLOCK_NS // HOUR_NS, "blocks": out}
