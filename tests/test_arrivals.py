"""Open-loop send times: vllm bench's Poisson and gamma arrivals, seeded, with ramp-up (pure)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from pytest_modelsweep.workloads.arrivals import ArrivalProcess, RampUp, offered_rate

N = 20_000


def gaps(offsets: list[float]) -> np.ndarray:
    return np.diff(np.concatenate([[0.0], offsets]))


@pytest.mark.parametrize("rate", [0.5, 4.0, 200.0])
def test_mean_rate_is_the_rate(rate: float) -> None:
    offsets = ArrivalProcess(rate).offsets(N, seed=1)
    assert offsets[-1] == pytest.approx(N / rate)  # rescaled exactly, as vLLM does
    assert gaps(offsets).mean() == pytest.approx(1 / rate)
    assert all(b >= a for a, b in itertools.pairwise(offsets))
    assert offered_rate(offsets) == pytest.approx(rate, rel=0.02)


@pytest.mark.parametrize("burstiness", [0.25, 0.5, 1.0, 2.0, 8.0])
def test_gamma_gaps_have_cv_one_over_root_burstiness(burstiness: float) -> None:
    process = ArrivalProcess(3.0, burstiness=burstiness)
    g = gaps(process.offsets(N, seed=7))
    cv = g.std(ddof=1) / g.mean()
    assert cv == pytest.approx(1 / math.sqrt(burstiness), rel=0.04)


def test_burstiness_one_is_poisson() -> None:
    g = gaps(ArrivalProcess(2.0).offsets(N, seed=3)) * 2.0  # in units of the mean gap
    # exponential gaps: P(gap > t) = exp(-t)
    for t in (0.5, 1.0, 2.0, 3.0):
        assert (g > t).mean() == pytest.approx(math.exp(-t), abs=0.01)


def test_seeded() -> None:
    process = ArrivalProcess(5.0, burstiness=0.5)
    assert process.offsets(50, seed=4) == process.offsets(50, seed=4)
    assert process.offsets(50, seed=4) != process.offsets(50, seed=5)


def test_limits_even_spacing_and_all_at_once() -> None:
    assert ArrivalProcess(4.0, burstiness=math.inf).offsets(4, seed=0) == pytest.approx(
        [0.25, 0.5, 0.75, 1.0]
    )
    assert ArrivalProcess(math.inf).offsets(3, seed=0) == [0.0, 0.0, 0.0]
    assert offered_rate([0.0, 0.0, 0.0]) is None and offered_rate([1.0]) is None
    assert ArrivalProcess(math.inf).describe() == "all at once"
    assert ArrivalProcess(2.0).describe() == "Poisson 2 req/s"
    assert ArrivalProcess(2.0, burstiness=0.5).describe() == "gamma (burstiness 0.5) 2 req/s"
    assert ArrivalProcess(2.0, burstiness=math.inf).describe() == "evenly spaced 2 req/s"


@pytest.mark.parametrize("strategy", ["linear", "exponential"])
def test_ramp_up_moves_the_rate_by_request_index(strategy: str) -> None:
    ramp = RampUp(strategy, 1.0, 16.0)  # type: ignore[arg-type]
    assert ramp.rate_at(0, 5) == 1.0 and ramp.rate_at(4, 5) == pytest.approx(16.0)
    assert ramp.rate_at(2, 5) == pytest.approx(8.5 if strategy == "linear" else 4.0)
    process = ArrivalProcess(16.0, burstiness=math.inf, ramp_up=ramp)
    offsets = process.offsets(5, seed=0)
    # evenly spaced at each request's own rate, not rescaled
    expected = np.cumsum([1 / ramp.rate_at(i, 5) for i in range(5)])
    assert offsets == pytest.approx(list(expected))
    assert process.describe() == f"evenly spaced, {strategy} ramp-up 1 → 16 req/s"
    assert (
        ArrivalProcess(16.0, ramp_up=ramp).describe() == f"Poisson, {strategy} ramp-up 1 → 16 req/s"
    )
    # random gaps follow the ramp too: the late requests come faster than the early ones
    g = gaps(ArrivalProcess(16.0, ramp_up=ramp).offsets(N, seed=2))
    assert g[: N // 10].mean() > 4 * g[-N // 10 :].mean()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rate": 0.0}, "request rate must be a positive number of requests/s"),
        ({"rate": float("nan")}, "request rate must be a positive"),
        ({"rate": 1.0, "burstiness": 0.0}, r"burstiness must be > 0 \(1 = Poisson"),
        ({"rate": 1.0, "burstiness": -1.0}, "burstiness must be > 0"),
    ],
)
def test_bad_processes_are_one_line(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ArrivalProcess(**kwargs)


def test_bad_ramps_and_counts_are_one_line() -> None:
    with pytest.raises(ValueError, match="ramp-up strategy must be 'linear' or 'exponential'"):
        RampUp("step", 1, 2)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="ramp-up start rate must be a positive number"):
        RampUp("linear", 0, 2)
    with pytest.raises(ValueError, match="sends at least one request"):
        ArrivalProcess(1.0).offsets(0, seed=0)
