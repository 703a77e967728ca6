"""Settings: one declarative table, resolved CLI flag > env var > config file > default.

Every setting is declared exactly once in :data:`SETTINGS` (name, flags, env vars, whether the config file may
set it, parser, default, one line of help, whether it is secret or decides what content leaves the machine).
:func:`add_arguments` builds argparse flags from the table, :func:`load_config` resolves every setting into a
frozen :class:`Config`, :func:`describe` renders it for ``copilot-otel config`` (value and source),
and :func:`settings_markdown` writes the settings table of docs/configuration.md. Every switch goes through the one
boolean parser (``true``/``false``, ``1``/``0``, ``yes``/``no``, ``on``/``off``).

Precedence, highest first (as logfire's ``load_param``):

1. a CLI flag (``cli`` mapping, e.g. ``vars(args)``; ``None`` means "not given"),
2. the setting's environment variables, in the order listed (an empty value counts as unset); for a per-signal
   setting (``signal_env``) the signal's own variable first, as the OTLP exporter specification says
   (``OTEL_EXPORTER_OTLP_LOGS_TIMEOUT`` > ``OTEL_EXPORTER_OTLP_TIMEOUT``),
3. the TOML config file (``--config``, ``COPILOT_OTEL_CONFIG`` or
   ``$XDG_CONFIG_HOME/copilot-otel/config.toml``),
4. the default.

The OTLP request settings (headers, timeout, compression, TLS files) are read here and nowhere else: every
transport, for every signal, gets them as :class:`OtlpOptions` (:meth:`Config.otlp`). Header values may hold
credentials: they are kept in a :class:`Headers` whose ``repr`` hides them, ``config`` shows only whether they
are set, and an error about a secret setting does not quote its value. The endpoints too: ``endpoint`` (where
traces go, and whether anything is sent at all) and ``otlp_endpoint`` (each signal's own
``OTEL_EXPORTER_OTLP_<SIGNAL>_ENDPOINT``) are resolved here, once, into the URL each signal is sent to
(:meth:`Config.signal_endpoints`), which ``copilot-otel config`` shows with its source.

Every bad value fails at load with a :class:`~copilot_otel.common.errors.ConfigError` that names where the value came
from and quotes it, e.g. ``Expected OTEL_EXPORTER_OTLP_PROTOCOL to be one of grpc, http/protobuf, got
'udp'``.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from types import MappingProxyType
from typing import Any, Generic, Literal, TypeVar, get_args
from urllib.parse import urlsplit

from ..common import display
from ..common.errors import ConfigError
from .content import (
    CAPTURE_ENV,
    CAPTURE_MODES,
    CAPTURE_MODES_HELP,
    DEFAULT_MAX_LENGTH,
    EMIT_EVENT_ENV,
    KIND_ENV,
    MASTER_KINDS,
    MAX_LENGTH_ENV,
    MIN_MAX_LENGTH,
    ContentKind,
    ContentPolicy,
)
from .locate import (
    CONFIG_ENV,
    CONFIG_FLAG,
    CONFIG_NAME,
    STATE_DIR_ENV,
    STATE_DIR_FLAG,
    default_dirs,
    expand,
    home,
    toml_module,
)
from .moments import FORMS, parse_moment
from .policy import RunawayPolicy as _RunawayPolicy
from .policy import parse_policy as _parse_policy
from .policy import parse_repositories as _parse_repositories

_toml = toml_module()

__all__ = [
    "SETTINGS",
    "Backfill",
    "CaptureState",
    "Config",
    "LogLevel",
    "OtlpProtocol",
    "Setting",
    "add_arguments",
    "capture_state",
    "describe",
    "did_you_mean",
    "load_config",
]

# OTLP/JSON over HTTP is not offered: the metric exporters (the OTel SDK's) cannot send it, and every collector
# takes http/protobuf. ``http/json`` is refused with a message saying so (see :func:`_protocol`).
OtlpProtocol = Literal["grpc", "http/protobuf"]
LogLevel = Literal["debug", "info", "warning", "error"]

# The largest span/log export request by default (protobuf bytes before compression): gRPC's default message limit,
# which an OpenTelemetry Collector's OTLP receiver keeps (max_recv_msg_size_mib: 4).
DEFAULT_MAX_REQUEST_BYTES = 4 * 1024 * 1024

T = TypeVar("T")
Env = Mapping[str, str]
#: A parser turns a raw value (a string from a flag or env var, or a native TOML value) into the setting's
#: type, or raises :class:`_Invalid` saying what it expected. ``env`` is passed for ``~`` expansion.
Parser = Callable[[object, Env], T]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})


class _Invalid(ValueError):
    """Raised by a parser; ``args[0]`` completes "Expected <source> to be ...", e.g. ``"an integer >= 1"``."""


@dataclass(frozen=True)
class Backfill:
    """What to do with session logs that already exist when the daemon starts.

    Attributes:
        mode: ``"all"`` exports everything already on disk, ``"none"`` starts at the end of existing files
            (live only), ``"since"`` exports what happened at or after ``since_ns``.
        since_ns: Unix nanoseconds for ``mode == "since"``, else ``None``.
    """

    mode: Literal["all", "none", "since"]
    since_ns: int | None = None

    def __str__(self) -> str:
        if self.mode != "since" or self.since_ns is None:
            return self.mode
        return (_EPOCH + timedelta(microseconds=self.since_ns // 1_000)).isoformat()


#: The OTLP signals, as in ``OTEL_EXPORTER_OTLP_<SIGNAL>_*`` (upper-cased there).
SIGNALS: tuple[str, ...] = ("traces", "logs", "metrics")


@dataclass(frozen=True)
class PerSignal(Generic[T]):
    """A setting's value for each OTLP signal (``OTEL_EXPORTER_OTLP_<SIGNAL>_X`` beats ``OTEL_EXPORTER_OTLP_X``)."""

    traces: T
    logs: T
    metrics: T

    def __getitem__(self, signal: object) -> T:
        value: T = getattr(self, str(getattr(signal, "value", signal)))
        return value

    def values(self) -> tuple[T, T, T]:
        return (self.traces, self.logs, self.metrics)


@dataclass(frozen=True)
class Headers:
    """OTLP request headers. They may hold credentials: ``repr`` and ``config`` never show the values."""

    items: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    def __bool__(self) -> bool:
        return bool(self.items)

    def as_dict(self) -> dict[str, str]:
        return dict(self.items)

    def __repr__(self) -> str:
        return f"Headers({len(self.items)} set)"


