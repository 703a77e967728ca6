"""The one batcher: replay and the daemon's outbox cut records by one count, and requests carry no more."""

from __future__ import annotations

from collections import deque
from pathlib import Path

import pytest

from copilot_otel.deliver import batcher
from copilot_otel.model.records import LogRecord, SpanKind, SpanRecord
from tests.conftest import CLI_GENERATED, replay_into
from tests.otlp_receiver import OtlpReceiver


def _span(n: int) -> SpanRecord:
    return SpanRecord(1, n + 1, None, f"s{n}", SpanKind.INTERNAL, n, n + 1, {})


def test_a_lane_gives_one_count_of_records_with_the_marks_among_and_right_after_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(batcher, "BATCH_RECORDS", 3)
    items: deque[SpanRecord | LogRecord | str] = deque(
        [_span(0), "a", _span(1), _span(2), "b", "c", _span(3), "d"]
    )
    batch, marks = batcher.take(items)
    assert [s.name for s in batch.spans] == ["s0", "s1", "s2"] and batch.full
    assert marks == ["a", "b", "c"]  # "d" needs s3 delivered first
    assert list(items) == [items[0], "d"] and items[0].name == "s3"  # type: ignore[union-attr]


def test_replay_hands_over_and_sends_by_the_one_count(
    receiver: OtlpReceiver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(batcher, "BATCH_RECORDS", 8)
    assert replay_into(receiver, CLI_GENERATED / "multi-tool" / "events.jsonl") == 0
    requests = [r for r in receiver.request_log() if r.signal in ("traces", "logs")]
    assert sum(r.item_count for r in requests if r.signal == "traces") == len(receiver.spans()) > 8
    assert max(r.item_count for r in requests) <= 8
