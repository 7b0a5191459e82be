"""The metric table: every benchmark the benches record, in one place.

Each :class:`Metric` says what a measurement's ``benchmark`` name means; adding a metric is
one entry in :data:`METRICS`. A name the table lacks recorded in the unit ``accuracy`` (or
``tokens/s``) is a user's benchmark of that kind, so a process that never saw its
declaration reads it the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Kind(StrEnum):
    """What a metric measures, which decides how it is gated and reported."""

    ACCURACY = "accuracy"
    THROUGHPUT = "throughput"
    SMOKE = "smoke"
    SCREENING = "screening"
    CAPACITY = "capacity"
    RATE_CAPACITY = "rate_capacity"
    STARTUP = "startup"
    COMPARISON = "comparison"


VERDICT_PREFIX = "verdict:"
RATIO_BENCHMARK = "throughput_ratio"
CAPACITY_RATIO_BENCHMARK = "capacity_ratio"
RATE_CAPACITY_RATIO_BENCHMARK = "rate_capacity_ratio"
VERDICT_MARKER = "verdict"
STARTUP_MARKER = "startup"
"""Cold starts: run first among a model's tests, before the run's own server of it starts."""
BENCHMARK_MARKER = "modelsweep_benchmark"
"""``@pytest.mark.modelsweep_benchmark("name")``: declares a test as an accuracy benchmark."""
ACCURACY_UNIT = "accuracy"
"""The unit of every accuracy measurement; a name the table lacks recorded in it is accuracy."""
THROUGHPUT_UNIT = "tokens/s"
"""The unit of throughput measurements; a name the table lacks recorded in it is throughput
(a user's own prompts, ``@pytest.mark.modelsweep_benchmark(name, kind="throughput")``)."""


@dataclass(frozen=True)
class Metric:
    """One benchmark name as recorded in measurements, and what it means."""

    name: str
    kind: Kind
    unit: str
    higher_is_better: bool
    label: str
    marker: str
    marker_help: str = ""
    compares: Kind | None = None

    @property
    def gated(self) -> bool:
        """Whether ``--baseline`` and ``modelsweep compare`` compare this metric."""
        return self.kind in GATED_KINDS


GATED_KINDS = (Kind.ACCURACY, Kind.THROUGHPUT, Kind.STARTUP)
"""Kinds the baseline gate compares: those with an interval over repeats. Smoke (one
generation) and both capacities (one search, a bracket but no repeats) are left out."""

METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric(
            "gsm8k",
            Kind.ACCURACY,
            "accuracy",
            True,
            "GSM8K accuracy",
            "gsm8k",
            "GSM8K accuracy, scored as lm-evaluation-harness scores it",
        ),
        Metric(
            "bfcl",
            Kind.ACCURACY,
            "accuracy",
            True,
            "BFCL accuracy",
            "bfcl",
            "BFCL simple tool-calling accuracy, scored by BFCL's AST rules",
        ),
        Metric(
            "throughput",
            Kind.THROUGHPUT,
            "tokens/s",
            True,
            "Throughput",
            "throughput",
            "output throughput at 1, 4 and 16 concurrent requests, 256 tokens each",
        ),
        Metric(
            "long_prompt",
            Kind.THROUGHPUT,
            "tokens/s",
            True,
            "Long-prompt throughput",
            "long_prompt",
            "throughput with 1,024- and 3,072-token prompts that never repeat",
        ),
        Metric(
            RATIO_BENCHMARK,
            Kind.COMPARISON,
            "x reference",
            True,
            "Throughput relative to the reference",
            VERDICT_MARKER,
            compares=Kind.THROUGHPUT,
        ),
        Metric(
            "capacity",
            Kind.CAPACITY,
            "concurrent requests",
            True,
            "Capacity under SLO",
            "capacity",
            "the most concurrent requests served while --slo-attainment of them "
            "meet --slo (a search up to the server's max_num_seqs)",
        ),
        Metric(
            CAPACITY_RATIO_BENCHMARK,
            Kind.COMPARISON,
            "x reference",
            True,
            "Capacity relative to the reference",
            VERDICT_MARKER,
            compares=Kind.CAPACITY,
        ),
        Metric(
            "open_loop",
            Kind.THROUGHPUT,
            "tokens/s",
            True,
            "Open-loop throughput",
            "open_loop",
            "requests sent at --request-rate (Poisson, or gamma with --burstiness), latency "
            "from each request's scheduled send time",
        ),
        Metric(
            "rate_capacity",
            Kind.RATE_CAPACITY,
            "req/s",
            True,
            "Capacity in requests/s under SLO",
            "rate_capacity",
            "the highest request rate at which --slo-attainment of requests "
            "meet --slo (a sweep of open-loop rates over --rate-sweep, stopped at saturation)",
        ),
        Metric(
            RATE_CAPACITY_RATIO_BENCHMARK,
            Kind.COMPARISON,
            "x reference",
            True,
            "Capacity in requests/s relative to the reference",
            VERDICT_MARKER,
            compares=Kind.RATE_CAPACITY,
        ),
        Metric(
            "startup",
            Kind.STARTUP,
            "s",
            False,
            "Cold start (launch to first token)",
            STARTUP_MARKER,
            "seconds from launching a model's server to the first token of its first request, "
            "over --startup-launches fresh launches (not with --endpoint)",
        ),
        Metric(
            "smoke",
            Kind.SMOKE,
            "tokens/s",
            True,
            "Smoke",
            "smoke",
            "a single real generation per model (the quickest end-to-end check)",
        ),
        Metric(
            "screen",
            Kind.SCREENING,
            "GiB",
            True,
            "Screening (KV-cache headroom)",
            "screen",
            "candidate screening from the Hugging Face API (licence, memory)",
        ),
    )
}
"""Every recorded benchmark, in the order reports show them (registered user benchmarks
last). ``verdict:<name>`` entries are not listed: :func:`metric_for` derives one per
accuracy metric."""

