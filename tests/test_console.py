"""Output on a cp1252 console or a redirected stream: ASCII glyphs instead of a crash; ``--json`` is UTF-8 bytes.

Each command runs as a real process whose standard streams are pipes encoded as cp1252
(``PYTHONIOENCODING``), which is what a redirected stream gets on a Windows machine with a Western code page.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from copilot_otel._platform import can_encode_glyphs, text_streams
from tests.conftest import CLI_GENERATED
from tests.otlp_receiver import OtlpReceiver

ROOT = Path(__file__).resolve().parent.parent
LOG = CLI_GENERATED / "failing-tool" / "events.jsonl"


def _run(*args: str, encoding: str = "cp1252") -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONIOENCODING": encoding, "COPILOT_OTEL_METRICS": "false"}
    return subprocess.run(
        [sys.executable, "-m", "copilot_otel", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )


def test_show_draws_ascii_trees_on_cp1252() -> None:
    result = _run("show", str(LOG))
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    text = result.stdout.decode("cp1252")
    assert "Prompt 1/1" in text and "Traceback" not in result.stderr.decode("cp1252")
    assert "x view" in text and "+ bash" in text  # failed and succeeded tools: ✗ and ✓ spelled in ASCII
    assert "-> tool_calls" in text  # the finish reason's arrow
    assert "`-- " in text or "+-- " in text  # rich's ASCII tree guides
    assert all(glyph not in text for glyph in "✓✗→…│├└")


def test_show_json_is_utf8_whatever_the_console() -> None:
    legacy, utf8 = _run("show", "--json", str(LOG)), _run("show", "--json", str(LOG), encoding="utf-8")
    assert legacy.returncode == utf8.returncode == 0
    assert legacy.stdout == utf8.stdout
    spans = json.loads(legacy.stdout.decode("utf-8"))["spans"]
    assert len(spans) >= 5


def test_doctor_and_replay_summary_on_cp1252(tmp_path: Path, receiver: OtlpReceiver) -> None:
    doctor = _run("doctor", "--state-dir", str(tmp_path / "state"), "--timeout", "2")
    assert doctor.returncode in (0, 1) and b"Traceback" not in doctor.stderr
    assert b"state dir" in doctor.stdout
    replay = _run(
        "replay",
        str(LOG),
        "--endpoint",
        receiver.http_endpoint,
        "--state-dir",
        str(tmp_path / "s"),
        "--no-progress",
    )
    assert replay.returncode == 0, replay.stderr.decode(errors="replace")
    assert b"spans" in replay.stdout and b" -> OTLP" in replay.stdout


def test_status_on_cp1252(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    now = time.time()
    doc = {
        "pid": os.getpid(),
        "started_at": now - 60,
        "updated_at": now,
        "destination": "OTLP → collector “a”",
    }
    (state / "status.json").write_text(json.dumps(doc), encoding="utf-8")
    table = _run("status", "--state-dir", str(state))
    assert table.returncode == 0, table.stderr.decode(errors="replace")
    assert 'OTLP -> collector "a"' in table.stdout.decode("cp1252")
    raw = _run("status", "--json", "--state-dir", str(state))
    assert raw.returncode == 0 and json.loads(raw.stdout.decode("utf-8"))["destination"] == doc["destination"]


def test_the_text_layer_spells_glyphs_and_replaces_the_rest() -> None:
    cp1252 = io.TextIOWrapper(io.BytesIO(), encoding="cp1252")
    assert not can_encode_glyphs(cp1252)
    assert can_encode_glyphs(io.TextIOWrapper(io.BytesIO(), encoding="utf-8"))
    saved = sys.stdout
    sys.stdout = cp1252
    try:
        with text_streams():
            print("✓ done → next … 中文 é")
        cp1252.flush()
    finally:
        sys.stdout = saved
    assert cp1252.buffer.getvalue().decode("cp1252") == "+ done -> next ... ?? é\n"
