"""Where the state directory is, found without the settings table: what the ``statusline`` hook needs to start.

Claude Code waits for the hook after every message, and the table (:mod:`.config`: every setting, its parsers and
the privacy gates) costs more to import than the hook has. The hook needs one setting, ``state_dir``, so this
module finds it by the table's own rule, flag > environment variable > config file > default, with the pieces the
table uses itself: the names (:data:`STATE_DIR_FLAG` …), ``~`` expansion (:func:`expand`), the TOML reader
(:func:`toml_module`) and the platform's default folders. Anything this reading cannot settle (a config file it
cannot read or parse, a ``state_dir`` of another type) is :class:`Unsettled`: the caller then loads the whole
table, which says exactly what is wrong. ``tests/test_statusline.py`` holds this reading to the table's.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType

from .._platform import _quick

__all__ = [
    "CONFIG_ENV",
    "CONFIG_FLAG",
    "CONFIG_NAME",
    "STATE_DIR_ENV",
    "STATE_DIR_FLAG",
    "Unsettled",
    "default_dirs",
    "expand",
    "state_dir",
    "toml_module",
]

CONFIG_FLAG = "--config"
CONFIG_ENV = "COPILOT_OTEL_CONFIG"
STATE_DIR_FLAG = "--state-dir"
STATE_DIR_ENV = "COPILOT_OTEL_STATE_DIR"
CONFIG_NAME = "config.toml"


class Unsettled(Exception):
    """This quick reading cannot settle the state directory: load the whole settings table instead."""


def home(env: Mapping[str, str]) -> Path:
    """``HOME``; on Windows ``USERPROFILE`` first (where Copilot CLI puts ``.copilot``)."""
    return _quick.home(env, windows=_quick.dirs_kind() == "windows")


def default_dirs(env: Mapping[str, str]) -> tuple[Path, Path]:
    """``(state, config)`` folders when no setting names them: XDG on Linux, ~/Library/Application Support on
    macOS, %LOCALAPPDATA% / %APPDATA% on Windows (:func:`copilot_otel._platform._quick.default_dirs`)."""
    return _quick.default_dirs(env, _quick.dirs_kind())


def expand(text: str, env: Mapping[str, str]) -> Path:
    """``~`` expansion against ``env``'s ``HOME`` (so tests control it); the OS expands ``~user``."""
    if text == "~" or text.startswith("~/"):
        return home(env) / text[2:]
    return Path(text).expanduser()


def toml_module() -> ModuleType | None:
    """``tomllib`` (3.11+), else the ``tomli`` backport if installed, else ``None``: no config file support
    (flags and env vars still work; a config file that exists is a ConfigError)."""
    for name in ("tomllib", "tomli"):
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError:  # Python 3.10 without tomli
            continue
    return None


def _given(flags: Mapping[str, str], flag: str, env: Mapping[str, str], var: str) -> str | None:
    """A flag's value, else a non-blank environment variable's, stripped as the table strips them."""
    value = flags.get(flag)
    if value is None:
        value = env.get(var)
    return value.strip() if value is not None and value.strip() else None


def state_dir(flags: Mapping[str, str], env: Mapping[str, str] | None = None) -> Path:
    """The state directory ``flags`` (``{"--state-dir": …, "--config": …}``, as given) and ``env`` select.

    Raises:
        Unsettled: The config file is needed and cannot be read (a given one missing, unreadable, not TOML, no
            TOML reader) or its ``state_dir`` is not a non-empty string.
    """
    env = os.environ if env is None else env
    given = _given(flags, STATE_DIR_FLAG, env, STATE_DIR_ENV)
    if given is not None:
        return expand(given, env)
    state, config = default_dirs(env)
    named = _given(flags, CONFIG_FLAG, env, CONFIG_ENV)
    path = expand(named, env) if named is not None else config / CONFIG_NAME
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        if named is None:
            return state  # no config file, as the default allows
        raise Unsettled(f"{path} does not exist") from None
    except OSError as exc:
        raise Unsettled(str(exc)) from None
    toml = toml_module()
    if toml is None:
        raise Unsettled("no TOML reader")
    try:
        values = toml.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, toml.TOMLDecodeError) as exc:
        raise Unsettled(str(exc)) from None
    value = values.get("state_dir")
    if value is None:
        return state
    if not isinstance(value, str) or not value.strip():
        raise Unsettled("state_dir is not a path")
    return expand(value.strip(), env)
