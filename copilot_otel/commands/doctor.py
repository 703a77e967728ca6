"""``copilot-otel doctor``: check the configuration, reach the collector, send a test span, say what to fix.

Each check prints one line: a mark (``✓``/``✗``/``!`` on a terminal, ``ok``/``FAIL``/``warn`` otherwise), what
was checked, what was found and, when something is wrong, what to do about it. Header values are never shown,
only whether they are set. The exit code is 0 when no check failed (warnings do not fail), else 1.

The test span, then a test log event and a test metric point (for each signal that is enabled), go through the
exporter ``run`` and ``replay`` use (:class:`~copilot_otel.deliver.telemetry.Telemetry` built from the same config), so
"doctor passes" means "the daemon's spans, log events and metrics will arrive". The test trace id is printed
so the span can be looked up in the backend.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from rich.console import Console
from rich.text import Text

from .._platform import current
from ..common import display
from ..common.errors import CopilotOtelError, SourceError, StateError
from ..daemon.act import describe_policy
from ..daemon.state import StateStore, stored_checkpoints
from ..deliver import tls
from ..deliver.deadletter import describe as describe_dead_letters
from ..deliver.export import REJECTS_EVERY_REQUEST, Signal
from ..deliver.metrics import Aggregator
from ..deliver.outcome import Delivery
from ..deliver.probe import PLAIN_HTTP_NOT_GRPC, host_port, protocol_mismatch
from ..deliver.telemetry import Telemetry, resource_attributes
from ..library import (
    AGENT_TITLES,
    NOT_READ_LOGS,
    discover,
    not_read_in,
    setting_flag,
    source_logs,
    subagent_parts,
)
from ..model.records import LogRecord, Severity, SpanKind, SpanRecord
from ..projections import catalog
from ..settings.config import Config, capture_state, describe
from ..settings.roots import not_read_line
from ..sources import Source, agent_roots, loop_source
from ..sources.sessions import SessionFile, pid_alive, scan_root, unreadable_sessions

__all__ = ["Check", "Mark", "doctor", "run_checks"]

TEST_SPAN_NAME = "copilot-otel doctor"
#: The test log event's ``event.name`` and the test metric's name (a counter of 1; doctor's probes only).
TEST_EVENT_NAME = catalog.DOCTOR_EVENT
TEST_METRIC_NAME = catalog.DOCTOR_METRIC
_SUGGESTED_ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318"
# How a permanent refusal reads (HTTP 4xx but 429, gRPC codes that retrying cannot fix), as opposed to an outage.
_PERMANENT = (
    "does not accept",
    "HTTP 400",
    "HTTP 401",
    "HTTP 403",
    "HTTP 404",
    "HTTP 405",
    "HTTP 413",
    "HTTP 415",
    "UNIMPLEMENTED",
    "INVALID_ARGUMENT",
    "PERMISSION_DENIED",
    "UNAUTHENTICATED",
    "NOT_FOUND",
)
# Bytes read from the collector port when sniffing which protocol it speaks after a failed export.


class Mark(str, enum.Enum):
    """The verdict of one check."""

    OK = "ok"
    WARN = "warn"
    FAIL = "fail"


_GLYPHS = {Mark.OK: ("✓", "green"), Mark.WARN: ("!", "yellow"), Mark.FAIL: ("✗", "bold red")}
_PLAIN = {Mark.OK: "ok  ", Mark.WARN: "warn", Mark.FAIL: "FAIL"}


@dataclass(frozen=True, slots=True)
class Check:
    """One line of the report: ``what`` was checked, what was ``found``, and the ``fix`` when not OK."""

    mark: Mark
    what: str
    found: str
    fix: str = ""


def doctor(config: Config, timeout_s: float = 10.0) -> int:
    """Run every check, print one line each, and return 0 when none failed (1 otherwise)."""
    console = display.neutralise(Console(highlight=False, markup=False, emoji=False, soft_wrap=True))
    glyphs = console.is_terminal
    failed = 0
    for check in run_checks(config, timeout_s):
        failed += check.mark is Mark.FAIL
        console.print(_line(check, glyphs))
    if failed:
        console.print(f"{failed} check{'s' if failed > 1 else ''} failed.", style="bold red")
        return 1
    console.print("All checks passed.", style="green")
    return 0


def _line(check: Check, glyphs: bool) -> Text:
    text = Text()
    if glyphs:
        glyph, style = _GLYPHS[check.mark]
        text.append(glyph, style=style)
    else:
        text.append(_PLAIN[check.mark])
    text.append(f" {check.what}: ", style="bold")
    text.append(check.found)
    if check.fix:
        text.append(f" — {check.fix}", style="yellow" if check.mark is Mark.WARN else "red")
    return text


def run_checks(config: Config, timeout_s: float = 10.0) -> Iterator[Check]:
    """The checks, in order; each is yielded as soon as it is done so slow ones show progress."""
    shown = {name: (value, source) for name, value, source in describe(config)}
    yield _config_file(config)
    yield _capture(config)
    yield _runaway_action(config)
    yield _state_dir(config.state_dir)
    yield from _daemon_checks(config.state_dir)
    yield (
        _session_logs(config.session_state)
        if "copilot" in config.agents
        else _switched_off(config, "copilot")
    )
    yield from _other_agents(config)
    yield from _not_read(config)
    if config.endpoint is None:
        yield Check(
            Mark.OK,
            "endpoint",
            "none set: telemetry goes to the embedded OTLP/JSON file (the OpenTelemetry Collector "
            "file-exporter format), nothing is sent over the network",
            "",
        )
        yield _writable_file(
            "embedded file",
            config.embedded_output or config.state_dir / "otlp.jsonl",
            f"to send to a collector instead, set {_SUGGESTED_ENDPOINT}",
        )
        return
    yield _endpoint(config, *shown["endpoint"])
    protocol = _protocol(config)
    yield protocol
    header_source = config.sources.get("otlp_headers", "default")
    yield Check(
        Mark.OK,
        "headers",
        f"set by {header_source.removeprefix('env ')} (values not shown)"
        if config.otlp_headers_set
        else "not set (fine unless the collector needs an API key or token)",
    )
    if tls.uses_tls(config.endpoint, config.protocol, config.otlp("traces")):
        yield _tls(config)
    if config.output_file is not None:
        yield _writable_file("output file", config.output_file, "")
    if protocol.mark is Mark.FAIL:
        yield Check(Mark.FAIL, "test span", "not sent", "fix the protocol first")
        return
    reach = _reach(config.endpoint, config.protocol, timeout_s)
    yield reach
    if reach.mark is Mark.FAIL:
        yield Check(Mark.FAIL, "test span", "not sent", "the collector cannot be reached")
        return
    yield from _test_export(config, timeout_s)


# ----------------------------------------------------------------------------------------------- local checks
def _config_file(config: Config) -> Check:
    source = config.sources.get("config_file", "default")
    if source.startswith("default") and not config.config_file.exists():
        return Check(
            Mark.OK,
            "config file",
            f"{config.config_file} not found (optional: flags, environment variables and defaults are used)",
        )
    return Check(Mark.OK, "config file", f"{config.config_file} ({source})")


def _runaway_action(config: Config) -> Check:
    """What a runaway detection does; a warning where it cannot do what was asked (see daemon/act.py)."""
    import shutil

    policy = config.runaway_action
    source = config.sources.get("runaway_action", "default")
    if not policy.active:
        return Check(Mark.OK, "runaway action", f"none: detections are only reported ({source})")
    found = describe_policy(policy, config.runaway_dry_run, config.runaway_action_repositories)
    found = found.removeprefix("runaway action: ") + f" ({source})"
    channels = []
    if config.notify_desktop:
        channels.append("desktop")
    if config.notify_webhook:
        channels.append(f"webhook {urlsplit(config.notify_webhook).hostname} ({config.webhook_format})")
    found += "; notifies: " + (", ".join(channels) or "the log only")
    if policy.interrupts and not current.can_interrupt:
        return Check(
            Mark.WARN, "runaway action", found, f"{current.name} cannot interrupt the CLI: it notifies"
        )
    if config.notify_desktop and current.notification_command("t", "b", shutil.which) is None:
        return Check(
            Mark.WARN,
            "runaway action",
            found,
            "no desktop notification command (notify-send or gdbus) on PATH; set notify_desktop = false "
            "or COPILOT_OTEL_NOTIFY_WEBHOOK",
        )
    return Check(Mark.OK, "runaway action", found)


def _capture(config: Config) -> Check:
    """Which content leaves the machine: off is fine; on is a warning, so nobody ships prompts unaware."""
    state = capture_state(config)
    if not state.on:
        return Check(Mark.OK, "content capture", f"{state.summary} ({state.source})")
    return Check(
        Mark.WARN,
        "content capture",
        f"{state.summary} ({state.source})",
        "intended? unset OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT and COPILOT_OTEL_CAPTURE_* "
        "to keep content on this machine",
    )


def _endpoint(config: Config, shown: str, source: str) -> Check:
    """The endpoint in effect; a base URL that already names the traces path is a mistake (the exporters
    append ``/v1/traces``, ``/v1/metrics``, ``/v1/logs`` themselves), except in the per-signal variable."""
    path = urlsplit(config.endpoint or "").path.rstrip("/")
    if (
        config.protocol != "grpc"
        and path.endswith(("/v1/traces", "/v1/metrics", "/v1/logs"))
        and source != "env OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    ):
        base = shown.rstrip("/").rsplit("/v1/", 1)[0]
        return Check(
            Mark.FAIL,
            "endpoint",
            f"{shown} ({source}) ends in {path[path.rindex('/v1/') :]}",
            f"give the base URL {base}: the signal paths (/v1/traces, /v1/metrics, /v1/logs) are appended "
            "to it (or set OTEL_EXPORTER_OTLP_TRACES_ENDPOINT to the full traces URL)",
        )
    return Check(Mark.OK, "endpoint", f"{shown} ({source})")


def _state_dir(path: Path) -> Check:
    try:
        _probe_directory(path)
        problem = current.private_dir_problem(path)
    except OSError as exc:
        return Check(
            Mark.FAIL,
            "state dir",
            f"{path} is not writable ({exc.strerror or exc})",
            "set --state-dir or COPILOT_OTEL_STATE_DIR to a directory you can write",
        )
    if problem is not None:
        return Check(
            Mark.FAIL,
            "state dir",
            f"{path} {problem}",
            "the daemon refuses a state directory other users could plant files or links in",
        )
    try:  # read-only: a running daemon is not disturbed
        stored = stored_checkpoints(path)
    except StateError as exc:
        return Check(
            Mark.WARN,
            "state dir",
            str(exc),
            "the daemon sets a damaged database aside at its next start and reads every session log again "
            "(the same ids: nothing is lost, a backend may see data twice)",
        )
    held = f" ({stored} checkpoint{'' if stored == 1 else 's'})" if stored is not None else ""
    return Check(Mark.OK, "state dir", f"{path} is writable{held}")


def _daemon_checks(state_dir: Path) -> Iterator[Check]:
    """What a running daemon and the state directory say needs attention (nothing when all is well)."""
    dead = describe_dead_letters(state_dir)
    if dead:
        yield Check(
            Mark.WARN,
            "dead letters",
            dead,
            "see them with 'copilot-otel dead-letters list', send them again with 'copilot-otel dead-letters "
            "resend' once the collector accepts them, or drop them with 'copilot-otel dead-letters clear'",
        )
    try:
        status = StateStore.read_status(state_dir)
    except CopilotOtelError:
        return
    pid = status.get("pid") if status else None
    if not status or not isinstance(pid, int) or not pid_alive(pid):
        return
    discovery = str(status.get("discovery") or "")
    if discovery.startswith("polling ("):
        yield Check(
            Mark.WARN,
            "file watching",
            f"the daemon (pid {pid}) is {discovery}: new lines are found by polling, at most a few seconds late",
            "raise the limit (sysctl fs.inotify.max_user_watches=524288) and restart the daemon",
        )


def _probe_directory(path: Path) -> None:
    """Create ``path`` if needed and prove a file can be written in it (removed again)."""
    path.mkdir(parents=True, exist_ok=True)
    probe = path / f".doctor-{os.getpid()}.tmp"
    try:
        with open(probe, "wb") as fh:
            fh.write(b"ok")
    finally:
        with contextlib.suppress(OSError):
            probe.unlink()


def _session_logs(root: Path) -> Check:
    if not root.exists():
        return Check(
            Mark.WARN,
            "session logs",
            f"{root} does not exist yet",
            "fine if the Copilot CLI has not run as this user yet (the daemon waits for it); "
            "otherwise set --session-state or COPILOT_OTEL_SESSION_STATE",
        )
    try:
        sessions = scan_root(root)
        if not root.is_dir():
            raise SourceError(f"cannot read session folder {root}: not a directory")
    except SourceError as exc:
        return Check(
            Mark.FAIL,
            "session logs",
            str(exc),
            "set --session-state or COPILOT_OTEL_SESSION_STATE to the Copilot CLI's session-state folder",
        )
    found = f"{len(sessions)} session{'s' if len(sessions) != 1 else ''} in {root}"
    bad = unreadable_sessions(root)
    if bad:
        reasons = "; ".join(f"{session.session_id}: {reason}" for session, reason in bad[:3])
        more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
        return Check(
            Mark.WARN,
            "session logs",
            f"{found}, {len(bad)} unreadable ({reasons}{more})",
            "these are skipped until they can be read",
        )
    return Check(Mark.OK, "session logs", found)


def _switched_off(config: Config, agent: str) -> Check:
    root = next(root for root in agent_roots(config) if root.agent == agent)
    what = "session logs" if agent == "copilot" else f"{AGENT_TITLES[agent]} logs"
    return Check(
        Mark.OK,
        what,
        f"{root.logs} not read: switched off by the agents setting (--agents, COPILOT_OTEL_AGENTS)",
    )


def _other_agents(config: Config) -> Iterator[Check]:
    """One line per other coding agent (Claude Code, Codex CLI, Gemini CLI): its folder, there or not or switched off by the
    ``agents`` setting, and how many session logs it holds. A missing folder is an agent not installed: fine."""
    for root in agent_roots(config):
        if root.source is None:
            continue  # Copilot's: the "session logs" line
        what = f"{AGENT_TITLES[root.agent]} logs"
        flag = setting_flag(root.setting)
        if not root.enabled:
            yield _switched_off(config, root.agent)
        elif not root.found:
            yield Check(
                Mark.OK,
                what,
                f"{root.logs} does not exist (fine if {AGENT_TITLES[root.agent]} has not run as this user; "
                f"{flag} says where its folder is)",
            )
        else:
            yield _agent_logs(what, root.source, root.logs, flag)


def _agent_logs(what: str, source: Source, logs: Path, flag: str) -> Check:
    try:
        found = source_logs(source, logs.parent)
    except SourceError as exc:
        return Check(Mark.FAIL, what, str(exc), f"make it readable, or set {flag} to {what[:-5]}'s folder")
    # A sub-agent's file (Claude Code's, Gemini's) or thread (Codex's) is part of its session, as report counts it.
    subagents = len(
        subagent_parts([SessionFile(log.session_id, log.path, None, log.source.value) for log in found])
    )
    sessions = len(found) - subagents
    text = f"{display.count(sessions, 'session')} in {logs}"
    if subagents:
        text += f" (and {display.count(subagents, 'sub-agent file')})"
    if found and loop_source(source) is None:
        return Check(
            Mark.WARN,
            what,
            f"{text}; this version cannot fold them yet",
            "they are skipped until its reader is wired",
        )
    return Check(Mark.OK, what, text)


def _not_read(config: Config) -> Iterator[Check]:
    """Drift: one line per agent and CLI version whose newest logs hold records of kinds its reader does not
    read (what those say is not exported); nothing when no log is found (the lines above say where)."""
    try:
        sessions = discover(config, subagents=True).sessions
    except SourceError:
        return  # the session logs' line says why
    if not sessions:
        return
    found = not_read_in(sessions)
    if not found:
        yield Check(
            Mark.OK, "record kinds", f"every kind in each agent's {NOT_READ_LOGS} newest logs is read"
        )
        return
    for (agent, version), kinds in sorted(found.items(), key=lambda item: str(item[0])):
        yield Check(
            Mark.WARN,
            "record kinds",
            not_read_line(agent, version, kinds),
            "what they say is not exported; docs/other-agents.md lists the CLI versions each reader was "
            "recorded against",
        )


def _writable_file(what: str, path: Path, note: str) -> Check:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "ab"):
            pass  # opening for append proves we can write without touching what is there
        size = path.stat().st_size
    except OSError as exc:
        return Check(
            Mark.FAIL,
            what,
            f"{path} is not writable ({exc.strerror or exc})",
            "set --output-file / --state-dir to a writable place",
        )
    found = f"{path} is writable ({size:,} bytes so far)"
    return Check(Mark.OK, what, f"{found}; {note}" if note else found)


def _protocol(config: Config) -> Check:
    source = config.sources.get("protocol", "default")
    port = urlsplit(config.endpoint or "").port
    if config.protocol == "grpc" and port == 4318:
        return Check(
            Mark.WARN,
            "protocol",
            f"grpc ({source}) to port 4318",
            "4318 is the usual OTLP/HTTP port: use --protocol http/protobuf, or port 4317 for gRPC",
        )
    if config.protocol != "grpc" and port == 4317:
        return Check(
            Mark.WARN,
            "protocol",
            f"{config.protocol} ({source}) to port 4317",
            "4317 is the usual OTLP/gRPC port: use --protocol grpc, or port 4318 for HTTP",
        )
    return Check(Mark.OK, "protocol", f"{config.protocol} ({source})")


# ------------------------------------------------------------------------------------------------ network
def _reach(endpoint: str, protocol: str, timeout_s: float) -> Check:
    host, port = host_port(endpoint)
    where = f"{host}:{port}"
    try:
        with socket.create_connection((host, port), timeout=min(timeout_s, 5.0)):
            pass
    except socket.gaierror as exc:
        return Check(
            Mark.FAIL,
            "collector",
            f"cannot resolve {host} ({exc.strerror or exc})",
            "check the host name in the endpoint",
        )
    except ConnectionRefusedError:
        port_hint = "4317" if protocol == "grpc" else "4318"
        scheme_port = f"http://localhost:{port_hint}"
        return Check(
            Mark.FAIL,
            "collector",
            f"connection refused at {where}",
            f"is the collector running? try OTEL_EXPORTER_OTLP_ENDPOINT={scheme_port}"
            + (f" with OTEL_EXPORTER_OTLP_PROTOCOL={protocol}" if protocol == "grpc" else ""),
        )
    except TimeoutError:
        return Check(
            Mark.FAIL,
            "collector",
            f"no answer from {where} within {min(timeout_s, 5.0):g}s",
            "is the host right and the port open (firewall, VPN, proxy)?",
        )
    except OSError as exc:
        return Check(
            Mark.FAIL,
            "collector",
            f"cannot connect to {where} ({exc.strerror or exc})",
            "is the collector running and the endpoint right?",
        )
    return Check(Mark.OK, "collector", f"{where} accepts connections")


@contextlib.contextmanager
def _quiet_export_logs() -> Iterator[None]:
    """The sender logs retries and dead letters for the daemon's log; doctor reports them itself."""
    log = logging.getLogger("copilot_otel.deliver.export")
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        log.setLevel(level)


