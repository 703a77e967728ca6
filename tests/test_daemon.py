"""Fault injection for ``copilot-otel run``: real files, a real daemon process, a real OTLP receiver.

After each fault, the spans received must be exactly the spans ``copilot-otel replay`` produces from the final
logs (duplicates allowed only as byte-identical replays), and no good line may be lost.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from copilot_otel.daemon.daemon import FD_CHECK_S, MAX_OPEN_TAILERS
from copilot_otel.daemon.state import DB_FILE, read_checkpoints
from tests.conftest import CLI_GENERATED, FIXTURES
from tests.daemon_process import DaemonProcess, assert_delivered_like_replay, expected_spans
from tests.otlp_receiver import OtlpReceiver
from tests.waiting import until


@pytest.fixture
def env(tmp_path: Path, receiver: OtlpReceiver) -> Iterator[dict[str, Any]]:
    root = tmp_path / "session-state"
    root.mkdir()
    ctx: dict[str, Any] = {
        "root": root,
        "state": tmp_path / "state",
        "tmp": tmp_path,
        "receiver": receiver,
        "daemons": [],
    }

    def daemon(*extra: str, ready: bool = True, **kw: Any) -> DaemonProcess:
        d = DaemonProcess(root, ctx["state"], receiver.http_endpoint, tmp_path / "daemon.log", *extra, **kw)
        d.start(ready)
        ctx["daemons"].append(d)
        return d

    ctx["daemon"] = daemon
    yield ctx
    for d in ctx["daemons"]:
        if d.proc is not None and d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait(10)


def _lines(name: str) -> list[bytes]:
    return (CLI_GENERATED / name / "events.jsonl").read_bytes().splitlines(keepends=True)


def _status(state: Path) -> dict[str, Any]:
    """The daemon's ``status.json`` (written at start-up, then every few seconds); ``{}`` before the first."""
    try:
        doc: dict[str, Any] = json.loads((state / "status.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
    return doc


def _write(path: Path, data: bytes, mode: str = "ab") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, mode) as fh:
        fh.write(data)
        fh.flush()


def test_follows_new_sessions_and_stops_cleanly(env: dict[str, Any]) -> None:
    d = env["daemon"]()
    for name in ("subagent", "failing-tool"):
        shutil.copytree(CLI_GENERATED / name, env["root"] / name)
    paths = [env["root"] / n / "events.jsonl" for n in ("subagent", "failing-tool")]
    assert_delivered_like_replay(env["receiver"], paths, env["tmp"])
    assert d.terminate() == 0
    status = json.loads((env["state"] / "status.json").read_text())
    assert status["files_tracked"] == 2 and status["backlog_spans"] == 0
    assert "Traceback" not in d.output()


def test_partial_line_then_completion(env: dict[str, Any]) -> None:
    lines = _lines("multi-tool")
    log = env["root"] / "multi-tool" / "events.jsonl"
    _write(log, b"".join(lines[:12]) + lines[12][:40])
    d = env["daemon"]()
    env["receiver"].wait_for(lambda r: len(r.spans()) >= 3, 15)  # (read in one go with the partial line)
    _write(log, lines[12][40:] + b"".join(lines[13:]))
    assert_delivered_like_replay(env["receiver"], [log], env["tmp"])
    assert d.terminate() == 0


def test_partial_line_then_sigkill_reads_the_line_once_whole(env: dict[str, Any]) -> None:
    lines = _lines("multi-tool")
    log = env["root"] / "multi-tool" / "events.jsonl"
    _write(log, b"".join(lines[:16]) + lines[16][:25])
    d = env["daemon"]()
    env["receiver"].wait_for(lambda r: len(r.spans()) >= 4, 15)
    state = env["state"]
    d.until("a checkpoint before the partial line", lambda: str(log) in read_checkpoints(state))
    d.kill()
    _write(log, lines[16][25:] + b"".join(lines[17:]))
    d2 = env["daemon"]()
    assert_delivered_like_replay(env["receiver"], [log], env["tmp"])
    assert d2.terminate() == 0
    assert "bad line" not in d2.output()


def test_sigkill_between_export_and_checkpoint_replays_identical_spans(env: dict[str, Any]) -> None:
    shutil.copytree(CLI_GENERATED / "capi-subagent", env["root"] / "s1")
    d = env["daemon"]()
    env["receiver"].wait_for(lambda r: len(r.spans()) >= 1, 15)
    d.kill()  # almost surely before the 1 s checkpoint flush
    d2 = env["daemon"]()
    log = env["root"] / "s1" / "events.jsonl"
    assert_delivered_like_replay(env["receiver"], [log], env["tmp"])
    assert d2.terminate() == 0


def test_truncation_while_running_and_while_stopped(env: dict[str, Any]) -> None:
    log = env["root"] / "plain" / "events.jsonl"
    shutil.copytree(CLI_GENERATED / "plain-question", log.parent)
    d = env["daemon"]()
    env["receiver"].wait_for(lambda r: len(r.spans()) >= 3, 15)
    # truncate while running, then write a different session into the same file
    _write(log, b"".join(_lines("failing-tool")), mode="wb")
    assert_delivered_like_replay(
        env["receiver"], [CLI_GENERATED / "plain-question" / "events.jsonl", log], env["tmp"]
    )
    assert d.terminate() == 0
    # truncated and regrown past the old offset while stopped: caught by the fingerprint
    env["receiver"].clear()
    _write(log, b"".join(_lines("multi-tool")) + b"".join(_lines("plain-question")), mode="wb")
    d2 = env["daemon"]()
    assert_delivered_like_replay(env["receiver"], [log], env["tmp"])
    assert d2.terminate() == 0


def test_file_replaced_under_the_same_name(env: dict[str, Any]) -> None:
    log = env["root"] / "s" / "events.jsonl"
    _write(log, b"".join(_lines("multi-tool")))
    d = env["daemon"]()
    env["receiver"].wait_for(lambda r: len(r.spans()) >= 14, 15)
    tmp = log.with_name("events.jsonl.new")
    tmp.write_bytes(b"".join(_lines("subagent")))
    os.replace(tmp, log)
    assert_delivered_like_replay(
        env["receiver"],
        [CLI_GENERATED / "multi-tool" / "events.jsonl", CLI_GENERATED / "subagent" / "events.jsonl"],
        env["tmp"],
    )
    assert d.terminate() == 0


def test_deleted_while_open_is_drained_then_forgotten(env: dict[str, Any]) -> None:
    lines = _lines("subagent")
    log = env["root"] / "gone" / "events.jsonl"
    _write(log, b"".join(lines[:8]))
    d = env["daemon"]()
    env["receiver"].wait_for(lambda r: len(r.logs()) >= 1, 15)
    _write(log, b"".join(lines[8:]))
    log.unlink()
    env["receiver"].wait_for(lambda r: len(r.spans()) >= 12, 15)
    assert d.terminate() == 0
    assert str(log) not in read_checkpoints(env["state"])


def test_session_folder_created_and_written_within_a_millisecond(env: dict[str, Any]) -> None:
    d = env["daemon"]()
    d.until("the first scan", lambda: _status(env["state"]).get("scans", 0) >= 1)  # the watch is up
    folder = env["root"] / "fast"
    folder.mkdir()
    (folder / "events.jsonl").write_bytes(b"".join(_lines("plain-question")))
    assert_delivered_like_replay(env["receiver"], [folder / "events.jsonl"], env["tmp"], timeout=5)
    assert d.terminate() == 0


def test_two_thousand_session_folders(env: dict[str, Any]) -> None:
    template = b"".join(_lines("plain-question"))
    old_id = b"0a000001-0000-4000-8000-000000000001"
    for i in range(2000):
        sid = f"0b{i:06d}-0000-4000-8000-000000000000".encode()
        _write(env["root"] / sid.decode() / "events.jsonl", template.replace(old_id, sid))
    d = env["daemon"]()
    env["receiver"].wait_for(
        lambda r: len({s["trace_id"] for s in r.spans() if s["parent_span_id"] is None}) >= 2000, 120
    )
    # Each log was read to its end and is recent, so its descriptor may stay open for a while, but at most
    # MAX_OPEN_TAILERS of them once the periodic descriptor check (every FD_CHECK_S) has run.
    assert d.proc is not None
    fd_dir = Path(f"/proc/{d.proc.pid}/fd")

    def open_logs() -> int:
        targets = []
        for fd in fd_dir.iterdir():
            with contextlib.suppress(FileNotFoundError):  # closed meanwhile
                targets.append(os.readlink(fd))
        return sum(1 for t in targets if t.endswith("events.jsonl"))

    until(
        lambda: open_logs() <= MAX_OPEN_TAILERS,
        FD_CHECK_S + 10,
        f"at most {MAX_OPEN_TAILERS} logs open after the descriptor check",
        detail=lambda: f"{open_logs()} open",
    )
    assert d.terminate() == 0
    roots = {s["trace_id"] for s in env["receiver"].spans() if s["parent_span_id"] is None}
    assert len(roots) == 2000


@pytest.mark.parametrize("fault", ["refused", "unavailable", "retry_after"])
def test_collector_trouble_delivers_everything_after_recovery(env: dict[str, Any], fault: str) -> None:
    receiver: OtlpReceiver = env["receiver"]
    if fault == "refused":
        receiver.stop()
    elif fault == "unavailable":
        receiver.fail_next(4, "unavailable")
    else:
        receiver.fail_next(2, "retry_after", retry_after_s=1.5)
    shutil.copytree(CLI_GENERATED / "failing-tool", env["root"] / "f")
    d = env["daemon"]()
    if fault == "refused":
        d.until("a refused export", lambda: _status(env["state"]).get("retries", 0) >= 1)
        receiver.start()  # back up on the same ports
    log = env["root"] / "f" / "events.jsonl"
    assert_delivered_like_replay(receiver, [log], env["tmp"], timeout=40)
    assert d.terminate() == 0
    if fault == "retry_after":
        outcomes = [r.outcome for r in receiver.request_log()]
        assert outcomes.count("retry_after") == 2


def test_permanent_rejection_is_dead_lettered_and_the_rest_delivered(env: dict[str, Any]) -> None:
    receiver: OtlpReceiver = env["receiver"]
    receiver.reject_when(lambda s: s["name"] == "execute_tool grep")
    shutil.copytree(CLI_GENERATED / "multi-tool", env["root"] / "m")
    d = env["daemon"]()
    want = expected_spans([env["root"] / "m" / "events.jsonl"], env["tmp"])
    receiver.wait_for(lambda r: len(r.spans()) >= len(want) - 1, 20)
    assert d.terminate() == 0  # (its stop flushes what it holds)
    names = [s["name"] for s in receiver.spans()]
    assert "execute_tool grep" not in names and "execute_tool create" in names
    dead = [json.loads(line) for line in (env["state"] / "dead-letter.jsonl").read_text().splitlines()]
    assert [x["record"]["name"] for x in dead] == ["execute_tool grep"]


def test_bad_input_in_the_middle_of_a_session(env: dict[str, Any]) -> None:
    lines = _lines("multi-tool")
    log = env["root"] / "bad" / "events.jsonl"
    d = env["daemon"]()
    _write(log, b"".join(lines[:10]))
    _write(log, b"\xff\xfe\xfa invalid utf-8 \xc3\x28\n")
    _write(log, b"this is not json at all\n")
    _write(log, b'{"type": "x", "data": "' + b"A" * (20 * 1024 * 1024) + b'"\n')  # a 20 MB (broken) line
    _write(log, b"".join(lines[10:]))
    assert_delivered_like_replay(env["receiver"], [CLI_GENERATED / "multi-tool" / "events.jsonl"], env["tmp"])
    assert d.terminate() == 0
    status = json.loads((env["state"] / "status.json").read_text())
    assert sum(status["lines_dropped"].values()) == 3
    assert "invalid_utf8" in status["lines_dropped"] and "invalid_json" in status["lines_dropped"]


def test_torn_state_file_falls_back_without_loss(env: dict[str, Any]) -> None:
    shutil.copytree(CLI_GENERATED / "resumed", env["root"] / "r")
    d = env["daemon"]()
    log = env["root"] / "r" / "events.jsonl"
    assert_delivered_like_replay(env["receiver"], [log], env["tmp"])
    assert d.terminate() == 0
    path = env["state"] / DB_FILE
    path.write_bytes(b"\0" * len(path.read_bytes()))  # its pages overwritten: not a database any more
    env["receiver"].clear()
    d2 = env["daemon"]()
    assert_delivered_like_replay(env["receiver"], [log], env["tmp"])  # read again from 0, identical
    assert d2.terminate() == 0
    assert "corrupt" in d2.output().lower()


def test_unwritable_state_dir_is_a_clear_error(env: dict[str, Any]) -> None:
    env["state"].write_text("not a directory")
    d = env["daemon"](ready=False)
    rc = d.wait(30)
    assert rc != 0
    out = d.output().strip().splitlines()
    assert "Traceback" not in d.output()
    assert out[-1].startswith("copilot-otel: error:") and "state" in out[-1]


def test_second_daemon_on_the_same_state_dir_refuses(env: dict[str, Any]) -> None:
    d = env["daemon"]()  # (ready: it holds the state dir's lock)
    d2 = DaemonProcess(env["root"], env["state"], env["receiver"].http_endpoint, env["tmp"] / "d2.log").start(
        False
    )
    env["daemons"].append(d2)
    assert d2.wait(30) != 0
    assert "already using" in d2.output()
    assert d.terminate() == 0


def test_sigterm_with_a_backlog_flushes_and_saves_state(env: dict[str, Any]) -> None:
    receiver: OtlpReceiver = env["receiver"]
    receiver.fail_next(3, "unavailable")
    for name in ("multi-tool", "capi-multi-tool"):
        shutil.copytree(CLI_GENERATED / name, env["root"] / name)
    d = env["daemon"]()
    receiver.wait_for(lambda r: len(r.request_log()) >= 1, 20)  # a backlog: its first export was refused
    assert d.terminate() == 0
    paths = [env["root"] / n / "events.jsonl" for n in ("multi-tool", "capi-multi-tool")]
    # whatever was not delivered before the deadline is delivered by the next start, nothing twice differently
    d2 = env["daemon"]()
    assert_delivered_like_replay(receiver, paths, env["tmp"])
    assert d2.terminate() == 0


def test_last_line_without_newline_in_an_idle_legacy_log(env: dict[str, Any]) -> None:
    source = FIXTURES / "public" / "microsoft__vscode-copilot-chat__0.0.354-two-questions.jsonl"
    assert not source.read_bytes().endswith(b"\n")  # a real capture whose last line never got its newline
    log = env["root"] / "cb2aca77-f42b-4dbd-a10a-41bd04eaa3ba.jsonl"
    shutil.copy(source, log)
    d = env["daemon"]("--idle-timeout", "8")
    want = expected_spans([log], env["tmp"])
    receiver: OtlpReceiver = env["receiver"]
    receiver.wait_for(lambda r: len({s["span_id"] for s in r.spans()}) >= len(want), 30)
    assert d.terminate() == 0
    got = {s["span_id"]: s for s in receiver.spans()}
    assert set(got) == set(want)
    for span_id, span in got.items():
        ours, theirs = dict(span), dict(want[span_id])
        if (
            span["parent_span_id"] is None
            and span["attributes"].get("copilot_otel.incomplete.reason") == "idle_timeout"
        ):
            # the one allowed difference: live closes a never-ending prompt on idle, replay at the end of the file
            assert theirs["attributes"]["copilot_otel.incomplete.reason"] == "file_ended"
            ours["attributes"] = {
                k: v for k, v in ours["attributes"].items() if k != "copilot_otel.incomplete.reason"
            }
            theirs["attributes"] = {
                k: v for k, v in theirs["attributes"].items() if k != "copilot_otel.incomplete.reason"
            }
        ours.pop("resource", None)
        assert ours == theirs, span["name"]


def test_backfill_none_exports_only_what_is_written_from_now_on(env: dict[str, Any]) -> None:
    lines = _lines("resumed")
    split = next(i for i, line in enumerate(lines) if b'"type":"session.resume"' in line)
    log = env["root"] / "resumed" / "events.jsonl"
    _write(log, b"".join(lines[:split]))
    old = time.time() - 7200
    os.utime(log, (old, old))  # history from two hours ago
    d = env["daemon"]("--backfill", "none")
    d.until("the history found", lambda: _status(env["state"]).get("files_tracked", 0) >= 1)
    assert env["receiver"].spans() == [], "history is not exported with --backfill none"
    _write(log, b"".join(lines[split:]))
    want = expected_spans([log], env["tmp"])
    resume_ns = min(
        s["start_ns"]
        for s in want.values()
        if s["parent_span_id"] is None
        and s["start_ns"] > 0
        and any(t["trace_id"] == s["trace_id"] for t in want.values())
    )
    roots = sorted((s for s in want.values() if s["parent_span_id"] is None), key=lambda s: s["start_ns"])
    assert len(roots) == 2 and roots[0]["start_ns"] == resume_ns
    second = {roots[1]["trace_id"]}
    receiver: OtlpReceiver = env["receiver"]
    receiver.wait_for(lambda r: any(s["parent_span_id"] is None for s in r.spans()), 15)
    assert d.terminate() == 0  # (its stop flushes what it holds)
    got = {s["span_id"]: {k: v for k, v in s.items() if k != "resource"} for s in receiver.spans()}
    traces = {s["trace_id"] for s in got.values()}
    assert len(traces) == 1 and traces <= second, "only the prompt written after the start"
    assert got == {k: v for k, v in want.items() if v["trace_id"] in traces}


def test_live_session_is_not_delayed_by_a_large_backfill(env: dict[str, Any]) -> None:
    template = b"".join(_lines("multi-tool"))
    old_id = b"0a000002-0000-4000-8000-000000000002"
    total = 3000
    for i in range(total):
        sid = f"0d{i:06d}-0000-4000-8000-000000000000".encode()
        _write(env["root"] / sid.decode() / "events.jsonl", template.replace(old_id, sid))
    old = time.time() - 7200
    for folder in env["root"].iterdir():
        os.utime(folder / "events.jsonl", (old, old))  # months of history, as far as the daemon can tell
    live_id = "0a000001-0000-4000-8000-000000000001"
    seen: dict[str, int] = {"backfill_roots": 0, "spans": 0}

    def on_accept(signal: str, items: list[dict[str, Any]] | None, count: int, received_ns: int) -> None:
        for span in items or () if signal == "traces" else ():
            seen["spans"] += 1
            if span["parent_span_id"] is None:
                if span["attributes"]["gen_ai.conversation.id"] == live_id:
                    seen.setdefault("live_root_after", seen["backfill_roots"])
                    seen.setdefault("live_ns", received_ns)
                else:
                    seen["backfill_roots"] += 1

    with OtlpReceiver(on_accept=on_accept) as receiver:
        d = DaemonProcess(env["root"], env["state"], receiver.http_endpoint, env["tmp"] / "fair.log").start()
        receiver.wait_for(lambda r: seen["spans"] >= 300, 60)  # the backfill is under way
        _write(env["root"] / live_id / "events.jsonl", b"".join(_lines("plain-question")))
        written_ns = time.time_ns()
        receiver.wait_for(lambda r: "live_ns" in seen, 30)
        receiver.wait_for(lambda r: seen["backfill_roots"] >= total, 120)
        assert d.terminate() == 0
    latency = (seen["live_ns"] - written_ns) / 1e9
    print(
        f"live session exported {latency:.2f}s after it was written; {seen['live_root_after']}/{total} "
        "backfilled prompts had been delivered by then"
    )
    assert seen["live_root_after"] < total, "the live session did not wait for the end of the backfill"


def test_daemon_keeps_exporting_spans_when_the_endpoint_takes_no_logs(env: dict[str, Any]) -> None:
    receiver: OtlpReceiver = env["receiver"]
    shutil.copytree(CLI_GENERATED / "subagent", env["root"] / "s")
    d = env["daemon"](env={"OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": f"{receiver.http_endpoint}/no-logs-here"})
    assert_delivered_like_replay(receiver, [env["root"] / "s" / "events.jsonl"], env["tmp"])
    assert d.terminate() == 0
    assert d.output().count("does not accept logs") == 1  # said once, then logs are dropped
    assert read_checkpoints(env["state"]), "checkpoints still advance"


def test_captured_content_live_is_what_replay_exports(
    env: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every content switch on, the system prompt included (its lines are decoded only then): the daemon reads
    # them from the live file as replay does from the whole one.
    for name, value in (
        ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true"),
        ("COPILOT_OTEL_CAPTURE_SYSTEM_PROMPT", "true"),
        ("COPILOT_OTEL_CAPTURE_REASONING", "true"),
    ):
        monkeypatch.setenv(name, value)
    shutil.copytree(CLI_GENERATED / "subagent", env["root"] / "s")
    d = env["daemon"]()
    assert_delivered_like_replay(env["receiver"], [env["root"] / "s" / "events.jsonl"], env["tmp"])
    assert d.terminate() == 0
    carried = [s["name"] for s in env["receiver"].spans() if "gen_ai.system_instructions" in s["attributes"]]
    assert sorted(carried) == ["invoke_agent", "invoke_agent explore"]
