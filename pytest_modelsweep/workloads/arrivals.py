"""When an open-loop window sends its requests: Poisson or gamma arrivals at a rate, seeded.

As ``vllm bench serve``: each gap is gamma with shape = burstiness and mean 1 / rate (1:
Poisson; infinite: evenly spaced), the first request waits one gap too. Without a ramp-up the
times are scaled so the last falls at ``count / rate`` (the offered rate does not depend on
the seed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

RampStrategy = Literal["linear", "exponential"]


@dataclass(frozen=True)
class RampUp:
    """A rate that moves from ``start_rps`` to ``end_rps`` over the window's requests."""

    strategy: RampStrategy
    start_rps: float
    end_rps: float

    def __post_init__(self) -> None:
        if self.strategy not in ("linear", "exponential"):
            raise ValueError(
                f"ramp-up strategy must be 'linear' or 'exponential', got {self.strategy!r}"
            )
        for name, value in (("start", self.start_rps), ("end", self.end_rps)):
            if not (math.isfinite(value) and value > 0):
                raise ValueError(
                    f"ramp-up {name} rate must be a positive number of requests/s, got {value!r}"
                )

    def rate_at(self, index: int, count: int) -> float:
        """The rate that request ``index`` of ``count`` is sent at."""
        progress = index / max(count - 1, 1)
        return (
            self.start_rps + (self.end_rps - self.start_rps) * progress
            if self.strategy == "linear"
            else float(self.start_rps * (self.end_rps / self.start_rps) ** progress)
        )


@dataclass(frozen=True)
class ArrivalProcess:
    """Requests per second (``math.inf``: all at once), burstiness (1: Poisson) and an
    optional ramp-up (whose rates then rule; ``rate`` only labels the window)."""

    rate: float
    burstiness: float = 1.0
    ramp_up: RampUp | None = None

    def __post_init__(self) -> None:
        if math.isnan(self.rate) or not self.rate > 0:
            raise ValueError(
                f"request rate must be a positive number of requests/s (or inf), got {self.rate!r}"
            )
        if math.isnan(self.burstiness) or not self.burstiness > 0:
            raise ValueError(
                f"burstiness must be > 0 (1 = Poisson, below 1 burstier, above 1 "
                f"more even), got {self.burstiness!r}"
            )

    def describe(self) -> str:
        """E.g. ``Poisson 2 req/s``, ``gamma (burstiness 0.5) 2 req/s``, ``all at once``."""
        shape = (
            "evenly spaced"
            if math.isinf(self.burstiness)
            else "Poisson"
            if self.burstiness == 1
            else f"gamma (burstiness {self.burstiness:g})"
        )
        if (ramp := self.ramp_up) is not None:
            return f"{shape}, {ramp.strategy} ramp-up {ramp.start_rps:g} → {ramp.end_rps:g} req/s"
        return "all at once" if math.isinf(self.rate) else f"{shape} {self.rate:g} req/s"

    def offsets(self, count: int, seed: int) -> list[float]:
        """Send times of ``count`` requests in seconds after the window starts (ascending)."""
        if count < 1:
            raise ValueError(f"an open-loop window sends at least one request, got {count}")
        rng = np.random.default_rng(seed)
        rates = [
            self.rate if self.ramp_up is None else self.ramp_up.rate_at(index, count)
            for index in range(count)
        ]
        gaps = [  # drawn in order, one gamma variate a request
            0.0
            if math.isinf(rate)
            else 1.0 / rate
            if math.isinf(self.burstiness)
            else float(rng.gamma(shape=self.burstiness, scale=1.0 / (rate * self.burstiness)))
            for rate in rates
        ]
        times = np.cumsum(gaps)
        if self.ramp_up is None and not math.isinf(self.rate) and times[-1] > 0:
            times *= (count / self.rate) / times[-1]
        return [float(t) for t in times]


def offered_rate(offsets: list[float]) -> float | None:
    """Requests per second the schedule offers, (n − 1) / span; None for fewer than two
    requests or an all-at-once schedule."""
    return (
        None
        if len(offsets) < 2 or offsets[-1] <= offsets[0]
        else (len(offsets) - 1) / (offsets[-1] - offsets[0])
    )