def _test_export(config: Config, timeout_s: float) -> Iterator[Check]:
    """Send a test span, then a test log event and metric point (when those signals are on), one check each."""
    try:
        telemetry = Telemetry.from_config(config, with_metrics=False)
    except CopilotOtelError as exc:
        yield Check(Mark.FAIL, "test span", "not sent", str(exc))
        return
    sender = telemetry.sender
    sender.dead_letter = None  # a rejected probe is reported here, not kept
    sender.timeout_s = min(sender.timeout_s, max(timeout_s, 0.5))
    now = time.time_ns()
    trace_id = int.from_bytes(os.urandom(16), "big") or 1
    span = SpanRecord(
        trace_id=trace_id,
        span_id=int.from_bytes(os.urandom(8), "big") or 1,
        parent_span_id=None,
        name=TEST_SPAN_NAME,
        kind=SpanKind.INTERNAL,
        start_ns=now,
        end_ns=now + 1_000_000,
        attributes={catalog.DOCTOR_EVENT: True},
    )
    event = LogRecord(
        event_name=TEST_EVENT_NAME,
        time_ns=now,
        severity=Severity.INFO,
        body="copilot-otel doctor test event",
        attributes={catalog.DOCTOR_EVENT: True},
        trace_id=trace_id,
        span_id=span.span_id,
    )
    probes = Aggregator()
    probes.count(TEST_METRIC_NAME, 1)
    metric_body = probes.encode(resource_attributes(config), now, now + 1_000_000)
    try:
        with _quiet_export_logs():
            started = time.monotonic()
            outcome = sender.deliver([span], max_retry_s=timeout_s)
            took = time.monotonic() - started
            span_check = _verdict(
                config, "test span", outcome, sender.stats.last_error, timeout_s, telemetry.description
            )
            if span_check.mark is Mark.OK:
                span_check = Check(
                    Mark.OK,
                    "test span",
                    f"accepted by {telemetry.description} in {took:.2f}s; trace id {trace_id:032x} "
                    f"(span {TEST_SPAN_NAME!r}: look it up in your backend)",
                )
            yield span_check
            if span_check.mark is Mark.FAIL:
                return
            if config.logs_enabled:
                outcome = sender.deliver([], [event], max_retry_s=timeout_s)
                yield _verdict(config, "test log event", outcome, sender.stats.last_error, timeout_s, "")
            else:
                yield Check(Mark.OK, "test log event", "not sent: log events are off (logs_enabled false)")
            if config.metrics_enabled:
                outcome = sender.deliver_body(Signal.METRICS, metric_body, max_retry_s=timeout_s)
                yield _verdict(config, "test metric", outcome, sender.stats.last_error, timeout_s, "")
            else:
                yield Check(Mark.OK, "test metric", "not sent: metrics are off (metrics_enabled false)")
    finally:
        telemetry.close()


