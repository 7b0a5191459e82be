"""Holm's step-down over a family of m comparisons, one rule for every caller.

By ascending p-value, the r-th (0-based) is tested at level ``alpha / (m - r)``; while every
step so far rejected, a step rejects when its test at that level does. From the first that does
not, every later comparison keeps that step's level and is not rejected.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
R = TypeVar("R")


@dataclass(frozen=True)
class HolmStep(Generic[R]):
    """One comparison's step: ``rank`` (0-based) by p-value, the ``alpha`` it was tested at,
    whether it was ``rejected``, and what its test returned."""

    rank: int
    alpha: float
    rejected: bool
    result: R


def holm_step_down(
    p_values: Mapping[K, float], alpha: float, test: Callable[[K, float], tuple[bool, R]]
) -> dict[K, HolmStep[R]]:
    """Each key's step (ties in input order); ``test(key, level)`` returns whether the key's
    comparison rejects at ``level`` and what it found there."""
    family = len(p_values)
    steps: dict[K, HolmStep[R]] = {}
    stepping, level = True, alpha / max(family, 1)
    for rank, key in enumerate(sorted(p_values, key=lambda k: p_values[k])):
        if stepping:
            level = alpha / (family - rank)
        rejects, result = test(key, level)
        stepping = stepping and rejects
        steps[key] = HolmStep(rank, level, stepping, result)
    return {key: steps[key] for key in p_values}