@dataclass(frozen=True)
class Setting(Generic[T]):
    """One row of the settings table.

    Attributes:
        name: Field name on :class:`Config`, argparse ``dest`` and config file key.
        help: One line for ``--help`` (env vars and the default are appended automatically).
        parse: Turns a raw value into ``T`` (raises :class:`_Invalid`).
        default: The default value, unless ``default_from_env`` computes it.
        default_from_env: Computes the default from the environment (``HOME``, ``XDG_*``, ``COPILOT_HOME``).
        default_help: How the default reads in ``--help``; ``str(default)`` when not given.
        flags: CLI flags (may be empty: env var / config file only).
        env_vars: Environment variables, highest priority first.
        env_parse: Parser for env values when their unit differs (``OTEL_*`` intervals are milliseconds).
        file: Whether the config file may set it.
        metavar: Shown in ``--help``.
        signal_env: For a setting each OTLP signal resolves on its own: the per-signal variable, with
            ``{signal}`` for ``TRACES``/``LOGS``/``METRICS`` (``OTEL_EXPORTER_OTLP_{signal}_TIMEOUT``). It beats
            ``env_vars`` (the general one), as the OTLP exporter specification says; the value is a
            :class:`PerSignal`.
        secret: The value may hold credentials: ``config`` shows only "set" / "not set", ``repr`` hides it.
        privacy: The setting decides what content leaves the machine (prompts, responses, tool arguments...):
            ``config`` and ``doctor`` name these variables in the content-capture line.
    """

    name: str
    help: str
    parse: Parser[T]
    default: T | None = None
    default_from_env: Callable[[Env], T] | None = None
    default_help: str | None = None
    flags: tuple[str, ...] = ()
    env_vars: tuple[str, ...] = ()
    env_parse: Parser[T] | None = None
    file: bool = True
    metavar: str | None = None
    signal_env: str | None = None
    secret: bool = False
    privacy: bool = False

    def env_for(self, signal: str | None = None) -> tuple[str, ...]:
        """The variables read, highest priority first: for ``signal``, its own variable then the general ones."""
        if self.signal_env is None or signal is None:
            return self.env_vars
        return (self.signal_env.format(signal=signal.upper()), *self.env_vars)

    @property
    def all_env_vars(self) -> tuple[str, ...]:
        """Every variable of this setting, the per-signal variants included."""
        if self.signal_env is None:
            return self.env_vars
        return (*self.env_vars, *(self.signal_env.format(signal=s.upper()) for s in SIGNALS))

    def default_for(self, env: Env) -> T | None:
        """The default value under ``env``."""
        return self.default_from_env(env) if self.default_from_env is not None else self.default

    def full_help(self) -> str:
        """``help`` plus env vars and default, escaped for argparse's ``%`` formatting."""
        extra = []
        if self.env_vars:
            unit = " (milliseconds)" if self.env_parse is not None else ""
            extra.append(f"env: {', '.join(self.all_env_vars)}{unit}")
        shown = self.default_help if self.default_help is not None else _show(self.name, self.default)
        extra.append(f"default: {shown}")
        return f"{self.help} [{'; '.join(extra)}]".replace("%", "%%")


# --- parsers ------------------------------------------------------------------------------------------------


def _text(raw: object, expected: str) -> str:
    if isinstance(raw, os.PathLike):
        raw = os.fspath(raw)
    if not isinstance(raw, str) or not raw.strip():
        raise _Invalid(expected)
    return raw.strip()


def _to_float(raw: object, expected: str) -> float:
    if isinstance(raw, bool):
        raise _Invalid(expected)
    if isinstance(raw, (int, float)):
        value = float(raw)
    else:
        try:
            value = float(_text(raw, expected))
        except ValueError:
            raise _Invalid(expected) from None
    if not math.isfinite(value):
        raise _Invalid(expected)
    return value


def _seconds(*, positive: bool = False, millis: bool = False) -> Parser[float]:
    """A duration; ``millis`` parses milliseconds (the ``OTEL_*`` convention) and returns seconds."""
    expected = f"a number of {'milliseconds' if millis else 'seconds'} {'> 0' if positive else '>= 0'}"

    def parse(raw: object, env: Env) -> float:
        value = _to_float(raw, expected)
        if value < 0 or (positive and value == 0):
            raise _Invalid(expected)
        return value / 1_000 if millis else value

    return parse


def _integer(minimum: int, maximum: int | None = None) -> Parser[int]:
    expected = f"an integer >= {minimum}" if maximum is None else f"an integer from {minimum} to {maximum}"

    def parse(raw: object, env: Env) -> int:
        if isinstance(raw, bool):
            raise _Invalid(expected)
        if isinstance(raw, int):
            value = raw
        else:
            try:
                value = int(_text(raw, expected))
            except ValueError:
                raise _Invalid(expected) from None
        if value < minimum or (maximum is not None and value > maximum):
            raise _Invalid(expected)
        return value

    return parse


def _boolean(raw: object, env: Env) -> bool:
    expected = "true or false"
    if isinstance(raw, bool):
        return raw
    text = _text(raw, expected).lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise _Invalid(expected)


def _choice(choices: tuple[str, ...]) -> Parser[Any]:
    expected = f"one of {', '.join(choices)}"

    def parse(raw: object, env: Env) -> str:
        text = _text(raw, expected).lower()
        if text not in choices:
            raise _Invalid(expected)
        return text

    return parse


def _protocol(raw: object, env: Env) -> str:
    expected = f"one of {', '.join(_PROTOCOLS)}"
    text = _text(raw, expected).lower()
    if text == "http/json":
        raise _Invalid(
            f"{expected} (copilot-otel does not send OTLP/JSON; every collector accepts http/protobuf)"
        )
    if text not in _PROTOCOLS:
        raise _Invalid(expected)
    return text


def _string(raw: object, env: Env) -> str:
    return _text(raw, "a non-empty string")


def _path(raw: object, env: Env) -> Path:
    return expand(_text(raw, "a path"), env)


# A DNS name (letters, digits, "-", "_", dots), an IPv4 address, or an IPv6 one (urlsplit strips its brackets).
_HOST = re.compile(r"[A-Za-z0-9_.-]+|[0-9A-Fa-f:.]+(%[A-Za-z0-9_.-]+)?")


def _url(raw: object, env: Env) -> str:
    expected = "an http:// or https:// URL"
    text = _text(raw, expected)
    try:
        parts = urlsplit(text)
        _ = parts.port  # raises ValueError for a non-numeric or out-of-range port
    except ValueError:
        raise _Invalid(expected) from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise _Invalid(expected)
    # "local host", "host,name": urlsplit takes them, no resolver does (and it drops tabs and newlines silently)
    if not _HOST.fullmatch(parts.hostname) or any(c.isspace() for c in text):
        raise _Invalid(f"{expected} with a valid host name")
    return text


def _backfill(raw: object, env: Env) -> Backfill:
    """``all``, ``none`` or a moment of the one grammar (:mod:`copilot_otel.settings.moments`), counted from now."""
    expected = f"all, none or a moment: {FORMS}"
    if isinstance(raw, (datetime, date)):  # TOML (offset or local) datetime, local date
        raw = raw.isoformat()
    text = _text(raw, expected)
    if text.strip().lower() in ("all", "none"):
        return Backfill("all" if text.strip().lower() == "all" else "none")
    try:
        return Backfill("since", parse_moment(text, now_ns=time.time_ns()))
    except ConfigError:
        raise _Invalid(expected) from None


def _timeout_millis(raw: object, env: Env) -> float:
    """An ``OTEL_EXPORTER_OTLP_*TIMEOUT``: milliseconds, as the OTLP exporter specification says; seconds out."""
    expected = "a positive number of milliseconds"
    value = _to_float(raw, expected)
    if value <= 0:
        raise _Invalid(expected)
    return value / 1_000


def _file(raw: object, env: Env) -> Path:
    """A file that must exist when the setting is read (a CA or client certificate, a key)."""
    path = expand(_text(raw, "a path to a file"), env)
    if not path.is_file():
        raise _Invalid("a path to an existing file")
    return path


