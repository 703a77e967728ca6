"""The one rate limit of our own warnings (daemon, exporter, notifier): one line per key per interval, the next
line saying how many were held back, in one wording."""

from __future__ import annotations

import logging
import threading

import pytest

from copilot_otel.common.ratelimit import RateLimitedLog
from copilot_otel.daemon.notify import Notice, Notifier
from copilot_otel.deliver import export


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records]


def test_a_burst_is_one_line_and_the_next_says_how_many_were_held(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    log = RateLimitedLog(logging.getLogger("test.ratelimit"), 30.0, clock)
    with caplog.at_level(logging.WARNING, logger="test.ratelimit"):
        assert log.warning("bad", "bad line in %s", "a.jsonl")
        assert not any(log.warning("bad", "bad line in %s", "b.jsonl") for _ in range(41))
        assert log.warning("other", "another problem")  # keys are limited apart
        clock.now += 30.0
        assert log.warning("bad", "bad line in %s", "c.jsonl")
    assert _lines(caplog) == [
        "bad line in a.jsonl",
        "another problem",
        "bad line in c.jsonl (+41 similar since)",
    ]


def test_a_line_may_have_its_own_interval_and_reset_forgets_keys(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    log = RateLimitedLog(logging.getLogger("test.ratelimit"), 30.0, clock)
    with caplog.at_level(logging.ERROR, logger="test.ratelimit"):
        assert log.log(logging.ERROR, "endpoint:401", "401", interval_s=300.0)
        clock.now += 60.0
        assert not log.log(logging.ERROR, "endpoint:401", "401", interval_s=300.0)
        log.reset("endpoint:")
        assert log.log(logging.ERROR, "endpoint:401", "401 again", interval_s=300.0)
    assert _lines(caplog) == ["401", "401 again"]  # a reset key starts afresh: nothing is said to be held


def test_threads_share_one_limit(caplog: pytest.LogCaptureFixture) -> None:
    """The exporter's workers and the notifier's two threads share a log: of 8 x 500 calls in one interval
    exactly one is said."""
    log = RateLimitedLog(logging.getLogger("test.ratelimit"), 3600.0)
    said: list[bool] = []

    def hammer() -> None:
        said.extend(log.warning("k", "same problem") for _ in range(500))

    with caplog.at_level(logging.WARNING, logger="test.ratelimit"):
        threads = [threading.Thread(target=hammer) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert said.count(True) == 1
    assert _lines(caplog) == ["same problem"]


def test_the_exporter_and_the_notifier_use_it(caplog: pytest.LogCaptureFixture) -> None:
    """A notifier whose queue is full drops notices: one line for the burst (and every drop counted)."""

    class Never:
        name = "webhook"

        def send(self, message: object) -> None:  # never called: the worker is not started
            raise AssertionError

    notifier = Notifier([Never()], queue_size=1)
    notice = Notice("copilot_otel.runaway.detected", "s1", "turns", "notified", 0)
    with caplog.at_level(logging.WARNING, logger="copilot_otel.daemon.notify"):
        for _ in range(4):
            notifier.submit(notice)
    assert _lines(caplog) == ["dropped a notification: 1 are already waiting"]
    drops = 0
    while not notifier.outcomes.empty():
        assert notifier.outcomes.get_nowait() == ("queue", "dropped")
        drops += 1
    assert drops == 3
    # Both build theirs from the one class (no throttle of their own).
    assert isinstance(notifier._log, RateLimitedLog)
    assert not hasattr(export, "_Throttled")
