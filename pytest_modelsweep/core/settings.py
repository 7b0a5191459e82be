"""What a benchmark test needs to know of the run: :class:`BenchSettings`. Pure.

The plugin's run state (``state.RunState.bench_settings``) builds it from the
options; benches, the public fixtures and the workloads read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .cost import Pricing
    from .slo import Slo


@dataclass(frozen=True)
class BenchSettings:
    """What a benchmark test needs to know of the run: its id and the measuring options."""

    run_id: str
    repeats: int | None
    """Timed repeats per throughput setting; None: ``--repeats auto`` (see the fields below)."""
    timed_requests: int | None
    limit: int | None
    gsm8k_max_tokens: int
    reuse: bool
    request_timeout_s: float
    idle_timeout_s: float
    repeats_target: float = 0.05
    """``--repeats auto``: stop when the 95% half-width is within this share of the mean."""
    repeats_max: int = 10
    """``--repeats auto``: stop after this many repeats."""
    unstable_cv: float = 0.10
    """A setting whose repeats' CV exceeds this is unstable."""
    contended_cores: float = 0.25
    """A window in which other processes used more CPU cores than this is contended."""
    slo: Slo | None = None
    """``--slo``: latency targets of a good request; None: no goodput is recorded."""
    slo_attainment: float = 0.90
    """``--slo-attainment``: capacity needs this share of requests meeting the SLO."""
    pricing: Pricing | None = None
    """The machine's price (``--usd-per-hour``, else the sweep's ``[pricing]``); None: no cost."""

