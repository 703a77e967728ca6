"""The embedded default's ``otlp.jsonl`` rotates by size and keeps a bounded number of rotated files.

Real requests (OTLP protobuf, as the exporters send them) through the real file transport; two transports on
one file stand for the span and metric exporters (and replay's worker processes) writing it together.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from copilot_otel.deliver.export import FileTransport, Signal
from copilot_otel.deliver.sink import KEEP, MAX_BYTES
from tests.test_dead_letters_full_disk import SmallDisk, small_disk

__all__ = ["small_disk"]  # the real full disk's fixture, used here by name


def _request(index: int, repeat: int = 4) -> bytes:
    span = Span(
        trace_id=bytes(16), span_id=index.to_bytes(8, "big"), name=f"chat gpt-4.1 #{index:04d}" * repeat
    )
    request = ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=[span])])]
    )
    body: bytes = request.SerializeToString()
    return body


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def test_the_file_rotates_by_size_and_keeps_a_bounded_number(tmp_path: Path) -> None:
    path = tmp_path / "state" / "otlp.jsonl"
    transport = FileTransport(path, max_bytes=2_000, keep=2)
    for index in range(60):
        assert transport.send(Signal.TRACES, _request(index), timeout=1.0).ok
    files = sorted(p.name for p in path.parent.iterdir() if not p.name.startswith("."))
    assert files == ["otlp.jsonl", "otlp.jsonl.1", "otlp.jsonl.2"]  # never a .3
    for name in files:
        assert 0 < (path.parent / name).stat().st_size <= 2_000
    # The newest requests are kept, in order, each a whole line; the oldest went with the deleted file.
    kept = [line for name in reversed(files) for line in _lines(path.parent / name)]
    names = [r["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["name"] for r in kept]  # type: ignore[index]
    numbers = [int(str(n).split("#")[1][:4]) for n in names]
    assert numbers == list(range(60 - len(numbers), 60)) and len(numbers) < 60


def test_writers_sharing_the_file_never_rotate_it_twice(tmp_path: Path) -> None:
    path = tmp_path / "otlp.jsonl"
    writers = [FileTransport(path, max_bytes=3_000, keep=5) for _ in range(2)]

    def write(transport: FileTransport, offset: int) -> None:
        for index in range(offset, offset + 20):
            assert transport.send(Signal.TRACES, _request(index), timeout=1.0).ok

    threads = [threading.Thread(target=write, args=(w, 100 * n)) for n, w in enumerate(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    every = [path, *(path.with_name(f"otlp.jsonl.{i}") for i in range(1, 6))]
    lines = [line for p in every if p.exists() for line in _lines(p)]
    assert len(lines) == 40, "nothing lost while both rotated (the keep limit was not reached)"
    assert all(p.stat().st_size <= 3_000 for p in every if p.exists())


def test_the_defaults_are_bounded() -> None:
    assert MAX_BYTES == 64 * 1024 * 1024 and KEEP == 3


def test_a_line_the_full_disk_takes_only_part_of_is_taken_back(small_disk: SmallDisk) -> None:
    """The disk has room for the start of a line only (the rest of the file's last page): the send fails, to be
    retried, and the file keeps whole lines; before, the first short write was taken for the whole line."""
    path = small_disk.path / "otlp.jsonl"
    transport = FileTransport(path)
    assert transport.send(Signal.TRACES, _request(0), timeout=1.0).ok
    before = path.read_bytes()
    small_disk.fill()
    big = _request(1, repeat=1_000)  # about 20 KB: more than the page has left
    assert not transport.send(Signal.TRACES, big, timeout=1.0).ok
    assert path.read_bytes() == before
    small_disk.free()
    assert transport.send(Signal.TRACES, big, timeout=1.0).ok
    assert len(_lines(path)) == 2
