"""Agent-loop features over real CLI captures (issue 23): hooks, warnings, skills, a custom agent, reasoning,
failed and cut model calls, imported sessions.

Each fixture under ``tests/fixtures/cli-shapes`` was written by the real Copilot CLI 1.0.102
(``tests/realcli/shapes.py``); it is replayed through the real pipeline into the real OTLP receiver, and the
rules are checked on what arrived, against the raw events of the same log.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FIXTURES, replay_into
from tests.otlp_receiver import OtlpReceiver
from tests.test_fixture_shapes import FEATURE_SHAPES

SHAPES = FIXTURES / "cli-shapes"
# The feature captures, and one session of a model that reports no reasoning tokens.
NAMES = (*FEATURE_SHAPES, "model-change-resume")
Span = dict[str, Any]
ERROR = 2  # the OTLP status code of a failed span


def _events(name: str) -> list[dict[str, Any]]:
    lines = (SHAPES / name / "events.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _ns(stamp: str) -> int:
    from copilot_otel.model.timestamps import parse_timestamp

    return parse_timestamp(stamp)


class Out:
    def __init__(self, receiver: OtlpReceiver) -> None:
        self.spans: list[Span] = receiver.spans()
        self.logs: list[dict[str, Any]] = receiver.logs()
        self.metrics: list[dict[str, Any]] = receiver.metrics()

    def named(self, prefix: str) -> list[Span]:
        return sorted((s for s in self.spans if s["name"].startswith(prefix)), key=lambda s: s["start_ns"])

    def roots(self) -> list[Span]:
        return sorted((s for s in self.spans if s["parent_span_id"] is None), key=lambda s: s["start_ns"])

    def by_id(self, span_id: str) -> Span:
        return next(s for s in self.spans if s["span_id"] == span_id)

    def points(self, name: str) -> list[dict[str, Any]]:
        return [p for p in self.metrics if p["name"] == name]


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Out]]:
    result: dict[str, Out] = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(tmp_path_factory.mktemp("home")))
        for name in NAMES:
            with OtlpReceiver() as receiver:
                state = str(tmp_path_factory.mktemp("state"))
                assert replay_into(receiver, SHAPES / name, extra=("--state-dir", state)) == 0
                result[name] = Out(receiver)
    yield result


# ---------------------------------------------------------------------------------------------- hooks
def test_every_hook_run_is_a_span_under_its_tool_or_prompt(out: dict[str, Out]) -> None:
    x = out["hooks"]
    raw = _events("hooks")
    starts = [e for e in raw if e["type"] == "hook.start"]
    hooks = x.named("hook ")
    assert sorted(h["attributes"]["copilot_otel.hook.invocation_id"] for h in hooks) == sorted(
        e["data"]["hookInvocationId"] for e in starts
    )
    (root,) = x.roots()
    for hook in hooks:
        kind = hook["attributes"]["copilot_otel.hook.type"]
        assert hook["name"] == f"hook {kind}"
        assert hook["attributes"]["openinference.span.kind"] == "CHAIN"
        assert hook["trace_id"] == root["trace_id"]
        parent = x.by_id(hook["parent_span_id"])
        if kind in ("preToolUse", "postToolUse"):
            assert parent["name"] == "execute_tool bash"
            assert parent["attributes"]["gen_ai.tool.call.id"] == hook["attributes"]["gen_ai.tool.call.id"]
        else:
            assert parent is root or parent["span_id"] == root["span_id"]
    # the hooks written before the user.message belong to that prompt, whose root now starts with them
    assert root["start_ns"] == _ns(starts[0]["timestamp"])


def test_a_failed_hook_is_an_error_span_with_its_reason(out: dict[str, Out]) -> None:
    hooks = out["hooks"].named("hook ")
    failed = [h for h in hooks if h["status_code"] == ERROR]
    ends = [e for e in _events("hooks") if e["type"] == "hook.end" and e["data"]["success"] is False]
    assert len(failed) == len(ends) == 1
    (hook,) = failed
    assert hook["attributes"]["error.type"] == "HookTimeoutError"
    assert hook["status_message"] == ends[0]["data"]["error"]["message"]
    assert hook["attributes"]["langfuse.observation.level"] == "ERROR"
    assert hook["attributes"]["copilot_otel.hook.source"] == ".github/hooks/policy.json"
    # the tool it followed succeeded: its span is not failed by the hook, and holds the hook's time as a child
    tool = out["hooks"].by_id(hook["parent_span_id"])
    assert tool["status_code"] != ERROR
    assert tool["start_ns"] <= hook["start_ns"] <= hook["end_ns"] <= tool["end_ns"]
    # the tool span says how much of it its hooks took (here the 1 s timeout of a 1.05 s span)
    in_hooks = [h for h in hooks if h["parent_span_id"] == tool["span_id"]]
    assert tool["attributes"]["copilot_otel.tool.hooks_s"] == pytest.approx(
        sum(h["end_ns"] - h["start_ns"] for h in in_hooks) / 1e9
    )
    assert tool["attributes"]["copilot_otel.tool.hooks_s"] > 0.9 * (tool["end_ns"] - tool["start_ns"]) / 1e9


def test_a_tool_denied_by_a_hook_is_a_denial_naming_the_hook(out: dict[str, Out]) -> None:
    tools = [s for s in out["hooks"].named("execute_tool") if s["status_code"] == ERROR]
    assert len(tools) == 1
    attrs = tools[0]["attributes"]
    assert attrs["error.type"] == "denied"
    assert attrs["copilot_otel.tool.denied_by"] == "preToolUse hook"
    (deciding,) = [
        h for h in out["hooks"].named("hook preToolUse") if h["parent_span_id"] == tools[0]["span_id"]
    ]
    assert deciding["attributes"]["copilot_otel.hook.denied_calls"] == 1


def test_a_session_warning_is_a_span_event_a_log_event_and_a_metric(out: dict[str, Out]) -> None:
    x = out["hooks"]
    (warning,) = [e for e in _events("hooks") if e["type"] == "session.warning"]
    (root,) = x.roots()
    events = [e for e in root["events"] if e["name"] == "copilot_otel.session.warning"]
    assert [e["attributes"]["copilot_otel.warning.type"] for e in events] == ["hook"]
    assert events[0]["attributes"]["copilot_otel.warning.message"] == warning["data"]["message"]
    logs = [r for r in x.logs if r["attributes"].get("event.name") == "copilot_otel.session.warning"]
    assert len(logs) == 1
    assert logs[0]["trace_id"] == root["trace_id"]
    (point,) = x.points("copilot_otel.session.warnings")
    assert point["attributes"] == {"copilot_otel.warning.type": "hook", "copilot_otel.agent": "copilot"}
    assert point["value"] == 1


# ---------------------------------------------------------------------------------------------- skills
@pytest.mark.parametrize("name", ["skill-user", "skill-agent", "skill-plugin"])
def test_a_skill_is_in_the_trace_of_its_prompt(out: dict[str, Out], name: str) -> None:
    (root,) = out[name].roots()
    skills = [e for e in root["events"] if e["name"] == "github.copilot.skill.invoked"]
    (raw,) = [e for e in _events(name) if e["type"] == "skill.invoked"]
    assert len(skills) == 1
    assert skills[0]["time_ns"] == _ns(raw["timestamp"])
    attrs = skills[0]["attributes"]
    assert (attrs["github.copilot.skill.trigger"], attrs["github.copilot.skill.source"]) == (
        raw["data"]["trigger"],
        raw["data"]["source"],
    )
    if name == "skill-plugin":
        assert attrs["github.copilot.skill.plugin_name"] == "shapes-tools"
    if name == "skill-user":  # written before its user.message: the prompt starts with it
        assert root["start_ns"] == skills[0]["time_ns"]


# ---------------------------------------------------------------------------------------------- custom agent
def test_the_root_of_an_agent_session_is_named(out: dict[str, Out]) -> None:
    x = out["custom-agent"]
    (root,) = x.roots()
    assert root["name"] == "invoke_agent reviewer"
    attrs = root["attributes"]
    assert attrs["gen_ai.agent.name"] == "reviewer"
    assert attrs["github.copilot.agent.type"] == "custom"
    assert attrs["agent.name"] == "reviewer"
    assert attrs["langfuse.trace.name"] == "reviewer prompt"
    assert all(c["attributes"]["gen_ai.agent.name"] == "reviewer" for c in x.named("chat "))
    assert out["reasoning"].roots()[0]["attributes"]["github.copilot.agent.type"] == "builtin"


# ---------------------------------------------------------------------------------------------- reasoning
def test_reasoning_tokens_and_effort_on_the_chat_spans(out: dict[str, Out]) -> None:
    x = out["reasoning"]
    raw = [e["data"]["usage"] for e in _events("reasoning") if e["type"] == "session.usage_record"]
    chats = x.named("chat ")
    assert [c["attributes"]["gen_ai.usage.reasoning.output_tokens"] for c in chats] == [
        u["reasoningTokens"] for u in raw
    ]
    assert [c["attributes"]["llm.token_count.completion_details.reasoning"] for c in chats] == [25, 10, 5]
    assert [c["attributes"]["gen_ai.request.reasoning.level"] for c in chats] == ["high", "high", "low"]
    assert [r["attributes"]["gen_ai.request.reasoning.level"] for r in x.roots()] == ["high", "low"]
    # a sub-agent's calls carry their own effort (their usage records say it), not the session's
    reasoning = [
        p
        for p in x.points("gen_ai.client.token.usage")
        if p["attributes"]["gen_ai.token.type"] == "reasoning"
    ]
    assert sum(p["sum"] if "sum" in p else p["value"] for p in reasoning) == 40


def test_a_sub_agents_calls_carry_their_own_effort(tmp_path: Path) -> None:
    from copilot_otel.library import read_session
    from copilot_otel.model.activity import ModelCall

    folder = FIXTURES / "cli-generated" / "subagent"
    raw = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines() if line.strip()]
    sub_agent = {
        e["data"]["usage"]["apiCallId"]: e["data"]["usage"].get("reasoningEffort")
        for e in raw
        if e["type"] == "session.usage_record" and "agentId" in e
    }
    assert set(sub_agent.values()) == {"low"}
    calls = [r for r in read_session(folder).records if isinstance(r, ModelCall)]
    assert {c.response_id: c.reasoning_effort for c in calls if c.response_id in sub_agent} == sub_agent


@pytest.mark.parametrize("name", NAMES)
def test_cache_tokens_under_the_semconv_packages_names(out: dict[str, Out], name: str) -> None:
    """The package defines cache_creation (and no cache_write): one name, not both."""
    for span in out[name].spans:
        assert "gen_ai.usage.cache_write.input_tokens" not in span["attributes"], span["name"]
    chats = out[name].named("chat ")
    assert all("gen_ai.usage.cache_creation.input_tokens" in c["attributes"] for c in chats)


def test_no_reasoning_attribute_where_the_log_has_no_count(out: dict[str, Out]) -> None:
    """Unknown is not zero: a model that reports no reasoning tokens gets no reasoning count."""
    for span in out["model-change-resume"].spans:
        assert "gen_ai.usage.reasoning.output_tokens" not in span["attributes"]
        assert "llm.token_count.completion_details.reasoning" not in span["attributes"]


# ---------------------------------------------------------------------------------------------- failed calls
@pytest.mark.parametrize(("name", "status"), [("error-context", "400"), ("error-ratelimit", "429")])
def test_a_failed_calls_chat_span_carries_the_providers_status(
    out: dict[str, Out], name: str, status: str
) -> None:
    x = out[name]
    (error,) = [e for e in _events(name) if e["type"] == "session.error"]
    (chat,) = x.named("chat ")
    assert chat["attributes"]["error.type"] == status == str(error["data"]["statusCode"])
    assert (chat["status_code"], chat["status_message"]) == (ERROR, error["data"]["message"])
    (root,) = x.roots()
    assert root["attributes"]["error.type"] == status
    assert root["status_code"] == ERROR
    duration = [
        p for p in x.points("gen_ai.client.operation.duration") if p["attributes"].get("error.type") == status
    ]
    assert duration


def test_a_call_cut_by_ctrl_c_is_cancelled_by_the_user(out: dict[str, Out]) -> None:
    chats = out["ctrlc-stream"].named("chat ")
    assert [c["attributes"].get("error.type") for c in chats] == [None, "cancelled"]
    assert chats[1]["attributes"]["copilot_otel.incomplete.reason"] == "aborted"
    assert all(c["attributes"].get("error.type") != "ModelCallError" for c in chats)


# ---------------------------------------------------------------------------------------------- imports
def test_an_imported_transcript_is_one_event_not_model_calls(out: dict[str, Out]) -> None:
    x = out["imported"]
    raw = _events("imported")
    resumed = _ns(next(e for e in raw if e["type"] == "session.resume")["timestamp"])
    assert all(s["start_ns"] >= resumed for s in x.spans), "nothing of the import is a span"
    assert len(x.roots()) == 1  # the real prompt after it
    assert len(x.named("chat ")) == sum(e["type"] == "session.usage_record" for e in raw) == 2
    (imported,) = [r for r in x.logs if r["attributes"].get("event.name") == "copilot_otel.session.imported"]
    assert imported["time_ns"] == _ns(raw[0]["data"]["startTime"])  # dated by the transcript
    attrs = imported["attributes"]
    assert attrs["copilot_otel.import.user_messages"] == 2
    assert attrs["copilot_otel.import.assistant_messages"] == 3
    assert attrs["copilot_otel.import.tool_calls"] == 1


def test_fixtures_exist() -> None:
    assert all((SHAPES / name / "events.jsonl").is_file() for name in NAMES)
    assert Path(__file__).name == "test_loop_features.py"


# ---------------------------------------------------------------------------------------------- report and show
def test_report_and_show_count_reasoning_tokens_only_where_known(capsys: pytest.CaptureFixture[str]) -> None:
    from copilot_otel.cli import main

    assert main(["report", "session", str(SHAPES / "reasoning"), "--tz", "UTC", "--json"]) == 0
    totals = json.loads(capsys.readouterr().out)["totals"]
    assert totals["reasoning_tokens"] == 40
    assert main(["report", "session", str(SHAPES / "model-change-resume"), "--tz", "UTC", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["totals"]["reasoning_tokens"] == 0
    assert main(["show", str(SHAPES / "reasoning")]) == 0
    shown = capsys.readouterr().out
    assert "1,200 in / 60 out tokens (25 reasoning)" in shown
    assert main(["show", str(SHAPES / "model-change-resume")]) == 0
    assert "reasoning" not in capsys.readouterr().out


def test_show_draws_hooks_under_their_tool_and_the_warning() -> None:
    from rich.console import Console

    from copilot_otel.commands.show import render_session
    from copilot_otel.library import read_session

    console = Console(width=200, record=True, color_system=None)
    console.print(render_session(read_session(SHAPES / "hooks")))
    text = console.export_text()
    assert "hook postToolUse" in text
    assert "failed: HookTimeoutError" in text
    assert "denied 1 call" in text
    assert "⚠ warning (hook): post hook crashed" in text


# ---------------------------------------------------------------------------------------------- unknown is not zero
def test_a_count_out_of_range_is_absent_not_zero(
    out: dict[str, Out], capsys: pytest.CaptureFixture[str]
) -> None:
    x = out["usage-out-of-range"]
    raw = [e["data"]["usage"] for e in _events("usage-out-of-range") if e["type"] == "session.usage_record"]
    assert raw[0]["outputTokens"] > 2**53
    chat = x.named("chat ")[0]
    assert chat["attributes"]["gen_ai.usage.input_tokens"] == raw[0]["inputTokens"]
    for key in ("gen_ai.usage.output_tokens", "llm.token_count.completion", "llm.token_count.total"):
        assert key not in chat["attributes"], key
    (root,) = x.roots()
    assert "gen_ai.usage.output_tokens" not in root["attributes"]  # a sum missing a part is not the sum
    outputs = [
        p for p in x.points("gen_ai.client.token.usage") if p["attributes"]["gen_ai.token.type"] == "output"
    ]
    assert not outputs
    from copilot_otel.cli import main

    folder = str(SHAPES / "usage-out-of-range")
    assert main(["report", "session", folder, "--tz", "UTC", "--json"]) == 0
    totals = json.loads(capsys.readouterr().out)["totals"]
    assert "output_tokens" in totals["estimated"]
    assert totals["input_tokens"] == sum(u["inputTokens"] for u in raw)
    assert main(["show", folder]) == 0
    assert "1,200 in / ? out tokens" in capsys.readouterr().out


def test_hooks_of_a_log_that_ends_before_its_prompt_are_not_lost() -> None:
    """The hooks capture cut before its user.message (as a file being written, or a CLI killed, leaves it):
    its sessionStart and userPromptSubmitted hooks still end up as spans, under a synthetic root."""
    from copilot_otel.model.records import SpanRecord
    from copilot_otel.pipeline import Pipeline

    data = (SHAPES / "hooks" / "events.jsonl").read_bytes()
    cut = data.index(b'{"type":"user.message"')
    pipeline = Pipeline("hooks")
    emitted = [e for step in pipeline.feed_blob(data[:cut]) for e in step.emissions]
    assert pipeline.has_open_prompt  # what waits for the prompt keeps the fold (and the checkpoint) open
    emitted += pipeline.close("file_ended").emissions
    spans = [e for e in emitted if isinstance(e, SpanRecord)]
    assert sorted(s.name for s in spans) == ["hook sessionStart", "hook userPromptSubmitted", "invoke_agent"]
    (root,) = [s for s in spans if s.parent_span_id is None]
    assert root.attributes["copilot_otel.prompt.synthetic"] is True
    assert all(s.parent_span_id == root.span_id for s in spans if s is not root)
    assert not pipeline.has_open_prompt


def test_a_sandboxed_tool_run_says_so(out: dict[str, Out]) -> None:
    (tool,) = out["sandbox"].named("execute_tool")
    assert tool["attributes"]["copilot_otel.tool.sandboxed"] is True
    assert tool["attributes"]["process.exit.code"] == 1
    assert all(
        "copilot_otel.tool.sandboxed" not in t["attributes"] for t in out["hooks"].named("execute_tool")
    )


# ---------------------------------------------------------------------------------------------- extensions
def test_an_extension_tool_call_is_one_tool_span_marked_as_run_by_an_extension(out: dict[str, Out]) -> None:
    x = out["extension-tools"]
    raw = _events("extension-tools")
    handed = [e["data"]["toolCallId"] for e in raw if e["type"] == "external_tool.requested"]
    starts = {e["data"]["toolCallId"]: e for e in raw if e["type"] == "tool.execution_start"}
    assert sorted(handed) == sorted(starts) == ["call_ext_0_0", "call_ext_0_1"]
    tools = x.named("execute_tool")
    # One span per call, from its tool.execution_start: external_tool.* add none (the CLI's own OTel makes a
    # second, "external_tool shapes_greet", under each).
    assert sorted(t["attributes"]["gen_ai.tool.call.id"] for t in tools) == sorted(handed)
    assert not [s for s in x.spans if "external" in s["name"]]
    for tool in tools:
        attrs = tool["attributes"]
        assert tool["start_ns"] == _ns(starts[attrs["gen_ai.tool.call.id"]]["timestamp"])
        assert attrs["copilot_otel.tool.external"] is True
        assert attrs["gen_ai.tool.type"] == "extension"
        assert "copilot_otel.tool.mcp_server" not in attrs
    failed = {t["attributes"]["gen_ai.tool.call.id"]: t["status_code"] == ERROR for t in tools}
    assert failed == {"call_ext_0_0": False, "call_ext_0_1": True}
    # The CLI's own tools are not marked.
    assert all(
        "copilot_otel.tool.external" not in t["attributes"] for t in out["hooks"].named("execute_tool")
    )
    assert {t["attributes"]["gen_ai.tool.type"] for t in out["hooks"].named("execute_tool")} == {"function"}


def test_the_extension_is_named_on_stdout_only() -> None:
    """Why the tool span cannot name its extension: CLI 1.0.102 names it only in the ephemeral
    ``session.extensions_loaded`` (stdout), never in events.jsonl, and says nowhere which extension owns a tool."""
    folder = SHAPES / "extension-tools"
    log = (folder / "events.jsonl").read_text(encoding="utf-8")
    stdout = [json.loads(line) for line in (folder / "_capture" / "stdout.jsonl").read_text().splitlines()]
    (loaded,) = [e for e in stdout if e.get("type") == "session.extensions_loaded"]
    assert loaded["data"]["extensions"] == [
        {"id": "project:shapes-greeter", "name": "shapes-greeter", "source": "project", "status": "running"}
    ]
    assert "shapes-greeter" not in log and "session.extensions_loaded" not in log
    assert all("providerId" not in e["data"] for e in _events("extension-tools"))