_BUILT_IN = frozenset(METRICS)

OTHER_MARKERS = {
    VERDICT_MARKER: "paired comparison of a candidate with the reference",
    BENCHMARK_MARKER: "modelsweep_benchmark(name): this test records the accuracy benchmark "
    "`name` (selected by -m name) and gets a paired verdict per candidate",
    "vllm": "needs a real vLLM server",
}
"""Markers that no single metric owns: ``verdict`` selects every comparison."""


def verdict_metric(compared: str) -> Metric:
    """The ``verdict:<compared>`` metric: a paired accuracy difference, candidate − reference."""
    base = METRICS.get(compared)
    label = base.label if base is not None else f"{compared} accuracy"
    return Metric(
        f"{VERDICT_PREFIX}{compared}",
        Kind.COMPARISON,
        "accuracy difference",
        True,
        f"{label} verdict",
        VERDICT_MARKER,
        compares=Kind.ACCURACY,
    )


def user_metric(name: str, unit: str, label: str | None = None) -> Metric:
    """The metric of a user's benchmark in ``unit`` (accuracy, or throughput of their own
    prompts): its marker is its name (``-m name``)."""
    kind = Kind.ACCURACY if unit == ACCURACY_UNIT else Kind.THROUGHPUT
    declared = "" if kind is Kind.ACCURACY else f'({name!r}, kind="throughput")'
    return Metric(
        name,
        kind,
        unit,
        True,
        label or f"{name} {kind.value}",
        name,
        f"the {kind.value} benchmark {name} (declared with "
        f"@pytest.mark.{BENCHMARK_MARKER}{declared})",
    )


