"""``copilot-otel service install|uninstall|status``: run ``copilot-otel run`` as a per-user service.

* Linux: a systemd user unit ``~/.config/systemd/user/copilot-otel.service`` (``Restart=on-failure``). The
  user's current settings are written as ``Environment=`` lines, except the secrets (:func:`is_secret`: OTLP
  headers, an endpoint URL with a password or a query string, the webhook URL), which go to
  ``~/.config/copilot-otel/service.env`` (mode 0600), named by ``EnvironmentFile=``: the unit is world-readable.
* macOS: a launchd agent ``~/Library/LaunchAgents/io.github.copilot-otel.plist`` (``RunAtLoad``, ``KeepAlive``
  unless it exits cleanly, output logged to the state dir); launchd has no environment file, so the plist is
  mode 0600 whenever it carries a secret.
  It is bootstrapped into ``gui/<uid>`` and, where that domain does not exist (an SSH session), ``user/<uid>``.
* Windows: a per-user Task Scheduler task ``copilot-otel`` (at log-on of this user, restarted on failure, no
  time limit), registered with ``schtasks /Create /XML``. Task Scheduler has no environment setting, so the
  task runs ``pythonw -m copilot_otel._platform._launch`` with a JSON file of the settings (in the config
  folder, under the user's profile, secrets included) and the state dir's ``service.log``; the task's XML names
  only those two paths.

"Current settings" are every ``OTEL_*`` and ``COPILOT_OTEL_*`` variable set now, plus the flags given to
``service install`` and any path that would resolve differently in the service's bare environment (e.g. a
state dir derived from ``XDG_STATE_HOME``). Re-run ``install`` after changing them.

``uninstall --purge`` then removes copilot-otel's state dir and config folder, each named (with its size) before
it goes; a folder that is not copilot-otel's own, a running daemon's, or another service's is named and kept.

Enabling uses ``systemctl --user`` / ``launchctl``. Where those are missing or fail (no user bus in a
container, an SSH session without a login manager) the file is still written and the exact commands to run
are printed; ``--no-enable`` only writes. ``COPILOT_OTEL_SERVICE_PLATFORM=linux|darwin``,
``COPILOT_OTEL_SYSTEMCTL``, ``COPILOT_OTEL_LAUNCHCTL`` and ``COPILOT_OTEL_SCHTASKS`` override the platform and
the tools (for tests and unusual installs).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import plistlib
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from html import escape as _html_escape
from pathlib import Path

from .._platform import LockHeld, ServiceManager, current, launchd_domains
from ..common.display import count
from ..common.display import url as shown_url
from ..common.errors import ConfigError, StateError
from ..common.files import write_new_file
from ..daemon.servicefiles import (
    LAUNCHD_LABEL,
    PLATFORM_ENV,
    config_home,
    installed_state_dirs,
    json_environment,
    launch_agents,
    manager_kind,
    plist_environment,
    setting_default,
    suffix,
    systemd_env_file,
    unit_environment,
)
from ..daemon.state import LOCK_FILE
from ..settings.config import Config


def escape(text: str) -> str:
    """XML character data: ``&``, ``<`` and ``>`` escaped (what ``xml.sax.saxutils.escape`` does, without its
    import of ``urllib.request``: ~20 ms of ``status``'s start-up)."""
    return _html_escape(text, quote=False)


__all__ = [
    "LAUNCHD_LABEL",
    "SYSTEMD_UNIT",
    "TASK_NAME",
    "ServiceEnvironment",
    "executable",
    "is_secret",
    "service",
    "service_environment",
    "task_xml",
]

SYSTEMD_UNIT = "copilot-otel.service"
SYSTEMCTL_ENV = "COPILOT_OTEL_SYSTEMCTL"
LAUNCHCTL_ENV = "COPILOT_OTEL_LAUNCHCTL"
SCHTASKS_ENV = "COPILOT_OTEL_SCHTASKS"
TASK_NAME = "copilot-otel"
# Variables that steer this command, not the daemon: never copied into the service.
_NOT_COPIED = frozenset({PLATFORM_ENV, SYSTEMCTL_ENV, LAUNCHCTL_ENV, SCHTASKS_ENV})
# systemctl/launchctl normally answer at once; a hung user bus must not hang the install.
_TOOL_TIMEOUT_S = 30.0


def service(
    config: Config,
    action: str,
    enable: bool = True,
    name: str = "",
    purge: bool = False,
    env: Mapping[str, str] | None = None,
) -> int:
    """Install, uninstall or describe the user service; returns the exit code.

    ``install`` and ``uninstall`` return 0 once the files are written / removed, also when the service manager
    could not be reached (the commands to run are printed then). ``status`` returns 0 when installed, else 1.
    ``uninstall`` with ``purge`` also removes the state dir and the config folder (:func:`purge_paths`).

    The daemon's settings come from ``config``; ``env`` (this process's environment unless given) is read only
    for what no setting holds: the variables copied into the service, where the service manager keeps its
    files (``HOME``, ``XDG_CONFIG_HOME``), the user's name, and the test overrides named in the module docstring.

    ``name`` makes a second service (``copilot-otel-<name>``), e.g. for a second Copilot home: it gets its own
    unit, secrets file and, unless a state dir is given, its own state dir (``<state dir>/<name>``), since two
    daemons cannot share one. ``install`` run again keeps the OTLP endpoint and headers the installed service
    had when the shell it runs in sets no endpoint (uninstall first to drop them).

    Raises:
        ConfigError: The platform is not supported (or ``COPILOT_OTEL_SERVICE_PLATFORM`` is invalid).
        StateError: A file cannot be written or removed, or the state dir the service needs is not writable.
    """
    if name and not _NAME.fullmatch(name):
        raise ConfigError(f"Expected --name to be letters, digits, '-' or '_' (at most 40), got {name!r}")
    if name and config.sources.get("state_dir", "default") == "default":
        config = dataclasses.replace(config, state_dir=config.state_dir / name)
    if purge and action != "uninstall":
        raise ConfigError(f"--purge goes with 'service uninstall', not with {action!r}")
    env = os.environ if env is None else env
    manager = _MANAGERS[manager_kind(env)](config, env, name)
    if action == "install":
        return manager.install(enable)
    if action == "uninstall":
        code = manager.uninstall()
        return purge_files(purge_paths(config, env, name)) if purge else code
    if action == "status":
        return manager.status()
    raise ConfigError(f"Expected the service action to be one of install, uninstall, status, got {action!r}")


_NAME = re.compile(r"[A-Za-z0-9_-]{1,40}")


# ------------------------------------------------------------------------------------------------ --purge
@dataclass(frozen=True, slots=True)
class PurgePath:
    """A folder ``uninstall --purge`` would remove: what it holds, or why it is left alone (``refused``)."""

    path: Path
    holds: str
    refused: str = ""


def purge_paths(config: Config, env: Mapping[str, str], name: str = "") -> list[PurgePath]:
    """The folders ``uninstall --purge`` removes: the state dir (checkpoints, ``status.json``, the embedded
    default's ``otlp.jsonl``, dead letters, service logs) and, for the main service, the config folder
    (``config.toml``, the service's settings files).

    Only copilot-otel's own folders are removed: the default ones and what is inside them, or a folder that holds
    nothing but files copilot-otel writes (:data:`_OWN_FILES`). A state dir set to a folder with anything else in
    it (``--state-dir ~/Documents``) is refused, and so is a folder that holds another installed service's state
    dir, or one a running daemon holds.
    """
    defaults = current.default_dirs(env)
    wanted = [
        PurgePath(
            Path(os.path.abspath(config.state_dir)),
            "state: checkpoints, status, otlp.jsonl, dead letters, logs",
        )
    ]
    if not name:
        wanted.append(
            PurgePath(Path(os.path.abspath(defaults.config)), "config: config.toml, service settings")
        )
    own = [Path(os.path.abspath(defaults.state)), Path(os.path.abspath(defaults.config))]
    others = [Path(os.path.abspath(p)) for p in installed_state_dirs(env)]
    out = []
    for item in wanted:
        path = item.path
        if not path.exists() and not path.is_symlink():
            continue
        if path.is_symlink() or not path.is_dir():
            refused = "not a folder of its own (a link or a file): remove it yourself"
        elif not any(path == root or root in path.parents for root in own) and (foreign := _foreign(path)):
            refused = (
                f"not copilot-otel's own folder: it holds {', '.join(foreign[:3])}{'…' if len(foreign) > 3 else ''}"
                ", which copilot-otel did not write: remove what is ours yourself"
            )
        elif any(other == path or path in other.parents for other in others):
            refused = "another installed copilot-otel service keeps its state there: uninstall it first"
        else:
            refused = _daemon_running(path)
        out.append(dataclasses.replace(item, refused=refused))
    return out


# What copilot-otel writes in a state dir, by name (a leading dot stripped): the checkpoints and their temporaries
# (state.db*, state.json*), the lock, status.json, the embedded default's otlp.jsonl* and its lock, the dead
# letters, the service logs and the write probes of service and doctor.
_OWN_FILES = ("lock", "state.", "status.json", "otlp.jsonl", "dead-letter", "service", "doctor-")


def _foreign(folder: Path) -> list[str]:
    """The names in ``folder`` that copilot-otel does not write (a sub-folder is never one of ours)."""
    try:
        entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
    except OSError as exc:
        return [f"(unreadable: {exc.strerror or exc})"]
    return [
        entry.name
        for entry in entries
        if not entry.is_file(follow_symlinks=False) or not entry.name.lstrip(".").startswith(_OWN_FILES)
    ]


def _daemon_running(state_dir: Path) -> str:
    """Why ``state_dir`` must stay: a daemon holds its lock (the service manager could not stop it)."""
    lock_file = state_dir / LOCK_FILE
    if not lock_file.exists():
        return ""
    try:
        current.lock_exclusive(lock_file).release()
    except LockHeld as held:
        return f"a copilot-otel daemon (pid {held.owner}) still runs with it: stop it, then run this again"
    except OSError:
        return ""
    return ""


def purge_files(paths: Sequence[PurgePath]) -> int:
    """Say what is removed, then remove it; 0 when everything listed is gone, 4 when a folder was refused or
    could not be removed (it is named, with the reason)."""
    if not paths:
        print("Nothing else to remove (--purge): no state or config folder of copilot-otel exists.")
        return 0
    print("Removing (--purge):")
    for item in paths:
        files, size = _folder_size(item.path) if not item.refused else (0, 0)
        what = f"{item.holds}; {count(files, 'file')}, {_bytes(size)}" if not item.refused else ""
        what = what or f"NOT removed: {item.refused}"
        print(f"  {item.path}  ({what})")
    code = 0
    for item in paths:
        if item.refused:
            code = 4
            continue
        try:
            shutil.rmtree(item.path)
        except OSError as exc:
            print(f"Could not remove {item.path}: {exc.strerror or exc}")
            code = 4
            continue
        print(f"Removed {item.path}")
    return code


def _folder_size(path: Path) -> tuple[int, int]:
    files = size = 0
    for folder, _dirs, names in os.walk(path):
        for file in names:
            with contextlib.suppress(OSError):
                size += os.lstat(os.path.join(folder, file)).st_size
                files += 1
    return files, size


def _bytes(size: int) -> str:
    if size < 1024:
        return count(size, "byte")
    scaled, unit = size / 1024, "KiB"
    for bigger in ("MiB", "GiB"):
        if scaled < 1024:
            break
        scaled, unit = scaled / 1024, bigger
    return f"{scaled:,.1f} {unit}"


# ------------------------------------------------------------------------------------------------ what to run
def executable() -> list[str]:
    """The command that starts copilot-otel, as absolute paths: the running console script if that is what
    we are, else ``copilot-otel`` on ``PATH``, else the one next to this interpreter, else ``python -m``."""
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is not None and argv0.name == "copilot-otel" and argv0.is_file():
        return [str(argv0.resolve())]
    found = shutil.which("copilot-otel")
    if found:
        return [str(Path(found).resolve())]
    sibling = Path(sys.executable).parent / "copilot-otel"
    if sibling.is_file() and os.access(sibling, os.X_OK):
        return [str(sibling)]
    return [str(Path(sys.executable).absolute()), "-m", "copilot_otel"]


@dataclass
class ServiceEnvironment:
    """The environment the service gets: ``public`` goes into the unit, ``secret`` into a 0600 file."""

    public: dict[str, str] = field(default_factory=dict)
    secret: dict[str, str] = field(default_factory=dict)


def service_environment(config: Config, env: Mapping[str, str] | None = None) -> ServiceEnvironment:
    """The variables that make the service behave like ``copilot-otel run`` would in this shell now."""
    env = os.environ if env is None else env
    values: dict[str, str] = {
        name: value
        for name, value in env.items()
        if name.startswith(("OTEL_", "COPILOT_OTEL_")) and name not in _NOT_COPIED and value.strip()
    }
    sources = config.sources
    if sources.get("endpoint", "").startswith("flag") and config.endpoint:
        # A flag beats every endpoint variable (per-signal ones included), as it did for this command.
        for signal in ("TRACES", "LOGS", "METRICS"):
            values.pop(f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT", None)
        values["OTEL_EXPORTER_OTLP_ENDPOINT"] = config.endpoint
    if sources.get("protocol", "").startswith("flag"):
        for signal in ("TRACES", "LOGS", "METRICS"):
            values.pop(f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL", None)
        values["OTEL_EXPORTER_OTLP_PROTOCOL"] = config.protocol
    if sources.get("log_level", "").startswith("flag"):
        values["COPILOT_OTEL_LOG_LEVEL"] = config.log_level
    # Paths: written out whenever the service's bare environment (HOME only: no XDG_*, no COPILOT_HOME) would
    # resolve them differently, and always absolute. Values from the config file are left to the config file.
    bare = {"HOME": env.get("HOME", str(Path.home()))}
    for name, var in (
        ("config_file", "COPILOT_OTEL_CONFIG"),
        ("state_dir", "COPILOT_OTEL_STATE_DIR"),
        ("session_state", "COPILOT_OTEL_SESSION_STATE"),
    ):
        value = Path(os.path.abspath(getattr(config, name)))
        if sources.get(name, "default").startswith("file "):
            continue
        if value != setting_default(name, bare):
            values[var] = str(value)
        else:
            values.pop(var, None)
    result = ServiceEnvironment()
    for name in sorted(values):
        (result.secret if is_secret(name, values[name]) else result.public)[name] = values[name]
    return result


# A variable that is a credential whatever its value: the webhook URL (a Slack or Teams webhook's path is its key).
_SECRET_VARIABLES = frozenset({"COPILOT_OTEL_NOTIFY_WEBHOOK"})


def is_secret(name: str, value: str) -> bool:
    """Whether a variable's value is a credential, kept out of the service's world-readable file.

    The OTLP headers (API keys, bearer tokens), the webhook URL, and any endpoint or URL that carries a user and
    password or a query string (``http://alice:…@host:4318``, ``?token=…``): what the messages mask
    (:func:`copilot_otel.common.display.url`) is what the unit must not show.
    """
    if "HEADERS" in name or name in _SECRET_VARIABLES:
        return True
    if name.endswith("ENDPOINT") or "://" in value:
        return shown_url(value) != value
    return False


# ------------------------------------------------------------------------------------------------ helpers


def _write_atomic(path: Path, data: bytes, mode: int) -> None:
    """Write ``path`` via a temporary file (the state's writer: new, never through a link, synced) renamed
    over it by the platform seam, with exactly ``mode`` (umask does not widen it)."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_new_file(tmp, data, sync=True)
        os.chmod(tmp, mode)  # exactly mode, whatever the umask (Windows keeps only the read-only bit)
        current.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise StateError(f"cannot write {path}: {exc.strerror or exc}") from exc


def _remove(path: Path) -> bool:
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise StateError(f"cannot remove {path}: {exc.strerror or exc}") from exc
    return True


def _check_state_dir(state_dir: Path) -> None:
    """The daemon keeps checkpoints there: refuse to install a service that could only crash-loop."""
    probe = state_dir / f".service-{os.getpid()}.tmp"
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"ok")
        probe.unlink()
    except OSError as exc:
        raise StateError(
            f"the state dir {state_dir} is not writable ({exc.strerror or exc}); the service would not "
            "start: set --state-dir or COPILOT_OTEL_STATE_DIR to a writable directory"
        ) from exc


@dataclass(frozen=True, slots=True)
class _Ran:
    """What running one service-manager command gave: ``ok``, its output, or why it could not run."""

    ok: bool
    output: str


def _run(cmd: Sequence[str]) -> _Ran:
    try:
        proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=_TOOL_TIMEOUT_S, check=False)
    except FileNotFoundError:
        return _Ran(False, f"{cmd[0]} not found")
    except PermissionError:
        return _Ran(False, f"{cmd[0]} is not executable")
    except subprocess.TimeoutExpired:
        return _Ran(False, f"{shlex.join(cmd)} did not answer within {_TOOL_TIMEOUT_S:g}s")
    except OSError as exc:
        return _Ran(False, f"cannot run {cmd[0]}: {exc.strerror or exc}")
    text = (
        (proc.stdout.strip() or proc.stderr.strip())
        if proc.returncode == 0
        else (proc.stderr.strip() or proc.stdout.strip() or f"exit status {proc.returncode}")
    )
    return _Ran(proc.returncode == 0, text)


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def _tool(env: Mapping[str, str], env_var: str, name: str) -> str:
    """The service-manager binary: the override, else the one on PATH, else its bare name (fails to run)."""
    return env.get(env_var, "").strip() or shutil.which(name) or name


def _describe_env(environment: ServiceEnvironment) -> list[str]:
    lines = []
    if environment.public:
        lines.append("  settings: " + ", ".join(environment.public))
    if environment.secret:
        lines.append("  secrets (values not shown): " + ", ".join(environment.secret))
    return lines


class _Manager:
    config: Config
    env: Mapping[str, str]

    def __init__(self, config: Config, env: Mapping[str, str], name: str = "") -> None:
        self.config = config
        self.env = env

    def install(self, enable: bool) -> int:
        raise NotImplementedError

    def installed_environment(self) -> dict[str, str]:
        """The variables the installed service runs with (``{}`` when none is installed or it is unreadable)."""
        raise NotImplementedError

    def environment(self) -> ServiceEnvironment:
        """What the service gets now; an endpoint and headers it had are kept when this shell sets none."""
        environment = service_environment(self.config, self.env)
        kept = _kept_endpoint(environment, self.installed_environment())
        if kept:
            print("Kept from the installed service (this shell sets no OTLP endpoint): " + ", ".join(kept))
        return environment

    def uninstall(self) -> int:
        raise NotImplementedError

    def status(self) -> int:
        raise NotImplementedError


def _kept_endpoint(environment: ServiceEnvironment, installed: Mapping[str, str]) -> list[str]:
    """Carry the installed ``OTEL_EXPORTER_OTLP_*`` variables over when ``environment`` names no endpoint.

    Re-running ``install`` from a shell without the OTLP variables (a new terminal, a script) must not silently
    turn a service that exported to a collector into one that writes a local file.
    """
    current = {**environment.public, **environment.secret}
    if any(name.startswith("OTEL_EXPORTER_OTLP_") and name.endswith("ENDPOINT") for name in current):
        return []
    kept = sorted(n for n in installed if n.startswith("OTEL_EXPORTER_OTLP_") and n not in current)
    for name in kept:
        (environment.secret if is_secret(name, installed[name]) else environment.public)[name] = installed[
            name
        ]
    environment.public = dict(sorted(environment.public.items()))
    environment.secret = dict(sorted(environment.secret.items()))
    return kept


def _print_commands(intro: str, commands: Sequence[str]) -> None:
    print(intro)
    for command in commands:
        print(f"  {command}")


# ------------------------------------------------------------------------------------------------ systemd
def _systemd_escape(value: str) -> str:
    """A value for a unit file: ``%`` specifiers doubled; quoted with C escapes when it needs quoting."""
    value = value.replace("%", "%%")
    if value and not any(c in value for c in " \t\"'\\;$\n"):
        return value
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("$", "$$")
    return f'"{escaped}"'


def _environment_line(name: str, value: str) -> str:
    escaped = (
        f"{name}={value}".replace("%", "%%").replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    )
    return f'Environment="{escaped}"'


def _env_file_line(name: str, value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$").replace("`", "\\`")
    return f'{name}="{escaped}"'


class _Systemd(_Manager):
    def __init__(self, config: Config, env: Mapping[str, str], name: str = "") -> None:
        super().__init__(config, env)
        self.unit_name = f"copilot-otel{suffix(name)}.service"
        self.unit_dir = config_home(env) / "systemd" / "user"
        self.unit = self.unit_dir / self.unit_name
        self.wants_link = self.unit_dir / "default.target.wants" / self.unit_name
        self.env_file = systemd_env_file(env, name)
        self.systemctl = _tool(env, SYSTEMCTL_ENV, "systemctl")

    def render(self, environment: ServiceEnvironment) -> str:
        command = " ".join(_systemd_escape(part) for part in [*executable(), "run"])
        lines = [
            "# copilot-otel: follows GitHub Copilot CLI session logs and exports them as OpenTelemetry.",
            "# Written by 'copilot-otel service install' (run it again after changing settings);",
            "# remove with 'copilot-otel service uninstall'.",
            "[Unit]",
            "Description=copilot-otel: GitHub Copilot CLI sessions to OpenTelemetry",
            "",
            "[Service]",
            "Type=simple",
            f"ExecStart={command}",
            "Restart=on-failure",
            "RestartSec=5s",
            "# SIGTERM makes the daemon flush and checkpoint; give it time before SIGKILL.",
            "TimeoutStopSec=30s",
        ]
        lines += [_environment_line(name, value) for name, value in environment.public.items()]
        if environment.secret:
            lines.append(
                "# Secrets (OTLP headers, endpoint credentials, the webhook URL): in a file only you can read."
            )
            lines.append(f"EnvironmentFile=-{_systemd_escape(str(self.env_file))}")
        lines += ["", "[Install]", "WantedBy=default.target", ""]
        return "\n".join(lines)

    def _commands(self, *args: str) -> list[str]:
        return [self.systemctl, "--user", *args]

    def installed_environment(self) -> dict[str, str]:
        return unit_environment(self.unit, self.env_file)

    def install(self, enable: bool) -> int:
        _check_state_dir(self.config.state_dir)
        environment = self.environment()
        if environment.secret:
            body = "".join(_env_file_line(k, v) + "\n" for k, v in environment.secret.items())
            _write_atomic(
                self.env_file,
                ("# copilot-otel service secrets (" + ", ".join(environment.secret) + ")\n" + body).encode(),
                0o600,
            )
        else:
            _remove(self.env_file)
        _write_atomic(self.unit, self.render(environment).encode(), 0o644)
        print(f"Wrote {self.unit}")
        if environment.secret:
            print(f"Wrote {self.env_file} (mode 0600)")
        for line in _describe_env(environment):
            print(line)
        steps = [("daemon-reload",), ("enable", self.unit_name), ("restart", self.unit_name)]
        shown = [shlex.join(["systemctl", "--user", *step]) for step in steps]
        if not enable:
            _print_commands("Not enabled (--no-enable). To enable and start it:", shown)
            return 0
        for step in steps:
            ran = _run(self._commands(*step))
            if not ran.ok:
                reason = _first_line(ran.output)
                _print_commands(
                    f"Could not enable it with systemctl --user ({reason}). The unit is written; "
                    "enable and start it from your login session with:",
                    shown,
                )
                return 0
        print(
            f"Enabled and started {self.unit_name}; follow its log with: journalctl --user -u {self.unit_name} -f"
        )
        user = self.env.get("USER") or self.env.get("LOGNAME") or "$USER"
        print(f"To keep it running while you are logged out: loginctl enable-linger {user}")
        return 0

    def uninstall(self) -> int:
        present = [p for p in (self.unit, self.env_file) if p.exists()] + (
            [self.wants_link] if self.wants_link.is_symlink() else []
        )
        if not present:
            print(f"Not installed: {self.unit} does not exist.")
            return 0
        stopped = _run(self._commands("disable", "--now", self.unit_name))
        for path in present:
            _remove(path)
            print(f"Removed {path}")
        if stopped.ok:
            _run(self._commands("daemon-reload"))
            print(f"Stopped and disabled {self.unit_name}")
            return 0
        _print_commands(
            f"Could not stop it with systemctl --user ({_first_line(stopped.output)}). If it is "
            "running, stop it with:",
            [
                shlex.join(["systemctl", "--user", "stop", self.unit_name]),
                shlex.join(["systemctl", "--user", "daemon-reload"]),
            ],
        )
        return 0

    def status(self) -> int:
        if not self.unit.exists():
            print(f"Not installed ({self.unit} does not exist); install with: copilot-otel service install")
            return 1
        print(f"Installed: {self.unit}")
        for line in self.unit.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("ExecStart="):
                print(f"  {line}")
        if self.env_file.exists():
            print(f"  secrets in {self.env_file} (mode {self.env_file.stat().st_mode & 0o777:04o})")
        active = _run(self._commands("is-active", self.unit_name))
        enabled = _run(self._commands("is-enabled", self.unit_name))
        if _unreachable(active):
            print(f"  systemctl --user is unavailable ({_first_line(active.output)}); cannot tell if it runs")
            return 0
        print(f"  systemctl --user is-active: {_first_line(active.output) or 'unknown'}")
        print(f"  systemctl --user is-enabled: {_first_line(enabled.output) or 'unknown'}")
        return 0


def _unreachable(ran: _Ran) -> bool:
    """Whether the service manager itself could not be asked (as opposed to answering "inactive")."""
    text = ran.output.lower()
    return not ran.ok and (
        "not found" in text
        or "not executable" in text
        or "failed to connect" in text
        or "cannot run" in text
        or "did not answer" in text
        or "no medium" in text
    )


# ------------------------------------------------------------------------------------------------ launchd
class _Launchd(_Manager):
    def __init__(self, config: Config, env: Mapping[str, str], name: str = "") -> None:
        super().__init__(config, env)
        self.label = f"{LAUNCHD_LABEL}.{name}" if name else LAUNCHD_LABEL
        self.plist = launch_agents(env) / f"{self.label}.plist"
        self.launchctl = _tool(env, LAUNCHCTL_ENV, "launchctl")
        self.domains = launchd_domains(current.user_id() or 0)
        self.domain = self.domains[0]

    def installed_environment(self) -> dict[str, str]:
        return plist_environment(self.plist)

    def render(self, environment: ServiceEnvironment) -> dict[str, object]:
        state_dir = Path(os.path.abspath(self.config.state_dir))
        return {
            "Label": self.label,
            "ProgramArguments": [*executable(), "run"],
            "EnvironmentVariables": {**environment.public, **environment.secret},
            "RunAtLoad": True,
            # Restart after a crash, not after a clean exit (launchctl bootout, SIGTERM): Restart=on-failure.
            "KeepAlive": {"SuccessfulExit": False},
            "ThrottleInterval": 5,
            "ProcessType": "Background",
            "StandardOutPath": str(state_dir / "service.out.log"),
            "StandardErrorPath": str(state_dir / "service.err.log"),
        }

    def install(self, enable: bool) -> int:
        _check_state_dir(self.config.state_dir)
        environment = self.environment()
        document = self.render(environment)
        # launchd has no separate environment file: a plist that carries a secret is private.
        _write_atomic(self.plist, plistlib.dumps(document), 0o600 if environment.secret else 0o644)
        print(f"Wrote {self.plist}" + (" (mode 0600: it holds secrets)" if environment.secret else ""))
        for line in _describe_env(environment):
            print(line)
        print(f"  logs: {document['StandardErrorPath']}")
        target = f"{self.domain}/{self.label}"
        shown = [
            f"launchctl bootout {target} 2>/dev/null",
            shlex.join(["launchctl", "bootstrap", self.domain, str(self.plist)]),
        ]
        if not enable:
            _print_commands("Not loaded (--no-enable). To load and start it:", shown)
            return 0
        _run([self.launchctl, "bootout", target])  # not loaded yet is fine: this only replaces an old version
        ran = _run([self.launchctl, "bootstrap", self.domain, str(self.plist)])
        for fallback in self.domains[1:]:
            if ran.ok:
                break
            # Over SSH there is no gui/<uid> domain ("Domain does not support specified action"): user/<uid>.
            _run([self.launchctl, "bootout", f"{fallback}/{self.label}"])
            retry = _run([self.launchctl, "bootstrap", fallback, str(self.plist)])
            if retry.ok:
                ran, self.domain = retry, fallback
        if not ran.ok:
            _print_commands(
                f"Could not load it with launchctl ({_first_line(ran.output)}). The agent is written; "
                "load and start it with:",
                shown,
            )
            return 0
        print(f"Loaded and started {self.label}")
        return 0

    def uninstall(self) -> int:
        if not self.plist.exists():
            print(f"Not installed: {self.plist} does not exist.")
            return 0
        target = f"{self.domain}/{self.label}"
        ran = _run([self.launchctl, "bootout", target])
        for fallback in self.domains[1:]:
            if not ran.ok:
                ran = _run([self.launchctl, "bootout", f"{fallback}/{self.label}"])
        _remove(self.plist)
        print(f"Removed {self.plist}")
        if ran.ok:
            print(f"Stopped {self.label}")
        else:
            _print_commands(
                f"Could not stop it with launchctl ({_first_line(ran.output)}). If it is running, "
                "stop it with:",
                [f"launchctl bootout {target}"],
            )
        return 0

    def status(self) -> int:
        if not self.plist.exists():
            print(f"Not installed ({self.plist} does not exist); install with: copilot-otel service install")
            return 1
        print(f"Installed: {self.plist}")
        try:
            document = plistlib.loads(self.plist.read_bytes())
            print(f"  ProgramArguments: {shlex.join(document.get('ProgramArguments', []))}")
        except (OSError, plistlib.InvalidFileException, ValueError) as exc:
            print(f"  cannot read it: {exc}")
        ran = _run([self.launchctl, "print", f"{self.domain}/{self.label}"])
        for fallback in self.domains[1:]:
            if not ran.ok:
                ran = _run([self.launchctl, "print", f"{fallback}/{self.label}"])
        if not ran.ok:
            print(f"  launchctl: {_first_line(ran.output) or 'not loaded'}")
            return 0
        for line in ran.output.splitlines():
            stripped = line.strip()
            if stripped.startswith(("state =", "pid =", "last exit code =")):
                print(f"  {stripped}")
        return 0


# ------------------------------------------------------------------------------------------------ Task Scheduler
def task_xml(
    command: str, arguments: Sequence[str], working_dir: str, user: str, task_name: str = TASK_NAME
) -> str:
    """A Task Scheduler task definition (schema ``http://schemas.microsoft.com/windows/2004/02/mit/task``, 1.2):
    start at log-on of ``user`` in their session, with no time limit, restarted every minute when it fails."""
    args = subprocess.list2cmdline(list(arguments))
    return "\n".join(
        [
            '<?xml version="1.0" encoding="UTF-16"?>',
            '<Task version="1.2" xmlns="http://schemas.microsoft.com/windows/2004/02/mit/task">',
            "  <RegistrationInfo>",
            "    <Description>copilot-otel: GitHub Copilot CLI sessions to OpenTelemetry. Written by "
            "'copilot-otel service install'; remove with 'copilot-otel service uninstall'.</Description>",
            f"    <URI>\\{task_name}</URI>",
            "  </RegistrationInfo>",
            "  <Triggers>",
            "    <LogonTrigger>",
            "      <Enabled>true</Enabled>",
            f"      <UserId>{escape(user)}</UserId>",
            "    </LogonTrigger>",
            "  </Triggers>",
            "  <Principals>",
            '    <Principal id="Author">',
            f"      <UserId>{escape(user)}</UserId>",
            "      <LogonType>InteractiveToken</LogonType>",
            "      <RunLevel>LeastPrivilege</RunLevel>",
            "    </Principal>",
            "  </Principals>",
            "  <Settings>",
            "    <MultipleInstancesPolicy>IgnoreNew</MultipleInstancesPolicy>",
            "    <DisallowStartIfOnBatteries>false</DisallowStartIfOnBatteries>",
            "    <StopIfGoingOnBatteries>false</StopIfGoingOnBatteries>",
            "    <StartWhenAvailable>true</StartWhenAvailable>",
            "    <IdleSettings>",
            "      <StopOnIdleEnd>false</StopOnIdleEnd>",
            "      <RestartOnIdle>false</RestartOnIdle>",
            "    </IdleSettings>",
            "    <Enabled>true</Enabled>",
            "    <ExecutionTimeLimit>PT0S</ExecutionTimeLimit>",
            "    <Priority>7</Priority>",
            "    <RestartOnFailure>",
            "      <Interval>PT1M</Interval>",
            "      <Count>255</Count>",
            "    </RestartOnFailure>",
            "  </Settings>",
            '  <Actions Context="Author">',
            "    <Exec>",
            f"      <Command>{escape(command)}</Command>",
            f"      <Arguments>{escape(args)}</Arguments>",
            f"      <WorkingDirectory>{escape(working_dir)}</WorkingDirectory>",
            "    </Exec>",
            "  </Actions>",
            "</Task>",
            "",
        ]
    )


def _windows_python() -> str:
    """``pythonw.exe`` next to this interpreter (no console window for a log-on task), else this interpreter."""
    here = Path(sys.executable)
    windowless = here.with_name("pythonw" + here.suffix)
    return str(windowless if windowless.is_file() else here)


class _TaskScheduler(_Manager):
    def __init__(self, config: Config, env: Mapping[str, str], name: str = "") -> None:
        super().__init__(config, env)
        self.task = f"{TASK_NAME}{suffix(name)}"
        folder = current.default_dirs(env).config
        self.xml_file = folder / f"{self.task}-task.xml"
        self.env_file = folder / f"service-env{suffix(name)}.json"
        self.log_file = Path(os.path.abspath(config.state_dir)) / "service.log"
        self.schtasks = _tool(env, SCHTASKS_ENV, "schtasks")
        domain, user = env.get("USERDOMAIN", ""), env.get("USERNAME", "")
        self.user = f"{domain}\\{user}" if domain and user else user or env.get("USER", "")

    def installed_environment(self) -> dict[str, str]:
        return json_environment(self.env_file)

    def command(self) -> tuple[str, list[str]]:
        """The task's program and arguments: the launcher, which loads the settings file and runs ``run``."""
        return _windows_python(), [
            "-m",
            "copilot_otel._platform._launch",
            str(self.env_file),
            str(self.log_file),
        ]

    def render(self) -> str:
        program, arguments = self.command()
        return task_xml(
            program, arguments, str(Path(os.path.abspath(self.config.state_dir))), self.user, self.task
        )

    def install(self, enable: bool) -> int:
        _check_state_dir(self.config.state_dir)
        environment = self.environment()
        settings = {**environment.public, **environment.secret}
        _write_atomic(self.env_file, json.dumps(settings, indent=2).encode("utf-8"), 0o600)
        _write_atomic(self.xml_file, self.render().encode("utf-16"), 0o644)
        print(f"Wrote {self.xml_file}")
        print(f"Wrote {self.env_file} (only your account can read your profile folder)")
        for line in _describe_env(environment):
            print(line)
        print(f"  log: {self.log_file}")
        steps = [
            ["/Create", "/TN", self.task, "/XML", str(self.xml_file), "/F"],
            ["/Run", "/TN", self.task],
        ]
        shown = [subprocess.list2cmdline(["schtasks", *step]) for step in steps]
        if not enable:
            _print_commands("Not registered (--no-enable). To register and start it:", shown)
            return 0
        for step in steps:
            ran = _run([self.schtasks, *step])
            if not ran.ok:
                _print_commands(
                    f"Could not register it with schtasks ({_first_line(ran.output)}). The task file is "
                    "written; register and start it with:",
                    shown,
                )
                return 0
        print(f"Registered and started the scheduled task {self.task} (it starts at every log-on)")
        return 0

    def uninstall(self) -> int:
        present = [p for p in (self.xml_file, self.env_file) if p.exists()]
        _run([self.schtasks, "/End", "/TN", self.task])
        ran = _run([self.schtasks, "/Delete", "/TN", self.task, "/F"])
        for path in present:
            _remove(path)
            print(f"Removed {path}")
        if ran.ok:
            print(f"Stopped and deleted the scheduled task {self.task}")
        elif not present:
            print(f"Not installed: no scheduled task {self.task} and no {self.xml_file}.")
        else:
            _print_commands(
                f"Could not delete the task with schtasks ({_first_line(ran.output)}). If it exists, delete it "
                "with:",
                [subprocess.list2cmdline(["schtasks", "/Delete", "/TN", self.task, "/F"])],
            )
        return 0

    def status(self) -> int:
        ran = _run([self.schtasks, "/Query", "/TN", self.task, "/FO", "LIST", "/V"])
        if not ran.ok and not self.xml_file.exists():
            print(
                f"Not installed (no scheduled task {self.task}); install with: copilot-otel service install"
            )
            return 1
        print(f"Installed: scheduled task {self.task} ({self.xml_file})")
        if not ran.ok:
            print(f"  schtasks: {_first_line(ran.output) or 'not registered'}")
            return 0
        for line in ran.output.splitlines():
            key = line.split(":", 1)[0].strip()
            if key in ("Status", "Last Run Time", "Last Result", "Next Run Time"):
                print(f"  {line.strip()}")
        return 0


_MANAGERS: dict[ServiceManager, type[_Systemd | _Launchd | _TaskScheduler]] = {
    "systemd": _Systemd,
    "launchd": _Launchd,
    "task-scheduler": _TaskScheduler,
}
