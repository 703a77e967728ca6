"""What a model call cost in USD, from the call's own tokens and a price table that ships with a package.

The table is genai-prices' bundled data (the Pydantic team's, a release every week or two): it is read from the
installed package, never fetched (its auto-update is never started), so a cost is the same offline and the same
on every run of the same log. A call is priced at the prices in force when it started (the table dates them).

Which calls are priced per token: every call of Claude Code (Anthropic), Codex (OpenAI) and Gemini CLI (Google),
and Copilot CLI's calls through a provider the user pays per token (BYOK: ``gen_ai.provider.name`` is the BYOK
provider's). A Copilot CLI call through GitHub's own API (``github``) is paid in premium requests, not tokens:
:meth:`PriceTable.cost` gives ``None`` for it and the report keeps premium requests x their price.

A model the table does not know is :class:`Unpriced`, never 0: what it cost is not known, and a 0 would hide it.

Start-up: genai-prices imports pydantic and an HTTP client (~0.2 s on a 2-core machine, its data ~20 ms more),
so it is imported on the first call that is priced, never when this module is. The table's own calculation
takes ~0.13 ms a call (Decimal arithmetic over every price unit); a report over 100,000 events would spend
seconds in it. The prices of a model are linear in each kind of token within an input-size tier, so each
model's rates per token are worked out once per price period and tier from the table's own ``calc_price``
(probing it with one kind of token at a time), and a call costs five multiplications. ``tests/test_prices.py``
checks every fixture call against the table's own figure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any, Final

from ..model.activity import ModelCall, SubagentCall, Usage
from ..settings.report_defaults import TokenPrice

__all__ = ["OVERRIDE_SOURCE", "OWN_API", "PROVIDERS", "Cost", "PriceTable", "Unpriced", "table_source"]

# Copilot CLI's own API: its calls are paid in premium requests (the loop's provider for them).
OWN_API: Final = "github"
# What a cost priced by --price says it came from.
OVERRIDE_SOURCE: Final = "--price"

# gen_ai.provider.name (as the sources write it) -> genai-prices' provider id. A provider not here (a Copilot
# BYOK provider type the table names the same way: openai, anthropic, azure...) is looked up as it is; ``byok``
# (the CLI did not say which) lets the table find the provider from the model's name.
PROVIDERS: Final[Mapping[str, str | None]] = {
    "gcp.gemini": "google",
    "gcp.vertex_ai": "google",
    "aws.bedrock": "aws",
    "azure.ai.openai": "azure",
    "byok": None,
}

_PER_MILLION = 1_000_000


@dataclasses.dataclass(frozen=True, slots=True)
class Cost:
    """A call's cost in USD: the prompt's side (input, cache read and write) and the answer's (output,
    reasoning), and where the prices came from (``genai-prices 0.2.5`` or ``--price``)."""

    input_usd: float
    output_usd: float
    source: str

    @property
    def total_usd(self) -> float:
        return self.input_usd + self.output_usd


@dataclasses.dataclass(frozen=True, slots=True)
class Unpriced:
    """A call paid per token whose cost is not known, and why (the model is not in the table; its tokens are
    not in the log)."""

    model: str
    reason: str


@dataclasses.dataclass(frozen=True, slots=True)
class _Rates:
    """USD per token of each kind, in one price period and input-size tier of one model."""

    input: float
    cache_read: float
    cache_write: float
    output: float
    reasoning_extra: float  # reasoning tokens are output tokens; what one costs beyond an output token


@dataclasses.dataclass(frozen=True, slots=True)
class _Tiers:
    """A model's rates in one price period: ``rates[i]`` applies while the call's input tokens exceed
    ``thresholds[i - 1]`` (the table's cliff tiers: past a threshold, every token costs the tier's price)."""

    thresholds: tuple[int, ...]
    rates: tuple[_Rates, ...]

    def at(self, input_tokens: int) -> _Rates:
        tier = 0
        for threshold in self.thresholds:
            if input_tokens > threshold:
                tier += 1
        return self.rates[tier]


def _genai_prices() -> Any:
    """The price table's package, imported on first use (see the module docstring)."""
    import genai_prices

    return genai_prices


def table_source() -> str:
    """``genai-prices 0.2.5``: the table and its version, as a cost's source says it."""
    return f"genai-prices {_genai_prices().__version__}"


def _probe(model_price: Any, genai: Any, threshold: int) -> _Rates:
    """A tier's rates, from the table's own calculation: ``total`` tokens (inside the tier) of one kind at a
    time, over the input tokens alone."""
    usage = genai.Usage
    total = threshold + 1

    def usd(**counts: int) -> Any:
        return model_price.calc_price(usage(input_tokens=total, **counts))["total_price"]

    plain = usd()
    with_output = usd(output_tokens=total)
    return _Rates(
        input=float(plain / total),
        cache_read=float(usd(cache_read_tokens=total) / total),
        cache_write=float(usd(cache_write_tokens=total) / total),
        output=float((with_output - plain) / total),
        reasoning_extra=float(
            (usd(output_tokens=total, output_reasoning_tokens=total) - with_output) / total
        ),
    )