def metric_for(benchmark: str, unit: str | None = None) -> Metric | None:
    """The metric a measurement's ``benchmark`` names; None for one the table lacks.

    Any ``verdict:<name>`` is a comparison; a name the table lacks recorded in ``unit``
    ``accuracy`` or ``tokens/s`` is a user's benchmark of that kind.
    """
    if benchmark in METRICS:
        return METRICS[benchmark]
    if benchmark.startswith(VERDICT_PREFIX):
        return verdict_metric(benchmark[len(VERDICT_PREFIX) :])
    return user_metric(benchmark, unit) if unit in (ACCURACY_UNIT, THROUGHPUT_UNIT) else None


def kind_of(benchmark: str, unit: str | None = None) -> Kind | None:
    """The kind of a benchmark name (with its unit, see :func:`metric_for`), or None."""
    metric = metric_for(benchmark, unit)
    return None if metric is None else metric.kind


_RESERVED_NAMES = frozenset(
    {
        "parametrize",
        "skip",
        "skipif",
        "xfail",
        "usefixtures",
        "filterwarnings",
        "tryfirst",
        "trylast",
    }
)
"""pytest's own markers: a benchmark named like one would be selected as one."""


def benchmark_name_problem(
    name: object, kind: Kind = Kind.ACCURACY, *, builtin: bool = False
) -> str | None:
    """Why ``name`` cannot name a user's benchmark (and its marker), or None: it must be an
    identifier not starting with ``_``, no other marker or metric, and no built-in's
    (items and baselines are kept by name) unless ``builtin``."""
    if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
        return (
            f"{name!r} is not a benchmark name: use a Python identifier that does not start "
            "with '_', e.g. 'my_eval'"
        )
    if name in _RESERVED_NAMES or name in OTHER_MARKERS:
        return (
            f"{name!r} is one of pytest's or modelsweep's own markers: name the benchmark otherwise"
        )
    taken = METRICS.get(name)
    if taken is not None and (taken.kind is not kind or kind is not Kind.ACCURACY):
        return (
            f"{name!r} is modelsweep's {taken.kind.value} benchmark {taken.label!r}: name "
            f"the {kind.value} benchmark otherwise"
        )
    if taken is not None and name in _BUILT_IN and not builtin:
        return (
            f"{name!r} is modelsweep's built-in benchmark {taken.label!r} "
            "(benches/test_accuracy.py): yours would be pooled with its items, verdicts "
            f"and baselines; name yours otherwise, e.g. 'my_{name}'"
        )
    return None


def register_accuracy_metric(name: str, label: str | None = None) -> Metric:
    """Give a user's accuracy benchmark its report title (default ``"<name> accuracy"``).

    Call it in ``conftest.py`` so every process sees it; ValueError for a name that
    :func:`benchmark_name_problem` refuses.
    """
    problem = benchmark_name_problem(name)
    if problem is not None:
        raise ValueError(problem)
    METRICS[name] = user_metric(name, ACCURACY_UNIT, label)
    return METRICS[name]


def benchmarks_of(kind: Kind) -> tuple[str, ...]:
    """The table's benchmark names of one kind, in report order."""
    return tuple(name for name, metric in METRICS.items() if metric.kind is kind)


def rank(benchmark: str) -> int:
    """A benchmark's place in reports: its row in the table (``verdict:<name>`` as ``<name>``),
    after them all if unknown."""
    benchmark = benchmark.removeprefix(VERDICT_PREFIX)
    names = list(METRICS)
    return names.index(benchmark) if benchmark in names else len(names)


def label_of(benchmark: str, fallback: str) -> str:
    """The report title of a benchmark, or ``fallback`` for one the table lacks."""
    metric = metric_for(benchmark)
    return fallback if metric is None else metric.label


def markers() -> dict[str, str]:
    """Every pytest marker the plugin registers → its help text, metrics' markers first."""
    found: dict[str, str] = {}
    for metric in METRICS.values():
        found.setdefault(metric.marker, metric.marker_help or OTHER_MARKERS.get(metric.marker, ""))
    return found | {k: v for k, v in OTHER_MARKERS.items() if k not in found}


MARKERS: dict[str, str] = markers()
"""Marker → help text, for ``config.addinivalue_line("markers", ...)``."""
