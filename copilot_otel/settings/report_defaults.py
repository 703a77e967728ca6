"""The report's periods and default price, apart from the report itself: the CLI's parser (built for every
command) names them, and importing the whole report module costs every command ~50 ms of start-up.

``--price`` is read here too (:func:`parse_prices`): it takes today's premium request price (a bare number) and
a model's per-token prices (``MODEL=IN,OUT[,CACHE_READ[,CACHE_WRITE]]``), and refuses a negative one before any
log is read.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Literal

from ..common.errors import ConfigError

Period = Literal["daily", "weekly", "monthly", "session", "repo", "model", "agent", "blocks"]
PERIODS: tuple[Period, ...] = ("daily", "weekly", "monthly", "session", "repo", "model", "agent", "blocks")

# The public price of a premium request beyond the plan's allowance: "$0.04 USD per request" (GitHub Docs,
# "Requests in GitHub Copilot" / "GitHub Copilot premium requests", billing since 2025-06-18; read 2026-12-01,
# when GitHub marks request-based billing "legacy" for plans that stayed on it after 2026-06-01).
PREMIUM_REQUEST_PRICE_USD = 0.04


@dataclasses.dataclass(frozen=True, slots=True)
class TokenPrice:
    """A model's prices given by the user (``--price MODEL=...``), in USD per million tokens.

    ``cache_read`` and ``cache_write`` are ``None`` when not given: those tokens then cost what other input
    tokens cost (no discount is assumed that the user did not state).
    """

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Prices:
    """What ``--price`` said: the premium request's price, and per-token prices of models by name."""

    premium_request: float = PREMIUM_REQUEST_PRICE_USD
    models: tuple[tuple[str, TokenPrice], ...] = ()


PRICE_HELP = (
    f"USD per premium request (default {PREMIUM_REQUEST_PRICE_USD}, GitHub's public price), or a model's USD "
    "per million tokens instead of the price table's: MODEL=INPUT,OUTPUT[,CACHE_READ[,CACHE_WRITE]] "
    "(repeatable)"
)


def _amount(text: str, option: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"Expected {option} to be a number of USD, got {text!r}") from None
    if not math.isfinite(value):
        raise ConfigError(f"Expected {option} to be a number of USD, got {text!r}")
    if value < 0:
        raise ConfigError(f"{option}: a price cannot be negative, got {text!r}")
    return value


def parse_prices(values: Sequence[str] | None) -> Prices:
    """The ``--price`` values given (each a bare number or ``MODEL=IN,OUT[,CACHE_READ[,CACHE_WRITE]]``).

    Raises:
        ConfigError: A value is no number, is negative, or names a model with fewer than two or more than four
            prices (the message quotes it).
    """
    premium = PREMIUM_REQUEST_PRICE_USD
    models: dict[str, TokenPrice] = {}
    for value in values or ():
        model, sep, rates = value.partition("=")
        if not sep:
            premium = _amount(value, "--price")
            continue
        parts = rates.split(",")
        if not model.strip() or not 2 <= len(parts) <= 4:
            raise ConfigError(
                f"Expected --price MODEL=INPUT,OUTPUT[,CACHE_READ[,CACHE_WRITE]] (USD per million tokens), "
                f"got {value!r}"
            )
        amounts = [_amount(part.strip(), f"--price {model.strip()}") for part in parts]
        models[model.strip()] = TokenPrice(*amounts)
    return Prices(premium, tuple(models.items()))
