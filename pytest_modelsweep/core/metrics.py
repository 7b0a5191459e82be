"""The metric table: every benchmark the benches record, in one place.

Each :class:`Metric` says what a measurement's ``benchmark`` name means: its
kind, unit, direction, the pytest marker that selects its tests and how
reports title and order it. The gate, the reports and the CLI ask
:func:`metric_for` instead of keeping lists of names; adding a metric is one
entry in :data:`METRICS`.

Kinds:

- ``accuracy``: a proportion of items scored correct (0–1); the gate compares
  it item by item with the baseline's. Besides the table's own (GSM8K, BFCL),
  a user's benchmark (``@pytest.mark.modelsweep_benchmark``) is one: every
  measurement recorded in the unit ``accuracy`` under a name the table lacks is
  an accuracy metric (:func:`accuracy_metric`), so that a process that never
  saw the declaration (xdist's controller, ``modelsweep compare``) reads it the
  same way; :func:`register_accuracy_metric` gives one a report title.
- ``throughput``: output tokens/s over repeated timed windows; the gate
  compares the mean over repeats as a ratio.
- ``smoke``: one short generation that proves a model serves at all. Its
  tokens/s is a single timing with no repeats, so it is not gated.
- ``screening``: a figure from screening a candidate before serving it
  (KV-cache headroom), not a measurement of a served model.
- ``capacity``: the most concurrent requests a model serves while enough of them
  meet the ``--slo`` targets, found by one search (grow, then bisect) with one
  window per step. Not gated: see :data:`GATED_KINDS`.
- ``rate_capacity``: the highest request rate (req/s) at which enough requests meet
  the ``--slo`` targets, found by one sweep of open-loop rates (grow, then bisect; each
  step decided from its attainment interval, a saturated server stops it). Not gated,
  like capacity: see :data:`GATED_KINDS`.
- ``startup``: seconds from launching a model's server to the first token of its first
  request, over fresh launches, the cache state said; gated (a ratio of geometric means).
- ``comparison``: a candidate measured against the reference in the same run:
  ``verdict:<accuracy metric>`` (paired accuracy difference),
  ``throughput_ratio`` (candidate ÷ reference tokens/s), ``capacity_ratio``
  (candidate ÷ reference capacity) and ``rate_capacity_ratio`` (the same in req/s).
  ``compares`` names the kind it compares.

``open_loop`` is a throughput metric: tokens/s of windows whose requests arrive at
``--request-rate`` (Poisson, or gamma with ``--burstiness``), latency from each request's
scheduled send time, each window marked ``saturated`` when the server fell behind.

No pytest here: plugin, reports and CLI all import this module.
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
"""Kinds the baseline gate compares. Smoke is left out on purpose: one 32-token
generation has no repeats, so its interval is degenerate and one noisy timing
would fail a build; its test already fails when a model does not generate. Capacity
is left out for the same reason: it is one search with no repeats, each step a single
window whose attainment decides pass or miss, so the capacity has a bracket between two
adjacent concurrencies but no interval over repeats that could tell a regression from a
window that fell on the other side of the target by chance. Capacity in req/s is left out
for that reason too: its sweep's bracket is as wide as its last bisection step (10% by
default), so against a baseline it could only say "moved by more than a step", which the
gate's interval rule for throughput (an interval over repeats, Holm across settings)
cannot be matched to. Startup is gated: its launches are repeats, so the ratio of geometric
means has a t interval like throughput's."""

METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("gsm8k", Kind.ACCURACY, "accuracy", True, "GSM8K accuracy", "gsm8k",
           "GSM8K accuracy, scored as lm-evaluation-harness scores it"),
    Metric("bfcl", Kind.ACCURACY, "accuracy", True, "BFCL accuracy", "bfcl",
           "BFCL simple tool-calling accuracy, scored by BFCL's AST rules"),
    Metric("throughput", Kind.THROUGHPUT, "tokens/s", True, "Throughput", "throughput",
           "output throughput at 1, 4 and 16 concurrent requests, 256 tokens each"),
    Metric("long_prompt", Kind.THROUGHPUT, "tokens/s", True, "Long-prompt throughput",
           "long_prompt", "throughput with 1,024- and 3,072-token prompts that never repeat"),
    Metric(RATIO_BENCHMARK, Kind.COMPARISON, "x reference", True,
           "Throughput relative to the reference", VERDICT_MARKER, compares=Kind.THROUGHPUT),
    Metric("capacity", Kind.CAPACITY, "concurrent requests", True, "Capacity under SLO",
           "capacity", "the most concurrent requests served while --slo-attainment of them "
           "meet --slo (a search up to the server's max_num_seqs)"),
    Metric(CAPACITY_RATIO_BENCHMARK, Kind.COMPARISON, "x reference", True,
           "Capacity relative to the reference", VERDICT_MARKER, compares=Kind.CAPACITY),
    Metric("open_loop", Kind.THROUGHPUT, "tokens/s", True, "Open-loop throughput", "open_loop",
           "requests sent at --request-rate (Poisson, or gamma with --burstiness), latency "
           "from each request's scheduled send time"),
    Metric("rate_capacity", Kind.RATE_CAPACITY, "req/s", True, "Capacity in requests/s under SLO",
           "rate_capacity", "the highest request rate at which --slo-attainment of requests "
           "meet --slo (a sweep of open-loop rates over --rate-sweep, stopped at saturation)"),
    Metric(RATE_CAPACITY_RATIO_BENCHMARK, Kind.COMPARISON, "x reference", True,
           "Capacity in requests/s relative to the reference", VERDICT_MARKER,
           compares=Kind.RATE_CAPACITY),
    Metric("startup", Kind.STARTUP, "s", False, "Cold start (launch to first token)",
           STARTUP_MARKER,
           "seconds from launching a model's server to the first token of its first request, "
           "over --startup-launches fresh launches (not with --endpoint)"),
    Metric("smoke", Kind.SMOKE, "tokens/s", True, "Smoke", "smoke",
           "a single real generation per model (the quickest end-to-end check)"),
    Metric("screen", Kind.SCREENING, "GiB", True, "Screening (KV-cache headroom)", "screen",
           "candidate screening from the Hugging Face API (licence, memory)"),
)}
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
    return Metric(f"{VERDICT_PREFIX}{compared}", Kind.COMPARISON, "accuracy difference", True,
                  f"{label} verdict", VERDICT_MARKER, compares=Kind.ACCURACY)


def accuracy_metric(name: str, label: str | None = None) -> Metric:
    """The metric of a user's accuracy benchmark: its marker is its name (``-m name``)."""
    return Metric(name, Kind.ACCURACY, ACCURACY_UNIT, True, label or f"{name} accuracy", name,
                  f"the accuracy benchmark {name} (declared with @pytest.mark.{BENCHMARK_MARKER})")


def throughput_metric(name: str) -> Metric:
    """The metric of a user's throughput benchmark (their own prompts): marker = name."""
    return Metric(name, Kind.THROUGHPUT, THROUGHPUT_UNIT, True, f"{name} throughput", name,
                  f"the throughput benchmark {name} (declared with "
                  f"@pytest.mark.{BENCHMARK_MARKER}({name!r}, kind=\"throughput\"))")


def metric_for(benchmark: str, unit: str | None = None) -> Metric | None:
    """The metric a measurement's ``benchmark`` names; None for one the table lacks.

    Any ``verdict:<name>`` is a comparison, also for an accuracy metric that
    is not in the table (a user's own benchmark judged by the verdict fixture).
    Given the measurement's ``unit``, a name the table lacks recorded in
    ``accuracy`` is an accuracy metric (a user's benchmark, see :func:`accuracy_metric`).
    """
    if benchmark in METRICS:
        return METRICS[benchmark]
    if benchmark.startswith(VERDICT_PREFIX):
        return verdict_metric(benchmark[len(VERDICT_PREFIX):])
    if unit == ACCURACY_UNIT:
        return accuracy_metric(benchmark)
    if unit == THROUGHPUT_UNIT:
        return throughput_metric(benchmark)
    return None


def kind_of(benchmark: str, unit: str | None = None) -> Kind | None:
    """The kind of a benchmark name (with its unit, see :func:`metric_for`), or None."""
    metric = metric_for(benchmark, unit)
    return None if metric is None else metric.kind