def _headers(raw: object, env: Env) -> Headers:
    """``key=value,key2=value2`` (URL-encoded values, as ``OTEL_EXPORTER_OTLP_HEADERS``)."""
    from opentelemetry.util.re import parse_env_headers

    # The SDK's own parser: URL-decoded values, lower-cased keys, malformed entries logged and skipped.
    return Headers(tuple(parse_env_headers(_text(raw, "key=value pairs"), liberal=True).items()))


def _capture_mode(raw: object, env: Env) -> str:
    """The master content switch: a boolean (the legacy form) or a semconv capture mode, lower-cased."""
    expected = f"one of {CAPTURE_MODES_HELP}"
    if isinstance(raw, bool):
        return "true" if raw else "false"
    text = _text(raw, expected).lower()
    if text in _TRUE or text in _FALSE:
        return "true" if text in _TRUE else "false"
    if text not in CAPTURE_MODES:
        raise _Invalid(expected)
    return text


# --- environment-dependent defaults -------------------------------------------------------------------------


def _runaway_policy(raw: object, env: Env) -> _RunawayPolicy:
    try:
        return _parse_policy(raw)
    except ValueError as exc:
        raise _Invalid(f"none, notify, interrupt or action:reason,...;... ({exc})") from None


def _repositories(raw: object, env: Env) -> tuple[str, ...]:
    return _parse_repositories(raw)


def _default_session_state(env: Env) -> Path:
    copilot_home = env.get("COPILOT_HOME", "").strip()
    base = expand(copilot_home, env) if copilot_home else home(env) / ".copilot"
    return base / "session-state"


def _other_home(variable: str, folder: str, *, names_home: bool = False) -> Callable[[Env], Path]:
    """Another agent's home, as that CLI finds it: its own variable (``CLAUDE_CONFIG_DIR``, ``CODEX_HOME``), else
    ``~/folder``. ``names_home``: the variable names the user's home, not the agent's folder (Gemini CLI's
    ``GEMINI_CLI_HOME``: its folder is ``$GEMINI_CLI_HOME/.gemini``)."""

    def default(env: Env) -> Path:
        value = env.get(variable, "").strip()
        if not value:
            return home(env) / folder
        return expand(value, env) / folder if names_home else expand(value, env)

    return default


def _agents(raw: object, env: Env) -> tuple[Agent, ...]:
    if isinstance(raw, (list, tuple)):  # a TOML list
        raw = ",".join(str(item) for item in raw) or "none"
    text = _text(raw, "a comma-separated list of " + ", ".join(AGENTS))
    names = [name.strip().lower() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in (*AGENTS, "none")]
    if unknown:
        raise _Invalid(f"{', '.join(AGENTS)} or none, comma-separated (unknown: {', '.join(unknown)})")
    if "none" in names:
        if len(names) > 1:
            raise _Invalid("none alone, or agents without none")
        return ()
    return tuple(agent for agent in AGENTS if agent in names)  # the table's order, each once


def _default_state_dir(env: Env) -> Path:
    return default_dirs(env)[
        0
    ]  # XDG on Linux; ~/Library/Application Support on macOS, %LOCALAPPDATA% on Windows


def _default_config_file(env: Env) -> Path:
    return default_dirs(env)[1] / CONFIG_NAME


# --- the table ----------------------------------------------------------------------------------------------

_PROTOCOLS: tuple[str, ...] = get_args(OtlpProtocol)
#: The coding agents whose session logs are read (``agents``), in the order they are listed.
Agent = Literal["copilot", "claude-code", "codex", "gemini"]
AGENTS: tuple[Agent, ...] = get_args(Agent)
#: ``tls_trust``: the OS trust store (through ``truststore``; certifi when it is not installed) or certifi's.
TLS_TRUST: tuple[str, ...] = ("system", "certifi")
_KIND_WORDS = {
    ContentKind.PROMPTS: "prompts",
    ContentKind.RESPONSES: "responses",
    ContentKind.TOOL_ARGUMENTS: "tool arguments",
    ContentKind.TOOL_RESULTS: "tool results",
    ContentKind.SYSTEM_PROMPT: "the system prompt",
    ContentKind.REASONING: "model reasoning",
}

_LOG_LEVELS: tuple[str, ...] = get_args(LogLevel)

# Each signal's own endpoint, like the other OTLP options; `endpoint` (where traces go) reads its traces variables.
_OTLP_ENDPOINT: Setting[str] = Setting(
    "otlp_endpoint",
    "Where one signal is sent: its own variable is used as given (over HTTP the whole URL, .../v1/logs); "
    "without it the signal goes to the endpoint, with its path appended (--endpoint beats the traces "
    "variable; over gRPC every signal goes to the endpoint)",
    _url,
    default_help="the endpoint",
    env_vars=("OTEL_EXPORTER_OTLP_ENDPOINT",),
    signal_env="OTEL_EXPORTER_OTLP_{signal}_ENDPOINT",
    file=False,  # one URL for every signal is what `endpoint` is
)

