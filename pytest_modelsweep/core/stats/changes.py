"""Where a short series of runs' figures changed by more than its run-to-run noise.

Binary segmentation with a max-|t| statistic (docs/ci.md, "The change rule"): for each split k
of x_1..x_n (:data:`SIDES` runs at least on each side), t_k = (mean before − mean after) /
sqrt(V (1/k + 1/(n − k))), V = max(S², W): S² the pooled spread around each side's mean (df
n − 2), W the mean within-run variance (0 when unknown). T = max_k |t_k| has the p-value
(1 + count) / (1 + ``simulations``) of simulated unchanged normal series (fixed seed) with
T at least as large; p <= ``alpha``: a change at the maximising k, and each side is tested in
turn at half the level its parent was tested at. The family-wise false-alarm rate is at most
``alpha`` over an unchanged series (benches/perf/change_point_simulation.py), and at most
``alpha`` over the unchanged stretches of a series with a change (the two sides' levels sum to
their parent's).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt

ALPHA = 0.05
SIMULATIONS = 9999
SEED = 20261205
MIN_RUNS = 3
"""The fewest runs a segment must hold to be tested (S² needs n - 2 >= 1)."""
SIDES = (2, 1)
"""The fewest runs before and after a change: the newest run alone may have changed, the
oldest alone may not (one run, first or last, can only differ beyond noise by far)."""

Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Change:
    """A change located between run ``index - 1`` and run ``index`` (0-based)."""

    index: int
    before: float
    """The mean of the segment before (the series' scale)."""
    after: float
    statistic: float
    p_value: float


def _max_t(values: Floats, within: float, sides: tuple[int, int]) -> tuple[Floats, Floats]:
    """max_k |t_k| and its k for each row of ``values`` (rows: series)."""
    n = values.shape[-1]
    cumsum = np.cumsum(values, axis=-1)
    cumsq = np.cumsum(values * values, axis=-1)
    total, total_sq = cumsum[..., -1], cumsq[..., -1]
    best = np.full(values.shape[:-1], -1.0)
    where = np.zeros(values.shape[:-1])
    for k in range(sides[0], n - sides[1] + 1):
        left, left_sq = cumsum[..., k - 1], cumsq[..., k - 1]
        right, right_sq = total - left, total_sq - left_sq
        mean_left, mean_right = left / k, right / (n - k)
        squares = (left_sq - k * mean_left**2) + (right_sq - (n - k) * mean_right**2)
        spread = np.maximum(np.maximum(squares, 0.0) / (n - 2), within)
        scale = np.sqrt(spread * (1 / k + 1 / (n - k)))
        difference = np.abs(mean_left - mean_right)
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(
                scale > 0,
                difference / np.where(scale > 0, scale, 1.0),
                np.where(difference > 1e-12 * (1 + np.abs(mean_left)), np.inf, 0.0),
            )
        larger = t > best
        best = np.where(larger, t, best)
        where = np.where(larger, k, where)
    return best, where


@lru_cache(maxsize=64)
def _null(n: int, sides: tuple[int, int], simulations: int, seed: int) -> Floats:
    """T of ``simulations`` unchanged normal series of ``n`` runs, sorted."""
    rng = np.random.default_rng([seed, n, *sides])
    statistics, _ = _max_t(rng.standard_normal((simulations, n)), 0.0, sides)
    return np.sort(statistics)


def _fewest(sides: tuple[int, int]) -> int:
    return max(MIN_RUNS, sum(sides))


def max_t_test(
    values: Sequence[float],
    within: float = 0.0,
    *,
    sides: tuple[int, int] = SIDES,
    simulations: int = SIMULATIONS,
    seed: int = SEED,
) -> tuple[float, int, float]:
    """(T, k, p-value) of one series (the module's rule); k: the size of the first side."""
    x = np.asarray(values, dtype=float)
    n = x.size
    if n < _fewest(sides):
        raise ValueError(f"a change test needs at least {_fewest(sides)} runs, got {n}")
    statistic, where = _max_t(x[np.newaxis, :], within, sides)
    null = _null(n, sides, simulations, seed)
    exceeding = null.size - int(np.searchsorted(null, statistic[0], side="left"))
    return float(statistic[0]), int(where[0]), (1 + exceeding) / (1 + simulations)


def change_points(
    values: Sequence[float],
    within: Sequence[float] | None = None,
    *,
    alpha: float = ALPHA,
    sides: tuple[int, int] = SIDES,
    simulations: int = SIMULATIONS,
    seed: int = SEED,
) -> list[Change]:
    """The changes the module's rule locates in ``values`` (oldest first), in run order;
    ``within``: each run's within-run variance of its figure (NaN or missing: unknown)."""
    x = [float(v) for v in values]
    if any(not math.isfinite(v) for v in x):
        raise ValueError("a change test needs finite figures")
    noise = [float(w) for w in within] if within is not None else [math.nan] * len(x)
    if len(noise) != len(x):
        raise ValueError(f"{len(x)} figures but {len(noise)} within-run variances")
    found: list[Change] = []

    def split(start: int, stop: int, level: float) -> None:
        segment = x[start:stop]
        if len(segment) < _fewest(sides):
            return
        known = [w for w in noise[start:stop] if math.isfinite(w)]
        floor = sum(known) / len(known) if known else 0.0
        statistic, k, p_value = max_t_test(
            segment, floor, sides=sides, simulations=simulations, seed=seed
        )
        if p_value > level:
            return
        found.append(
            Change(
                start + k,
                sum(segment[:k]) / k,
                sum(segment[k:]) / (len(segment) - k),
                statistic,
                p_value,
            )
        )
        split(start, start + k, level / 2)
        split(start + k, stop, level / 2)

    split(0, len(x), alpha)
    return sorted(found, key=lambda change: change.index)
