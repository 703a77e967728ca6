"""What model calls cost: every fixture call of every agent checked against the price table's own figure.

The expected figures come from genai-prices' own ``calc_price`` (its public front door, Decimal arithmetic),
over each call's tokens; the code under test works each model's rates out once and multiplies
(:mod:`copilot_otel.projections.prices`), so the two must agree call by call, tiers included. Claude Code's
costs are checked from the raw log lines too (each assistant message's own ``usage``), and the report says a
model the table does not know, and takes ``--price``.
"""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import genai_prices
import pytest

from copilot_otel import library
from copilot_otel.cli import main
from copilot_otel.model.activity import ModelCall, Usage
from copilot_otel.projections.prices import PROVIDERS, Cost, PriceTable, Unpriced, table_source
from tests.conftest import FIXTURES, replay_into
from tests.otlp_receiver import OtlpReceiver

OTHER = FIXTURES / "other-agents"
AGENT_SETS = ("claude-code", "claude-code-2.1.332", "codex", "gemini")


def _logs(folder: Path) -> list[Path]:
    """The session logs of one recorded scenario (a sub-agent's file is read with its parent's)."""
    return sorted(
        p
        for p in folder.rglob("*")
        if p.is_file()
        and "subagents" not in p.parts
        and "_capture" not in p.parts
        and (p.suffix == ".jsonl" or (p.suffix == ".json" and "chats" in p.parts))
    )


def _scenarios() -> list[Path]:
    out = [s for name in AGENT_SETS for s in sorted((OTHER / name).iterdir()) if s.is_dir()]
    return [*out, FIXTURES / "cli-generated", FIXTURES / "cli-shapes"]


def _calls(folder: Path) -> list[tuple[str, ModelCall]]:
    calls = []
    for log in _logs(folder):
        try:
            session = library.read_session(log)
        except Exception:  # a side file of the scenario, not a session log
            continue
        calls += [(session.agent, call) for call in session.model_calls]
    return calls


def _table_figure(call: ModelCall) -> Any:
    """The table's own price of the call's tokens (provider as the call names it), at the call's time."""
    return _table_price(call.provider, call.model, call.usage, call.start_ns)


def _table_price(provider: str, model: str, u: Usage, start_ns: int) -> Any:
    counts = {"input_tokens": u.input, "output_tokens": u.output}
    for key, value in (
        ("cache_read_tokens", u.cache_read),
        ("cache_write_tokens", u.cache_write),
        ("output_reasoning_tokens", u.reasoning),
    ):
        if value:
            counts[key] = value
    return genai_prices.calc_price(
        genai_prices.Usage(**counts),
        model,
        provider_id=PROVIDERS.get(provider, provider),
        genai_request_timestamp=datetime.fromtimestamp(start_ns / 1e9, timezone.utc),
    )