SETTINGS: tuple[Setting[Any], ...] = (
    Setting(
        "config_file",
        "TOML config file (a missing default file is fine; a missing given file is an error)",
        _path,
        default_from_env=_default_config_file,
        default_help="$XDG_CONFIG_HOME/copilot-otel/config.toml or ~/.config/copilot-otel/config.toml",
        flags=(CONFIG_FLAG,),
        env_vars=(CONFIG_ENV,),
        file=False,
        metavar="PATH",
    ),
    Setting(
        "session_state",
        "Copilot CLI session-state directory to read session logs from",
        _path,
        default_from_env=_default_session_state,
        default_help="$COPILOT_HOME/session-state or ~/.copilot/session-state",
        flags=("--session-state",),
        env_vars=("COPILOT_OTEL_SESSION_STATE",),
        metavar="PATH",
    ),
    Setting(
        "agents",
        "Whose session logs run, replay, show and report read by default: copilot, claude-code, codex, "
        "gemini, comma-separated (none: only the paths given); a missing folder is an agent not installed",
        _agents,
        default=AGENTS,
        default_help=",".join(AGENTS),
        flags=("--agents",),
        env_vars=("COPILOT_OTEL_AGENTS",),
        metavar="LIST",
    ),
    Setting(
        "claude_code_home",
        "Claude Code's folder (its session logs are in projects/ under it)",
        _path,
        default_from_env=_other_home("CLAUDE_CONFIG_DIR", ".claude"),
        default_help="$CLAUDE_CONFIG_DIR or ~/.claude",
        flags=("--claude-code-home",),
        env_vars=("COPILOT_OTEL_CLAUDE_CODE_HOME",),
        metavar="PATH",
    ),
    Setting(
        "codex_home",
        "Codex CLI's folder (its session logs are in sessions/ under it)",
        _path,
        default_from_env=_other_home("CODEX_HOME", ".codex"),
        default_help="$CODEX_HOME or ~/.codex",
        flags=("--codex-home",),
        env_vars=("COPILOT_OTEL_CODEX_HOME",),
        metavar="PATH",
    ),
    Setting(
        "gemini_home",
        "Gemini CLI's folder (its session logs are in tmp/*/chats/ under it)",
        _path,
        default_from_env=_other_home("GEMINI_CLI_HOME", ".gemini", names_home=True),
        default_help="$GEMINI_CLI_HOME/.gemini or ~/.gemini",
        flags=("--gemini-home",),
        env_vars=("COPILOT_OTEL_GEMINI_HOME",),
        metavar="PATH",
    ),
    Setting(
        "state_dir",
        "Directory for checkpoints, the lock file and the embedded OTLP file",
        _path,
        default_from_env=_default_state_dir,
        default_help="$XDG_STATE_HOME/copilot-otel or ~/.local/state/copilot-otel",
        flags=(STATE_DIR_FLAG,),
        env_vars=(STATE_DIR_ENV,),
        metavar="PATH",
    ),
    Setting(
        "endpoint",
        "OTLP collector base URL; without one, telemetry goes to the embedded file exporter",
        _url,
        default_help="none (embedded file exporter)",
        flags=("--endpoint",),
        # Where traces go: the traces variable first, as the OTel SDK resolves them (otlp_endpoint's traces row).
        env_vars=_OTLP_ENDPOINT.env_for("traces"),
        metavar="URL",
    ),
    _OTLP_ENDPOINT,
    Setting(
        "protocol",
        "OTLP transport",
        _protocol,
        default="http/protobuf",
        flags=("--protocol",),
        env_vars=("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"),
        metavar="{" + ",".join(_PROTOCOLS) + "}",
    ),
    Setting(
        "otlp_headers",
        "Headers of every OTLP request (key=value,...; URL-encoded values), e.g. authorization=Bearer%20<token>",
        _headers,
        default=Headers(),
        default_help="none",
        env_vars=("OTEL_EXPORTER_OTLP_HEADERS",),
        signal_env="OTEL_EXPORTER_OTLP_{signal}_HEADERS",
        file=False,  # credentials: kept out of a file that is read by everyone who can read the config
        secret=True,
    ),
    Setting(
        "otlp_timeout",
        "Deadline of one OTLP request, in seconds (the variables are in milliseconds, as the OTel specification says)",
        _seconds(positive=True),
        default=10.0,
        default_help="10 s (10000 ms)",
        env_vars=("OTEL_EXPORTER_OTLP_TIMEOUT",),
        env_parse=_timeout_millis,
        signal_env="OTEL_EXPORTER_OTLP_{signal}_TIMEOUT",
    ),
    Setting(
        "otlp_compression",
        "Compression of OTLP requests",
        _choice(("gzip", "none")),
        default="none",
        env_vars=("OTEL_EXPORTER_OTLP_COMPRESSION",),
        signal_env="OTEL_EXPORTER_OTLP_{signal}_COMPRESSION",
    ),
    Setting(
        "otlp_certificate",
        "CA certificate (PEM) that the collector's TLS certificate must chain to; replaces the trust store",
        _file,
        default_help="none (the trust store of tls_trust)",
        env_vars=("OTEL_EXPORTER_OTLP_CERTIFICATE",),
        signal_env="OTEL_EXPORTER_OTLP_{signal}_CERTIFICATE",
    ),
    Setting(
        "otlp_client_key",
        "Private key (PEM) for TLS client authentication (mTLS), with otlp_client_certificate",
        _file,
        default_help="none",
        env_vars=("OTEL_EXPORTER_OTLP_CLIENT_KEY",),
        signal_env="OTEL_EXPORTER_OTLP_{signal}_CLIENT_KEY",
    ),
    Setting(
        "otlp_client_certificate",
        "Certificate chain (PEM) for TLS client authentication (mTLS)",
        _file,
        default_help="none",
        env_vars=("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",),
        signal_env="OTEL_EXPORTER_OTLP_{signal}_CLIENT_CERTIFICATE",
    ),
    Setting(
        "otlp_insecure",
        "gRPC without TLS even for an endpoint that is not http:// (an http:// endpoint never uses TLS)",
        _boolean,
        default=False,
        env_vars=("OTEL_EXPORTER_OTLP_INSECURE",),
        signal_env="OTEL_EXPORTER_OTLP_{signal}_INSECURE",
    ),
    Setting(
        "tls_trust",
        "Which CAs an https/gRPC-TLS collector is checked against without otlp_certificate: system = the OS "
        "trust store (Keychain, Windows certificate store, OpenSSL's default paths; through truststore), "
        "certifi = Mozilla's CA bundle",
        _choice(TLS_TRUST),
        default="system",
        env_vars=("COPILOT_OTEL_TLS_TRUST",),
    ),
    Setting(
        "output_file",
        "Where the embedded exporter writes OTLP JSON lines when no endpoint is set (default: <state-dir>/otlp.jsonl)",
        _path,
        default_help="none",
        flags=("--output-file",),
        env_vars=("COPILOT_OTEL_OUTPUT_FILE",),
        metavar="PATH",
    ),
    Setting(
        "service_name",
        "service.name resource attribute",
        _string,
        default="copilot-otel",
        env_vars=("OTEL_SERVICE_NAME",),
    ),
    Setting(
        "include_user_name",
        "Add the login name as the user.name resource attribute (for teams sending to one collector)",
        _boolean,
        default=False,
        env_vars=("COPILOT_OTEL_INCLUDE_USER_NAME",),
    ),
    Setting(
        "max_retry_time",
        "replay: give up re-sending after this many seconds of failures (run retries for as long as it takes)",
        _seconds(),
        default=60.0,
        flags=("--max-retry-time",),
        env_vars=("COPILOT_OTEL_MAX_RETRY_TIME",),
        metavar="SECONDS",
    ),
    Setting(
        "export_delay",
        "Seconds between span/log batch exports",
        _seconds(),
        default=1.0,
        flags=("--export-delay",),
        env_vars=("OTEL_BSP_SCHEDULE_DELAY",),
        env_parse=_seconds(millis=True),
        metavar="SECONDS",
    ),
    Setting(
        "max_request_bytes",
        "Largest span/log request to a collector, in bytes before compression (a 413 or RESOURCE_EXHAUSTED "
        "lowers it; the local file has no limit)",
        _integer(64 * 1024),
        default=DEFAULT_MAX_REQUEST_BYTES,
        default_help="4194304 (4 MiB, gRPC's and a collector's default limit)",
        env_vars=("COPILOT_OTEL_MAX_REQUEST_BYTES",),
        metavar="BYTES",
    ),
    Setting(
        "metric_interval",
        "Seconds between metric exports",
        _seconds(positive=True),
        default=15.0,
        env_vars=("OTEL_METRIC_EXPORT_INTERVAL",),
        env_parse=_seconds(positive=True, millis=True),
    ),
    Setting(
        "backfill",
        "Sessions already on disk at start: all, none, or a moment (2026-11-01, 7d, yesterday…; README: "
        "Moments): the prompts that started since then, by the events' own time",
        _backfill,
        default=Backfill("all"),
        flags=("--backfill",),
        env_vars=("COPILOT_OTEL_BACKFILL",),
        metavar="all|none|MOMENT",
    ),
    Setting(
        "idle_timeout",
        "Close a session's open spans after this many seconds without new lines",
        _seconds(positive=True),
        default=1800.0,
        flags=("--idle-timeout",),
        env_vars=("COPILOT_OTEL_IDLE_TIMEOUT",),
        metavar="SECONDS",
    ),
    Setting(
        "rescan_interval",
        "Seconds between full rescans of the session-state directory",
        _seconds(positive=True),
        default=5.0,
        flags=("--rescan-interval",),
        env_vars=("COPILOT_OTEL_RESCAN_INTERVAL",),
        metavar="SECONDS",
    ),
    Setting(
        "backlog_cap",
        "Stop reading new lines while this many spans wait for export",
        _integer(1),
        default=20_000,
        env_vars=("COPILOT_OTEL_BACKLOG_CAP",),
    ),
    Setting(
        "workers",
        "replay: worker processes for large histories (0 = one per CPU, 1 = in-process)",
        _integer(0, 64),
        default=0,
        flags=("--workers",),
        env_vars=("COPILOT_OTEL_REPLAY_WORKERS",),
        metavar="N",
    ),
    Setting(
        "premium_quota",
        "Your plan's monthly premium request allowance (300 on Copilot Pro): 'live' and 'report' show what is left of it",
        _integer(0),
        default_help="none (no allowance shown)",
        flags=("--quota",),
        env_vars=("COPILOT_OTEL_PREMIUM_QUOTA",),
        metavar="N",
    ),
    Setting(
        "runaway_turns",
        "Flag a prompt as runaway after this many agent turns",
        _integer(1),
        default=25,
        flags=("--runaway-turns",),
        env_vars=("COPILOT_OTEL_RUNAWAY_TURNS",),
        metavar="N",
    ),
    Setting(
        "runaway_identical_calls",
        "Flag a prompt as runaway after this many identical tool calls in a row",
        _integer(1),
        default=5,
        env_vars=("COPILOT_OTEL_RUNAWAY_IDENTICAL_CALLS",),
    ),
    Setting(
        "runaway_tool_errors",
        "Flag a prompt as runaway after this many failed tool calls in a row",
        _integer(1),
        default=5,
        env_vars=("COPILOT_OTEL_RUNAWAY_TOOL_ERRORS",),
    ),
    Setting(
        "runaway_tokens_per_minute",
        "Flag a prompt as runaway above this token burn rate (0 disables)",
        _integer(0),
        default=2_000_000,
        env_vars=("COPILOT_OTEL_RUNAWAY_TOKENS_PER_MINUTE",),
    ),
    # --- acting on a runaway (daemon/act.py): one self-contained block ---------------------------------
    Setting(
        "runaway_action",
        "What a runaway detection does: none, notify, interrupt, or per reason "
        "(interrupt:identical,errors;notify:turns)",
        _runaway_policy,
        default=_RunawayPolicy(),
        flags=("--runaway-action",),
        env_vars=("COPILOT_OTEL_RUNAWAY_ACTION",),
        metavar="ACTION",
    ),
    Setting(
        "runaway_action_repositories",
        "Act on runaways only in these repositories (owner/name) or folders, comma-separated (empty: all)",
        _repositories,
        default=(),
        default_help="all",
        env_vars=("COPILOT_OTEL_RUNAWAY_ACTION_REPOSITORIES",),
    ),
    Setting(
        "runaway_dry_run",
        "Only log what a runaway interrupt would do",
        _boolean,
        default=False,
        flags=("--runaway-dry-run",),
        env_vars=("COPILOT_OTEL_RUNAWAY_DRY_RUN",),
        metavar="BOOL",
    ),
    Setting(
        "notify_desktop",
        "Runaway notifications on the desktop (when runaway_action is notify or interrupt)",
        _boolean,
        default=True,
        env_vars=("COPILOT_OTEL_NOTIFY_DESKTOP",),
    ),
    Setting(
        "notify_webhook",
        "POST runaway notifications to this URL as JSON",
        _url,
        default_help="none",
        env_vars=("COPILOT_OTEL_NOTIFY_WEBHOOK",),
    ),
    Setting(
        "webhook_format",
        "Webhook body: json (documented fields) or slack (a Slack-compatible {text})",
        _choice(("json", "slack")),
        default="json",
        flags=("--webhook-format",),
        env_vars=("COPILOT_OTEL_NOTIFY_WEBHOOK_FORMAT",),
        metavar="{json,slack}",
    ),
    Setting(
        "notify_prompt_errors",
        "Also notify when a prompt ends in error",
        _boolean,
        default=False,
        env_vars=("COPILOT_OTEL_NOTIFY_PROMPT_ERRORS",),
    ),
    # --- end of the runaway action block ------------------------------------------------------------------
    Setting(
        "prometheus_port",
        "Serve Prometheus metrics on this port (0 picks a free port)",
        _integer(0, 65_535),
        default_help="none (no Prometheus endpoint)",
        flags=("--prometheus-port",),
        env_vars=("COPILOT_OTEL_PROMETHEUS_PORT",),
        metavar="PORT",
    ),
    Setting(
        "prometheus_host",
        "Address the Prometheus endpoint binds to",
        _string,
        default="127.0.0.1",
        flags=("--prometheus-host",),
        env_vars=("COPILOT_OTEL_PROMETHEUS_HOST",),
        metavar="HOST",
    ),
    Setting(
        "metrics_enabled",
        "Export metrics",
        _boolean,
        default=True,
        env_vars=("COPILOT_OTEL_METRICS",),
    ),
    Setting(
        "metrics_temporality",
        "Metric temporality: cumulative, delta (counters and histograms as deltas) or lowmemory (synchronous "
        "counters and histograms as deltas); replay marks its one request DELTA for both of the latter",
        _choice(("cumulative", "delta", "lowmemory")),
        default="cumulative",
        env_vars=("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE",),
    ),
    Setting(
        "logs_enabled",
        "Export log events",
        _boolean,
        default=True,
        env_vars=("COPILOT_OTEL_LOGS",),
    ),
    Setting(
        "capture_message_content",
        "Capture prompts, responses, tool arguments and tool results, and where they go (NO_CONTENT, "
        "SPAN_ONLY, EVENT_ONLY, SPAN_AND_EVENT; true = SPAN_ONLY)",
        _capture_mode,
        default="false",
        env_vars=(CAPTURE_ENV,),
        file=False,
        privacy=True,
    ),
    Setting(
        "capture_emit_event",
        "Emit the gen_ai.client.inference.operation.details log event carrying captured messages (unset: "
        "as capture_message_content says)",
        _boolean,
        default_help="as capture_message_content",
        env_vars=(EMIT_EVENT_ENV,),
        file=False,
        privacy=True,
    ),
    *(
        Setting(
            f"capture_{kind.value}",
            f"Capture {_KIND_WORDS[kind]} (unset: as capture_message_content says"
            + ("; it never turns this on" if kind not in MASTER_KINDS else "")
            + ")",
            _boolean,
            default_help="as capture_message_content",
            env_vars=(KIND_ENV[kind],),
            file=False,
            privacy=True,
        )
        for kind in ContentKind
    ),
    Setting(
        "content_max_length",
        "Characters kept per captured value (the rest is cut, with a marker)",
        _integer(MIN_MAX_LENGTH),
        default=DEFAULT_MAX_LENGTH,
        env_vars=(MAX_LENGTH_ENV,),
        file=False,
        privacy=True,
    ),
    Setting(
        "log_level",
        "copilot-otel's own log level",
        _choice(_LOG_LEVELS),
        default="info",
        flags=("--log-level",),
        env_vars=("COPILOT_OTEL_LOG_LEVEL",),
        metavar="{" + ",".join(_LOG_LEVELS) + "}",
    ),
)

