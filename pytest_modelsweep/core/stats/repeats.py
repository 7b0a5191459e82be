"""How many timed repeats a throughput setting gets, and which interval they make. Pure.

* **fixed** (``--repeats N``): N repeats; Student's t interval of the mean log tokens/s with
  N − 1 df.
* **auto** (``--repeats auto``): Stein's two-stage rule. The spread s0 of a first stage of n0
  repeats fixes the total: the fewest N ≥ n0 whose half-width exp(t(n0 − 1) · s0 / √N) − 1 is
  within ``target``, at most ``most``; the interval is the mean log over all N ± that t term,
  with exactly its 95% coverage for log-normal tokens/s whatever N is
  (``benches/perf/repeats_coverage_simulation.py``, docs/throughput.md).

:mod:`.intervals` is imported on first use: this module loads with the run's settings.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..options import AUTO_FIRST_STAGE

if TYPE_CHECKING:
    from .intervals import RatioInterval

RULE_FIXED = "fixed"
INTERVAL_T = "log-t"
"""The recorded interval's rule with fixed repeats: t on all n log values, n − 1 df."""
INTERVAL_TWO_STAGE = "log-t-two-stage"
"""With ``--repeats auto``: Stein's interval, the first stage's spread with n0 − 1 df."""


@dataclass(frozen=True)
class RepeatPolicy:
    """``--repeats``: ``count`` repeats (fixed), or, with ``count`` None, Stein's two-stage
    rule for a 95% half-width within ``target`` (a share of the mean), at most ``most``."""

    count: int | None
    target: float
    most: int
    first_stage: int = AUTO_FIRST_STAGE

    def __post_init__(self) -> None:
        if self.count is None and not 2 <= self.first_stage <= self.most:
            raise ValueError(
                f"--repeats auto needs 2 <= first stage ({self.first_stage}) "
                f"<= --repeats-max ({self.most})"
            )

    @property
    def auto(self) -> bool:
        return self.count is None

    @property
    def at_most(self) -> int:
        """The most repeats this policy can take."""
        return self.most if self.count is None else self.count

    def planned(self, values: Sequence[float]) -> int | None:
        """How many repeats this setting takes, given the first ones' values (tokens/s or
        pair ratios); None while an auto first stage is still running."""
        if self.count is not None:
            return self.count
        if len(values) < self.first_stage:
            return None
        first = values[: self.first_stage]
        if any(not value > 0 for value in first):
            return self.first_stage  # no interval can be claimed; nothing to aim for
        sd = statistics.stdev(math.log(value) for value in first)
        from .intervals import t_half_width

        half_widths = (
            (total, math.expm1(t_half_width(sd / math.sqrt(total), self.first_stage - 1)))
            for total in range(self.first_stage, self.most)
        )
        return next((total for total, half in half_widths if half <= self.target), self.most)

    def done(self, values: Sequence[float]) -> bool:
        """Whether the repeats measured so far (their ``values``) are all this policy takes."""
        planned = self.planned(values)
        return planned is not None and len(values) >= planned

    def progress(self, values: Sequence[float]) -> str:
        """``2/3``; auto: ``2/≤10 (auto)`` during the first stage, ``5/7 (auto)`` after it."""
        planned = self.planned(values)
        if not self.auto:
            return f"{len(values)}/{planned}"
        return f"{len(values)}/{f'≤{self.most}' if planned is None else planned} (auto)"

    @property
    def rule(self) -> str:
        """What the measurement records as ``repeats_rule``."""
        if self.count is not None:
            return RULE_FIXED
        return (
            f"auto: two-stage, {self.first_stage} first, half-width ≤ {self.target:.0%} "
            f"or {self.most} repeats"
        )

    @property
    def interval_rule(self) -> str:
        """Which interval the repeats make: :data:`INTERVAL_T` or :data:`INTERVAL_TWO_STAGE`."""
        return INTERVAL_T if self.count is not None else INTERVAL_TWO_STAGE

    def interval(self, values: Sequence[float]) -> tuple[float, float] | None:
        """The 95% interval of the setting's mean tokens/s (None: fewer than two repeats)."""
        from .intervals import log_mean_interval

        return log_mean_interval(values, first_stage=self.first_stage if self.auto else None)

    def paired_ratio(self, candidate: Sequence[float], reference: Sequence[float]) -> RatioInterval:
        """The interval of candidate ÷ reference from interleaved pairs measured under it."""
        from .intervals import paired_ratio_interval

        return paired_ratio_interval(
            candidate, reference, first_stage=self.first_stage if self.auto else None
        )
