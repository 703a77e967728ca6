"""A notification storm is one message per destination, retried, and sent before exit (issue 22, point 9).

200 sessions run away at once: their detections, read by the real pipeline from a runaway log built of real CLI
lines (:mod:`tests.runaway`), go through the real action path (:class:`RunawayActions` → :class:`Notifier` →
:class:`WebhookChannel`) to a real local HTTP receiver. The gathering window and the per-destination interval
are set far longer than the test, so what is sent is decided by :meth:`Notifier.close`, not by timing.
"""

from __future__ import annotations

import logging

import pytest

from copilot_otel.daemon.act import RunawayActions, SessionView
from copilot_otel.daemon.notify import Notifier, WebhookChannel
from copilot_otel.model.activity import Detection
from copilot_otel.pipeline import Pipeline, split_lines
from copilot_otel.settings.policy import parse_policy
from tests.runaway import iter_runaway_lines
from tests.webhook_receiver import WebhookReceiver

SESSIONS = 200
IDS = [f"{i:08x}-0000-4000-8000-000000000000" for i in range(SESSIONS)]
LONG_S = 3600.0  # longer than any test: nothing goes out by the clock


def _detection() -> Detection:
    pipeline = Pipeline("runaway", project=False)
    blob = "".join(iter_runaway_lines(turns=12)).encode()
    found = [r for item in split_lines(blob) for r in pipeline.feed(item).records if isinstance(r, Detection)]
    assert found, "the runaway log is detected"
    return found[0]


def _actions(notifier: Notifier, detection: Detection) -> RunawayActions:
    now = detection.time_ns + 10**9  # just after the detection: a live one
    return RunawayActions(parse_policy("notify"), notifier=notifier, clock=lambda: now)


def test_200_runaways_at_once_are_one_webhook_post_and_two_log_lines(
    caplog: pytest.LogCaptureFixture,
) -> None:
    detection = _detection()
    with WebhookReceiver() as hook, caplog.at_level(logging.WARNING, logger="copilot_otel"):
        notifier = Notifier([WebhookChannel(hook.url)], coalesce_s=LONG_S, min_interval_s=LONG_S).start()
        actions = _actions(notifier, detection)
        for session_id in IDS:
            actions.on_detection(detection, SessionView(session_id, None, repository="octo/app"))
        assert hook.bodies == []  # gathering: nothing sent yet
        actions.close(10)  # the daemon's shutdown: what waits is sent, whatever the interval
    assert len(hook.bodies) == 1, hook.bodies
    body = hook.bodies[0]
    assert body["event"] == "copilot_otel.notifications" and body["count"] == SESSIONS
    assert body["sessions"] == IDS
    assert body["notices"][0]["reason"] == detection.reason and len(body["notices"]) == 20
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(lines) == 2, lines  # the first detection, then one line for the 199 held back
    assert "Runaway agents detected in 199 sessions" in lines[1] and "00000001, 00000002" in lines[1]
    assert "and 189 more" in lines[1]
    actions.drain(None)
    assert actions.stats.notifications == {"webhook:sent": SESSIONS}  # counted per notice


def test_a_destination_gets_one_message_per_interval() -> None:
    detection = _detection()
    with WebhookReceiver() as hook:
        notifier = Notifier([WebhookChannel(hook.url)], coalesce_s=0, min_interval_s=LONG_S).start()
        actions = _actions(notifier, detection)
        actions.on_detection(detection, SessionView("first", None))
        hook.wait_for(1, 10)  # the first goes out at once
        for i in range(50):
            actions.on_detection(detection, SessionView(f"later-{i}", None))
        actions.close(10)
    assert [b.get("session_id") or b["count"] for b in hook.bodies] == ["first", 50]


def test_a_failed_delivery_is_retried_with_backoff_and_a_refusal_is_not() -> None:
    detection = _detection()
    with WebhookReceiver(first=(503, 502)) as recovering:
        notifier = Notifier([WebhookChannel(recovering.url)], coalesce_s=0, retry_backoff_s=0.05).start()
        _actions(notifier, detection).on_detection(detection, SessionView("s", None))
        recovering.wait_for(3, 10)
        notifier.close(5)
    assert [notifier.outcomes.get_nowait() for _ in range(notifier.outcomes.qsize())] == [("webhook", "sent")]
    with WebhookReceiver(status=400) as refusing:
        notifier = Notifier([WebhookChannel(refusing.url)], coalesce_s=0, retry_backoff_s=0.05).start()
        _actions(notifier, detection).on_detection(detection, SessionView("s", None))
        notifier.close(5)
    assert len(refusing.bodies) == 1  # HTTP 400 will not change: tried once
    assert [notifier.outcomes.get_nowait() for _ in range(notifier.outcomes.qsize())] == [
        ("webhook", "failed")
    ]
