"""The report's periods and default price, apart from the report itself: the CLI's parser (built for every
command) names them, and importing the whole report module costs every command ~50 ms of start-up."""

from __future__ import annotations

from typing import Literal

Period = Literal["daily", "weekly", "monthly", "session", "repo", "model", "agent", "blocks"]
PERIODS: tuple[Period, ...] = ("daily", "weekly", "monthly", "session", "repo", "model", "agent", "blocks")

# The public price of a premium request beyond the plan's allowance: "$0.04 USD per request" (GitHub Docs,
# "Requests in GitHub Copilot" / "GitHub Copilot premium requests", billing since 2025-06-18; read 2026-12-01,
# when GitHub marks request-based billing "legacy" for plans that stayed on it after 2026-06-01).
PREMIUM_REQUEST_PRICE_USD = 0.04