_BY_NAME: Mapping[str, Setting[Any]] = {setting.name: setting for setting in SETTINGS}
_FILE_KEYS: tuple[str, ...] = tuple(setting.name for setting in SETTINGS if setting.file)
#: The content switches (their values are switches, never secrets): named in the content-capture line.
_PRIVACY: tuple[Setting[Any], ...] = tuple(setting for setting in SETTINGS if setting.privacy)
_OTLP: tuple[Setting[Any], ...] = tuple(setting for setting in SETTINGS if setting.signal_env is not None)


@dataclass(frozen=True)
class OtlpOptions:
    """What one OTLP signal's requests are sent with (every transport reads these, for every signal).

    Attributes:
        headers: Request headers (credentials, tenant ids).
        timeout: Deadline of one request, in seconds.
        compression: ``gzip`` or ``None``.
        certificate: The CA file the collector's certificate must chain to; ``None`` = the ``trust`` store.
        client_key: Private key for TLS client authentication.
        client_certificate: Certificate chain for TLS client authentication.
        insecure: gRPC without TLS (an ``http://`` endpoint is plaintext anyway).
        trust: ``system`` (the OS trust store) or ``certifi``, when no ``certificate`` is given.
    """

    headers: Headers = field(default_factory=Headers)
    timeout: float = 10.0
    compression: str | None = None
    certificate: Path | None = None
    client_key: Path | None = None
    client_certificate: Path | None = None
    insecure: bool = False
    trust: str = "system"

    @property
    def tls_files(self) -> tuple[Path | None, Path | None, Path | None]:
        """``(certificate, client_certificate, client_key)``: what decides one TLS configuration."""
        return (self.certificate, self.client_certificate, self.client_key)