@pytest.mark.parametrize("folder", _scenarios(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_call_costs_what_the_price_table_says(folder: Path) -> None:
    table = PriceTable()
    calls = _calls(folder)
    assert calls, folder
    for agent, call in calls:
        cost = table.cost(call)
        if call.provider == "github" or not call.calls:
            assert cost is None  # premium requests (Copilot's own API), or no usage record: no per-token cost
            continue
        if call.usage.input is None or call.usage.output is None:
            assert isinstance(cost, Unpriced) and "not in the log" in cost.reason
            continue
        expected = _table_figure(call)
        assert isinstance(cost, Cost), (agent, call.model, cost)
        assert cost.source == table_source()
        assert cost.total_usd == pytest.approx(float(expected.total_price), rel=1e-9, abs=1e-15)
        assert cost.input_usd == pytest.approx(float(expected.input_price), rel=1e-9, abs=1e-15)
        assert cost.output_usd == pytest.approx(float(expected.output_price), rel=1e-9, abs=1e-15)


def test_each_agent_is_priced_at_its_providers_prices() -> None:
    """Claude Code at Anthropic's, Codex at OpenAI's, Gemini CLI at Google's: the table's provider of each."""
    seen: dict[str, set[str]] = {}
    for name in AGENT_SETS:
        for scenario in sorted((OTHER / name).iterdir()):
            if scenario.is_dir():
                for agent, call in _calls(scenario):
                    if call.calls:
                        seen.setdefault(agent, set()).add(_table_figure(call).provider.id)
    assert seen == {"claude-code": {"anthropic"}, "codex": {"openai"}, "gemini": {"google"}}


@pytest.mark.parametrize(
    ("provider", "model"),
    [("openai", "gpt-5.5"), ("gcp.gemini", "gemini-2.5-pro"), ("anthropic", "claude-sonnet-4-5")],
)
def test_tiered_prices_agree_on_either_side_of_each_threshold(provider: str, model: str) -> None:
    """Past a tier's threshold of input tokens every token costs the tier's price (the table's cliff)."""
    table = PriceTable()
    when = int(datetime(2026, 11, 1, tzinfo=timezone.utc).timestamp() * 1e9)
    for input_tokens in (0, 1, 1_000, 199_999, 200_000, 200_001, 272_000, 272_001, 1_500_000):
        usage = Usage(input_tokens, 3_000, input_tokens // 2, input_tokens // 10, 0.0, 0.0, 1, 700)
        cost = table.usage_cost(provider, model, usage, when)
        assert isinstance(cost, Cost)
        expected = _table_price(provider, model, usage, when)
        assert cost.total_usd == pytest.approx(float(expected.total_price), rel=1e-9), input_tokens


def _claude_raw_cost(log: Path) -> float:
    """A Claude Code session's cost from its raw lines: each assistant message's own ``usage`` (the last line
    of a message id: the CLI writes one line per content block, each with the message's usage), its own model,
    at its own time; sub-agents' files with it."""
    last: dict[str, dict[str, Any]] = {}
    files = [log, *sorted(log.with_suffix("").glob("subagents/*.jsonl"))]
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            message = record.get("message") if isinstance(record, dict) else None
            if (
                record.get("type") == "assistant"
                and isinstance(message, dict)
                and message.get("usage")
                and message.get("model") != "<synthetic>"
            ):
                last[f"{path}:{message['id']}"] = record
    total = 0.0
    for record in last.values():
        u = record["message"]["usage"]
        read, write = u.get("cache_read_input_tokens", 0), u.get("cache_creation_input_tokens", 0)
        price = genai_prices.calc_price(
            genai_prices.Usage(
                input_tokens=u["input_tokens"] + read + write,
                output_tokens=u["output_tokens"],
                cache_read_tokens=read,
                cache_write_tokens=write,
            ),
            record["message"]["model"],
            provider_id="anthropic",
            genai_request_timestamp=datetime.fromisoformat(record["timestamp"].replace("Z", "+00:00")),
        )
        total += float(price.total_price)
    return total


def _report_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["report", *argv, "--json", "--no-progress"]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


@pytest.mark.parametrize(
    "folder", sorted(p for p in (OTHER / "claude-code").iterdir() if p.is_dir()), ids=lambda p: p.name
)
def test_a_claude_code_session_costs_its_raw_usage_at_the_tables_prices(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (log,) = _logs(folder)
    doc = _report_json(capsys, "session", str(log))
    (row,) = doc["rows"]
    assert row["cost_usd"] == pytest.approx(_claude_raw_cost(log), abs=2e-6)
    assert row["cost_source"] == [table_source()]
    assert doc["report"]["price_table"] == table_source()


def _renamed(tmp_path: Path, model: str) -> Path:
    """A real Claude Code log whose model is one the table does not know."""
    (src,) = _logs(OTHER / "claude-code" / "multi-tool")
    dst = tmp_path / src.name
    dst.write_text(
        src.read_text(encoding="utf-8").replace('"claude-opus-4-8"', f'"{model}"'), encoding="utf-8"
    )
    return dst


def test_a_model_the_table_does_not_know_is_said_never_priced_at_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _renamed(tmp_path, "claude-nonesuch-9")
    calls = [c for c in library.read_session(log).model_calls if c.calls]
    doc = _report_json(capsys, "model", str(log))
    (row,) = doc["rows"]
    assert row["unpriced_calls"] == {"claude-nonesuch-9": len(calls)}
    assert row["cost_usd"] == 0 and row["cost_source"] == []
    assert doc["totals"]["unpriced_calls"] == {"claude-nonesuch-9": len(calls)}
    assert main(["report", "model", str(log), "--no-progress"]) == 0
    table = capsys.readouterr().out
    assert f"unpriced: {len(calls)} calls of claude-nonesuch-9 (not in {table_source()})" in table


def test_price_prices_a_model_per_million_tokens(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _renamed(tmp_path, "claude-nonesuch-9")
    calls = [c for c in library.read_session(log).model_calls if c.calls]
    doc = _report_json(capsys, "model", str(log), "--price", "claude-nonesuch-9=3,15,0.3,3.75")
    expected = 0.0
    for call in calls:
        u = call.usage
        assert u.input is not None and u.output is not None
        read, write = u.cache_read or 0, u.cache_write or 0
        expected += ((u.input - read - write) * 3 + u.output * 15 + read * 0.3 + write * 3.75) / 1e6
    (row,) = doc["rows"]
    assert row["cost_usd"] == pytest.approx(expected, abs=2e-6) and expected > 0
    assert row["cost_source"] == ["--price"] and row["unpriced_calls"] == {}
    # the premium request's price is still a bare number beside it
    assert _report_json(capsys, str(log), "--price", "0.1")["report"]["price_per_premium_request_usd"] == 0.1


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("-1", "--price: a price cannot be negative, got '-1'"),
        ("m=1,-2", "--price m: a price cannot be negative, got '-2'"),
        ("m=1", "Expected --price MODEL=INPUT,OUTPUT[,CACHE_READ[,CACHE_WRITE]]"),
        ("cheap", "Expected --price to be a number of USD, got 'cheap'"),
    ],
)
def test_a_bad_price_is_refused_with_one_line(
    value: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(OTHER / "claude-code"), f"--price={value}"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip()
    assert said in err and "\n" not in err


def test_json_and_csv_carry_the_cost_and_its_source(capsys: pytest.CaptureFixture[str]) -> None:
    """A Copilot BYOK call priced per token beside the premium requests of Copilot's own API, and a Claude Code
    session at Anthropic's prices: each row says where its cost came from."""
    byok = FIXTURES / "cli-generated" / "plain-question"
    own = FIXTURES / "cli-generated" / "capi-multi-tool"
    (claude,) = _logs(OTHER / "claude-code" / "plain-question")
    targets = [str(byok), str(own), str(claude)]
    doc = _report_json(capsys, "session", *targets, "--tz", "UTC")
    sources = {row["key"]: row["cost_source"] for row in doc["rows"]}
    assert sorted(sources.values()) == sorted([[table_source()], ["premium requests"], [table_source()]])
    assert doc["totals"]["cost_source"] == [table_source(), "premium requests"]
    assert all(row["cost_usd"] > 0 for row in doc["rows"])
    assert main(["report", "session", *targets, "--tz", "UTC", "--csv", "--no-progress"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    for parsed, expected in zip(rows, [*doc["rows"], doc["totals"]], strict=True):
        assert float(parsed["cost_usd"]) == pytest.approx(expected["cost_usd"])
        assert parsed["cost_source"] == ";".join(expected["cost_source"])
        assert parsed["unpriced_calls"] == ""


def test_the_cost_reaches_a_real_otlp_receiver(receiver: OtlpReceiver) -> None:
    """Replayed to a real OTLP receiver: each chat span carries its cost in OpenInference's and Langfuse's names,
    the prompt's root its calls' sum, and the cost counter adds up by provider and model."""
    (log,) = _logs(OTHER / "codex" / "multi-tool")
    table = PriceTable()
    costs = [c for c in map(table.cost, library.read_session(log).model_calls) if isinstance(c, Cost)]
    assert costs
    assert replay_into(receiver, log) == 0
    chats = [s for s in receiver.spans() if s["attributes"].get("openinference.span.kind") == "LLM"]
    assert sorted(s["attributes"]["llm.cost.total"] for s in chats) == pytest.approx(
        sorted(c.total_usd for c in costs)
    )
    for span in chats:
        attrs = span["attributes"]
        assert attrs["llm.cost.prompt"] + attrs["llm.cost.completion"] == pytest.approx(
            attrs["llm.cost.total"]
        )
        details = json.loads(attrs["langfuse.observation.cost_details"])
        assert details["total"] == pytest.approx(attrs["llm.cost.total"])
    roots = [s for s in receiver.spans() if s["parent_span_id"] is None]
    assert sum(r["attributes"]["copilot_otel.prompt.cost_usd"] for r in roots) == pytest.approx(
        sum(c.total_usd for c in costs)
    )
    points = [p for p in receiver.metrics() if p["name"] == "copilot_otel.cost"]
    assert points and {p["attributes"]["gen_ai.provider.name"] for p in points} == {"openai"}
    assert points[-1]["unit"] == "{USD}"
    assert max(p["value"] for p in points) == pytest.approx(sum(c.total_usd for c in costs))


def test_a_copilot_prompts_root_costs_its_sub_agents_calls_too(receiver: OtlpReceiver) -> None:
    """Copilot CLI logs a sub-agent's calls in its parent's log: the root's cost is every chat of its trace."""
    assert replay_into(receiver, FIXTURES / "cli-generated" / "subagent") == 0
    spans = receiver.spans()
    parent = {s["span_id"]: s["parent_span_id"] for s in spans}
    agents = {
        s["span_id"]
        for s in spans
        if s["parent_span_id"] is not None and s["name"].startswith("invoke_agent")
    }

    def under_an_agent(span_id: str | None) -> bool:
        while span_id is not None:
            if span_id in agents:
                return True
            span_id = parent.get(span_id)
        return False

    chats = [s for s in spans if "llm.cost.total" in s["attributes"]]
    assert any(under_an_agent(c["parent_span_id"]) for c in chats)  # a sub-agent's call is priced
    for root in (s for s in spans if s["parent_span_id"] is None):
        mine = [c["attributes"]["llm.cost.total"] for c in chats if c["trace_id"] == root["trace_id"]]
        assert root["attributes"]["copilot_otel.prompt.cost_usd"] == pytest.approx(sum(mine))
