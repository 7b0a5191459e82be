"""What a benchmark test needs to know of the run: :class:`BenchSettings`. Pure.

A view of the parsed options, made once per run; each value was checked by its option's
``type=`` parser (:mod:`.options`), so nothing here parses or defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .options import DEFAULTS, OPEN_LOOP_TIMED_REQUESTS, RateSweep, default_timed_requests
from .stats.repeats import RepeatPolicy

if TYPE_CHECKING:
    from .cost import Pricing
    from .slo import Slo


@dataclass(frozen=True)
class BenchSettings:
    """What a benchmark test needs to know of the run: its id and the measuring options."""

    run_id: str
    repeats: RepeatPolicy
    """``--repeats`` with ``--repeats-target`` and ``--repeats-max``: how many, which interval."""
    timed_requests: int | None
    """``--timed-requests``; None: :meth:`timed_requests_at` a concurrency's default."""
    limit: int | None
    gsm8k_max_tokens: int
    reuse: bool
    request_timeout_s: float
    idle_timeout_s: float
    unstable_cv: float
    """A setting whose repeats' CV exceeds this is unstable."""
    contended_cores: float
    """A window in which other processes used more CPU cores than this is contended."""
    contended_steal: float
    """A window in which the hypervisor stole more than this share of the CPU is contended."""
    slo: Slo | None
    """``--slo``: latency targets of a good request; None: no goodput is recorded."""
    slo_attainment: float
    """``--slo-attainment``: capacity needs this share of requests meeting the SLO."""
    pricing: Pricing | None
    """The machine's price (``--usd-per-hour``, else the sweep's ``[pricing]``); None: no cost."""
    round_size: int | None = None
    """``--until-decided``: accuracy items go out in rounds of this many; None: all at once."""
    request_rate: float | None = None
    """``--request-rate``: the open-loop benches' mean rate (req/s); None: they skip."""
    burstiness: float = DEFAULTS.burstiness
    """``--burstiness``: the shape of the gamma gaps between open-loop requests (1: Poisson)."""
    rate_sweep: RateSweep = DEFAULTS.rate_sweep
    """``--rate-sweep``: the rates the capacity-in-req/s sweep may try."""
    startup_launches: int = DEFAULTS.startup_launches
    """``--startup-launches``: fresh launches per model of the cold-start bench."""

    @classmethod
    def from_options(
        cls,
        option: Any,
        *,
        run_id: str,
        pricing: Pricing | None,
        gsm8k_max_tokens: int,
        round_size: int | None = None,
    ) -> BenchSettings:
        """The view of ``option`` (pytest's ``config.option``: parsed, checked, defaulted)."""
        return cls(
            run_id=run_id,
            repeats=RepeatPolicy(option.repeats, option.repeats_target, option.repeats_max),
            timed_requests=option.timed_requests,
            limit=option.limit,
            gsm8k_max_tokens=gsm8k_max_tokens,
            reuse=not option.no_reuse,
            request_timeout_s=option.request_timeout,
            idle_timeout_s=option.idle_timeout,
            unstable_cv=option.unstable_cv,
            contended_cores=option.contended_cores,
            contended_steal=option.contended_steal,
            slo=option.slo,
            slo_attainment=option.slo_attainment,
            pricing=pricing,
            round_size=round_size,
            request_rate=option.request_rate,
            burstiness=option.burstiness,
            rate_sweep=option.rate_sweep,
            startup_launches=option.startup_launches,
        )

    def timed_requests_at(self, concurrency: int) -> int:
        """Timed requests per window at ``concurrency``: ``--timed-requests``, else 2 ×
        concurrency, at least 4."""
        return self.timed_requests or default_timed_requests(concurrency)

    @property
    def open_loop_timed_requests(self) -> int:
        """Timed requests per open-loop window: ``--timed-requests``, else the default."""
        return self.timed_requests or OPEN_LOOP_TIMED_REQUESTS