@dataclass(frozen=True)
class Config:
    """Every setting, typed and resolved; build it with :func:`load_config`.

    ``sources`` maps each setting name to where its value came from: ``"default"``, ``"flag --endpoint"``,
    ``"env OTEL_EXPORTER_OTLP_ENDPOINT"`` or ``"file /path/config.toml"``; a per-signal setting also has
    ``"<name>.<signal>"`` entries, and ``"<name>"`` is their common source (or each signal's, joined).
    Field order follows :data:`SETTINGS`.
    """

    config_file: Path
    session_state: Path
    agents: tuple[Agent, ...]
    claude_code_home: Path
    codex_home: Path
    gemini_home: Path
    state_dir: Path
    endpoint: str | None
    otlp_endpoint: PerSignal[str | None]
    protocol: OtlpProtocol
    otlp_headers: PerSignal[Headers]
    otlp_timeout: PerSignal[float]
    otlp_compression: PerSignal[str]
    otlp_certificate: PerSignal[Path | None]
    otlp_client_key: PerSignal[Path | None]
    otlp_client_certificate: PerSignal[Path | None]
    otlp_insecure: PerSignal[bool]
    tls_trust: str
    output_file: Path | None
    service_name: str
    include_user_name: bool
    max_retry_time: float
    export_delay: float
    max_request_bytes: int
    metric_interval: float
    backfill: Backfill
    idle_timeout: float
    rescan_interval: float
    backlog_cap: int
    workers: int
    premium_quota: int | None
    runaway_turns: int
    runaway_identical_calls: int
    runaway_tool_errors: int
    runaway_tokens_per_minute: int
    # acting on a runaway (daemon/act.py)
    runaway_action: _RunawayPolicy
    runaway_action_repositories: tuple[str, ...]
    runaway_dry_run: bool
    notify_desktop: bool
    notify_webhook: str | None
    webhook_format: Literal["json", "slack"]
    notify_prompt_errors: bool
    prometheus_port: int | None
    prometheus_host: str
    metrics_enabled: bool
    metrics_temporality: str
    logs_enabled: bool
    capture_message_content: str
    capture_emit_event: bool | None
    capture_prompts: bool | None
    capture_responses: bool | None
    capture_tool_arguments: bool | None
    capture_tool_results: bool | None
    capture_system_prompt: bool | None
    capture_reasoning: bool | None
    content_max_length: int
    log_level: LogLevel
    sources: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def content(self) -> ContentPolicy:
        """The content-capture policy these settings make, so ``config``, ``doctor`` and ``run`` can say what
        content leaves.

        ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` (case-insensitive) is the master switch:
        unset, ``false``, ``0``, ``no`` or ``NO_CONTENT`` capture nothing; ``true``, ``1`` or ``yes``
        capture prompts, responses, tool arguments and tool results on spans; ``SPAN_ONLY``, ``EVENT_ONLY``
        and ``SPAN_AND_EVENT`` capture the same and choose where it goes. The system prompt and reasoning
        are only captured through their own switch.

        ``OTEL_INSTRUMENTATION_GENAI_EMIT_EVENT`` (``true``/``false``) switches the details events; unset, it
        follows the master switch (on for ``EVENT_ONLY`` and ``SPAN_AND_EVENT``). ``false`` turns them off, so
        ``EVENT_ONLY`` then captures nothing. ``true`` with a master switch that keeps content on spans
        (``true``, ``SPAN_ONLY``) changes nothing: the events exist to carry content, and that setting says
        content goes on spans only.

        ``COPILOT_OTEL_CAPTURE_{PROMPTS,RESPONSES,TOOL_ARGUMENTS,TOOL_RESULTS,SYSTEM_PROMPT,REASONING}``
        (``true``/``false``) override the master switch for one kind each, and
        ``COPILOT_OTEL_CONTENT_MAX_LENGTH`` (an integer, at least 16) sets ``max_length``.
        """
        return _content_policy(self.__dict__)

    @property
    def otlp_headers_set(self) -> bool:
        """Whether some signal sends headers (their values are never shown)."""
        return any(self.otlp_headers.values())

    def otlp(self, signal: object) -> OtlpOptions:
        """One signal's request options (``signal``: ``"traces"`` or an ``export.Signal``)."""
        return _options(self.__dict__, signal)

    def signal_endpoints(self) -> dict[str, str] | None:
        """The URL each signal is sent to (:func:`signal_endpoints`); ``None``: no endpoint, the embedded file."""
        targets = signal_endpoints(self)
        return None if targets is None else {signal: url for signal, (url, _) in targets.items()}

    @property
    def embedded_output(self) -> Path | None:
        """The OTLP JSON-lines file: ``output_file``, else ``state_dir/otlp.jsonl`` without an endpoint."""
        if self.output_file is not None:
            return self.output_file
        return self.state_dir / "otlp.jsonl" if self.endpoint is None else None