def _tls(config: Config) -> Check:
    """What the collector's certificate is checked against, per signal when they differ, and mTLS."""
    found = []
    for signal in ("traces", "logs", "metrics"):
        options = config.otlp(signal)
        line = tls.trust_source(options)
        if options.client_certificate is not None:
            line += f", client certificate {options.client_certificate}"
        found.append((signal, line))
    lines = {line for _, line in found}
    text = found[0][1] if len(lines) == 1 else "; ".join(f"{signal}: {line}" for signal, line in found)
    return Check(Mark.OK, "tls", f"the collector's certificate is checked against {text}")


def _verdict(
    config: Config, what: str, outcome: Delivery, last_error: str, timeout_s: float, description: str
) -> Check:
    """One probe's check line from its delivery outcome."""
    if outcome.delivered and not outcome.dead_lettered:
        return Check(Mark.OK, what, f"accepted{' by ' + description if description else ''}")
    error = outcome.error or last_error
    if error.startswith(tls.FAILURE_PREFIX):  # says what to set itself, unless the port speaks no TLS at all
        hint = _failure_hint(config, error, timeout_s)
        return Check(Mark.FAIL, what, error, "" if hint == _GENERIC_HINT else hint)
    signal = {"test log event": "logs", "test metric": "metrics"}.get(what)
    if signal and (outcome.delivered or any(marker in error for marker in _PERMANENT)):
        # The traces went through, so the endpoint is right: this signal is what the backend refuses.
        return Check(
            Mark.FAIL,
            what,
            f"refused: {error}",
            f"the collector takes traces but not {signal} (a traces-only backend?): point "
            f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT at one that does, or set "
            f"COPILOT_OTEL_{signal.upper()}=false",
        )
    if outcome.delivered or REJECTS_EVERY_REQUEST in error:  # dead-lettered, or everything is: a rejection
        return Check(Mark.FAIL, what, f"rejected by the collector: {error}", _rejection_hint(config, error))
    hint = _failure_hint(config, error, timeout_s)
    # a transport that found the wrong protocol already said what to change: not twice
    return Check(
        Mark.FAIL, what, f"not accepted within {timeout_s:g}s: {error}", "" if hint in error else hint
    )


