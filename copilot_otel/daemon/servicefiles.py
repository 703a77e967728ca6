"""The installed services' files read back: which service manager, where its files are, what state dir each names.

``copilot-otel status`` run from a shell whose settings differ from the service's asks :func:`installed_state_dirs`
where else a daemon may run. That is all ``status`` needs of :mod:`copilot_otel.commands.service`, which writes these files
and drives the service managers (``subprocess``, ``shutil``, the unit, plist and task XML writers): kept apart so
``status`` starts in under 100 ms (issue 25). :mod:`copilot_otel.commands.service` imports what it shares from here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from .._platform import ServiceManager, current
from ..common.errors import ConfigError
from ..common.jsonobject import NotAJsonObject, json_object
from ..settings.config import SETTINGS

__all__ = [
    "LAUNCHD_LABEL",
    "PLATFORM_ENV",
    "config_home",
    "installed_state_dirs",
    "json_environment",
    "launch_agents",
    "manager_kind",
    "plist_environment",
    "read_text",
    "setting_default",
    "suffix",
    "systemd_env_file",
    "unescape",
    "unit_environment",
]

LAUNCHD_LABEL = "io.github.copilot-otel"
PLATFORM_ENV = "COPILOT_OTEL_SERVICE_PLATFORM"


def suffix(name: str) -> str:
    """A service's file-name suffix: ``-NAME`` for ``--name NAME``, nothing for the default service."""
    return f"-{name}" if name else ""


def manager_kind(env: Mapping[str, str]) -> ServiceManager:
    """The service manager to drive: the platform seam's, unless ``COPILOT_OTEL_SERVICE_PLATFORM`` names one."""
    override = env.get(PLATFORM_ENV, "").strip()
    if override:
        if override not in _OVERRIDES:
            raise ConfigError(f"Expected {PLATFORM_ENV} to be one of linux, darwin, got {override!r}")
        return _OVERRIDES[override]
    if current.service_manager is None:
        raise ConfigError(
            "copilot-otel service supports Linux (systemd), macOS (launchd) and Windows (Task Scheduler), not "
            f"this system ({current.name}); run 'copilot-otel run' under your own service manager instead"
        )
    return current.service_manager


_OVERRIDES: dict[str, ServiceManager] = {"linux": "systemd", "darwin": "launchd"}


def setting_default(name: str, env: Mapping[str, str]) -> object:
    """A setting's default in environment ``env`` (a service's bare one differs from this shell's)."""
    setting = next(s for s in SETTINGS if s.name == name)
    return setting.default_for(env)


def config_home(env: Mapping[str, str]) -> Path:
    """Where systemd looks for user units: ``$XDG_CONFIG_HOME`` when absolute, else ``~/.config``."""
    value = env.get("XDG_CONFIG_HOME", "").strip()
    return Path(value) if value and os.path.isabs(value) else current.home(env) / ".config"


def unescape(text: str, newline: bool) -> str:
    """Undo a backslash escaping (``\\x`` → ``x``; ``\\n`` → a newline when ``newline``)."""
    out: list[str] = []
    chars = iter(text)
    for char in chars:
        if char == "\\":
            nxt = next(chars, "")
            out.append("\n" if newline and nxt == "n" else nxt)
        else:
            out.append(char)
    return "".join(out)


def read_text(path: Path) -> str:
    """A file we wrote, as text; empty when it cannot be read."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def unit_environment(unit: Path, env_file: Path) -> dict[str, str]:
    """The ``Environment=`` lines of a unit this module wrote, and the secrets file it names."""
    values: dict[str, str] = {}
    text = read_text(unit)
    for line in text.splitlines():
        if line.startswith('Environment="') and line.endswith('"'):
            name, _, value = unescape(line[len('Environment="') : -1], True).partition("=")
            values[name] = value.replace("%%", "%")
    if "EnvironmentFile=" in text:
        for line in read_text(env_file).splitlines():
            name, sep, value = line.partition("=")
            if sep and not line.startswith("#") and value.startswith('"') and value.endswith('"'):
                values[name] = unescape(value[1:-1], False)
    return values


def plist_environment(plist: Path) -> dict[str, str]:
    """A launchd agent's ``EnvironmentVariables``."""
    import plistlib  # start-up time: only where a plist is installed (``status`` looks on every platform)

    try:
        document = plistlib.loads(plist.read_bytes())
    except (OSError, plistlib.InvalidFileException, ValueError):
        return {}
    variables = document.get("EnvironmentVariables") if isinstance(document, dict) else None
    return {str(k): str(v) for k, v in variables.items()} if isinstance(variables, dict) else {}


def json_environment(path: Path) -> dict[str, str]:
    """The settings file a Windows task runs with."""
    try:
        settings = json_object(path.read_bytes())
    except (OSError, NotAJsonObject):
        return {}
    return {str(k): str(v) for k, v in settings.items()}


def systemd_env_file(env: Mapping[str, str], name: str) -> Path:
    """The 0600 file of a systemd unit's secret variables (``EnvironmentFile=``)."""
    return config_home(env) / "copilot-otel" / f"service{suffix(name)}.env"


def launch_agents(env: Mapping[str, str]) -> Path:
    """Where launchd reads the user's agents."""
    return current.home(env) / "Library" / "LaunchAgents"


def installed_state_dirs(env: Mapping[str, str] | None = None) -> list[Path]:
    """The state dir of each installed service (``status`` run from another shell finds them there)."""
    env = os.environ if env is None else env
    try:
        kind = manager_kind(env)
    except ConfigError:
        return []
    environments: list[dict[str, str]] = []
    if kind == "systemd":
        for unit in sorted((config_home(env) / "systemd" / "user").glob("copilot-otel*.service")):
            name = unit.name[len("copilot-otel") : -len(".service")].lstrip("-")
            environments.append(unit_environment(unit, systemd_env_file(env, name)))
    elif kind == "launchd":
        for plist in sorted(launch_agents(env).glob(f"{LAUNCHD_LABEL}*.plist")):
            environments.append(plist_environment(plist))
    else:
        for path in sorted(current.default_dirs(env).config.glob("service-env*.json")):
            environments.append(json_environment(path))
    # A unit that names no state dir uses the default of the service's bare environment (HOME only), which is
    # not this shell's when it sets XDG_STATE_HOME or COPILOT_OTEL_STATE_DIR.
    bare = Path(str(setting_default("state_dir", {"HOME": str(current.home(env))})))
    return [Path(env.get("COPILOT_OTEL_STATE_DIR") or bare) for env in environments]