def signal_endpoints(config: Config) -> dict[str, tuple[str, str]] | None:
    """Each signal's ``(URL, source)``: the one resolution of the endpoints (``None`` without an endpoint).

    As the OTLP exporter specification and the SDK have it, a signal's own ``OTEL_EXPORTER_OTLP_<SIGNAL>_ENDPOINT``
    is used as given, and otherwise the signal goes to the base endpoint with its path (``/v1/logs``) appended.
    The base is ``--endpoint`` (or the config file), which also beats the traces variable; else
    ``OTEL_EXPORTER_OTLP_ENDPOINT``; else, when only the traces variable is set, the traces URL without its
    ``/v1/traces``, so the other signals go to the same collector. gRPC sends every signal over one channel: to
    the base.
    """
    endpoint = config.endpoint
    if endpoint is None:
        return None
    source = config.sources.get("endpoint", "default")
    explicit = not source.startswith("env ")
    own = {
        signal: config.sources.get(f"otlp_endpoint.{signal}") == f"env {_signal_var(signal)}"
        for signal in SIGNALS
    }
    base, base_source = endpoint, source
    if not explicit and source == f"env {_signal_var('traces')}":
        general = _OTLP_ENDPOINT.env_vars[0]  # OTEL_EXPORTER_OTLP_ENDPOINT
        for signal in SIGNALS:
            if config.sources.get(f"otlp_endpoint.{signal}") == f"env {general}":
                base, base_source = str(config.otlp_endpoint[signal]), f"env {general}"
                break
        else:
            base = base.rstrip("/")
            if config.protocol != "grpc" and base.endswith("/v1/traces"):
                base = base[: -len("/v1/traces")]
    if config.protocol == "grpc":
        return {signal: (base, base_source) for signal in SIGNALS}
    targets: dict[str, tuple[str, str]] = {}
    for signal in SIGNALS:
        if own[signal] and not (explicit and signal == "traces"):  # the flag names where traces go
            targets[signal] = (str(config.otlp_endpoint[signal]), f"env {_signal_var(signal)}")
        else:
            targets[signal] = (f"{base.rstrip('/')}/v1/{signal}", base_source)
    return targets


def _signal_var(signal: str) -> str:
    return _OTLP_ENDPOINT.env_for(signal)[0]


def _options(values: Mapping[str, Any], signal: object) -> OtlpOptions:
    compression = values["otlp_compression"][signal]
    return OtlpOptions(
        headers=values["otlp_headers"][signal],
        timeout=values["otlp_timeout"][signal],
        compression=None if compression == "none" else compression,
        certificate=values["otlp_certificate"][signal],
        client_key=values["otlp_client_key"][signal],
        client_certificate=values["otlp_client_certificate"][signal],
        insecure=values["otlp_insecure"][signal],
        trust=values["tls_trust"],
    )


# --- loading ------------------------------------------------------------------------------------------------


def _quote(raw: object) -> str:
    return repr(os.fspath(raw) if isinstance(raw, os.PathLike) else raw)


def _parse(parser: Parser[T], raw: object, label: str, env: Env, secret: bool = False) -> T:
    try:
        return parser(raw, env)
    except _Invalid as exc:
        shown = "a value (not shown: it may hold credentials)" if secret else _quote(raw)
        raise ConfigError(f"Expected {label} to be {exc}, got {shown}") from None


def _resolve(
    setting: Setting[T],
    cli: Mapping[str, object],
    env: Env,
    file_values: Mapping[str, object],
    file: Path | None,
    signal: str | None = None,
) -> tuple[T | None, str]:
    """One setting's ``(value, source)``: flag > env var (for ``signal``, its own variable first) > config file
    > default."""
    raw = cli.get(setting.name)
    if raw is not None:
        label = setting.flags[0] if setting.flags else setting.name
        source = f"flag {label}" if setting.flags else f"argument {label}"
        return _parse(setting.parse, raw, label, env), source
    for var in setting.env_for(signal):
        text = env.get(var)
        if text is not None and text.strip():
            return _parse(setting.env_parse or setting.parse, text, var, env, setting.secret), f"env {var}"
    if setting.name in file_values:
        label = f"config file key {setting.name} in {file}"
        return _parse(setting.parse, file_values[setting.name], label, env), f"file {file}"
    return setting.default_for(env), "default"


def did_you_mean(word: str, choices: Iterable[str], cutoff: float = 0.6) -> str:
    """``"; did you mean 'x'?"`` for the closest of ``choices`` to a mistyped ``word`` (``""`` when none is as
    close as ``cutoff``, difflib's ratio): one matcher for config keys, flags and report periods."""
    import difflib  # only for this message: not every command's start-up

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=cutoff)
    return f"; did you mean {close[0]!r}?" if close else ""


def _read_file(path: Path, source: str) -> dict[str, Any] | None:
    """The config file's keys, or ``None`` when the default file does not exist."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        if source == "default":
            return None
        raise ConfigError(f"Config file {path} (from {source}) does not exist") from None
    except OSError as exc:
        raise ConfigError(f"Cannot read config file {path}: {exc.strerror or exc}") from None
    if _toml is None:
        raise ConfigError(
            f"Cannot read config file {path}: TOML config files need Python 3.11+ or the tomli package; "
            "use flags or environment variables instead"
        )
    try:
        values: dict[str, Any] = _toml.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"Cannot parse config file {path}: not UTF-8 ({exc.reason})") from None
    except _toml.TOMLDecodeError as exc:
        raise ConfigError(f"Cannot parse config file {path}: {exc}") from None
    for key in values:
        if key in _BY_NAME and key not in _FILE_KEYS:
            flags = " or ".join((*_BY_NAME[key].flags, *_BY_NAME[key].all_env_vars))
            raise ConfigError(f"Key {key!r} cannot be set in config file {path}; use {flags}")
        if key not in _FILE_KEYS:
            hint = did_you_mean(key, _FILE_KEYS)
            raise ConfigError(
                f"Unknown key {key!r} in config file {path}{hint} (allowed keys: {', '.join(_FILE_KEYS)})"
            )
    return values


def load_config(cli: Mapping[str, object] | None = None, env: Mapping[str, str] | None = None) -> Config:
    """Resolve every setting (flag > env var > config file > default) into a :class:`Config`.

    Args:
        cli: Flag values by setting name, e.g. ``vars(args)``; unknown keys are ignored and ``None`` means
            "not given". Values may be strings (as typed) or already typed (``Path``, ``float``, ...).
        env: The environment; ``os.environ`` when ``None``. ``HOME``, ``XDG_*`` and ``COPILOT_HOME`` are read
            from it for the defaults.

    Raises:
        ConfigError: a value is invalid (the message names its source and quotes it), the config file is
            unreadable, malformed or has unknown keys, or an explicitly given config file is missing.
    """
    cli = {} if cli is None else cli
    env = os.environ if env is None else env
    config_setting = _BY_NAME["config_file"]
    config_file, config_source = _resolve(config_setting, cli, env, {}, None)
    assert isinstance(config_file, Path)
    file_values = _read_file(config_file, config_source)

    values, sources = _resolve_all(SETTINGS, cli, env, file_values or {}, config_file)
    if file_values is None and config_source == "default":
        sources["config_file"] = "default (not found)"
    return Config(**values, sources=MappingProxyType(sources))


def _resolve_all(
    settings: Iterable[Setting[Any]],
    cli: Mapping[str, object],
    env: Env,
    file_values: Mapping[str, object],
    file: Path | None,
) -> tuple[dict[str, Any], dict[str, str]]:
    """Values and sources of ``settings``; a per-signal setting resolves once per signal into a PerSignal."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for setting in settings:
        if setting.signal_env is None:
            values[setting.name], sources[setting.name] = _resolve(setting, cli, env, file_values, file)
            continue
        each = {signal: _resolve(setting, cli, env, file_values, file, signal) for signal in SIGNALS}
        values[setting.name] = PerSignal(*(value for value, _ in each.values()))
        for signal, (_, source) in each.items():
            sources[f"{setting.name}.{signal}"] = source
        distinct = {source for _, source in each.values()}
        sources[setting.name] = (
            distinct.pop() if len(distinct) == 1 else "; ".join(f"{k}: {src}" for k, (_, src) in each.items())
        )
    content_vars = [var for setting in _PRIVACY for var in setting.env_vars if env.get(var, "").strip()]
    if any(setting in _PRIVACY for setting in settings):
        sources["content_capture"] = (
            "env " + ", ".join(f"{var}={env[var].strip()}" for var in content_vars)
            if content_vars
            else "default"
        )
    return values, sources


