"""The fault-injection checklist's last cases (reliability reference, section 2: #10, #26, #33, #39, #42).

Same harness as ``test_daemon.py``: real files, the daemon as a real child process, the real OTLP receiver. After
each fault the spans received must be what ``copilot-otel replay`` exports from the final logs, each exactly once.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

from copilot_otel.daemon.state import Checkpoint, read_checkpoints
from tests import test_daemon
from tests.conftest import CLI_GENERATED
from tests.daemon_process import DaemonProcess, assert_delivered_like_replay, expected_spans
from tests.otlp_receiver import OtlpReceiver
from tests.test_daemon import _lines, _write

env = test_daemon.env  # the fixture: state dir, session-state root, receiver, daemons stopped at the end


def _exactly_once(receiver: OtlpReceiver, paths: list[Path], tmp: Path) -> None:
    """Delivered like replay, and not one span twice so far (:func:`_none_twice` again once the daemon stopped)."""
    assert_delivered_like_replay(receiver, paths, tmp)
    _none_twice(receiver)


def _none_twice(receiver: OtlpReceiver) -> None:
    """Not one span received twice (nothing re-sent). Final once the daemon that sent them has exited: its stop
    flushes whatever it still held, so a span it would send again has been sent by then."""
    twice = [k for k, n in Counter(s["span_id"] for s in receiver.spans()).items() if n > 1]
    assert twice == [], f"{len(twice)} spans were sent again"


def _checkpoints(state: Path) -> dict[str, Checkpoint]:
    return read_checkpoints(state)


def _status(state: Path) -> dict[str, Any]:
    status: dict[str, Any] = json.loads((state / "status.json").read_text())
    return status


def _warnings(d: DaemonProcess) -> list[str]:
    return [line for line in d.output().splitlines() if "WARNING" in line or "ERROR" in line]


# ------------------------------------------------------------------------------ #10 deleted while stopped
def test_a_log_deleted_while_the_daemon_is_stopped_is_forgotten_not_an_error(env: dict[str, Any]) -> None:
    root, state = env["root"], env["state"]
    for name in ("plain-question", "failing-tool"):
        shutil.copytree(CLI_GENERATED / name, root / name)
    kept, gone = root / "plain-question" / "events.jsonl", root / "failing-tool" / "events.jsonl"
    d = env["daemon"]()
    _exactly_once(env["receiver"], [kept, gone], env["tmp"])
    assert d.terminate() == 0
    _none_twice(env["receiver"])
    assert set(_checkpoints(state)) == {str(kept), str(gone)}
    was = shutil.copytree(gone.parent, env["tmp"] / "was" / "failing-tool") / "events.jsonl"
    shutil.rmtree(gone.parent)
    sent = len(env["receiver"].spans())
    d2 = env["daemon"]()
    shutil.copytree(CLI_GENERATED / "multi-tool", root / "multi-tool")  # and it goes on working
    new = root / "multi-tool" / "events.jsonl"
    env["receiver"].wait_for(lambda r: len(r.spans()) >= sent + len(expected_spans([new], env["tmp"])), 20)
    assert d2.terminate() == 0  # (its stop saves the checkpoints)
    _exactly_once(env["receiver"], [kept, was, new], env["tmp"])
    assert set(_checkpoints(state)) == {str(kept), str(new)}, "the deleted log's checkpoint is collected"
    assert _warnings(d2) == [], "a log deleted while stopped is not an error"
    # Said as soon as the checkpoints are restored (before the first scan, which a big history makes slow), then
    # what the first scan found gone.
    assert "resumed 2 checkpointed session logs" in d2.output()
    assert "forgot 1 checkpointed session log deleted while stopped" in d2.output()


# -------------------------------------------------------------------------- #26 clock skew: end before start
def test_a_tool_that_ends_before_it_starts_is_clamped_and_counted(env: dict[str, Any]) -> None:
    root = env["root"]
    log = root / "skewed" / "events.jsonl"
    # the clock stepped back an hour between the second bash's start and its completion
    text = (CLI_GENERATED / "multi-tool" / "events.jsonl").read_text()
    assert text.count("2026-11-29T17:11:32.618Z") == 1
    _write(log, text.replace("2026-11-29T17:11:32.618Z", "2026-11-29T16:11:32.618Z").encode())
    d = env["daemon"]()
    _exactly_once(env["receiver"], [log], env["tmp"])  # live == replay
    assert d.terminate() == 0  # (its stop writes the status a last time)
    _none_twice(env["receiver"])
    spans = env["receiver"].spans()
    assert all(s["end_ns"] >= s["start_ns"] for s in spans)
    bash = [s for s in spans if s["name"] == "execute_tool bash" and s["end_ns"] == s["start_ns"]]
    assert len(bash) == 1, "the skewed tool ends at its start"
    assert _status(env["state"])["values_dropped"] == {"end_before_start": 1}
    said = [line for line in d.output().splitlines() if "end_before_start" in line]
    assert len(said) == 1 and "an end 3599.952 s before its start" in said[0], said


# ----------------------------------------------------------------------------- #33 restart with a changed config
def test_a_restart_with_other_settings_resumes_every_known_log(env: dict[str, Any]) -> None:
    root = env["root"]
    lines = _lines("multi-tool")
    half = root / "multi-tool" / "events.jsonl"
    _write(half, b"".join(lines[:16]))
    shutil.copytree(CLI_GENERATED / "failing-tool", root / "failing-tool")
    whole = root / "failing-tool" / "events.jsonl"
    d = env["daemon"]()
    env["receiver"].wait_for(lambda r: len(r.spans()) >= len(expected_spans([whole], env["tmp"])) + 3, 20)
    assert d.terminate() == 0  # (its stop saves the checkpoints)
    _write(half, b"".join(lines[16:]))
    # every setting that could look like "a new pipeline": backfill none, another service name, other intervals
    d2 = env["daemon"](
        "--backfill",
        "none",
        "--idle-timeout",
        "7200",
        "--runaway-turns",
        "99",
        "--export-delay",
        "0.5",
        "--log-level",
        "debug",
        env={"OTEL_SERVICE_NAME": "renamed", "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=other"},
    )
    _exactly_once(env["receiver"], [half, whole], env["tmp"])
    assert d2.terminate() == 0
    _none_twice(env["receiver"])
    assert "resumed 2 checkpointed session logs" in d2.output()
    assert {s["resource"]["service.name"] for s in env["receiver"].spans()} == {"copilot-otel", "renamed"}


# -------------------------------------------------------------------------------- #39 file moved into the tree
def test_a_log_moved_back_into_the_tree_resumes_and_an_unknown_one_is_read_from_zero(
    env: dict[str, Any],
) -> None:
    root, outside = env["root"], env["tmp"] / "backup"
    lines = {name: _lines(name) for name in ("multi-tool", "subagent")}
    moved = root / "multi-tool" / "events.jsonl"  # moved out, then into another folder of the tree
    copied = root / "subagent" / "events.jsonl"  # copied out and back (a restore: a new inode)
    _write(moved, b"".join(lines["multi-tool"][:16]))
    _write(copied, b"".join(lines["subagent"][:10]))
    d = env["daemon"]()
    env["receiver"].wait_for(lambda r: len(r.spans()) >= 5, 20)
    assert d.terminate() == 0  # (its stop saves the checkpoints)
    sent = len(env["receiver"].spans())
    outside.mkdir()
    shutil.move(moved.parent, outside / "multi-tool")
    restored = root / "restored-multi-tool" / "events.jsonl"
    shutil.move(outside / "multi-tool", restored.parent)
    shutil.copytree(copied.parent, outside / "subagent")
    shutil.rmtree(copied.parent)
    shutil.copytree(outside / "subagent", copied.parent)
    _write(restored, b"".join(lines["multi-tool"][16:]))
    _write(copied, b"".join(lines["subagent"][10:]))
    d2 = env["daemon"]()
    # a log the daemon never saw, moved in while it runs: read from the start
    shutil.copytree(CLI_GENERATED / "failing-tool", outside / "failing-tool")
    unknown = root / "failing-tool" / "events.jsonl"
    shutil.move(outside / "failing-tool", unknown.parent)
    _exactly_once(env["receiver"], [restored, copied, unknown], env["tmp"])
    assert d2.terminate() == 0  # (its stop saves the checkpoints)
    _none_twice(env["receiver"])
    assert len(env["receiver"].spans()) > sent
    assert set(_checkpoints(env["state"])) == {str(restored), str(copied), str(unknown)}
    assert "bad line" not in d2.output()


# ------------------------------------------------------------------ #42 the transport raises instead of failing
_RAISING_REQUESTS = """
import os

