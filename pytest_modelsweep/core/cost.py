"""What generated tokens cost: a machine's price per hour over its output rate.

``usd_per_million_output_tokens = usd_per_hour / (output tokens/s × 3600) × 1e6``, the
price from the sweep's ``[pricing]`` or ``--usd-per-hour``; without one there is no cost.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True)
class Pricing:
    """A machine's on-demand price, and where it came from."""

    usd_per_hour: float
    source: str = ""
    as_of: str = ""
    example: bool = False
    """The price only illustrates (the embedded sweep's CPU machine), it is nobody's quote."""

    def describe(self) -> str:
        """E.g. ``$1.20/h (Google Cloud TPU pricing, 2026-11-30)``; ``example`` said so."""
        where = ", ".join(part for part in (self.source, self.as_of) if part)
        tail = f" ({where})" if where else ""
        return f"${self.usd_per_hour:g}/h{tail}{', an example price' if self.example else ''}"


def usd_per_million_output_tokens(usd_per_hour: float, output_tokens_per_s: float) -> float | None:
    """Dollars per million generated tokens at this rate; None for a rate that is not positive."""
    if not (output_tokens_per_s > 0) or math.isinf(output_tokens_per_s):
        return None
    return usd_per_hour / (output_tokens_per_s * SECONDS_PER_HOUR) * 1e6


def costs_of(usd_per_hour: float, rates: Sequence[float]) -> list[float | None]:
    """The cost of each rate (one per repeat)."""
    return [usd_per_million_output_tokens(usd_per_hour, rate) for rate in rates]


@dataclass(frozen=True)
class CostFigures:
    """A throughput measurement's cost: $/1M output tokens at its mean rate, the interval
    from the rate's interval, and the price."""

    usd_per_million_output_tokens: float | None
    interval: tuple[float, float] | None
    pricing: Pricing


def cost_stats(
    pricing: Pricing, mean_rate: float, rate_interval: tuple[float, float] | None
) -> CostFigures:
    """A throughput measurement's cost figures at its mean rate and rate interval (the bounds
    swap: cost falls as rate rises)."""
    interval = None
    if rate_interval is not None:
        low, high = costs_of(pricing.usd_per_hour, rate_interval[::-1])
        if low is not None and high is not None:
            interval = (low, high)
    return CostFigures(
        usd_per_million_output_tokens(pricing.usd_per_hour, mean_rate), interval, pricing
    )
