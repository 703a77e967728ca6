"""``copilot-otel``: a thin shell over the library.

Parses arguments, builds a :class:`~copilot_otel.settings.config.Config`, calls one library function and turns
:class:`~copilot_otel.common.errors.CopilotOtelError` into one line on stderr and an exit code. No logic lives here.
"""

from __future__ import annotations

import sys

from .common.errors import interrupted as _interrupted

try:  # a Ctrl-C while the program is still loading (its first ~100 ms) is one line too, not a traceback
    import argparse
    import logging
    from collections.abc import Sequence
    from datetime import datetime
    from pathlib import Path
    from typing import Literal

    from ._platform import text_streams
    from ._version import __version__
    from .common import display
    from .common.errors import ConfigError, CopilotOtelError
    from .settings.config import AGENTS, Config, add_arguments, describe, did_you_mean, load_config
    from .settings.moments import parse_window
    from .settings.report_defaults import PERIODS, PRICE_HELP, parse_prices
except KeyboardInterrupt:
    raise SystemExit(_interrupted(sys.argv[1:])) from None

logger = logging.getLogger("copilot_otel")

_EXPORT = [
    "endpoint",
    "protocol",
    "output_file",
    "config_file",
    "log_level",
    "state_dir",
    "session_state",
    "runaway_turns",
]
# Whose logs a command reads with no path, and where each agent's are (replay, show, report, doctor).
_AGENTS = ["agents", "claude_code_home", "codex_home", "gemini_home"]
# Not --max-retry-time: the daemon never gives up on a batch (what it could not deliver yet is read again at the
# next start), so a time limit there would do nothing; replay and dead-letters resend take it.
_RUN = [
    *_EXPORT,
    *_AGENTS,
    "export_delay",
    "backfill",
    "idle_timeout",
    "rescan_interval",
    "prometheus_port",
    "prometheus_host",
]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="copilot-otel",
        description="Turn coding agents' session logs (GitHub Copilot CLI, Claude Code, Codex CLI, Gemini CLI) into "
        "OpenTelemetry traces, metrics and log events.",
    )
    parser.add_argument("--version", action="version", version=f"copilot-otel {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser(
        "replay",
        help="export existing session logs (backfill) and exit",
        description="Export every prompt of the given sessions; exits 0 only when the collector "
        "accepted all of it.",
    )
    p.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="session folder, events.jsonl, legacy <id>.jsonl, a session-state root, Claude Code's or Codex's "
        "folder (~/.claude, ~/.codex, ~/.gemini), or a session id (default: every log of the agents setting's agents)",
    )
    add_arguments(p, [*_EXPORT, *_AGENTS, "max_retry_time", "workers"])
    p.add_argument("--no-progress", action="store_true", help="do not show progress")
    _add_window_arguments(p)

    p = sub.add_parser(
        "run",
        help="follow every session as it is written (the daemon)",
        description="Backfill the history, then tail every Copilot CLI session live.",
    )
    add_arguments(p, _RUN)
    add_arguments(p, ["runaway_action", "runaway_dry_run", "webhook_format"])  # acting on a runaway

    p = sub.add_parser(
        "show",
        help="show a session's prompts as trees in the terminal (no backend needed)",
        description="Show a session without any backend; without an argument, list recent sessions.",
    )
    p.add_argument(
        "session",
        nargs="?",
        metavar="SESSION|PATH",
        help="session id (or prefix; a Claude Code session id, a Codex thread id too) or path",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON document: the session's spans, or the session list",
    )
    p.add_argument("--limit", type=_count, default=20, help="sessions to list (default 20; 0: all)")
    _add_agent_argument(p, "list only this agent's sessions")
    _add_repo_argument(p, "list only this repository's sessions")
    add_arguments(p, ["session_state", *_AGENTS, "config_file", "log_level", "runaway_turns"])

    _add_report_parser(sub)
    p = sub.add_parser(
        "live",
        help="what is burning now: premium requests against the quota, today's sessions, the running one",
        description="Redrawn in place until q or Ctrl-C; off a terminal (or with --once) one snapshot; "
        "--json: one JSON object per refresh, one per line. Reads the local logs only.",
    )
    p.add_argument("--interval", type=float, default=2.0, help="seconds between refreshes (default 2)")
    p.add_argument("--json", action="store_true", help="one JSON object per refresh, one per line")
    p.add_argument("--once", action="store_true", help="one snapshot, then exit")
    p.add_argument("--tz", help="IANA time zone 'today' is cut in, e.g. UTC (default: the local zone)")
    add_arguments(p, ["premium_quota", "session_state", "state_dir", "config_file", "log_level"])
    _add_dead_letters_parser(sub)

    p = sub.add_parser(
        "doctor",
        help="check the configuration and the collector, send a test span",
        description="Check configuration, reach the collector, send a test span; exit 0 when "
        "everything works.",
    )
    add_arguments(
        p,
        [
            "endpoint",
            "protocol",
            "output_file",
            "state_dir",
            "session_state",
            *_AGENTS,
            "config_file",
            "log_level",
        ],
    )
    p.add_argument(
        "--timeout", type=float, default=10.0, help="seconds to wait for the collector (default 10)"
    )

    p = sub.add_parser(
        "status",
        help="show what a running daemon is doing",
        description="Files tracked, backlog, last export, retries, dropped lines, detections.",
    )
    add_arguments(p, ["state_dir", "config_file", "log_level"])
    p.add_argument("--json", action="store_true", help="print the raw status as JSON")

    p = sub.add_parser(
        "statusline",
        help="one short line for Claude Code's statusLine hook (reads the hook's JSON on stdin)",
        description="The model, this session's cost, today's cost, the time left in the open 5-hour window and "
        "whether the daemon is delivering, from figures a background refresh keeps (so it answers at once). "
        'Configure it in ~/.claude/settings.json: {"statusLine": {"type": "command", "command": '
        '"copilot-otel statusline"}}.',
    )
    p.add_argument("--refresh", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--session-id", help=argparse.SUPPRESS)
    p.add_argument("--transcript", help=argparse.SUPPRESS)
    add_arguments(p, ["state_dir", "session_state", *_AGENTS, "config_file", "log_level"])

    p = sub.add_parser("config", help="print the effective configuration and where each value comes from")
    add_arguments(p, None)

    p = sub.add_parser("service", help="install or remove a user service running 'copilot-otel run'")
    p.add_argument("action", choices=["install", "uninstall", "status"])
    p.add_argument("--no-enable", action="store_true", help="write the unit file but do not enable it")
    p.add_argument(
        "--purge",
        action="store_true",
        help="with uninstall: also remove the state and config folders (listed first)",
    )
    p.add_argument(
        "--name",
        default="",
        help="a second service (copilot-otel-NAME), e.g. for a second Copilot home; its own state dir too",
    )
    add_arguments(p, ["config_file", "log_level", "state_dir", "session_state", "endpoint", "protocol"])
    return parser


# Every flag that takes a moment points to the one grammar (copilot_otel.settings.moments, README "Moments").
_MOMENT_HELP = "MOMENT: 2026-11-01, 20261101, 2026-11, 2026-11-01T09:00[+01:00], 7d, today… (README: Moments)"


def _add_agent_argument(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--agent", choices=AGENTS, metavar="NAME", help=f"{what}: {', '.join(AGENTS)}")


def _count(text: str) -> int:
    """A ``--limit``: a whole number, 0 or more (a negative one used to be taken silently as "all")."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {value}")
    return value


def _add_repo_argument(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--repo",
        metavar="NAME|PATH",
        help=f"{what}: owner/name or name, or a folder (the working folder at or under it)",
    )


def _add_window_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--since",
        metavar="MOMENT",
        help=f"only prompts that started at or after this moment, by the events' own time; {_MOMENT_HELP}",
    )
    p.add_argument(
        "--until",
        metavar="MOMENT",
        help=f"only prompts that started before this moment (a day: up to and including it); {_MOMENT_HELP}",
    )


class _TimestampFormatter(logging.Formatter):
    """Prefixes each line with its local time in ISO 8601 with milliseconds and the UTC offset."""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return datetime.fromtimestamp(record.created).astimezone().isoformat(timespec="milliseconds")


def _add_dead_letters_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "dead-letters",
        help="list, re-send or clear the records a collector permanently rejected",
        description="Records a collector refused (HTTP 400, partial success, INVALID_ARGUMENT) are kept in the "
        "state directory with the exact request and where it was refused; 'resend' posts them again there and "
        "removes what it accepted.",
    )
    p.add_argument("action", choices=["list", "resend", "clear"])
    p.add_argument(
        "--to-current",
        action="store_true",
        help="resend: send records another destination refused to the configured one (by default a resend "
        "goes only where each record was refused)",
    )
    add_arguments(
        p, ["endpoint", "protocol", "output_file", "max_retry_time", "state_dir", "config_file", "log_level"]
    )


def _add_report_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "report",
        help="add up usage from the logs on disk: daily, weekly, monthly, per session, repo or model",
        description="Sessions, prompts, tool calls, tokens, premium requests, AI units, lines changed and "
        "runaway detections per day, week, month, session, repository or model, with a total row. Reads the "
        "local logs only; nothing is sent anywhere.",
    )
    p.add_argument(
        "targets",
        nargs="*",
        metavar="[PERIOD] [SESSION|PATH ...]",
        help=f"what a row is: {', '.join(PERIODS)} (default daily); then session ids (or unique prefixes), "
        "session folders, events.jsonl files, session-state roots or another agent's folder (~/.claude, ~/.codex, ~/.gemini) "
        "(default: every log of the agents setting's agents)",
    )
    p.add_argument("--since", metavar="MOMENT", help=f"from this moment, in --tz; {_MOMENT_HELP}")
    p.add_argument(
        "--until", metavar="MOMENT", help=f"up to this moment (a day: up to and including it); {_MOMENT_HELP}"
    )
    p.add_argument("--tz", help="IANA time zone days are cut in, e.g. UTC (default: the local zone)")
    p.add_argument("--sort", help="key or a figure name, e.g. premium_requests (default: key for periods)")
    p.add_argument("--order", choices=["asc", "desc"], help="sort order (default: asc for key, else desc)")
    p.add_argument("--limit", type=_count, help="rows to show after sorting (the total counts all)")
    p.add_argument(
        "--price", action="append", metavar="USD|MODEL=IN,OUT[,CACHE_RD[,CACHE_WR]]", help=PRICE_HELP
    )
    p.add_argument(
        "--quota",
        type=float,
        help="monthly premium request allowance: show what is left (default: the premium_quota setting)",
    )
    p.add_argument(
        "--breakdown",
        action="store_true",
        help="under each row, one row per model (as ccusage's --breakdown); --json: each row's 'models'",
    )
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print one JSON document (docs/report.schema.json)")
    out.add_argument("--csv", action="store_true", help="print CSV: the JSON rows' keys, then a total row")
    out.add_argument(
        "--compact", action="store_true", help="the table with only sessions, prompts, tokens and cost"
    )
    out.add_argument(
        "--wide",
        action="store_true",
        help="the table with every figure, however wide (default: what fits the terminal; 80 columns piped)",
    )
    progress = p.add_mutually_exclusive_group()
    progress.add_argument(
        "--progress",
        action="store_true",
        help="say how far reading has got on stderr even when it is no terminal (default: only on a terminal)",
    )
    progress.add_argument("--no-progress", action="store_true", help="never say how far reading has got")
    p.add_argument(
        "--live",
        action="store_true",
        help="report blocks: the active 5-hour windows, redrawn every --interval seconds until Ctrl-C",
    )
    p.add_argument(
        "--interval",
        type=float,
        default=5.0,
        help="report blocks --live: seconds between redraws (default 5)",
    )
    p.add_argument(
        "--no-cache",
        action="store_true",
        help="read every log again and keep nothing (default: each session's figures are kept in the state "
        "directory's report-cache.db and only the logs that changed since are read)",
    )
    _add_agent_argument(p, "count only this agent's sessions ('report agent': a row per agent)")
    _add_repo_argument(p, "count only this repository's sessions")
    add_arguments(p, ["session_state", *_AGENTS, "state_dir", "config_file", "log_level", "runaway_turns"])


def _setup_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(display.SafeLogFilter())  # log content and URLs in messages: neutralised, masked
    # On a terminal someone watches the lines as they come; anywhere else (a service's log file, a pipe, a
    # container log) each line has to say when it happened.
    if sys.stderr.isatty():
        handler.setFormatter(logging.Formatter("copilot-otel: %(levelname)s: %(message)s"))
    else:
        handler.setFormatter(_TimestampFormatter("%(asctime)s copilot-otel: %(levelname)s: %(message)s"))
    root = logging.getLogger("copilot_otel")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
    # The SDK's exporters log every transient failure with their own wording; we report export trouble
    # ourselves (rate-limited), so theirs is only shown when debugging.
    sdk = logging.getLogger("opentelemetry")
    sdk.handlers[:] = [handler]
    sdk.setLevel(logging.DEBUG if level.lower() == "debug" else logging.CRITICAL)
    sdk.propagate = False


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    try:
        # A cp1252 console or a redirected stream gets ASCII glyphs instead of a UnicodeEncodeError.
        with text_streams():
            return _main(argv)
    except KeyboardInterrupt:  # before the command's own handling (building the parser, reading argv)
        return _interrupted(list(sys.argv[1:] if argv is None else argv))


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """``parser.parse_args``, but a flag the subcommand does not know is that subcommand's error: its usage, and
    the flag it most likely meant (argparse would print the top-level usage, which names no flag at all)."""
    args, unknown = parser.parse_known_args(argv)
    if not unknown:
        return args
    commands = next((a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)), {})
    target: argparse.ArgumentParser = commands.get(args.command, parser) if args.command else parser
    known = [flag for action in target._actions for flag in action.option_strings]
    # Flags share their "--": only a close match is a guess (--sinse: --since; --workers under report: none).
    hints = [did_you_mean(word.split("=", 1)[0], known, 0.8) for word in unknown if word.startswith("-")]
    hint = next((h for h in hints if h), "")
    target.error(f"unrecognized arguments: {' '.join(unknown)}{hint}")


def _main(argv: Sequence[str] | None) -> int:
    parser = _parser()
    args = _parse(parser, argv)
    if args.command is None:
        parser.print_help()
        return 2
    _setup_logging("info")
    try:
        config = load_config(vars(args))
        _setup_logging(config.log_level)
        return _dispatch(args, config)
    except CopilotOtelError as exc:
        print(f"copilot-otel: error: {display.message(str(exc))}", file=sys.stderr)
        if isinstance(exc, ConfigError) and args.command == "statusline" and args.refresh and args.state_dir:
            from .commands.statusline import record_problem

            # started in the background: nobody reads its stderr, the line says it
            record_problem(Path(args.state_dir), str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        return _interrupted(list(sys.argv[1:] if argv is None else argv))
    except BrokenPipeError:
        return 0


def _dispatch(args: argparse.Namespace, config: Config) -> int:
    if args.command == "replay":
        return _replay(args, config)
    if args.command == "config":
        width = max(len(name) for name, _, _ in describe(config))
        for name, value, source in describe(config):
            print(f"{name:<{width}}  {value}  ({source})")
        return 0
    # Each command's module is imported when that command runs: the others' start-up time (`--help`, `status`
    # and `config` never load the pipeline, `show` never loads the exporter).
    if args.command == "run":
        from .daemon.daemon import run

        return run(config)
    if args.command == "show":
        from .commands.show import show

        return show(
            config, args.session, as_json=args.json, limit=args.limit, agent=args.agent, repo=args.repo
        )
    if args.command == "report":
        import time

        from .commands.report import report, split_period

        prices = parse_prices(args.price)  # a bad price is refused before any log is read
        progress: Literal["terminal", "always", "never"] = (
            "never" if args.no_progress else "always" if args.progress else "terminal"
        )
        period, paths = split_period(args.targets, config.session_state)
        if period == "blocks":
            from .commands.blocks import blocks

            if args.csv or args.breakdown:
                raise ConfigError("report blocks prints a table or --json (no --csv, no --breakdown)")
            return blocks(
                config,
                paths,
                since=args.since,
                until=args.until,
                tz=args.tz,
                agent=args.agent,
                repo=args.repo,
                prices=prices,
                output="json" if args.json else "table",
                live=args.live,
                interval_s=args.interval,
                progress=progress,
            )
        if args.live:
            raise ConfigError(
                "--live redraws 'report blocks'; for the other periods, see 'copilot-otel live'"
            )
        return report(
            config,
            period,
            paths=paths,
            since=args.since,
            until=args.until,
            tz=args.tz,
            sort=args.sort,
            order=args.order,
            limit=args.limit,
            price=prices.premium_request,
            prices=prices,
            quota=args.quota if args.quota is not None else config.premium_quota,
            output="json" if args.json else "csv" if args.csv else "table",
            now_ns=time.time_ns(),
            breakdown=args.breakdown,
            layout="wide" if args.wide else "compact" if args.compact else "fit",
            progress=progress,
            agent=args.agent,
            repo=args.repo,
            cache=not args.no_cache,
        )
    if args.command == "live":
        from .commands.live import live

        return live(config, interval_s=args.interval, as_json=args.json, once=args.once, tz=args.tz)
    if args.command == "doctor":
        from .commands.doctor import doctor

        return doctor(config, timeout_s=args.timeout)
    if args.command == "statusline":
        from .commands import statusline

        if args.refresh:
            return statusline.refresh(config, args.session_id, args.transcript)
        # a default config file that is not there is no flag to give the refresh
        given = str(config.config_file) if config.config_file.is_file() else None
        return statusline.answer(config.state_dir, given, statusline.read_stdin())
    if args.command == "status":
        from .commands.status import print_status

        return print_status(config, as_json=args.json)
    if args.command == "dead-letters":
        from .commands.dead_letters import command

        return command(config, args.action, to_current=args.to_current)
    if args.command == "service":
        from .commands.service import service

        return service(config, args.action, enable=not args.no_enable, name=args.name, purge=args.purge)
    raise AssertionError(args.command)


def _replay(args: argparse.Namespace, config: Config) -> int:
    import time

    from .replay import Progress, replay  # each command's module is imported when it runs (start-up time)

    now_ns = time.time_ns()
    since_ns, until_ns = parse_window(args.since, args.until, now_ns=now_ns)
    paths = args.paths  # none: every enabled agent's folder (replay discovers them)
    show_progress = not args.no_progress
    bar = None
    on_progress = None
    if show_progress and sys.stderr.isatty():
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            TextColumn,
            TimeElapsedColumn,
        )
        from rich.progress import (
            Progress as Bar,
        )

        bar = Bar(
            TextColumn("replaying"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("sessions"),
            TextColumn("{task.fields[events]} events, {task.fields[rate]} events/s"),
            TimeElapsedColumn(),
            transient=True,
        )
        task = bar.add_task("replay", total=None, events=0, rate=0)
        bar.start()

        def on_progress(p: Progress) -> None:
            bar.update(
                task,
                completed=p.sessions_done,
                total=p.sessions_total,
                events=p.events,
                rate=int(p.events / p.elapsed_s) if p.elapsed_s else 0,
            )
    elif show_progress:
        last = [0.0]

        def on_progress(p: Progress) -> None:
            # Plain lines when not on a terminal: one every 2 s at most, and one at the end.
            if p.elapsed_s - last[0] >= 2.0 or p.sessions_done == p.sessions_total:
                last[0] = p.elapsed_s
                rate = int(p.events / p.elapsed_s) if p.elapsed_s else 0
                print(
                    f"copilot-otel: replayed {p.sessions_done}/{p.sessions_total} sessions, {p.events} events "
                    f"({rate}/s)",
                    file=sys.stderr,
                )

    try:
        report = replay(paths, config, on_progress=on_progress, since_ns=since_ns, until_ns=until_ns)
    finally:
        if bar is not None:
            bar.stop()
    if report.exit_code:
        print(f"copilot-otel: error: {display.message(report.summary())}", file=sys.stderr)
    else:
        print(f"copilot-otel: {display.message(report.summary())}")
    return report.exit_code
