"""One rule for span status and ``error.type``, on every span of every fixture, as it reaches a real receiver.

The semantic conventions' "Recording errors" pair the two: an operation that ended in an error has status Error and
``error.type``; one that did not has neither. A call the user cut (Ctrl-C mid-reply) is recorded as an error
(``error.type=cancelled``, status ERROR, as its prompt's root is), never as one of the two alone.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import FIXTURES, replay_into
from tests.otlp_receiver import OtlpReceiver
from tests.test_golden import CLAUDE_CODE_SCENARIOS as CLAUDE_CODE
from tests.test_golden import CODEX_SCENARIOS as CODEX
from tests.test_golden import FIXTURE_LOGS, gemini_logs, rollouts
from tests.test_golden import GEMINI_SCENARIOS as GEMINI

ERROR = 2  # OTLP's STATUS_CODE_ERROR

# Each group of fixtures, as the golden tests replay them: Copilot CLI's logs, each other agent's scenarios.
GROUPS: dict[str, list[list[Path]]] = {
    "copilot": [[log] for log in FIXTURE_LOGS.values()],
    "claude-code": [[home] for home in CLAUDE_CODE.values()],
    "codex": [rollouts(home) for home in CODEX.values()],
    "gemini": [gemini_logs(name) for name in GEMINI],
}


def _mismatches(spans: list[dict[str, object]]) -> list[tuple[str, object, object]]:
    out = []
    for span in spans:
        attributes = span["attributes"]
        assert isinstance(attributes, dict)
        if ("error.type" in attributes) != (span["status_code"] == ERROR):
            out.append((str(span["name"]), attributes.get("error.type"), span["status_code"]))
    return out


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_error_type_is_set_exactly_on_error_spans(group: str, receiver: OtlpReceiver) -> None:
    spans: list[dict[str, object]] = []
    for paths in GROUPS[group]:
        receiver.clear()
        assert replay_into(receiver, *paths) == 0
        spans.extend(receiver.spans())
    assert spans
    assert _mismatches(spans) == []


def test_a_call_the_user_cut_is_an_error_span_as_its_root_is(receiver: OtlpReceiver) -> None:
    """[aborted]: Ctrl-C while the model replied; the chat span and the root are both ERROR, both say why."""
    assert replay_into(receiver, FIXTURES / "cli-generated" / "aborted" / "events.jsonl") == 0
    spans = receiver.spans()
    cut = [
        s for s in spans if s["name"].startswith("chat ") and s["attributes"].get("error.type") == "cancelled"
    ]
    assert cut
    assert {s["status_code"] for s in cut} == {ERROR}
    roots = [s for s in spans if s["parent_span_id"] is None]
    assert {s["status_code"] for s in roots} == {ERROR}
