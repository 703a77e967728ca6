"""macOS: launchd agents, ``~/Library/Application Support``, spawned replay workers."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

from . import _quick
from ._portable import DefaultDirs, ServiceManager
from ._posix import Posix

__all__ = ["Darwin", "launchd_domains"]


class Darwin(Posix):
    """macOS."""

    name = "darwin"
    service_manager: ServiceManager | None = "launchd"

    def default_dirs(self, env: Mapping[str, str]) -> DefaultDirs:
        """``~/Library/Application Support/copilot-otel``, unless XDG or an earlier version's folders say
        otherwise (:func:`._quick.default_dirs`)."""
        return DefaultDirs(*_quick.default_dirs(env, "darwin"))

    def notification_command(
        self, title: str, body: str, find: Callable[[str], str | None]
    ) -> list[str] | None:
        """Notification Center, through AppleScript's ``display notification`` (JSON strings are valid
        AppleScript string literals for what we send: quotes and backslashes escaped)."""
        osascript = find("osascript")
        if osascript is None:
            return None
        script = f"display notification {json.dumps(body)} with title {json.dumps(title)}"
        return [osascript, "-e", script]

    def worker_start_method(self, protocol: str) -> str:
        # Forking after network libraries (and Apple's frameworks) have started threads can crash on macOS; spawn
        # has been Python's default there since 3.8 for that reason.
        return "spawn"


def launchd_domains(uid: int) -> list[str]:
    """The launchd domains to try for a per-user agent: ``gui/<uid>`` (a desktop login), then ``user/<uid>``
    (the one that exists over SSH, where ``gui/<uid>`` refuses to bootstrap)."""
    return [f"gui/{uid}", f"user/{uid}"]
