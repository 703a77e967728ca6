"""Tell a person about a runaway without any backend: a desktop notification and/or an HTTP webhook.

A :class:`Notice` says what happened in one session (no prompt or tool content unless content capture is on:
the title is the session's ``workspace.yaml`` summary, which the daemon reads only when prompts are captured).
:class:`Notifier` sends notices on a small worker thread from a bounded queue, so a slow webhook never holds up
the tail; a full queue drops the notice (counted). Every failure is logged (at most once a minute per channel)
and counted; none is raised.

Webhook body (``webhook_format = "json"``, ``POST``, ``Content-Type: application/json``)::

    {"source": "copilot-otel", "event": "copilot_otel.runaway.detected",
     "session_id": "…", "title": null, "repository": "octo/app", "branch": "main",
     "reason": "identical_tool_calls", "threshold": 5, "action": "interrupted",
     "counts": {"turns": 6, "tool_calls": 5}, "tool_name": "bash",
     "show_command": "copilot-otel show …", "detail": "…", "time": "2026-12-01T14:40:07.123Z"}

``webhook_format = "slack"`` sends ``{"text": "<one line>"}`` (Slack, Mattermost, Rocket.Chat, Discord's
``/slack`` endpoints).
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal, Protocol

from . import __version__
from ._platform import Platform, current

__all__ = ["DesktopChannel", "Notice", "Notifier", "WebhookChannel"]

logger = logging.getLogger(__name__)

WebhookFormat = Literal["json", "slack"]
# Notices waiting for the worker at most; more are dropped (a notification storm helps nobody).
QUEUE_SIZE = 64
SEND_TIMEOUT_S = 5.0
_LOG_EVERY_S = 60.0


@dataclass(frozen=True, slots=True)
class Notice:
    """One thing to tell the user about one session (the neutral form every channel formats)."""

    event: str
    session_id: str
    reason: str
    action: str
    time_ns: int
    threshold: int | None = None
    turns: int = 0
    tool_calls: int = 0
    tool_name: str | None = None
    repository: str | None = None
    branch: str | None = None
    title: str | None = None
    detail: str = ""

    @property
    def show_command(self) -> str:
        return f"copilot-otel show {self.session_id}"

    def headline(self) -> str:
        """The notification's title."""
        where = self.repository or self.session_id[:8]
        if self.event == "copilot_otel.prompt.error":
            return f"Copilot prompt failed in {where}"
        verb = {"interrupted": "interrupted", "dry_run": "detected (dry run)"}.get(self.action, "detected")
        return f"Runaway agent {verb} in {where}"

    def body(self) -> str:
        """The notification's text: reason, counts, how to look."""
        what = self.reason.replace("_", " ")
        if self.tool_name:
            what += f" ({self.tool_name})"
        parts = [f"{what}: {self.turns} turns, {self.tool_calls} tool calls so far"]
        if self.title:
            parts.append(f"session {self.title!r}")
        if self.branch:
            parts.append(f"branch {self.branch}")
        parts.append(self.show_command)
        return "; ".join(parts)

    def as_json(self) -> dict[str, Any]:
        """The documented webhook body."""
        when = datetime.fromtimestamp(self.time_ns / 1e9, tz=timezone.utc)
        return {
            "source": "copilot-otel",
            "event": self.event,
            "session_id": self.session_id,
            "title": self.title,
            "repository": self.repository,
            "branch": self.branch,
            "reason": self.reason,
            "threshold": self.threshold,
            "action": self.action,
            "counts": {"turns": self.turns, "tool_calls": self.tool_calls},
            "tool_name": self.tool_name,
            "show_command": self.show_command,
            "detail": self.detail,
            "time": when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        }


class Channel(Protocol):
    """Somewhere a notice can go; ``send`` raises on failure (the notifier counts and logs it)."""

    name: str

    def send(self, notice: Notice) -> None: ...


