"""The decision page as its renderers read it: the answer, a row of cells per model, the
lines the cells point to, the Pareto data; the words and the knobs' names it uses.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...core.measurements import CONCURRENCY, RATE
from ...core.metrics import CAPACITY_RATIO_BENCHMARK, METRICS, RATE_CAPACITY_RATIO_BENCHMARK

FALLBACK_CONCURRENCY = 16
"""The throughput setting named when no model was measured at any concurrency."""
STARTUP = "startup"
SCREEN = "screen"
HOLDS = ("matches", "equivalent", "better")  # a candidate holds the reference's accuracy
NOT_MEASURED = "not measured"
CANNOT_CONCLUDE = "cannot conclude"
NOT_JUDGED = "not judged"
NOT_SCREENED = "not screened"
NO_PRICE = "no price"
NO_PRICE_WHY = (
    "no price: give --usd-per-hour or a [pricing] table in the sweep (no cost is ever assumed)"
)
REFERENCE = "reference"
DASH = "—"
ACCURACY_BLOCK = "accuracy vs reference"  # the table column of every accuracy group
FIGURES_TITLE = "Figures behind the cells"  # the folded heading of figure_lines
DECIDED_RATIO_SPREAD = 1.25
"""The decision line states a throughput ratio as a figure only where its 95% interval lies
within ×/÷ this of it; a wider one is no usable figure (the table still shows it)."""


@dataclass(frozen=True)
class Cell:
    """A figure or verdict word; ``why`` exactly when it does not conclude, ``detail`` a line
    a concluded figure needs, ``note`` the number of either line, ``tip`` the figures behind."""

    text: str
    why: str = ""
    note: int | None = None
    verdict: str | None = None
    detail: str = ""
    tip: str = ""

    @property
    def line(self) -> str:
        """The line under the table this cell points to ("" if none)."""
        return self.why or self.detail

    @property
    def shown(self) -> str:
        """The text with its note mark: ``not measured [2]``."""
        return f"{self.text} [{self.note}]" if self.note is not None else self.text


@dataclass(frozen=True)
class Column:
    """A part of a column group (``GSM8K vs reference``): its name there, a flat title;
    ``verdict``: holds verdict words; ``block``: the table column, when not its group's."""

    group: str
    name: str
    title: str
    verdict: bool = False
    block: str = ""


@dataclass
class DecisionRow:
    """One model: the reference (its own figures) or a candidate (compared with it)."""

    model: str
    is_reference: bool
    cells: list[Cell]
    flags: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ParetoPoint:
    """A model on the Pareto plot; ``holds``: it matches the reference on every verdict."""

    model: str
    x: float
    y: float
    x_low: float | None
    x_high: float | None
    y_low: float | None
    y_high: float | None
    holds: bool
    on_front: bool = False
    is_reference: bool = False


@dataclass(frozen=True)
class Pareto:
    """Accuracy difference (y) against throughput ratio or relative cost; ``left_out``:
    ``model: why`` of each candidate without a point."""

    x_label: str
    y_label: str
    x_name: str
    y_name: str
    x_higher_is_better: bool
    points: tuple[ParetoPoint, ...]
    left_out: tuple[str, ...]

    @property
    def front(self) -> list[str]:
        """The models on the front, in x order."""
        return [p.model for p in sorted(self.points, key=lambda p: p.x) if p.on_front]


@dataclass
class DecisionPage:
    """The answer, the table, the lines its cells point to, notes, the Pareto data (else why
    none), the groups left out (with their notes), failed tests of models with no row."""

    answer: str
    columns: list[Column]
    rows: list[DecisionRow]
    reasons: list[str]
    notes: list[str]
    pareto: Pareto | str
    unmeasured: list[tuple[str, list[int]]] = field(default_factory=list)
    unplaced: list[str] = field(default_factory=list)


def metric_label(metric: str) -> str:
    """``GSM8K``, ``BFCL``; a user's benchmark by its own name."""
    known = METRICS.get(metric)
    return known.label.removesuffix(" accuracy") if known is not None else metric


def one_line(text: object, limit: int = 160) -> str:
    line = " ".join(str(text or "").split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


@dataclass(frozen=True)
class Search:
    """A knob's search as the page names it: its ``ratio`` benchmark, column ``group`` and
    its parts (``short``: the verdict's, ``figure``: the capacity's), ``what`` it finds, what a
    ``missing`` one lacks, the ``search``, its tests' ``bench`` file; of its ratio: the
    ``ratio_name``, what one without a bracket ``lacks``, the ``bound`` a ratio lacks when
    both searches ``passed`` at their top."""

    ratio: str
    group: str
    short: str
    figure: str
    what: str
    missing: str
    search: str
    bench: str
    ratio_name: str
    lacks: str
    bound: str
    passed: str


SEARCHES = {
    CONCURRENCY: Search(
        CAPACITY_RATIO_BENCHMARK,
        "capacity under the SLO",
        "capacity",
        "concurrency",
        "capacity",
        "capacity measurement",
        "capacity search",
        "benches/test_capacity.py",
        "capacity ratio",
        "search bracket",
        "bracket",
        "searches passed at their server's maximum concurrency",
    ),
    RATE: Search(
        RATE_CAPACITY_RATIO_BENCHMARK,
        "req/s under the SLO",
        "req/s",
        "requests/s",
        "capacity in req/s",
        "capacity in req/s",
        "rate sweep",
        "benches/test_open_loop.py",
        "capacity ratio in req/s",
        "value or interval",
        "interval",
        "sweeps passed at their maximum rate",
    ),
}
