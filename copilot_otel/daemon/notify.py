"""Tell a person about a runaway without any backend: a desktop notification and/or an HTTP webhook.

A :class:`Notice` says what happened in one session (no prompt or tool content unless content capture is on:
the title is the session's ``workspace.yaml`` summary, which the daemon reads only when prompts are captured).
:class:`Notifier` sends notices on a small worker thread from a bounded queue, so a slow webhook never holds up
the tail; a full queue drops the notice (counted). Every failure is logged (at most once a minute per channel, the
next line saying how many were held back: :class:`~copilot_otel.common.ratelimit.RateLimitedLog`) and counted; none is
raised.

A storm (200 sessions looping at once, a shared collector hiccup that fails every prompt) must not become 200
webhook posts and desktop pop-ups. So each destination gets at most one message per :data:`MIN_INTERVAL_S`,
a notice waits :data:`COALESCE_S` for others, and what gathered in between goes out as one :class:`Burst`
("Runaway agents detected in 200 sessions", naming them). A failed delivery is retried
:data:`ATTEMPTS` times with backoff (not a refusal such as HTTP 400 or a missing notification command);
:meth:`Notifier.close` sends what is still waiting, whatever the interval, within its deadline. Outcomes are
counted per notice, so ``copilot_otel.notifications`` counts notices, however many messages carried them.

Webhook body (``webhook_format = "json"``, ``POST``, ``Content-Type: application/json``)::

    {"source": "copilot-otel", "event": "copilot_otel.runaway.detected",
     "session_id": "…", "title": null, "repository": "octo/app", "branch": "main",
     "reason": "identical_tool_calls", "threshold": 5, "action": "interrupted",
     "counts": {"turns": 6, "tool_calls": 5}, "tool_name": "bash",
     "show_command": "copilot-otel show …", "detail": "…", "time": "2026-12-01T14:40:07.123Z"}

A burst (more than one notice in one message) is posted as::

    {"source": "copilot-otel", "event": "copilot_otel.notifications", "count": 200,
     "sessions": ["…", …], "notices": [<the body above>, … at most 20]}

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

from .._platform import Platform, current
from .._version import __version__
from ..common.ratelimit import RateLimitedLog
from ..projections.catalog import NOTIFICATIONS, PROMPT_ERROR_EVENT

__all__ = ["Burst", "DesktopChannel", "Notice", "Notifier", "Refused", "WebhookChannel"]

logger = logging.getLogger(__name__)

WebhookFormat = Literal["json", "slack"]
# Notices waiting for the worker at most; more are dropped (counted). The worker only moves them to the
# destinations' waiting lists, so this bounds a burst between two of its wake-ups: 200 sessions looping at once
# must fit (a notice is a few hundred bytes).
QUEUE_SIZE = 1_024
SEND_TIMEOUT_S = 5.0
_LOG_EVERY_S = 60.0
# A notice waits this long for others, so that what happens at once goes out as one message.
COALESCE_S = 2.0
# One message per destination at most this often; notices in between wait for the next (aggregated).
MIN_INTERVAL_S = 30.0
# Tries per message, the first included, with backoff doubling from RETRY_BACKOFF_S in between.
ATTEMPTS = 3
RETRY_BACKOFF_S = 1.0
# Notices waiting for one destination at most (beyond, dropped and counted); a burst message names them all.
MAX_WAITING = 1_000
# The notices a burst's JSON body carries whole (it names every session).
BURST_NOTICES = 20
# Sessions a burst's text names before "and N more".
BURST_NAMED = 10


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
        if self.event == PROMPT_ERROR_EVENT:
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


@dataclass(frozen=True, slots=True)
class Burst:
    """Several notices sent as one message (a storm): the same three views a :class:`Notice` has."""

    notices: tuple[Notice, ...]

    @property
    def sessions(self) -> list[str]:
        return list(dict.fromkeys(n.session_id for n in self.notices))

    def headline(self) -> str:
        sessions = len(self.sessions)
        where = "1 session" if sessions == 1 else f"{sessions} sessions"
        if all(n.event == PROMPT_ERROR_EVENT for n in self.notices):
            return f"Copilot prompts failed in {where}"
        return f"Runaway agents detected in {where} ({len(self.notices)} notices)"

    def body(self) -> str:
        reasons: dict[str, int] = {}
        for n in self.notices:
            reasons[n.reason] = reasons.get(n.reason, 0) + 1
        why = ", ".join(f"{reason.replace('_', ' ')} {count}" for reason, count in sorted(reasons.items()))
        named = self.sessions
        if len(named) == 1:  # several notices of one session (two thresholds crossed): its own command
            return f"{why}; copilot-otel show {named[0]}"
        more = f" and {len(named) - BURST_NAMED} more" if len(named) > BURST_NAMED else ""
        return f"{why}; sessions {', '.join(s[:8] for s in named[:BURST_NAMED])}{more}; copilot-otel show <session>"

    def as_json(self) -> dict[str, Any]:
        return {
            "source": "copilot-otel",
            "event": NOTIFICATIONS,
            "count": len(self.notices),
            "sessions": self.sessions,
            "notices": [n.as_json() for n in self.notices[:BURST_NOTICES]],
        }


Message = Notice | Burst


class Refused(OSError):
    """A delivery the destination refused for good (HTTP 4xx, no notification command): not retried."""


class Channel(Protocol):
    """Somewhere a message can go; ``send`` raises on failure (the notifier retries, counts and logs it)."""

    name: str

    def send(self, notice: Message) -> None: ...


@dataclass
class WebhookChannel:
    """``POST`` the notice to ``url`` as the documented JSON body, or as a Slack-compatible ``{"text"}``."""

    url: str
    format: WebhookFormat = "json"
    timeout_s: float = SEND_TIMEOUT_S
    name: str = "webhook"

    def payload(self, notice: Message) -> bytes:
        if self.format == "slack":
            body: dict[str, Any] = {"text": f"*{notice.headline()}*\n{notice.body()}"}
        else:
            body = notice.as_json()
        return json.dumps(body).encode()

    def send(self, notice: Message) -> None:
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
            retryable = exc.code in (408, 425, 429) or exc.code >= 500
            raise (OSError if retryable else Refused)(f"HTTP {exc.code} from the webhook") from None
        except urllib.error.URLError as exc:
            raise OSError(f"webhook unreachable: {exc.reason}") from None


@dataclass
class DesktopChannel:
    """A desktop notification through the platform's command (:meth:`Platform.notification_command`)."""

    platform: Platform = field(default_factory=lambda: current)
    find: Callable[[str], str | None] = shutil.which
    timeout_s: float = SEND_TIMEOUT_S
    name: str = "desktop"

    def command(self, notice: Message) -> list[str] | None:
        """The exact command that shows ``notice`` here, or ``None`` when this machine has no way to."""
        return self.platform.notification_command(notice.headline(), notice.body(), self.find)

    def send(self, notice: Message) -> None:
        argv = self.command(notice)
        if argv is None:
            raise Refused(f"no desktop notification command on this {self.platform.name} machine")
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

    ``outcomes`` collects ``(channel, result)`` pairs, one per notice, for the daemon to count on its own thread.

    Args:
        channels: Where notices go.
        queue_size: Notices waiting for the worker at most.
        coalesce_s: How long a notice waits for others to go out with it.
        min_interval_s: One message per channel at most this often.
        attempts: Tries per message; backoff doubles from ``retry_backoff_s`` between them.
    """

    def __init__(
        self,
        channels: Sequence[Channel],
        queue_size: int = QUEUE_SIZE,
        *,
        coalesce_s: float = COALESCE_S,
        min_interval_s: float = MIN_INTERVAL_S,
        attempts: int = ATTEMPTS,
        retry_backoff_s: float = RETRY_BACKOFF_S,
    ) -> None:
        self.channels = list(channels)
        self.outcomes: queue.SimpleQueue[Outcome] = queue.SimpleQueue()
        self._queue: queue.Queue[Notice | None] = queue.Queue(queue_size)
        self._thread: threading.Thread | None = None
        self._log = RateLimitedLog(logger, _LOG_EVERY_S)
        self._coalesce_s, self._min_interval_s = coalesce_s, min_interval_s
        self._attempts, self._backoff_s = max(1, attempts), retry_backoff_s
        # Per channel: the notices waiting, and when it may send next.
        self._waiting: dict[str, list[Notice]] = {c.name: [] for c in self.channels}
        self._next_at: dict[str, float] = {c.name: 0.0 for c in self.channels}
        self._closing = threading.Event()
        self._deadline = float("inf")

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
            self._log.warning("queue", "dropped a notification: %d are already waiting", self._queue.maxsize)

    def close(self, timeout_s: float = 2.0) -> None:
        """Send what is queued and waiting (whatever the interval, within ``timeout_s``), then stop the worker."""
        if self._thread is None:
            return
        self._deadline = time.monotonic() + timeout_s
        self._closing.set()  # cuts a retry's backoff short
        with contextlib.suppress(queue.Full):
            self._queue.put(None, timeout=timeout_s)
        self._thread.join(max(0.0, self._deadline - time.monotonic()))
        self._thread = None

    def _work(self) -> None:
        closing = False
        while not closing:
            due = [self._next_at[name] for name, waiting in self._waiting.items() if waiting]
            timeout = max(0.0, min(due) - time.monotonic()) if due else None
            try:
                item = self._queue.get(timeout=timeout)
            except queue.Empty:
                pass  # a channel came due
            else:
                if item is None:
                    closing = True
                else:
                    self._wait(item)
            now = time.monotonic()
            for channel in self.channels:
                waiting = self._waiting[channel.name]
                if waiting and (closing or now >= self._next_at[channel.name]):
                    self._waiting[channel.name] = []
                    self._deliver(channel, waiting)
                    self._next_at[channel.name] = time.monotonic() + self._min_interval_s

    def _wait(self, notice: Notice) -> None:
        now = time.monotonic()
        for channel in self.channels:
            waiting = self._waiting[channel.name]
            if len(waiting) >= MAX_WAITING:
                self.outcomes.put((channel.name, "dropped"))
                self._log.warning(
                    f"{channel.name}:full", "dropped a %s notification: %d waiting", channel.name, MAX_WAITING
                )
                continue
            if not waiting:  # the first of a burst: the others have COALESCE_S to join it
                self._next_at[channel.name] = max(self._next_at[channel.name], now + self._coalesce_s)
            waiting.append(notice)

    def _deliver(self, channel: Channel, notices: list[Notice]) -> None:
        message: Message = notices[0] if len(notices) == 1 else Burst(tuple(notices))
        backoff = self._backoff_s
        for attempt in range(1, self._attempts + 1):
            try:
                channel.send(message)
            except Exception as exc:
                last = (
                    isinstance(exc, Refused)
                    or attempt == self._attempts
                    or time.monotonic() + backoff > self._deadline
                )
                if last:
                    for _ in notices:
                        self.outcomes.put((channel.name, "failed"))
                    self._log.warning(channel.name, "could not send a %s notification: %s", channel.name, exc)
                    return
                if not self._closing.is_set():
                    self._closing.wait(backoff)
                backoff *= 2
            else:
                for _ in notices:
                    self.outcomes.put((channel.name, "sent"))
                return