@dataclass
class WebhookChannel:
    """``POST`` the notice to ``url`` as the documented JSON body, or as a Slack-compatible ``{"text"}``."""

    url: str
    format: WebhookFormat = "json"
    timeout_s: float = SEND_TIMEOUT_S
    name: str = "webhook"

    def payload(self, notice: Notice) -> bytes:
        if self.format == "slack":
            body: dict[str, Any] = {"text": f"*{notice.headline()}*\n{notice.body()}"}
        else:
            body = notice.as_json()
        return json.dumps(body).encode()

    def send(self, notice: Notice) -> None:
        request = urllib.request.Request(
            self.url,
            data=self.payload(notice),
            method="POST",
            headers={"Content-Type": "application/json", "User-Agent": f"copilot-otel/{__version__}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                response.read(1024)
        except urllib.error.HTTPError as exc:
            raise OSError(f"HTTP {exc.code} from the webhook") from None
        except urllib.error.URLError as exc:
            raise OSError(f"webhook unreachable: {exc.reason}") from None


@dataclass
class DesktopChannel:
    """A desktop notification through the platform's command (:meth:`Platform.notification_command`)."""

    platform: Platform = field(default_factory=lambda: current)
    find: Callable[[str], str | None] = shutil.which
    timeout_s: float = SEND_TIMEOUT_S
    name: str = "desktop"

    def command(self, notice: Notice) -> list[str] | None:
        """The exact command that shows ``notice`` here, or ``None`` when this machine has no way to."""
        return self.platform.notification_command(notice.headline(), notice.body(), self.find)

    def send(self, notice: Notice) -> None:
        argv = self.command(notice)
        if argv is None:
            raise OSError(f"no desktop notification command on this {self.platform.name} machine")
        try:
            done = subprocess.run(
                argv,
                capture_output=True,
                text=True,
                timeout=self.timeout_s,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise OSError(f"{argv[0]} did not finish in {self.timeout_s:g}s") from None
        if done.returncode != 0:
            raise OSError(f"{argv[0]} exited {done.returncode}: {done.stderr.strip()[:200]}")


Outcome = tuple[str, str]  # (channel, "sent" | "failed" | "dropped")


class Notifier:
    """Sends notices to its channels on one worker thread; :meth:`submit` never blocks.

    ``outcomes`` collects ``(channel, result)`` pairs for the daemon to count on its own thread.
    """

    def __init__(self, channels: Sequence[Channel], queue_size: int = QUEUE_SIZE) -> None:
        self.channels = list(channels)
        self.outcomes: queue.SimpleQueue[Outcome] = queue.SimpleQueue()
        self._queue: queue.Queue[Notice | None] = queue.Queue(queue_size)
        self._thread: threading.Thread | None = None
        self._last_log: dict[str, float] = {}

    def start(self) -> Notifier:
        if self.channels and self._thread is None:
            self._thread = threading.Thread(target=self._work, name="copilot-otel-notify", daemon=True)
            self._thread.start()
        return self

    def submit(self, notice: Notice) -> None:
        """Queue a notice for every channel; a full queue drops it (counted, logged)."""
        if not self.channels:
            return
        try:
            self._queue.put_nowait(notice)
        except queue.Full:
            self.outcomes.put(("queue", "dropped"))
            self._warn("queue", "dropped a notification: %d are already waiting", self._queue.maxsize)

    def close(self, timeout_s: float = 2.0) -> None:
        """Send what is queued (within ``timeout_s``), then stop the worker."""
        if self._thread is None:
            return
        with contextlib.suppress(queue.Full):
            self._queue.put(None, timeout=timeout_s)
        self._thread.join(timeout_s)
        self._thread = None

    def _work(self) -> None:
        while True:
            notice = self._queue.get()
            if notice is None:
                return
            for channel in self.channels:
                try:
                    channel.send(notice)
                except Exception as exc:
                    self.outcomes.put((channel.name, "failed"))
                    self._warn(channel.name, "could not send a %s notification: %s", channel.name, exc)
                else:
                    self.outcomes.put((channel.name, "sent"))

    def _warn(self, key: str, msg: str, *args: Any) -> None:
        now = time.monotonic()
        if now - self._last_log.get(key, -1e9) >= _LOG_EVERY_S:
            self._last_log[key] = now
            logger.warning(msg, *args)