def _tiers(model_price: Any) -> _Tiers:
    genai = _genai_prices()
    tiered = genai.types.TieredPrices
    starts = sorted(
        {
            tier.start
            for value in vars(model_price).values()
            if isinstance(value, tiered)
            for tier in value.tiers
        }
    )
    # The first tier is probed with one token (any count up to the first threshold is in it), each next one just
    # past its threshold.
    return _Tiers(tuple(starts), tuple(_probe(model_price, genai, start) for start in [0, *starts]))


def _given(rates: TokenPrice) -> _Tiers:
    """A ``--price`` model's rates (USD per million tokens; cache tokens not priced cost what input costs)."""
    per = float(_PER_MILLION)
    read = rates.input if rates.cache_read is None else rates.cache_read
    write = rates.input if rates.cache_write is None else rates.cache_write
    return _Tiers((), (_Rates(rates.input / per, read / per, write / per, rates.output / per, 0.0),))


class PriceTable:
    """Prices model calls: the user's ``--price`` models first, else genai-prices' table.

    Args:
        models: Per-token prices the user gave, by model name (matched without regard to case).
    """

    def __init__(self, models: Mapping[str, TokenPrice] | None = None) -> None:
        self._given = {name.casefold(): _given(rates) for name, rates in (models or {}).items()}
        self._source: str | None = None
        # (provider id, model) -> the table's model, or the reason it has none
        self._models: dict[tuple[str | None, str], Any] = {}
        # id of a model's price period -> (the price object, kept alive so its id stays its own; its rates)
        self._periods: dict[int, tuple[Any, _Tiers]] = {}

    def cost(self, rec: ModelCall | SubagentCall) -> Cost | Unpriced | None:
        """The call's cost; ``None`` when it is not paid per token (Copilot CLI's own API) or no usage record
        says its tokens (a failed call, an older CLI's)."""
        if rec.provider == OWN_API or not rec.calls:
            return None
        return self.usage_cost(rec.provider, rec.model, rec.usage, rec.start_ns)

    def usage_cost(self, provider: str, model: str, usage: Usage, time_ns: int) -> Cost | Unpriced:
        """What ``usage`` of ``model`` from ``provider`` (``gen_ai.provider.name``) cost at ``time_ns``.

        Input tokens include the cached ones (the loop's meaning, and the table's); a cache count the log does
        not give is priced as the input it is part of (Gemini CLI's logs give no cache write, which Gemini does
        not bill). Unknown input or output tokens leave the call unpriced.
        """
        if usage.input is None or usage.output is None:
            return Unpriced(model, "its tokens are not in the log")
        if (usage.cache_read or 0) + (usage.cache_write or 0) > usage.input:
            return Unpriced(model, "its cache tokens exceed its input tokens")
        given = self._given.get(model.casefold())
        if given is not None:
            return _apply(given.at(usage.input), usage, OVERRIDE_SOURCE)
        try:
            found = self._model(provider, model)
        except ImportError:  # an install without it (pyproject installs it on every Python it supports)
            return Unpriced(model, "no price table: genai-prices is not installed")
        if isinstance(found, str):
            return Unpriced(model, found)
        when = datetime.fromtimestamp(time_ns / 1e9, timezone.utc)
        model_price = found.get_prices(when)
        period = self._periods.get(id(model_price))
        if period is None:
            period = self._periods[id(model_price)] = (model_price, _tiers(model_price))
        if self._source is None:
            self._source = table_source()
        return _apply(period[1].at(usage.input), usage, self._source)

    def _model(self, provider: str, model: str) -> Any:
        provider_id = PROVIDERS.get(provider, provider)
        key = (provider_id, model)
        found = self._models.get(key)
        if found is None:
            snapshot = _genai_prices().data_snapshot.get_snapshot()
            try:
                found = snapshot.find_provider_model(model, None, provider_id, None)[1]
            except LookupError:
                found = f"not in {self._source or table_source()}"
            self._models[key] = found
        return found


def _apply(rates: _Rates, usage: Usage, source: str) -> Cost:
    assert usage.input is not None and usage.output is not None  # checked by the caller
    read = usage.cache_read or 0
    write = usage.cache_write or 0
    input_usd = (
        (usage.input - read - write) * rates.input + read * rates.cache_read + write * rates.cache_write
    )
    output_usd = usage.output * rates.output + (usage.reasoning or 0) * rates.reasoning_extra
    return Cost(input_usd, output_usd, source)