def _content_policy(values: Mapping[str, Any]) -> ContentPolicy:
    return ContentPolicy.build(
        values["capture_message_content"],
        values["capture_emit_event"],
        {kind: values[f"capture_{kind.value}"] for kind in ContentKind},
        values["content_max_length"],
    )


# --- CLI and display ----------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser, names: Iterable[str] | None = None) -> None:
    """Add the flags of the named settings (all settings that have flags when ``names`` is ``None``).

    Each flag stores the raw string under ``dest=<setting name>`` with ``default=None`` so :func:`load_config`
    can tell "not given" from a value, and parse errors surface as :class:`ConfigError`, not argparse usage
    errors. Help text comes from the table.

    Raises:
        ValueError: a name is not a setting or has no flag (a programming error, not a user error).
    """
    selected = [s for s in SETTINGS if s.flags] if names is None else [_flagged(name) for name in names]
    for setting in selected:
        parser.add_argument(
            *setting.flags,
            dest=setting.name,
            default=None,
            metavar=setting.metavar or setting.name.upper(),
            help=setting.full_help(),
        )


def _flagged(name: str) -> Setting[Any]:
    setting = _BY_NAME.get(name)
    if setting is None:
        raise ValueError(f"Unknown setting {name!r}")
    if not setting.flags:
        raise ValueError(f"Setting {name!r} has no command-line flag")
    return setting


def _show(name: str, value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if name == "endpoint" and isinstance(value, str):
        return display.url(value)
    if name == "notify_webhook" and isinstance(value, str):  # a Slack webhook's path is its credential
        return display.webhook(value)
    if name == "runaway_action_repositories" and isinstance(value, tuple):
        return ", ".join(value) if value else "all"
    return str(value)


def _shown(setting: Setting[Any], value: object) -> str:
    if setting.secret:
        return "set" if value else "not set"
    return _show(setting.name, value)


def describe(config: Config) -> list[tuple[str, str, str]]:
    """``(name, value shown, source)`` rows for ``copilot-otel config``.

    Rows follow :data:`SETTINGS` (a per-signal setting whose signals differ has a row per signal,
    ``otlp_timeout.logs``; ``otlp_endpoint.<signal>`` is the URL that signal is sent to, as
    :func:`signal_endpoints` resolves it, and the setting it came from), then the derived ``embedded_output`` and
    ``content_capture``. Secret values are never
    shown (only "set" / "not set") and credentials in the endpoint URL are masked.
    """
    rows: list[tuple[str, str, str]] = []
    for setting in SETTINGS:
        value = getattr(config, setting.name)
        if setting.name == "otlp_endpoint":  # where each signal goes, resolved, and why
            targets = signal_endpoints(config)
            if targets is None:
                rows.append((setting.name, "none (embedded file exporter)", "derived"))
            elif config.protocol == "grpc":  # one channel for every signal
                url, src = targets["traces"]
                rows.append((setting.name, _show("endpoint", url), src))
            else:
                rows.extend(
                    (f"{setting.name}.{signal}", _show("endpoint", url), src)
                    for signal, (url, src) in targets.items()
                )
            continue
        if not isinstance(value, PerSignal):
            rows.append((setting.name, _shown(setting, value), config.sources.get(setting.name, "default")))
            continue
        each = [
            (_shown(setting, value[signal]), config.sources.get(f"{setting.name}.{signal}", "default"))
            for signal in SIGNALS
        ]
        if len(set(each)) == 1:  # the same for every signal: one row
            rows.append((setting.name, *each[0]))
        else:
            rows.extend((f"{setting.name}.{signal}", *row) for signal, row in zip(SIGNALS, each, strict=True))
    rows.append(("embedded_output", _show("embedded_output", config.embedded_output), "derived"))
    capture = capture_state(config)
    rows.append(("content_capture", capture.summary, capture.source))
    return rows


@dataclass(frozen=True)
class CaptureState:
    """What content leaves the machine, and where, in one line.

    Attributes:
        on: Some prompt, response, tool argument/result, system prompt or reasoning text is exported.
        summary: ``off: …`` or ``ON: <kinds> on <spans/log events> to <destination>``.
        source: The content variables that are set (``env NAME=value, …``), else ``default``.
    """

    on: bool
    summary: str
    source: str

    @property
    def line(self) -> str:
        """The summary as a sentence of its own: ``content capture: …`` (with its source)."""
        return f"content capture: {self.summary} ({self.source})"


def _join(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def capture_state(config: Config) -> CaptureState:
    """Describe the content-capture state of ``config``: which content is exported, on what, to where.

    Content goes on spans and/or on log events (the latter only while ``logs_enabled``), to the endpoint, or
    to the embedded file when there is none (then it stays on this machine, in that file).
    """
    policy = config.content
    source = config.sources.get("content_capture", "default")
    places = [
        place
        for place, used in (
            ("spans", policy.on_spans),
            ("log events", policy.on_events and config.logs_enabled),
        )
        if used
    ]
    kinds = [word for kind, word in _KIND_WORDS.items() if policy.allows(kind)]
    if not kinds or not places:
        dropped = " (the log events that would carry it are off: logs_enabled is false)" if kinds else ""
        return CaptureState(
            False, f"off: no prompt, response, tool argument or tool result is exported{dropped}", source
        )
    if config.endpoint is None:
        where = f"are written on {_join(places)} to the embedded file {config.embedded_output}"
    else:
        where = f"leave this machine on {_join(places)} to {display.url(config.endpoint)}"
    return CaptureState(
        True,
        f"ON: {_join(kinds)} {where} (secrets scrubbed, at most {policy.max_length:,} characters per value)",
        source,
    )


def settings_markdown() -> str:
    """The settings table of docs/configuration.md, made from :data:`SETTINGS` (a test keeps the page equal to it)."""
    rows = [
        "| setting (config file key) | flag | environment (first wins) | default | what it does |",
        "|---|---|---|---|---|",
    ]
    for setting in SETTINGS:
        name = f"`{setting.name}`" + ("" if setting.file else " (not in the file)")
        flags = ", ".join(f"`{flag}`" for flag in setting.flags) or "—"
        env_vars = [f"`{var}`" for var in setting.env_vars]
        if setting.signal_env is not None:
            env_vars.insert(0, f"`{setting.signal_env.replace('{signal}', '<SIGNAL>')}`")
        unit = " (ms)" if setting.env_parse is not None else ""
        default = (
            setting.default_help if setting.default_help is not None else _show(setting.name, setting.default)
        )
        what = setting.help + (
            " **Privacy:** decides what content leaves the machine." if setting.privacy else ""
        )
        rows.append(f"| {name} | {flags} | {', '.join(env_vars)}{unit} | {default} | {what} |")
    return "\n".join(rows) + "\n"