import requests

_left = [int(os.environ["RAISE_ON_FIRST_TRACE_POSTS"])]
_post = requests.Session.post


def post(self, url, *args, **kwargs):
    # a library that raises where it should return a failure (the SDK's HTTP exporter up to 1.44 did)
    if str(url).endswith("/v1/traces") and _left[0] > 0:
        _left[0] -= 1
        raise RuntimeError("the transport raised instead of returning a failure")
    return _post(self, url, *args, **kwargs)


requests.Session.post = post
"""


def test_a_transport_that_raises_is_not_acked_and_the_batch_is_delivered_once(env: dict[str, Any]) -> None:
    site = env["tmp"] / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_RAISING_REQUESTS)
    shutil.copytree(CLI_GENERATED / "multi-tool", env["root"] / "m")
    log = env["root"] / "m" / "events.jsonl"
    pythonpath = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    d = env["daemon"](env={"PYTHONPATH": pythonpath, "RAISE_ON_FIRST_TRACE_POSTS": "2"})
    _exactly_once(env["receiver"], [log], env["tmp"])
    assert d.terminate() == 0  # (its stop saves the checkpoints)
    _none_twice(env["receiver"])
    out = d.output()
    assert out.count("the transport raised instead of returning a failure") >= 1
    assert out.count("Traceback") <= 1, "said once with its traceback, then counted"
    assert _status(env["state"])["retries"] >= 2
    assert _checkpoints(env["state"])[str(log)].acked_offset == log.stat().st_size