_RESERVED_NAMES = frozenset({"parametrize", "skip", "skipif", "xfail", "usefixtures",
                             "filterwarnings", "tryfirst", "trylast"})
"""pytest's own markers: a benchmark named like one would be selected as one."""


def benchmark_name_problem(name: object, kind: Kind = Kind.ACCURACY, *,
                           builtin: bool = False) -> str | None:
    """Why ``name`` cannot name a user's accuracy benchmark (and its marker), or None.

    A name is a Python identifier not starting with ``_`` (a pytest marker and a
    ``-m`` expression take it as is), no marker or metric of another kind, and no
    built-in benchmark's (``gsm8k``, ``bfcl``: items, verdicts and baselines are kept
    by benchmark name, so a test of yours by that name would be pooled with the
    built-in's); only the built-in benches declare those (``builtin=True``).
    """
    if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
        return (f"{name!r} is not a benchmark name: use a Python identifier that does not start "
                "with '_', e.g. 'my_eval'")
    if name in _RESERVED_NAMES or name in OTHER_MARKERS:
        return (f"{name!r} is one of pytest's or modelsweep's own markers: name the "
                "benchmark otherwise")
    taken = METRICS.get(name)
    if taken is not None and (taken.kind is not kind or kind is not Kind.ACCURACY):
        return (f"{name!r} is modelsweep's {taken.kind.value} benchmark {taken.label!r}: name "
                f"the {kind.value} benchmark otherwise")
    if taken is not None and name in _BUILT_IN and not builtin:
        return (f"{name!r} is modelsweep's built-in benchmark {taken.label!r} "
                "(benches/test_accuracy.py): yours would be pooled with its items, verdicts "
                f"and baselines; name yours otherwise, e.g. 'my_{name}'")
    return None


def register_accuracy_metric(name: str, label: str | None = None) -> Metric:
    """Give a user's accuracy benchmark its report title (default ``"<name> accuracy"``).

    Optional: an unregistered accuracy benchmark is reported under the default
    title. Call it in ``conftest.py``, so that every process of the run (xdist's
    controller included) sees it; registering the same name again replaces the title.
    Raises ValueError for a name that :func:`benchmark_name_problem` refuses.
    """
    problem = benchmark_name_problem(name)
    if problem is not None:
        raise ValueError(problem)
    metric = accuracy_metric(name, label)
    METRICS[name] = metric
    return metric


def benchmarks_of(kind: Kind) -> tuple[str, ...]:
    """The table's benchmark names of one kind, in report order."""
    return tuple(name for name, metric in METRICS.items() if metric.kind is kind)


def all_metrics() -> list[Metric]:
    """Every metric in report order, with each accuracy metric's verdict after it."""
    listed: list[Metric] = []
    for metric in METRICS.values():
        listed.append(metric)
        if metric.kind is Kind.ACCURACY:
            listed.append(verdict_metric(metric.name))
    return listed


def rank(benchmark: str) -> int:
    """A benchmark's place in reports: its row in the table, after them all if unknown.

    ``verdict:<name>`` ranks as ``<name>``.
    """
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
        if metric.marker not in found:
            found[metric.marker] = metric.marker_help or OTHER_MARKERS.get(metric.marker, "")
    for marker, help_text in OTHER_MARKERS.items():
        found.setdefault(marker, help_text)
    return found


MARKERS: dict[str, str] = markers()
"""Marker → help text, for ``config.addinivalue_line("markers", ...)``."""

__all__ = [
    "ACCURACY_UNIT",
    "THROUGHPUT_UNIT",
    "BENCHMARK_MARKER",
    "CAPACITY_RATIO_BENCHMARK",
    "RATE_CAPACITY_RATIO_BENCHMARK",
    "GATED_KINDS",
    "MARKERS",
    "METRICS",
    "OTHER_MARKERS",
    "RATIO_BENCHMARK",
    "STARTUP_MARKER",
    "VERDICT_MARKER",
    "VERDICT_PREFIX",
    "Kind",
    "Metric",
    "accuracy_metric",
    "all_metrics",
    "benchmark_name_problem",
    "benchmarks_of",
    "kind_of",
    "label_of",
    "markers",
    "metric_for",
    "rank",
    "register_accuracy_metric",
    "throughput_metric",
]