def _rejection_hint(config: Config, error: str) -> str:
    if "HTTP 404" in error or "UNIMPLEMENTED" in error:
        if config.protocol == "grpc":
            return "this port has no OTLP trace service: is it the collector's gRPC port (usually 4317)?"
        return (
            "wrong path or port: give the base URL (http://host:4318, without /v1/traces) of the "
            "collector's OTLP/HTTP port; a gRPC port (4317) needs --protocol grpc"
        )
    if (
        "HTTP 401" in error
        or "HTTP 403" in error
        or "UNAUTHENTICATED" in error
        or "PERMISSION_DENIED" in error
    ):
        state = "are set but were refused" if config.otlp_headers_set else "are not set"
        return (
            f"the collector wants credentials: OTEL_EXPORTER_OTLP_HEADERS {state} "
            "(e.g. 'authorization=Bearer …')"
        )
    if "HTTP 415" in error:
        return "the endpoint does not take OTLP/protobuf: is it an OTLP receiver?"
    if "HTTP 400" in error and "plain HTTP" in error.lower():
        return "the port speaks HTTPS: use an https:// endpoint"
    return (
        "the collector refused the data as invalid: check that the endpoint is an OTLP traces receiver and "
        "look at the collector's log"
    )


def _failure_hint(config: Config, error: str, timeout_s: float) -> str:
    endpoint = config.endpoint or ""
    mismatch = protocol_mismatch(endpoint, config.protocol, min(timeout_s, 3.0))
    if mismatch is not None:
        return mismatch
    if config.protocol == "grpc":
        if "Failed parsing HTTP/2" in error:
            return PLAIN_HTTP_NOT_GRPC
        if endpoint.lower().startswith("https://") and (
            "WRONG_VERSION" in error or "handshake" in error.lower()
        ):
            return "the collector speaks plain (non-TLS) gRPC there: use an http:// endpoint"
    if "HTTP 503" in error or "UNAVAILABLE" in error or "HTTP 429" in error or "RESOURCE_EXHAUSTED" in error:
        return (
            "the collector is up but not accepting data (overloaded or its pipeline is failing): "
            "check its log"
        )
    if "no answer" in error or "DEADLINE_EXCEEDED" in error:
        return f"the collector did not answer in time: raise --timeout (now {timeout_s:g}s) or check its load"
    if "cannot connect" in error:
        return f"is the collector running and the endpoint right? try {_SUGGESTED_ENDPOINT}"
    return _GENERIC_HINT


_GENERIC_HINT = "check the endpoint, protocol and the collector's log"
