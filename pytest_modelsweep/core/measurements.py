"""One typed record per kind of measurement, and the :class:`Measurement` that carries one.

A measurement's ``stats`` is one of these records, chosen by the metric table
(:func:`stats_type`: the benchmark's kind, and for a comparison the kind it compares):

* :class:`AccuracyStats` — an accuracy run (GSM8K, BFCL, a user's ``evaluate``);
* :class:`ThroughputStats` — one throughput setting over its repeats (:class:`ThroughputWindow`
  each: in an open loop with its :class:`OpenLoop` figures, and with what the server's
  ``/metrics`` showed, :class:`ServerMetricsWindow`), with CV, the ``unstable``/``contended``/
  ``server queued``/``saturated`` flags, the interval, goodput and cost;
* :class:`CapacityStats` — a capacity search under an SLO (:class:`CapacityStep` each);
* :class:`RateCapacityStats` — a sweep of open-loop request rates under an SLO
  (:class:`RateStep` each, its window recorded);
* :class:`StartupStats` — a model's cold starts over fresh launches (:class:`ColdStart` each);
* :class:`AccuracyVerdictStats`, :class:`ThroughputRatioStats`, :class:`CapacityRatioStats`,
  :class:`RateCapacityRatioStats` — a candidate judged against the reference;
* :class:`SmokeStats`, :class:`ScreeningResult` — one generation; a screened repo;
* :class:`OtherStats` — a benchmark the table does not know (a user's ``record_measurement``).

Every record writes the keys the results file and the store hold (``to_dict``) and reads
them back (``from_dict``), as pytest-benchmark's one ``Stats`` class serves its table and its
compare step alike. A record read from a dict writes that dict back key for key, in its
order: a key that no field holds (a user's own figure, a value of an unexpected type, a key
an older writer left out) is kept as read (:class:`Shape`), so that files of every version
round-trip unchanged while readers use only the typed fields. Pure: no pytest.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from typing import Any, Protocol, TypeVar

from .cost import CostFigures, Pricing
from .metrics import Kind, metric_for
from .records import ItemRecord, RequestRecord
from .slo import Goodput, GoodputFigures
from .stats import (
    PairedInterval,
    RatioInterval,
    Verdict,
    VerdictRecord,
    log_mean_interval,
)

# --------------------------------------------------------------------------- the base


def _same(a: Any, b: Any) -> bool:
    """Whether two JSON values write the same text: same types, same key order, NaN = NaN."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


@dataclass(frozen=True)
class Shape:
    """How a record writes itself: ``keys`` None for the writer's own keys. A record read from
    a dict writes that dict's keys in its order: ``kept`` holds each value no field wrote back
    the same (a key no field holds, a value of another type), ``read`` what the fields wrote
    when read. A field changed since (``dataclasses.replace``) writes its new value, also
    under a key the dict lacked."""

    keys: tuple[str, ...] | None = None
    kept: Mapping[str, Any] = field(default_factory=dict)
    read: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, data: Mapping[str, Any], written: Mapping[str, Any]) -> Shape:
        """The shape of ``data`` as read into a record that writes ``written``."""
        kept = {k: v for k, v in data.items() if k not in written or not _same(written[k], v)}
        return cls(tuple(data), kept, written)

    def apply(self, written: dict[str, Any]) -> dict[str, Any]:
        if self.keys is None:
            return written
        changed = {k for k, v in written.items() if k not in self.read
                   or not _same(v, self.read[k])}
        out: dict[str, Any] = {}
        for k in self.keys:
            if k in changed:
                out[k] = written[k]
            elif k in self.kept:
                out[k] = self.kept[k]
            elif k in written:
                out[k] = written[k]
        out.update((k, v) for k, v in written.items() if k in changed and k not in out)
        return out


RecordT = TypeVar("RecordT", bound="Record")


@dataclass(frozen=True)
class Record:
    """A typed record with ``to_dict``/``from_dict``; subclasses say what they write
    (:meth:`written`) and how they read it (:meth:`read`, lenient: a missing or mistyped key
    gives the field's empty value, and :class:`Shape` keeps what was read)."""

    shape: Shape = field(default_factory=Shape, compare=False, repr=False, kw_only=True)

    def written(self) -> dict[str, Any]:
        """The record's keys as its writer writes them (JSON values)."""
        raise NotImplementedError

    @classmethod
    def read(cls: type[RecordT], data: Mapping[str, Any]) -> RecordT:
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        """The JSON-friendly dict of the results file and the store."""
        return self.shape.apply(self.written())

    @classmethod
    def from_dict(cls: type[RecordT], data: Any) -> RecordT:
        """The record of a dict written by :meth:`to_dict` (of any earlier version)."""
        mapping: Mapping[str, Any] = data if isinstance(data, Mapping) else {}
        record = cls.read(mapping)
        return replace(record, shape=Shape.of(mapping, record.written()))


# --------------------------------------------------------------------------- reading values


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _float_or_nan(value: Any) -> float:
    number = _float(value)
    return math.nan if number is None else number


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _floats(value: Any) -> tuple[float, ...]:
    if not isinstance(value, list):
        return ()
    numbers = [_float(v) for v in value]
    return tuple(n for n in numbers if n is not None) if None not in numbers else ()


def _ints(value: Any) -> tuple[int, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(n for n in (_int(v) for v in value) if n is not None)


def _strs(value: Any) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


def _pair(value: Any) -> tuple[float, float] | None:
    numbers = _floats(value)
    return (numbers[0], numbers[1]) if len(numbers) == 2 and len(value) == 2 else None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _records(cls: type[RecordT], value: Any) -> tuple[RecordT, ...]:
    return tuple(cls.from_dict(v) for v in value) if isinstance(value, list) else ()


def _verdict(value: Any) -> Verdict | None:
    try:
        return Verdict(value)
    except ValueError:
        return None


def _pricing(value: Any) -> Pricing | None:
    try:
        return Pricing.from_dict(value)
    except (KeyError, TypeError, ValueError):
        return None


def _usd(stats: Mapping[str, Any]) -> float | None:
    return _float(stats.get("usd_per_million_output_tokens"))


# --------------------------------------------------------------------------- shared parts


SERVER_QUEUED = "server queued"
"""The flag of a window whose server queued or preempted while the client had N in flight."""
SATURATED = "saturated"
"""The flag of an open-loop window whose server fell behind the offered rate."""


def side_flags(*, unstable: bool, cv: float | None, contended: bool, server_queued: bool = False,
               saturated: bool = False) -> tuple[str, ...]:
    """What makes one side of a comparison doubtful: ``unstable (CV 53%)``, ``contended``,
    ``server queued`` (it did not run all the client had in flight), ``saturated``."""
    flags = []
    if unstable:
        flags.append("unstable" if cv is None else f"unstable (CV {cv:.0%})")
    if contended:
        flags.append("contended")
    if server_queued:
        flags.append(SERVER_QUEUED)
    if saturated:
        flags.append(SATURATED)
    return tuple(flags)


def flags_text(candidate: Sequence[str] | None, reference: Sequence[str] | None) -> str:
    """``; the reference's measurement is flagged unstable (CV 53%), contended``, or ``""``."""
    parts = [f"the {role}'s measurement is flagged {', '.join(flags)}"
             for role, flags in (("candidate", candidate), ("reference", reference)) if flags]
    return "; " + "; ".join(parts) if parts else ""


@dataclass(frozen=True)
class Latency(Record):
    """One latency over a window's requests, in milliseconds (NaN without any request)."""

    mean_ms: float = math.nan
    p50_ms: float = math.nan
    p90_ms: float = math.nan
    p99_ms: float = math.nan
    n: int = 0

    def written(self) -> dict[str, Any]:
        return {"mean_ms": self.mean_ms, "p50_ms": self.p50_ms, "p90_ms": self.p90_ms,
                "p99_ms": self.p99_ms, "n": self.n}

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> Latency:
        return cls(_float_or_nan(data.get("mean_ms")), _float_or_nan(data.get("p50_ms")),
                   _float_or_nan(data.get("p90_ms")), _float_or_nan(data.get("p99_ms")),
                   _int(data.get("n")) or 0)


@dataclass(frozen=True)
class Contention(Record):
    """Who else used the CPUs during one timed window (``contended`` None: unknown)."""

    window_s: float | None = None
    other_cpu_cores: float | None = None
    server_cpu_cores: float | None = None
    client_cpu_cores: float | None = None
    steal_share: float | None = None
    load1_end: float | None = None
    contended: bool | None = None

    def written(self) -> dict[str, Any]:
        return {"window_s": self.window_s, "other_cpu_cores": self.other_cpu_cores,
                "server_cpu_cores": self.server_cpu_cores,
                "client_cpu_cores": self.client_cpu_cores, "steal_share": self.steal_share,
                "load1_end": self.load1_end, "contended": self.contended}

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> Contention:
        return cls(_float(data.get("window_s")), _float(data.get("other_cpu_cores")),
                   _float(data.get("server_cpu_cores")), _float(data.get("client_cpu_cores")),
                   _float(data.get("steal_share")), _float(data.get("load1_end")),
                   _bool(data.get("contended")))


# --------------------------------------------------------------------------- accuracy


_ACCURACY_CORE = ("n", "items", "failed", "correct", "accuracy", "truncated_rate")
_ACCURACY_RUN = ("sent", "reused", "wall_s", "sequence")
STOP_DECIDED, STOP_FINAL, STOP_FAILED = "decided", "final", "failed"
"""Why a sequential accuracy run stopped: every comparison decided; no more items (the data
set's end or ``--limit``); items got no answer."""


@dataclass(frozen=True)
class AccuracySequence(Record):
    """How a sequential accuracy run (``--until-decided``) went: the items went out in the
    seeded order ``order_seed`` of the data set's ``population`` items (after ``--limit``), in
    rounds of ``round_size``; ``used`` had been scored when it stopped, for ``stop``
    (:data:`STOP_DECIDED`, :data:`STOP_FINAL` or :data:`STOP_FAILED`); ``comparisons``: each
    comparison the model took part in as it stood then, one line each; ``items_digest``: a
    digest of the population's ids (two runs paired item by item must have drawn from the
    same items)."""

    population: int = 0
    used: int = 0
    round_size: int = 0
    order_seed: int = 0
    stop: str = ""
    comparisons: tuple[str, ...] = ()
    items_digest: str = ""

    def written(self) -> dict[str, Any]:
        return {"population": self.population, "used": self.used, "round_size": self.round_size,
                "order_seed": self.order_seed, "stop": self.stop,
                "comparisons": list(self.comparisons), "items_digest": self.items_digest}

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> AccuracySequence:
        return cls(_int(data.get("population")) or 0, _int(data.get("used")) or 0,
                   _int(data.get("round_size")) or 0, _int(data.get("order_seed")) or 0,
                   _str(data.get("stop")) or "", _strs(data.get("comparisons")),
                   _str(data.get("items_digest")) or "")

    def text(self) -> str:
        """``sequential: 120 of 300 items, decided`` (the accuracy's subset, in words)."""
        return f"sequential: {self.used} of {self.population} items, {self.stop}"


@dataclass(frozen=True)
class AccuracyStats(Record):
    """An accuracy run: ``n`` answered of ``items`` (``failed`` got no answer), ``correct``,
    ``accuracy`` (the mean score of the answered), the share cut by ``max_tokens``, how many
    were ``sent`` and ``reused``, and ``figures``: the benchmark's own summary beyond these
    (its ``summarise``: GSM8K's per-filter rates, BFCL's error types). ``sequence``: how a
    sequential run (``--until-decided``) chose its items (None for a run of every item): the
    accuracy is then over that subset."""

    n: int = 0
    items: int = 0
    failed: int = 0
    correct: int = 0
    accuracy: float = 0.0
    truncated_rate: float = 0.0
    sent: int = 0
    reused: int = 0
    wall_s: float = 0.0
    figures: Mapping[str, Any] = field(default_factory=dict)
    sequence: AccuracySequence | None = None

    @classmethod
    def of(cls, core: Mapping[str, Any], summary: Mapping[str, Any], *, sent: int, reused: int,
           wall_s: float, sequence: AccuracySequence | None = None) -> AccuracyStats:
        """From :func:`~pytest_modelsweep.api.evaluation.summarise_items`' ``core`` and the
        benchmark's ``summary``; the core figures win over the summary's of the same name,
        keys in the order ``{**summary, **core, sent, reused, wall_s[, sequence]}``."""
        written = {**summary, **core, "sent": sent, "reused": reused, "wall_s": wall_s}
        if sequence is not None:
            written["sequence"] = sequence.to_dict()
        record = cls.read(written)
        return replace(record, shape=Shape.of(written, record.written()))

    def written(self) -> dict[str, Any]:
        return {**self.figures, "n": self.n, "items": self.items, "failed": self.failed,
                "correct": self.correct, "accuracy": self.accuracy,
                "truncated_rate": self.truncated_rate, "sent": self.sent, "reused": self.reused,
                "wall_s": self.wall_s,
                **({} if self.sequence is None else {"sequence": self.sequence.to_dict()})}

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> AccuracyStats:
        known = set(_ACCURACY_CORE + _ACCURACY_RUN)
        sequence = data.get("sequence")
        return cls(
            n=_int(data.get("n")) or 0, items=_int(data.get("items")) or 0,
            failed=_int(data.get("failed")) or 0, correct=_int(data.get("correct")) or 0,
            accuracy=_float(data.get("accuracy")) or 0.0,
            truncated_rate=_float(data.get("truncated_rate")) or 0.0,
            sent=_int(data.get("sent")) or 0, reused=_int(data.get("reused")) or 0,
            wall_s=_float(data.get("wall_s")) or 0.0,
            figures={k: v for k, v in data.items() if k not in known},
            sequence=(AccuracySequence.from_dict(sequence) if isinstance(sequence, Mapping)
                      else None),
        )

    # GSM8K's and BFCL's own figures (their summarise functions), None for other benchmarks
    @property
    def strict_match_accuracy(self) -> float | None:
        return _float(self.figures.get("strict_match_accuracy"))

    @property
    def error_types(self) -> dict[str, int]:
        """BFCL: wrong answers per error type (empty for other benchmarks)."""
        types = _mapping(self.figures.get("error_types"))
        return {str(k): v for k, v in types.items() if _int(v) is not None}

    @property
    def parse_failures(self) -> int | None:
        return _int(self.figures.get("parse_failures"))


# --------------------------------------------------------------------------- a window's server


def _numbers(value: Any) -> dict[str, float]:
    return {str(k): float(v) for k, v in _mapping(value).items() if _float(v) is not None}


def _texts(value: Any) -> dict[str, str]:
    return {str(k): v for k, v in _mapping(value).items() if isinstance(v, str)}


@dataclass(frozen=True)
class MetricsSample(Record):
    """One scrape of the server's ``/metrics``: when its answer came (perf clock, seconds),
    the mapped metrics it held, and how many requests the client had in flight then (None
    when nobody told the sampler)."""

    t: float = 0.0
    values: Mapping[str, float] = field(default_factory=dict)
    client_in_flight: int | None = None

    def written(self) -> dict[str, Any]:
        return {"t": self.t, "values": dict(self.values), "client_in_flight": self.client_in_flight}

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> MetricsSample:
        return cls(_float(data.get("t")) or 0.0, _numbers(data.get("values")),
                   _int(data.get("client_in_flight")))


@dataclass(frozen=True)
class SamplerCost(Record):
    """What sampling cost the client: CPU seconds (all scrapes and parses) over the wall
    time it ran; ``cpu_cores`` = their ratio."""

    cpu_s: float = 0.0
    wall_s: float = 0.0
    scrapes: int = 0
    failed_scrapes: int = 0

    @property
    def cpu_cores(self) -> float | None:
        return self.cpu_s / self.wall_s if self.wall_s > 0 else None

    def written(self) -> dict[str, Any]:
        return {"cpu_s": self.cpu_s, "wall_s": self.wall_s, "cpu_cores": self.cpu_cores,
                "scrapes": self.scrapes, "failed_scrapes": self.failed_scrapes}

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> SamplerCost:
        return cls(_float(data.get("cpu_s")) or 0.0, _float(data.get("wall_s")) or 0.0,
                   _int(data.get("scrapes")) or 0, _int(data.get("failed_scrapes")) or 0)


@dataclass(frozen=True)
class GaugeSummary(Record):
    """A gauge over a window: mean of the samples (taken on a regular grid: a time average)
    and maximum."""

    mean: float = 0.0
    max: float = 0.0
    samples: int = 0

    def written(self) -> dict[str, Any]:
        return {"mean": self.mean, "max": self.max, "samples": self.samples}

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> GaugeSummary:
        return cls(_float(data.get("mean")) or 0.0, _float(data.get("max")) or 0.0,
                   _int(data.get("samples")) or 0)


def _gauge(value: Any) -> GaugeSummary | None:
    return GaugeSummary.from_dict(value) if isinstance(value, Mapping) else None


@dataclass(frozen=True)
class ServerMetricsSummary(Record):
    """One window's server metrics, summarised; None where the server exposes no such
    quantity (then :attr:`absent` says which names were looked for)."""

    samples: int = 0
    running: GaugeSummary | None = None
    waiting: GaugeSummary | None = None
    kv_cache_usage: GaugeSummary | None = None
    preemptions: float | None = None
    """Counter delta over the window."""
    prefix_cache_hits: float | None = None
    prefix_cache_queries: float | None = None
    absent: Mapping[str, str] = field(default_factory=dict)
    sources: Mapping[str, str] = field(default_factory=dict)
    peak_client_in_flight: int | None = None

    @property
    def prefix_cache_hit_rate(self) -> float | None:
        """Prompt tokens found in the prefix cache ÷ prompt tokens looked up, in the window;
        None when absent or nothing was looked up."""
        if self.prefix_cache_hits is None or not self.prefix_cache_queries:
            return None
        return self.prefix_cache_hits / self.prefix_cache_queries

    @property
    def queued(self) -> bool:
        """Whether the server had a request waiting at any sample."""
        return self.waiting is not None and self.waiting.max > 0

    @property
    def preempted(self) -> bool:
        return bool(self.preemptions)

    @property
    def flagged(self) -> bool:
        """The server queued or preempted: it did not run all the client had in flight."""
        return self.queued or self.preempted

    def flag_line(self) -> str | None:
        """E.g. ``the server queued up to 3 requests (running at most 2) while the client
        had up to 5 in flight``; None for an unflagged window."""
        if not self.flagged:
            return None
        parts = []
        if self.queued and self.waiting is not None:
            running = ("" if self.running is None
                       else f" (running at most {self.running.max:g})")
            parts.append(f"queued up to {self.waiting.max:g} requests{running}")
        if self.preempted:
            parts.append(f"preempted {self.preemptions:g} times")
        client = ("" if self.peak_client_in_flight is None
                  else f" while the client had up to {self.peak_client_in_flight} in flight")
        return f"the server {' and '.join(parts)}{client}"

    def written(self) -> dict[str, Any]:
        def gauge(value: GaugeSummary | None) -> dict[str, Any] | None:
            return None if value is None else value.to_dict()

        return {"samples": self.samples, "running": gauge(self.running),
                "waiting": gauge(self.waiting), "kv_cache_usage": gauge(self.kv_cache_usage),
                "preemptions": self.preemptions, "prefix_cache_hits": self.prefix_cache_hits,
                "prefix_cache_queries": self.prefix_cache_queries,
                "prefix_cache_hit_rate": self.prefix_cache_hit_rate,
                "queued": self.queued, "preempted": self.preempted,
                "flag": self.flag_line(), "absent": dict(self.absent),
                "sources": dict(self.sources),
                "peak_client_in_flight": self.peak_client_in_flight}

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> ServerMetricsSummary:
        return cls(
            samples=_int(data.get("samples")) or 0, running=_gauge(data.get("running")),
            waiting=_gauge(data.get("waiting")), kv_cache_usage=_gauge(data.get("kv_cache_usage")),
            preemptions=_float(data.get("preemptions")),
            prefix_cache_hits=_float(data.get("prefix_cache_hits")),
            prefix_cache_queries=_float(data.get("prefix_cache_queries")),
            absent=_texts(data.get("absent")), sources=_texts(data.get("sources")),
            peak_client_in_flight=_int(data.get("peak_client_in_flight")),
        )


@dataclass(frozen=True)
class ServerMetricsWindow(Record):
    """What the server's ``/metrics`` showed during one timed window: the series (a sample
    per scrape), its summary and the sampler's cost; ``unavailable`` says why there is
    nothing (no ``/metrics``), ``errors`` the first failed scrapes' lines."""

    server_kind: str = ""
    interval_s: float = 0.0
    samples: tuple[MetricsSample, ...] = ()
    summary: ServerMetricsSummary = field(default_factory=ServerMetricsSummary)
    cost: SamplerCost = field(default_factory=SamplerCost)
    unavailable: str | None = None
    errors: tuple[str, ...] = ()

    def written(self) -> dict[str, Any]:
        return {"server_kind": self.server_kind, "interval_s": self.interval_s,
                "series": [s.to_dict() for s in self.samples],
                "summary": self.summary.to_dict(), "cost": self.cost.to_dict(),
                "unavailable": self.unavailable, "errors": list(self.errors)}

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> ServerMetricsWindow:
        return cls(_str(data.get("server_kind")) or "", _float(data.get("interval_s")) or 0.0,
                   _records(MetricsSample, data.get("series")),
                   ServerMetricsSummary.from_dict(data.get("summary")),
                   SamplerCost.from_dict(data.get("cost")), _str(data.get("unavailable")),
                   _strs(data.get("errors")))

    def series(self, name: str) -> list[tuple[float, float]]:
        """``(seconds since the first sample, value)`` of one mapped metric's samples."""
        if not self.samples:
            return []
        start = self.samples[0].t
        return [(s.t - start, s.values[name]) for s in self.samples if name in s.values]


# --------------------------------------------------------------------------- a window's arrivals


@dataclass(frozen=True)
class Saturation(Record):
    """Whether the server kept up with an open-loop window's offered rate: ``offered_rps``
    is the schedule's rate, ``achieved_rps`` the completions' against it, from least-squares
    slopes over the whole window (``workloads/openloop.kept_up_rate``);
    saturated when achieved falls more than ``tolerance`` behind, or a request found the
    client's ``max_in_flight`` cap reached (``capped``)."""

    offered_rps: float | None = None
    achieved_rps: float | None = None
    tolerance: float = 0.0
    capped: int = 0
    max_in_flight: int = 0

    @property
    def shortfall(self) -> float | None:
        """1 − achieved ÷ offered (negative when completions ran ahead); None without both."""
        if self.offered_rps is None or self.achieved_rps is None or not self.offered_rps:
            return None
        return 1.0 - self.achieved_rps / self.offered_rps

    @property
    def saturated(self) -> bool:
        behind = self.shortfall
        return self.capped > 0 or (behind is not None and behind > self.tolerance)

    def reason(self) -> str | None:
        """One line for a saturated window; None otherwise."""
        if not self.saturated:
            return None
        parts = []
        behind = self.shortfall
        if behind is not None and behind > self.tolerance:
            parts.append(f"achieved {self.achieved_rps:.3g} req/s of {self.offered_rps:.3g} "
                         f"offered ({behind:.0%} behind; tolerance {self.tolerance:.0%})")
        if self.capped:
            parts.append(f"{self.capped} request(s) found the client's cap of "
                         f"{self.max_in_flight} in flight reached and waited for a slot")
        return "saturated: " + "; ".join(parts)

    def written(self) -> dict[str, Any]:
        return {"offered_rps": self.offered_rps, "achieved_rps": self.achieved_rps,
                "shortfall": self.shortfall, "tolerance": self.tolerance,
                "capped": self.capped, "max_in_flight": self.max_in_flight,
                "saturated": self.saturated, "reason": self.reason()}

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> Saturation:
        return cls(_float(data.get("offered_rps")), _float(data.get("achieved_rps")),
                   _float(data.get("tolerance")) or 0.0, _int(data.get("capped")) or 0,
                   _int(data.get("max_in_flight")) or 0)


@dataclass(frozen=True)
class OpenLoop(Record):
    """What an open-loop window adds to its throughput figures: its arrivals (rate,
    burstiness, ramp-up, seed), whether the server kept up (:class:`Saturation`), the most
    requests the client had in flight and how late the client sent (``send_lag``, ms).
    Its latencies run from each request's scheduled send time."""

    rate: float = 0.0
    burstiness: float = 1.0
    ramp_up: Mapping[str, Any] | None = None
    describe: str = ""
    seed: int = 0
    saturation: Saturation = field(default_factory=Saturation)
    peak_in_flight: int = 0
    send_lag: Latency = field(default_factory=Latency)

    @property
    def saturated(self) -> bool:
        return self.saturation.saturated

    def written(self) -> dict[str, Any]:
        return {"arrivals": {"rate": self.rate, "burstiness": self.burstiness,
                             "ramp_up": None if self.ramp_up is None else dict(self.ramp_up),
                             "describe": self.describe, "seed": self.seed},
                "saturation": self.saturation.to_dict(), "peak_in_flight": self.peak_in_flight,
                "send_lag": self.send_lag.to_dict()}

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> OpenLoop:
        arrivals = _mapping(data.get("arrivals"))
        ramp = arrivals.get("ramp_up")
        return cls(_float(arrivals.get("rate")) or 0.0, _float(arrivals.get("burstiness")) or 1.0,
                   dict(ramp) if isinstance(ramp, Mapping) else None,
                   _str(arrivals.get("describe")) or "", _int(arrivals.get("seed")) or 0,
                   Saturation.from_dict(data.get("saturation")),
                   _int(data.get("peak_in_flight")) or 0, Latency.from_dict(data.get("send_lag")))


# --------------------------------------------------------------------------- throughput


@dataclass(frozen=True)
class ThroughputWindow(Record):
    """One timed window of a throughput setting (one repeat): its rate, latencies, the
    server's counters it was checked against, its rule violations and contention; with an
    SLO its goodput, with a price its cost."""

    concurrency: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0
    duration_s: float = 0.0
    completed: int = 0
    output_tokens_per_s: float = 0.0
    requests_per_s: float = 0.0
    ttft: Latency = field(default_factory=Latency)
    tpot: Latency = field(default_factory=Latency)
    itl: Latency = field(default_factory=Latency)
    e2e: Latency = field(default_factory=Latency)
    total_prompt_tokens: int = 0
    total_completion_tokens: int = 0
    server_generated_tokens: float = 0.0
    generated_counter: str = ""
    fidelity: float = math.nan
    server_cached_tokens: float = 0.0
    reported_cached_tokens: int = 0
    server_prompt_tokens: float = 0.0
    bos_tokens: int = 0
    tokens_in_shared_chunks: int = 0
    violations: tuple[str, ...] = ()
    contention: Contention = field(default_factory=Contention)
    goodput: GoodputFigures | None = None
    priced: bool = False
    usd_per_million_output_tokens: float | None = None
    """Written when ``priced`` (None for a rate that is not positive)."""
    open_loop: OpenLoop | None = None
    """An open-loop window's arrivals and saturation (None: a closed loop, N in flight)."""
    server_metrics: ServerMetricsWindow | None = None
    """What the server's ``/metrics`` showed during the window (None: not sampled)."""

    def written(self) -> dict[str, Any]:
        data = {
            "concurrency": self.concurrency, "prompt_tokens": self.prompt_tokens,
            "output_tokens": self.output_tokens, "duration_s": self.duration_s,
            "completed": self.completed, "output_tokens_per_s": self.output_tokens_per_s,
            "requests_per_s": self.requests_per_s, "ttft": self.ttft.to_dict(),
            "tpot": self.tpot.to_dict(), "itl": self.itl.to_dict(), "e2e": self.e2e.to_dict(),
            "total_prompt_tokens": self.total_prompt_tokens,
            "total_completion_tokens": self.total_completion_tokens,
            "server_generated_tokens": self.server_generated_tokens,
            "generated_counter": self.generated_counter, "fidelity": self.fidelity,
            "server_cached_tokens": self.server_cached_tokens,
            "reported_cached_tokens": self.reported_cached_tokens,
            "server_prompt_tokens": self.server_prompt_tokens, "bos_tokens": self.bos_tokens,
            "tokens_in_shared_chunks": self.tokens_in_shared_chunks,
            "violations": list(self.violations), "contention": self.contention.to_dict(),
        }
        if self.goodput is not None:
            data.update(self.goodput.as_stats())
        if self.priced:
            data["usd_per_million_output_tokens"] = self.usd_per_million_output_tokens
        if self.open_loop is not None:
            data["open_loop"] = self.open_loop.to_dict()
        if self.server_metrics is not None:
            data["server_metrics"] = self.server_metrics.to_dict()
        return data

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> ThroughputWindow:
        return cls(
            concurrency=_int(data.get("concurrency")) or 0,
            prompt_tokens=_int(data.get("prompt_tokens")) or 0,
            output_tokens=_int(data.get("output_tokens")) or 0,
            duration_s=_float(data.get("duration_s")) or 0.0,
            completed=_int(data.get("completed")) or 0,
            output_tokens_per_s=_float(data.get("output_tokens_per_s")) or 0.0,
            requests_per_s=_float(data.get("requests_per_s")) or 0.0,
            ttft=Latency.from_dict(data.get("ttft")), tpot=Latency.from_dict(data.get("tpot")),
            itl=Latency.from_dict(data.get("itl")), e2e=Latency.from_dict(data.get("e2e")),
            total_prompt_tokens=_int(data.get("total_prompt_tokens")) or 0,
            total_completion_tokens=_int(data.get("total_completion_tokens")) or 0,
            server_generated_tokens=_float(data.get("server_generated_tokens")) or 0.0,
            generated_counter=_str(data.get("generated_counter")) or "",
            fidelity=_float_or_nan(data.get("fidelity")),
            server_cached_tokens=_float(data.get("server_cached_tokens")) or 0.0,
            reported_cached_tokens=_int(data.get("reported_cached_tokens")) or 0,
            server_prompt_tokens=_float(data.get("server_prompt_tokens")) or 0.0,
            bos_tokens=_int(data.get("bos_tokens")) or 0,
            tokens_in_shared_chunks=_int(data.get("tokens_in_shared_chunks")) or 0,
            violations=_strs(data.get("violations")),
            contention=Contention.from_dict(data.get("contention")),
            goodput=GoodputFigures.from_stats(data),
            priced="usd_per_million_output_tokens" in data, usd_per_million_output_tokens=_usd(data),
            open_loop=(OpenLoop.from_dict(data["open_loop"])
                       if isinstance(data.get("open_loop"), Mapping) else None),
            server_metrics=(ServerMetricsWindow.from_dict(data["server_metrics"])
                            if isinstance(data.get("server_metrics"), Mapping) else None),
        )

    @property
    def contended(self) -> bool:
        return self.contention.contended is True

    @property
    def server_flag(self) -> str | None:
        """A closed loop's server queued or preempted while the client had N in flight
        (:meth:`ServerMetricsSummary.flag_line`): it ran fewer than the window claims. None
        otherwise, unsampled, or in an open loop, where requests queue by design and each
        one's latency holds its wait (its summary still says how long the queue grew)."""
        if self.server_metrics is None or self.open_loop is not None:
            return None
        return self.server_metrics.summary.flag_line()

    @property
    def saturated(self) -> bool:
        """An open-loop window whose server fell behind the offered rate."""
        return self.open_loop is not None and self.open_loop.saturated


@dataclass(frozen=True)
class ThroughputStats(Record):
    """One throughput setting over its repeats: each repeat's tokens/s and window, their CV,
    ``unstable`` (CV above ``unstable_cv_limit``) and ``contended`` (others used the CPUs in
    ``contended_windows`` windows), the rule that chose the number of repeats, the 95%
    interval of the mean rate; with an SLO the goodput, with a price the cost."""

    repeat_values: tuple[float, ...] = ()
    repeats: tuple[ThroughputWindow, ...] = ()
    cv: float | None = None
    unstable: bool = False
    unstable_cv_limit: float | None = None
    contended: bool = False
    contended_windows: int = 0
    repeats_rule: str = ""
    interval_rule: str | None = None
    """What made ``interval``: ``log-t`` (fixed repeats) or ``log-t-two-stage`` (auto)."""
    interval: tuple[float, float] | None = None
    """The 95% interval of the mean output tokens/s (None with one repeat)."""
    goodput: GoodputFigures | None = None
    cost: CostFigures | None = None

    def written(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "repeat_values": list(self.repeat_values),
            "repeats": [window.to_dict() for window in self.repeats], "cv": self.cv,
            "unstable": self.unstable, "unstable_cv_limit": self.unstable_cv_limit,
            "contended": self.contended, "contended_windows": self.contended_windows,
            "repeats_rule": self.repeats_rule,
        }
        if self.interval_rule is not None:
            data["interval_rule"] = self.interval_rule
        if self.interval is not None:
            data["output_tokens_per_s_interval"] = list(self.interval)
        if self.goodput is not None:
            data.update(self.goodput.as_stats())
        if self.cost is not None:
            data.update(self.cost.as_stats())
        return data

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> ThroughputStats:
        return cls(
            repeat_values=_floats(data.get("repeat_values")),
            repeats=_records(ThroughputWindow, data.get("repeats")),
            cv=_float(data.get("cv")), unstable=_bool(data.get("unstable")) or False,
            unstable_cv_limit=_float(data.get("unstable_cv_limit")),
            contended=_bool(data.get("contended")) or False,
            contended_windows=_int(data.get("contended_windows")) or 0,
            repeats_rule=_str(data.get("repeats_rule")) or "",
            interval_rule=_str(data.get("interval_rule")),
            interval=_pair(data.get("output_tokens_per_s_interval")),
            goodput=GoodputFigures.from_stats(data), cost=CostFigures.from_stats(data),
        )

    @property
    def server_flagged_windows(self) -> int:
        """Windows whose server queued or preempted while the client had N in flight."""
        return sum(window.server_flag is not None for window in self.repeats)

    @property
    def saturated_windows(self) -> int:
        """Open-loop windows whose server fell behind the offered rate."""
        return sum(window.saturated for window in self.repeats)

    @property
    def flags(self) -> tuple[str, ...]:
        """``unstable (CV 53%)``, ``contended``, ``server queued``, ``saturated``: what makes
        this setting doubtful."""
        return side_flags(unstable=self.unstable, cv=self.cv, contended=self.contended,
                          server_queued=self.server_flagged_windows > 0,
                          saturated=self.saturated_windows > 0)

    @property
    def pricing(self) -> Pricing | None:
        return None if self.cost is None else self.cost.pricing


# --------------------------------------------------------------------------- capacity


class Window(Protocol):
    """What a capacity step reads of one measured window (a ``ThroughputResult`` has it)."""

    @property
    def output_tokens_per_s(self) -> float: ...

    @property
    def violations(self) -> Sequence[str]: ...


@dataclass(frozen=True)
class StepWindow:
    """What a recorded capacity step adds to the search's step: its window's timed requests,
    latencies, fidelity to the server's counters, contention and (priced) cost."""

    timed_requests: int
    ttft: Latency
    tpot: Latency
    e2e: Latency
    fidelity: float
    contention: Contention
    priced: bool = False
    usd_per_million_output_tokens: float | None = None
    server_metrics: ServerMetricsWindow | None = None
    """What the server's ``/metrics`` showed during the step (None: not sampled)."""

    def written(self) -> dict[str, Any]:
        data = {"timed_requests": self.timed_requests, "ttft": self.ttft.to_dict(),
                "tpot": self.tpot.to_dict(), "e2e": self.e2e.to_dict(),
                "fidelity": self.fidelity, "contention": self.contention.to_dict()}
        if self.priced:
            data["usd_per_million_output_tokens"] = self.usd_per_million_output_tokens
        if self.server_metrics is not None:
            data["server_metrics"] = self.server_metrics.to_dict()
        return data

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> StepWindow | None:
        if "timed_requests" not in data and "contention" not in data:
            return None
        metrics = data.get("server_metrics")
        return cls(_int(data.get("timed_requests")) or 0, Latency.from_dict(data.get("ttft")),
                   Latency.from_dict(data.get("tpot")), Latency.from_dict(data.get("e2e")),
                   _float_or_nan(data.get("fidelity")), Contention.from_dict(data.get("contention")),
                   "usd_per_million_output_tokens" in data, _usd(data),
                   ServerMetricsWindow.from_dict(metrics) if isinstance(metrics, Mapping) else None)


@dataclass(frozen=True)
class StepDecision:
    """What a capacity step's windows so far decide: the pooled attainment of its
    ``windows`` (``good`` of ``requests``) with its exact interval at ``confidence`` (of the
    effective counts, by the ``design_effect`` the windows show) and the ``outcome``:
    ``pass``, ``miss``, ``inconclusive``, or ``undecided`` (too few windows yet)."""

    windows: int
    good: int
    requests: int
    low: float
    high: float
    confidence: float
    design_effect: float
    outcome: str

    def written(self) -> dict[str, Any]:
        return {"window": self.windows, "outcome": self.outcome, "step_good": self.good,
                "step_requests": self.requests, "attainment_interval": [self.low, self.high],
                "interval_confidence": self.confidence, "design_effect": self.design_effect}

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> StepDecision | None:
        interval = _pair(data.get("attainment_interval"))
        outcome = _str(data.get("outcome"))
        if interval is None or outcome is None:
            return None
        return cls(_int(data.get("window")) or 1, _int(data.get("step_good")) or 0,
                   _int(data.get("step_requests")) or 0, interval[0], interval[1],
                   _float(data.get("interval_confidence")) or 0.0,
                   _float(data.get("design_effect")) or 1.0, outcome)


@dataclass(frozen=True)
class CapacityStep(Record):
    """One timed window of the search at one concurrency, and what its step's windows so far
    decided (``decision``; ``passed``: the step surely passes). ``recorded``: the window's
    figures, once the step is recorded. A record of an older search (one window a step,
    no decision) has ``decision`` None and ``passed`` from that window alone."""

    concurrency: int
    slo_attainment: float | None
    """Share of the window's requests that met every target; None without requests."""
    good: int
    requests: int
    goodput_rps: float | None
    output_tokens_per_s: float
    duration_s: float
    passed: bool
    violations: tuple[str, ...] = ()
    recorded: StepWindow | None = None
    decision: StepDecision | None = None

    @classmethod
    def of(cls, concurrency: int, goodput: Goodput, window: Window, target: float) -> CapacityStep:
        """The step a window measured: passed when its attainment reaches ``target``."""
        attainment = goodput.slo_attainment
        return cls(
            concurrency=concurrency, slo_attainment=attainment, good=goodput.good,
            requests=goodput.requests, goodput_rps=goodput.goodput_rps,
            output_tokens_per_s=window.output_tokens_per_s, duration_s=goodput.duration_s,
            passed=attainment is not None and attainment >= target and not window.violations,
            violations=tuple(window.violations),
        )

    @property
    def broken(self) -> bool:
        """Whether the window broke its rules (or sent nothing): no conclusion from it."""
        return bool(self.violations) or self.requests == 0

    def written(self) -> dict[str, Any]:
        data = {"concurrency": self.concurrency, "slo_attainment": self.slo_attainment,
                "good": self.good, "requests": self.requests, "goodput_rps": self.goodput_rps,
                "output_tokens_per_s": self.output_tokens_per_s, "duration_s": self.duration_s,
                "passed": self.passed, "violations": list(self.violations)}
        if self.decision is not None:
            data.update(self.decision.written())
        if self.recorded is not None:
            data.update(self.recorded.written())
        return data

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> CapacityStep:
        return cls(
            concurrency=_int(data.get("concurrency")) or 0,
            slo_attainment=_float(data.get("slo_attainment")), good=_int(data.get("good")) or 0,
            requests=_int(data.get("requests")) or 0, goodput_rps=_float(data.get("goodput_rps")),
            output_tokens_per_s=_float(data.get("output_tokens_per_s")) or 0.0,
            duration_s=_float(data.get("duration_s")) or 0.0,
            passed=_bool(data.get("passed")) or False, violations=_strs(data.get("violations")),
            recorded=StepWindow.read(data), decision=StepDecision.read(data),
        )


@dataclass(frozen=True)
class CapacityBracket:
    """One model's capacity and search bracket, as a comparison reads them back: the highest
    concurrency that surely passed and the lowest that surely missed above it (None: none
    did). The capacity lies in ``[last_pass, first_fail - 1]`` (where the SLO curve crosses
    the target: in ``[last_pass, first_fail)``) at ``confidence`` (None: a record of an older
    search, one window a step, whose bracket has no confidence level)."""

    capacity: int
    last_pass: int
    first_fail: int | None
    confidence: float | None = None

    def as_list(self) -> list[int | None]:
        return [self.last_pass, self.first_fail]

    def text(self) -> str:
        """E.g. ``[3, 4]``; ``[16, open]`` when the maximum passed."""
        return f"[{self.last_pass}, {'open' if self.first_fail is None else self.first_fail}]"

    def interval_text(self) -> str:
        """The capacity interval: ``5``, ``4–7`` or ``≥ 16``."""
        if self.first_fail is None:
            return f"≥ {self.last_pass}"
        high = self.first_fail - 1
        return str(high) if high == self.last_pass else f"{self.last_pass}–{high}"


@dataclass(frozen=True)
class CapacityRatio:
    """Candidate ÷ reference capacity, and the bracket the two searches allow for it.

    ``low`` = candidate's last pass ÷ reference's first miss (0 when the reference
    passed at its maximum), ``high`` = candidate's first miss ÷ reference's last pass
    (infinite when the candidate passed at its maximum; None in :meth:`as_dict`, so that
    strict JSON readers can read it). No confidence level:
    each side is one search. ``degenerate`` when both searches reached their maximum,
    so neither capacity is bounded above and the bracket says nothing.
    """

    ratio: float
    low: float
    high: float
    candidate: CapacityBracket
    reference: CapacityBracket
    confidence: float | None = None
    """The interval's level (both sides' capacity intervals, Bonferroni); None for a bracket
    of older one-window searches."""

    @property
    def degenerate(self) -> bool:
        return self.candidate.first_fail is None and self.reference.first_fail is None

    def as_dict(self) -> dict[str, Any]:
        high = None if math.isinf(self.high) else self.high
        data = {"ratio": self.ratio, "bracket_low": self.low, "bracket_high": high,
                "ratio_bracket": [self.low, high], "degenerate": self.degenerate,
                "candidate_capacity": self.candidate.capacity,
                "reference_capacity": self.reference.capacity,
                "candidate_bracket": self.candidate.as_list(),
                "reference_bracket": self.reference.as_list()}
        if self.confidence is not None:
            data["confidence"] = self.confidence
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CapacityRatio | None:
        """Inverse of :meth:`as_dict`; None when ``data`` holds no readable ratio."""
        ratio, low = _float(data.get("ratio")), _float(data.get("bracket_low"))
        high = _float(data.get("bracket_high"))
        sides = []
        for role in ("candidate", "reference"):
            capacity, bracket = _int(data.get(f"{role}_capacity")), data.get(f"{role}_bracket")
            if capacity is None or not isinstance(bracket, list) or len(bracket) != 2 \
                    or _int(bracket[0]) is None or not (bracket[1] is None or _int(bracket[1])):
                return None
            sides.append(CapacityBracket(capacity, bracket[0], bracket[1]))
        if ratio is None or low is None:
            return None
        return cls(ratio, low, math.inf if high is None else high, sides[0], sides[1],
                   _float(data.get("confidence")))


@dataclass(frozen=True)
class AtCapacity:
    """The figures of the passing step at the capacity (its window)."""

    output_tokens_per_s: float
    goodput_rps: float | None
    slo_attainment: float | None
    usd_per_million_output_tokens: float | None = None
    """Written when the measurement is priced."""


@dataclass(frozen=True)
class CapacityStats(Record):
    """A capacity search under an SLO: the ``capacity`` (None when the search broke off,
    ``error`` says why), every step, the ``bracket`` [last pass, first miss or None], where
    the maximum concurrency came from, contention, the figures at the capacity, the price,
    and a ``reason`` for a result that needs one (capacity 0, the maximum reached)."""

    capacity: int | None = None
    steps: tuple[CapacityStep, ...] = ()
    bracket: tuple[int, int | None] | None = None
    max_concurrency_source: str = ""
    contended: bool = False
    contended_windows: int = 0
    at_capacity: AtCapacity | None = None
    pricing: Pricing | None = None
    reason: str | None = None
    error: str | None = None
    confidence: float | None = None
    """The level of the capacity interval: the capacity lies in ``[bracket[0], bracket[1] -
    1]`` at it. None: an older search, one window a step, with no level."""
    inconclusive: tuple[int, ...] = ()
    """Concurrencies whose step stayed inconclusive after its most windows."""

    def written(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "capacity": self.capacity, "steps": [step.to_dict() for step in self.steps],
            "bracket": None if self.bracket is None else list(self.bracket),
            "max_concurrency_source": self.max_concurrency_source,
            "contended": self.contended, "contended_windows": self.contended_windows,
        }
        if self.confidence is not None:
            data.update(confidence=self.confidence, inconclusive=list(self.inconclusive))
        at = self.at_capacity
        if at is not None:
            data.update(output_tokens_per_s=at.output_tokens_per_s, goodput_rps=at.goodput_rps,
                        slo_attainment=at.slo_attainment)
            if self.pricing is not None:
                data["usd_per_million_output_tokens"] = at.usd_per_million_output_tokens
        if self.pricing is not None:
            data["pricing"] = self.pricing.as_dict()
        if self.reason is not None:
            data["reason"] = self.reason
        if self.error is not None:
            data["error"] = self.error
        return data

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> CapacityStats:
        bracket = data.get("bracket")
        pair: tuple[int, int | None] | None = None
        if isinstance(bracket, list) and len(bracket) == 2 and _int(bracket[0]) is not None \
                and (bracket[1] is None or _int(bracket[1]) is not None):
            pair = (bracket[0], bracket[1])
        rate = _float(data.get("output_tokens_per_s"))
        at = None if rate is None else AtCapacity(
            rate, _float(data.get("goodput_rps")), _float(data.get("slo_attainment")), _usd(data))
        return cls(
            capacity=_int(data.get("capacity")), steps=_records(CapacityStep, data.get("steps")),
            bracket=pair, max_concurrency_source=_str(data.get("max_concurrency_source")) or "",
            contended=_bool(data.get("contended")) or False,
            contended_windows=_int(data.get("contended_windows")) or 0, at_capacity=at,
            pricing=_pricing(data.get("pricing")), reason=_str(data.get("reason")),
            error=_str(data.get("error")), confidence=_float(data.get("confidence")),
            inconclusive=_ints(data.get("inconclusive")),
        )

    @property
    def flags(self) -> tuple[str, ...]:
        """``contended``: what makes this search doubtful (a search has no CV)."""
        return side_flags(unstable=False, cv=None, contended=self.contended)

    def measured_bracket(self) -> CapacityBracket:
        """The capacity and its bracket; ValueError for a search that concluded none."""
        capacity, bracket = self.capacity, self.bracket
        if capacity is None or bracket is None:
            raise ValueError(f"a capacity measurement without a capacity and its bracket "
                             f"(capacity {capacity!r}, bracket "
                             f"{None if bracket is None else list(bracket)!r})")
        last_pass, first_fail = bracket
        if last_pass != capacity or not (first_fail is None or first_fail > last_pass):
            raise ValueError(f"a capacity measurement whose bracket {list(bracket)} does not "
                             f"start at its capacity {capacity}")
        return CapacityBracket(capacity, last_pass, first_fail, self.confidence)


# --------------------------------------------------------------------------- smoke, screening


@dataclass(frozen=True)
class SmokeStats(Record):
    """One greedy generation: its latency, usage, finish reason and text."""

    latency_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None
    text: str = ""

    def written(self) -> dict[str, Any]:
        return {"latency_s": self.latency_s, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "finish_reason": self.finish_reason,
                "text": self.text}

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> SmokeStats:
        return cls(_float(data.get("latency_s")) or 0.0, _int(data.get("prompt_tokens")) or 0,
                   _int(data.get("completion_tokens")) or 0, _str(data.get("finish_reason")),
                   _str(data.get("text")) or "")


@dataclass(frozen=True)
class ScreeningResult(Record):
    """The screening of one candidate repo; ``reasons`` says why it was rejected (empty if not)."""

    model: str = ""
    repo: str = ""
    license: str | None = None
    architecture: str | None = None
    dtype: str | None = None
    parameters: int | None = None
    weights_gib: float | None = None
    budget_gib: float = 0.0
    kv_headroom_gib: float | None = None
    accepted: bool = False
    reasons: tuple[str, ...] = ()
    weights_source: str = ""

    @property
    def verdict(self) -> str:
        return "accepted" if self.accepted else "rejected"

    @property
    def reason(self) -> str:
        """The reasons as one line ("" when accepted)."""
        return "; ".join(self.reasons)

    def written(self) -> dict[str, Any]:
        """Plain JSON-friendly fields (``reasons`` as a list), plus ``verdict``."""
        return {"model": self.model, "repo": self.repo, "license": self.license,
                "architecture": self.architecture, "dtype": self.dtype,
                "parameters": self.parameters, "weights_gib": self.weights_gib,
                "budget_gib": self.budget_gib, "kv_headroom_gib": self.kv_headroom_gib,
                "accepted": self.accepted, "reasons": list(self.reasons),
                "weights_source": self.weights_source, "verdict": self.verdict}

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> ScreeningResult:
        return cls(
            model=_str(data.get("model")) or "", repo=_str(data.get("repo")) or "",
            license=_str(data.get("license")), architecture=_str(data.get("architecture")),
            dtype=_str(data.get("dtype")), parameters=_int(data.get("parameters")),
            weights_gib=_float(data.get("weights_gib")),
            budget_gib=_float(data.get("budget_gib")) or 0.0,
            kv_headroom_gib=_float(data.get("kv_headroom_gib")),
            accepted=_bool(data.get("accepted")) or False, reasons=_strs(data.get("reasons")),
            weights_source=_str(data.get("weights_source")) or "",
        )


# --------------------------------------------------------------------------- comparisons


@dataclass(frozen=True)
class SequentialVerdict(Record):
    """A verdict drawn from the anytime-valid confidence sequence of candidate − reference
    (``--until-decided``, :mod:`~pytest_modelsweep.core.sequences`): the sequence's
    [``low``, ``high``] at ``confidence`` and the mean ``difference`` after ``n`` paired items
    (``discordant`` scored differently; each side's mean over them) of the data set's
    ``population`` items, taken in the seeded order ``order_seed``; ``stop``: ``decided`` (the
    sequence decided the verdict) or ``final`` (no more items came: the data set's end, the
    limit, or a side that stopped); ``method``: the sequence's (``betting-iid``)."""

    difference: float = math.nan
    low: float = math.nan
    high: float = math.nan
    confidence: float = math.nan
    n: int = 0
    population: int = 0
    discordant: int = 0
    candidate_mean: float = math.nan
    reference_mean: float = math.nan
    method: str = ""
    stop: str = ""
    order_seed: int = 0

    def written(self) -> dict[str, Any]:
        return {"difference": self.difference, "low": self.low, "high": self.high,
                "confidence": self.confidence, "n": self.n, "population": self.population,
                "discordant": self.discordant, "candidate_mean": self.candidate_mean,
                "reference_mean": self.reference_mean, "method": self.method, "stop": self.stop,
                "order_seed": self.order_seed}

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> SequentialVerdict:
        return cls(_float_or_nan(data.get("difference")), _float_or_nan(data.get("low")),
                   _float_or_nan(data.get("high")), _float_or_nan(data.get("confidence")),
                   _int(data.get("n")) or 0, _int(data.get("population")) or 0,
                   _int(data.get("discordant")) or 0, _float_or_nan(data.get("candidate_mean")),
                   _float_or_nan(data.get("reference_mean")), _str(data.get("method")) or "",
                   _str(data.get("stop")) or "", _int(data.get("order_seed")) or 0)

    def text(self) -> str:
        """``decided after 120 of 300 items``; ``undecided after all 300 items``; ``undecided
        when the items stopped, after 120 of 300`` (a side stopped short)."""
        if self.stop == STOP_DECIDED:
            return f"decided after {self.n} of {self.population} items"
        if self.n >= self.population:
            return f"undecided after all {self.population} items"
        return f"undecided when the items stopped, after {self.n} of {self.population}"


@dataclass(frozen=True)
class AccuracyVerdictStats(Record):
    """A candidate's paired verdict on an accuracy benchmark: the interval of candidate −
    reference item by item, the margin and rule it was decided by, and the runs of each side
    (``interval`` None only for a record that holds none). A sequential verdict
    (``--until-decided``) holds its confidence sequence in ``sequence`` instead of a bootstrap
    ``interval`` (a fixed-n interval on a sequentially chosen sample lacks its coverage)."""

    candidate: str = ""
    reference: str = ""
    metric: str = ""
    verdict: Verdict | None = None
    interval: PairedInterval | None = None
    margin: float | None = None
    rule: str = ""
    candidate_run: str | None = None
    reference_run: str | None = None
    sequence: SequentialVerdict | None = None

    @classmethod
    def of(cls, record: VerdictRecord, *, candidate_run: str, reference_run: str,
           ) -> AccuracyVerdictStats:
        return cls(record.candidate, record.reference, record.metric, record.verdict,
                   record.interval, record.margin, record.rule, candidate_run, reference_run)

    @property
    def difference(self) -> float | None:
        """candidate − reference: the sequence's or the interval's mean difference."""
        if self.sequence is not None:
            return self.sequence.difference
        return None if self.interval is None else self.interval.difference

    def written(self) -> dict[str, Any]:
        return {"candidate": self.candidate, "reference": self.reference, "metric": self.metric,
                "verdict": None if self.verdict is None else self.verdict.value,
                **({} if self.interval is None else self.interval.as_dict()),
                "margin": self.margin, "rule": self.rule, "candidate_run": self.candidate_run,
                "reference_run": self.reference_run,
                **({} if self.sequence is None else {"sequence": self.sequence.to_dict()})}

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> AccuracyVerdictStats:
        try:
            interval: PairedInterval | None = PairedInterval.from_dict(data)
        except (KeyError, TypeError):
            interval = None
        sequence = data.get("sequence")
        return cls(_str(data.get("candidate")) or "", _str(data.get("reference")) or "",
                   _str(data.get("metric")) or "", _verdict(data.get("verdict")), interval,
                   _float(data.get("margin")), _str(data.get("rule")) or "",
                   _str(data.get("candidate_run")), _str(data.get("reference_run")),
                   SequentialVerdict.from_dict(sequence) if isinstance(sequence, Mapping)
                   else None)


@dataclass(frozen=True)
class InterleavedWindow(Record):
    """One window of an interleaved pair: whose, which pair, its rate and contention."""

    model: str = ""
    pair: int = 0
    output_tokens_per_s: float = 0.0
    contention: Contention = field(default_factory=Contention)

    def written(self) -> dict[str, Any]:
        return {"model": self.model, "pair": self.pair,
                "output_tokens_per_s": self.output_tokens_per_s,
                "contention": self.contention.to_dict()}

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> InterleavedWindow:
        return cls(_str(data.get("model")) or "", _int(data.get("pair")) or 0,
                   _float(data.get("output_tokens_per_s")) or 0.0,
                   Contention.from_dict(data.get("contention")))


@dataclass(frozen=True)
class Interleaved:
    """Both models measured in pairs of windows (A B, B A, ...): the windows in the order
    measured, each side's tokens/s in pair order, and whether any window was contended."""

    windows: tuple[InterleavedWindow, ...]
    candidate_values: tuple[float, ...]
    reference_values: tuple[float, ...]

    @property
    def contended(self) -> bool:
        return any(window.contention.contended for window in self.windows)


DESIGN_BACK_TO_BACK = "back-to-back"
DESIGN_INTERLEAVED = "interleaved"


@dataclass(frozen=True)
class ThroughputRatioStats(Record):
    """A candidate's throughput ÷ the reference's at one setting: the ratio interval, the
    tolerance and rule of the verdict, the runs of each side and how they were measured
    (``design``: back-to-back measurements with each side's flags, or ``interleaved``)."""

    candidate: str = ""
    reference: str = ""
    metric: str = ""
    verdict: Verdict | None = None
    interval: RatioInterval | None = None
    tolerance: float = 0.0
    rule: str = ""
    candidate_run: str | None = None
    reference_run: str | None = None
    candidate_flags: tuple[str, ...] | None = None
    reference_flags: tuple[str, ...] | None = None
    design: str = DESIGN_BACK_TO_BACK
    interleaved: Interleaved | None = None

    def written(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "candidate": self.candidate, "reference": self.reference, "metric": self.metric,
            "verdict": None if self.verdict is None else self.verdict.value,
            **({} if self.interval is None else self.interval.as_dict()),
            "tolerance": self.tolerance, "rule": self.rule, "candidate_run": self.candidate_run,
            "reference_run": self.reference_run,
        }
        if self.candidate_flags is not None or self.reference_flags is not None:
            data["candidate_flags"] = list(self.candidate_flags or ())
            data["reference_flags"] = list(self.reference_flags or ())
        data["design"] = self.design
        if self.interleaved is not None:
            data.update(windows=[w.to_dict() for w in self.interleaved.windows],
                        candidate_values=list(self.interleaved.candidate_values),
                        reference_values=list(self.interleaved.reference_values),
                        contended=self.interleaved.contended)
        return data

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> ThroughputRatioStats:
        try:
            interval: RatioInterval | None = RatioInterval.from_dict(data)
        except (KeyError, TypeError, ValueError):
            interval = None
        interleaved = None
        if "windows" in data:
            interleaved = Interleaved(_records(InterleavedWindow, data.get("windows")),
                                      _floats(data.get("candidate_values")),
                                      _floats(data.get("reference_values")))
        return cls(
            _str(data.get("candidate")) or "", _str(data.get("reference")) or "",
            _str(data.get("metric")) or "", _verdict(data.get("verdict")), interval,
            _float(data.get("tolerance")) or 0.0, _str(data.get("rule")) or "",
            _str(data.get("candidate_run")), _str(data.get("reference_run")),
            _strs(data["candidate_flags"]) if "candidate_flags" in data else None,
            _strs(data["reference_flags"]) if "reference_flags" in data else None,
            _str(data.get("design")) or DESIGN_BACK_TO_BACK, interleaved,
        )

    def flags_text(self) -> str:
        """``; the reference's measurement is flagged unstable (CV 53%)``, or ``""``."""
        return flags_text(self.candidate_flags, self.reference_flags)


@dataclass(frozen=True)
class CapacityRatioStats(Record):
    """A candidate's capacity ÷ the reference's under one SLO: the bracket the two searches
    allow, the tolerance, rule and attainment target, each side's maximum concurrency, run
    and flags (``ratio`` None only for a record that holds none)."""

    candidate: str = ""
    reference: str = ""
    metric: str = "capacity"
    verdict: Verdict | None = None
    ratio: CapacityRatio | None = None
    tolerance: float = 0.0
    rule: str = ""
    attainment_target: float | None = None
    candidate_max_concurrency: int | None = None
    reference_max_concurrency: int | None = None
    candidate_run: str | None = None
    reference_run: str | None = None
    candidate_flags: tuple[str, ...] = ()
    reference_flags: tuple[str, ...] = ()

    def written(self) -> dict[str, Any]:
        return {"candidate": self.candidate, "reference": self.reference, "metric": self.metric,
                "verdict": None if self.verdict is None else self.verdict.value,
                **({} if self.ratio is None else self.ratio.as_dict()),
                "tolerance": self.tolerance, "rule": self.rule,
                "attainment_target": self.attainment_target,
                "candidate_max_concurrency": self.candidate_max_concurrency,
                "reference_max_concurrency": self.reference_max_concurrency,
                "candidate_run": self.candidate_run, "reference_run": self.reference_run,
                "candidate_flags": list(self.candidate_flags),
                "reference_flags": list(self.reference_flags)}

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> CapacityRatioStats:
        return cls(
            _str(data.get("candidate")) or "", _str(data.get("reference")) or "",
            _str(data.get("metric")) or "capacity", _verdict(data.get("verdict")),
            CapacityRatio.from_dict(data), _float(data.get("tolerance")) or 0.0,
            _str(data.get("rule")) or "", _float(data.get("attainment_target")),
            _int(data.get("candidate_max_concurrency")),
            _int(data.get("reference_max_concurrency")),
            _str(data.get("candidate_run")), _str(data.get("reference_run")),
            _strs(data.get("candidate_flags")), _strs(data.get("reference_flags")),
        )

    def flags_text(self) -> str:
        return flags_text(self.candidate_flags, self.reference_flags)


@dataclass(frozen=True)
class OtherStats(Record):
    """The stats of a benchmark the metric table does not know, kept as recorded."""

    def written(self) -> dict[str, Any]:
        return {}

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> OtherStats:
        return cls()

    @property
    def values(self) -> Mapping[str, Any]:
        """The recorded figures, by name."""
        return self.shape.kept


# --------------------------------------------------------------------------- capacity in req/s


class StepOutcome(StrEnum):
    """What one step of a rate sweep decided (see ``workloads/rate_sweep``)."""

    PASS = "pass"
    MISS = "miss"
    INCONCLUSIVE = "inconclusive"
    SATURATED = "saturated"
    BROKEN = "broken"


def _outcome(value: Any) -> StepOutcome:
    try:
        return StepOutcome(value)
    except ValueError:
        return StepOutcome.BROKEN


@dataclass(frozen=True)
class AttainmentInterval(Record):
    """The share of good requests of a step, with its Clopper-Pearson interval (of the
    effective counts when ``windows`` > 1 showed a ``design_effect`` above 1; see
    ``workloads/attainment``)."""

    good: int = 0
    requests: int = 0
    confidence: float = 0.0
    low: float = 0.0
    high: float = 1.0
    method: str = "clopper-pearson"
    windows: int = 1
    design_effect: float = 1.0

    @property
    def share(self) -> float:
        return self.good / self.requests if self.requests else math.nan

    def decide(self, target: float) -> StepOutcome:
        """Pass when the whole interval reaches ``target``, miss when it lies below it."""
        if self.low >= target:
            return StepOutcome.PASS
        if self.high < target:
            return StepOutcome.MISS
        return StepOutcome.INCONCLUSIVE

    def text(self) -> str:
        """E.g. ``93.3% (28/30), 90% CI [80.9%, 98.8%]``; over several windows
        ``93.3% (28/30 in 3 windows, design effect 1.40), 95% CI [...]``."""
        counts = f"{self.good}/{self.requests}"
        if self.windows > 1:
            counts += f" in {self.windows} windows, design effect {self.design_effect:.2f}"
        return (f"{self.share:.1%} ({counts}), {100 * self.confidence:.4g}% CI "
                f"[{self.low:.1%}, {self.high:.1%}]")

    def written(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "good": self.good, "requests": self.requests, "share": self.share,
            "confidence": self.confidence, "low": self.low, "high": self.high,
            "method": self.method}
        if self.windows > 1:
            data.update(windows=self.windows, design_effect=self.design_effect)
        return data

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> AttainmentInterval:
        return cls(_int(data.get("good")) or 0, _int(data.get("requests")) or 0,
                   _float(data.get("confidence")) or 0.0, _float(data.get("low")) or 0.0,
                   _float_or_nan(data.get("high")), _str(data.get("method")) or "clopper-pearson",
                   _int(data.get("windows")) or 1, _float(data.get("design_effect")) or 1.0)


class RateWindow(Protocol):
    """What a rate step reads of one measured open-loop window."""

    @property
    def output_tokens_per_s(self) -> float: ...

    @property
    def violations(self) -> Sequence[str]: ...

    @property
    def offered_rps(self) -> float | None: ...

    @property
    def achieved_rps(self) -> float | None: ...

    @property
    def saturated(self) -> bool: ...

    @property
    def saturation_reason(self) -> str | None: ...


@dataclass(frozen=True)
class RateStep(Record):
    """One step of a rate sweep: a window at one rate and what it decided (``recorded``: the
    window's figures, once the step is recorded)."""

    rate: float = 0.0
    outcome: StepOutcome = StepOutcome.BROKEN
    interval: AttainmentInterval | None = None
    goodput_rps: float | None = None
    offered_rps: float | None = None
    achieved_rps: float | None = None
    output_tokens_per_s: float = 0.0
    saturation: str | None = None
    violations: tuple[str, ...] = ()
    recorded: ThroughputWindow | None = None

    @classmethod
    def decided(cls, rate: float, interval: AttainmentInterval | None,
                goodput_rps: float | None, window: RateWindow, target: float) -> RateStep:
        """The step a window measured: broken (rules broken, or no request), saturated, else
        what its attainment interval says against ``target``."""
        if window.violations or interval is None:
            outcome = StepOutcome.BROKEN
        elif window.saturated:
            outcome = StepOutcome.SATURATED
        else:
            outcome = interval.decide(target)
        return cls(rate=rate, outcome=outcome, interval=interval, goodput_rps=goodput_rps,
                   offered_rps=window.offered_rps, achieved_rps=window.achieved_rps,
                   output_tokens_per_s=window.output_tokens_per_s,
                   saturation=window.saturation_reason, violations=tuple(window.violations))

    @property
    def failed(self) -> bool:
        """A miss or a saturated step: the capacity lies below this rate."""
        return self.outcome in (StepOutcome.MISS, StepOutcome.SATURATED)

    @property
    def passed(self) -> bool:
        return self.outcome is StepOutcome.PASS

    def written(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "rate": self.rate, "outcome": str(self.outcome),
            "attainment": None if self.interval is None else self.interval.to_dict(),
            "goodput_rps": self.goodput_rps, "offered_rps": self.offered_rps,
            "achieved_rps": self.achieved_rps, "output_tokens_per_s": self.output_tokens_per_s,
            "saturation": self.saturation, "violations": list(self.violations)}
        if self.recorded is not None:
            data["window"] = self.recorded.to_dict()
        return data

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> RateStep:
        attainment, window = data.get("attainment"), data.get("window")
        return cls(
            rate=_float(data.get("rate")) or 0.0, outcome=_outcome(data.get("outcome")),
            interval=(AttainmentInterval.from_dict(attainment)
                      if isinstance(attainment, Mapping) else None),
            goodput_rps=_float(data.get("goodput_rps")), offered_rps=_float(data.get("offered_rps")),
            achieved_rps=_float(data.get("achieved_rps")),
            output_tokens_per_s=_float(data.get("output_tokens_per_s")) or 0.0,
            saturation=_str(data.get("saturation")), violations=_strs(data.get("violations")),
            recorded=ThroughputWindow.from_dict(window) if isinstance(window, Mapping) else None,
        )


@dataclass(frozen=True)
class RateBracket:
    """One model's capacity in requests/s and its sweep's bracket, as a comparison reads it."""

    capacity: float
    last_pass: float
    first_fail: float | None

    def as_list(self) -> list[float | None]:
        return [self.last_pass, self.first_fail]

    def text(self) -> str:
        """E.g. ``[1.41, 2]``; ``[64, open]`` when the sweep's maximum passed."""
        return (f"[{self.last_pass:.3g}, "
                f"{'open' if self.first_fail is None else f'{self.first_fail:.3g}'}]")


@dataclass(frozen=True)
class RateCapacityRatio:
    """Candidate ÷ reference capacity in requests/s, and the interval the two sweeps' brackets
    give it: ``low`` = candidate's last pass ÷ reference's first fail, ``high`` = candidate's
    first fail ÷ reference's last pass (infinite when the candidate passed at its sweep's
    maximum; 0 low when the reference did). Each bracket end is a step decided from its
    attainment interval, so both brackets hold their model's crossing rate, and the ratio
    interval the ratio of the crossings, unless a step was decided wrongly (the A/A error
    rate ``benches/perf/rate_capacity_simulation.py`` measures). ``degenerate``: both sweeps
    passed at their maximum, so the interval says nothing."""

    ratio: float
    low: float
    high: float
    candidate: RateBracket
    reference: RateBracket

    @property
    def degenerate(self) -> bool:
        return self.candidate.first_fail is None and self.reference.first_fail is None

    def text(self) -> str:
        """E.g. ``sweep interval 0.71–1.41`` (``0.71–∞`` when open above)."""
        high = "∞" if math.isinf(self.high) else f"{self.high:.2f}"
        return f"sweep interval {self.low:.2f}–{high}"

    def as_dict(self) -> dict[str, Any]:
        high = None if math.isinf(self.high) else self.high
        return {"ratio": self.ratio, "low": self.low, "high": high,
                "degenerate": self.degenerate,
                "candidate_capacity_rps": self.candidate.capacity,
                "reference_capacity_rps": self.reference.capacity,
                "candidate_bracket": self.candidate.as_list(),
                "reference_bracket": self.reference.as_list()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RateCapacityRatio | None:
        """Inverse of :meth:`as_dict`; None when ``data`` holds no readable ratio."""
        ratio, low, high = _float(data.get("ratio")), _float(data.get("low")), _float(data.get("high"))
        sides = []
        for role in ("candidate", "reference"):
            capacity, bracket = _float(data.get(f"{role}_capacity_rps")), data.get(f"{role}_bracket")
            if capacity is None or not isinstance(bracket, list) or len(bracket) != 2 \
                    or _float(bracket[0]) is None or not (bracket[1] is None or _float(bracket[1])):
                return None
            sides.append(RateBracket(capacity, float(bracket[0]),
                                     None if bracket[1] is None else float(bracket[1])))
        if ratio is None or low is None:
            return None
        return cls(ratio, low, math.inf if high is None else high, sides[0], sides[1])


@dataclass(frozen=True)
class RateCapacityStats(Record):
    """A sweep of open-loop rates under an SLO: ``capacity_rps`` (None when the sweep broke
    off: ``error`` says why), the ``bracket`` [last pass, first fail or None], the attainment
    ``target`` and each step's ``confidence``, the rates swept, why it ``stopped``, every step
    (its window recorded), contention, the figures at the capacity and the price."""

    capacity_rps: float | None = None
    bracket: tuple[float, float | None] | None = None
    target: float = 0.0
    confidence: float = 0.0
    start_rps: float = 0.0
    max_rps: float = 0.0
    burstiness: float = 1.0
    stopped: str = ""
    error: str | None = None
    steps: tuple[RateStep, ...] = ()
    contended: bool = False
    contended_windows: int = 0
    at_capacity: AtCapacity | None = None
    pricing: Pricing | None = None

    @property
    def saturated_at(self) -> float | None:
        """The lowest rate at which the server fell behind (None: it never did)."""
        rates = [s.rate for s in self.steps if s.outcome is StepOutcome.SATURATED]
        return min(rates) if rates else None

    @property
    def inconclusive_rates(self) -> list[float]:
        return [s.rate for s in self.steps if s.outcome is StepOutcome.INCONCLUSIVE]

    @property
    def capacity_step(self) -> RateStep | None:
        """The passing step at the capacity (None: none passed, or no capacity)."""
        if not self.capacity_rps:
            return None
        return next((s for s in self.steps if s.rate == self.capacity_rps and s.passed), None)

    @property
    def flags(self) -> tuple[str, ...]:
        """``contended``: what makes this sweep doubtful (its windows are open loops, whose
        requests queue by design, and a saturated step is a decision, not a doubt)."""
        return side_flags(unstable=False, cv=None, contended=self.contended)

    def written(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "capacity_rps": self.capacity_rps,
            "bracket": None if self.bracket is None else list(self.bracket),
            "target": self.target, "confidence": self.confidence, "start_rps": self.start_rps,
            "max_rps": self.max_rps, "burstiness": self.burstiness,
            "saturated_at": self.saturated_at, "inconclusive_rates": self.inconclusive_rates,
            "stopped": self.stopped, "error": self.error, "contended": self.contended,
            "contended_windows": self.contended_windows,
        }
        at = self.at_capacity
        if at is not None:
            data.update(output_tokens_per_s=at.output_tokens_per_s, goodput_rps=at.goodput_rps,
                        slo_attainment=at.slo_attainment)
            if self.pricing is not None:
                data["usd_per_million_output_tokens"] = at.usd_per_million_output_tokens
        if self.pricing is not None:
            data["pricing"] = self.pricing.as_dict()
        data["steps"] = [step.to_dict() for step in self.steps]
        return data

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> RateCapacityStats:
        bracket = data.get("bracket")
        pair: tuple[float, float | None] | None = None
        if isinstance(bracket, list) and len(bracket) == 2 and _float(bracket[0]) is not None \
                and (bracket[1] is None or _float(bracket[1]) is not None):
            pair = (float(bracket[0]), None if bracket[1] is None else float(bracket[1]))
        rate = _float(data.get("output_tokens_per_s"))
        at = None if rate is None else AtCapacity(
            rate, _float(data.get("goodput_rps")), _float(data.get("slo_attainment")), _usd(data))
        return cls(
            capacity_rps=_float(data.get("capacity_rps")), bracket=pair,
            target=_float(data.get("target")) or 0.0,
            confidence=_float(data.get("confidence")) or 0.0,
            start_rps=_float(data.get("start_rps")) or 0.0,
            max_rps=_float(data.get("max_rps")) or 0.0,
            burstiness=_float(data.get("burstiness")) or 1.0,
            stopped=_str(data.get("stopped")) or "", error=_str(data.get("error")),
            steps=_records(RateStep, data.get("steps")),
            contended=_bool(data.get("contended")) or False,
            contended_windows=_int(data.get("contended_windows")) or 0, at_capacity=at,
            pricing=_pricing(data.get("pricing")),
        )

    def measured_bracket(self) -> RateBracket:
        """The capacity and its bracket; ValueError for a sweep that concluded none."""
        capacity, bracket = self.capacity_rps, self.bracket
        if capacity is None or bracket is None:
            raise ValueError(f"a rate sweep without a capacity and its bracket (capacity "
                             f"{capacity!r}{f': {self.error}' if self.error else ''})")
        last_pass, first_fail = bracket
        if last_pass != capacity or not (first_fail is None or first_fail > last_pass):
            raise ValueError(f"a rate sweep whose bracket {list(bracket)} does not start at its "
                             f"capacity {capacity:g} req/s")
        return RateBracket(capacity, last_pass, first_fail)


@dataclass(frozen=True)
class RateCapacityRatioStats(Record):
    """A candidate's capacity in requests/s ÷ the reference's under one SLO: the interval the
    two sweeps give (:class:`RateCapacityRatio`), the tolerance and rule of the verdict, the
    attainment target and step confidence, each side's run and flags."""

    candidate: str = ""
    reference: str = ""
    metric: str = "rate_capacity"
    verdict: Verdict | None = None
    ratio: RateCapacityRatio | None = None
    tolerance: float = 0.0
    rule: str = ""
    attainment_target: float | None = None
    confidence: float | None = None
    candidate_run: str | None = None
    reference_run: str | None = None
    candidate_flags: tuple[str, ...] = ()
    reference_flags: tuple[str, ...] = ()

    def written(self) -> dict[str, Any]:
        return {"candidate": self.candidate, "reference": self.reference, "metric": self.metric,
                "verdict": None if self.verdict is None else self.verdict.value,
                **({} if self.ratio is None else self.ratio.as_dict()),
                "tolerance": self.tolerance, "rule": self.rule,
                "attainment_target": self.attainment_target, "confidence": self.confidence,
                "candidate_run": self.candidate_run, "reference_run": self.reference_run,
                "candidate_flags": list(self.candidate_flags),
                "reference_flags": list(self.reference_flags)}

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> RateCapacityRatioStats:
        return cls(
            _str(data.get("candidate")) or "", _str(data.get("reference")) or "",
            _str(data.get("metric")) or "rate_capacity", _verdict(data.get("verdict")),
            RateCapacityRatio.from_dict(data), _float(data.get("tolerance")) or 0.0,
            _str(data.get("rule")) or "", _float(data.get("attainment_target")),
            _float(data.get("confidence")),
            _str(data.get("candidate_run")), _str(data.get("reference_run")),
            _strs(data.get("candidate_flags")), _strs(data.get("reference_flags")),
        )

    def flags_text(self) -> str:
        return flags_text(self.candidate_flags, self.reference_flags)


# --------------------------------------------------------------------------- startup


@dataclass(frozen=True)
class CacheState(Record):
    """What was warm before one launch (``warm`` None: cannot be told): llama-server's model
    file in the page cache, or vLLM's compile caches."""

    kind: str = ""
    """``page-cache`` or ``compile-cache``."""
    warm: bool | None = None
    detail: str = ""
    resident_share: float | None = None
    evicted: bool = False

    def written(self) -> dict[str, Any]:
        return {"kind": self.kind, "warm": self.warm, "detail": self.detail,
                "resident_share": self.resident_share, "evicted": self.evicted}

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> CacheState:
        return cls(_str(data.get("kind")) or "", _bool(data.get("warm")),
                   _str(data.get("detail")) or "", _float(data.get("resident_share")),
                   _bool(data.get("evicted")) or False)


@dataclass(frozen=True)
class ColdStart(Record):
    """One fresh launch: seconds from spawn to ready and to the first token of the first
    request (``ready_within_s``: how late the readiness poll may have seen it); ``error``
    says why the first request failed (then ``first_token_s`` is None)."""

    launch: int = 0
    ready_s: float = 0.0
    ready_within_s: float = 0.0
    first_token_s: float | None = None
    first_request_ttft_s: float | None = None
    cache: CacheState = field(default_factory=CacheState)
    error: str | None = None

    def written(self) -> dict[str, Any]:
        return {"launch": self.launch, "ready_s": self.ready_s,
                "ready_within_s": self.ready_within_s, "first_token_s": self.first_token_s,
                "first_request_ttft_s": self.first_request_ttft_s,
                "cache": self.cache.to_dict(), "error": self.error}

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> ColdStart:
        return cls(_int(data.get("launch")) or 0, _float(data.get("ready_s")) or 0.0,
                   _float(data.get("ready_within_s")) or 0.0, _float(data.get("first_token_s")),
                   _float(data.get("first_request_ttft_s")), CacheState.from_dict(data.get("cache")),
                   _str(data.get("error")))


def _geometric_mean(values: Sequence[float]) -> float | None:
    if not values or not all(v > 0 for v in values):
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


@dataclass(frozen=True)
class StartupStats(Record):
    """A model's start over fresh launches: each launch's figures and cache state, the
    geometric means of launch → ready and launch → first token with their 95% intervals
    (:func:`~.stats.log_mean_interval`: none below two launches, or with a failed first
    request), and the launches' ``cache`` state in one word: ``cold`` (every launch read its
    files cold), ``warm``, ``mixed`` or ``unknown``."""

    backend: str = ""
    launches: tuple[ColdStart, ...] = ()

    @property
    def ready_values(self) -> list[float]:
        return [c.ready_s for c in self.launches]

    @property
    def first_token_values(self) -> list[float]:
        """Launch → first token of each launch whose first request got one."""
        return [c.first_token_s for c in self.launches if c.first_token_s is not None]

    @property
    def errors(self) -> list[str]:
        return [f"launch {c.launch}: {c.error}" for c in self.launches if c.error]

    @property
    def first_token_s(self) -> float | None:
        return _geometric_mean(self.first_token_values) if not self.errors else None

    @property
    def ready_s(self) -> float | None:
        return _geometric_mean(self.ready_values)

    @property
    def first_token_s_interval(self) -> tuple[float, float] | None:
        if self.errors:
            return None
        return log_mean_interval(self.first_token_values)

    @property
    def ready_s_interval(self) -> tuple[float, float] | None:
        return log_mean_interval(self.ready_values)

    @property
    def cache(self) -> str:
        """``cold``, ``warm``, ``mixed`` or ``unknown``: how cold the launches really were."""
        states = {c.cache.warm for c in self.launches}
        if not states or None in states:
            return "unknown"
        if states == {False}:
            return "cold"
        return "warm" if states == {True} else "mixed"

    def written(self) -> dict[str, Any]:
        first, ready = self.first_token_s_interval, self.ready_s_interval
        return {"backend": self.backend, "first_token_s": self.first_token_s,
                "first_token_s_interval": None if first is None else list(first),
                "ready_s": self.ready_s, "ready_s_interval": None if ready is None else list(ready),
                "cache": self.cache, "errors": self.errors,
                "launches": [c.to_dict() for c in self.launches]}

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> StartupStats:
        return cls(_str(data.get("backend")) or "", _records(ColdStart, data.get("launches")))


Stats = (AccuracyStats | ThroughputStats | CapacityStats | SmokeStats | ScreeningResult
         | AccuracyVerdictStats | ThroughputRatioStats | CapacityRatioStats | OtherStats
         | RateCapacityStats | RateCapacityRatioStats | StartupStats)
"""The ``stats`` of a measurement: one record per kind."""

StatsT = TypeVar("StatsT", AccuracyStats, ThroughputStats, CapacityStats, SmokeStats,
                 ScreeningResult, AccuracyVerdictStats, ThroughputRatioStats, CapacityRatioStats,
                 OtherStats, RateCapacityStats, RateCapacityRatioStats, StartupStats)

_BY_KIND: dict[Kind, type[Stats]] = {
    Kind.ACCURACY: AccuracyStats, Kind.THROUGHPUT: ThroughputStats,
    Kind.CAPACITY: CapacityStats, Kind.SMOKE: SmokeStats, Kind.SCREENING: ScreeningResult,
    Kind.RATE_CAPACITY: RateCapacityStats, Kind.STARTUP: StartupStats,
}
_BY_COMPARED: dict[Kind, type[Stats]] = {
    Kind.ACCURACY: AccuracyVerdictStats, Kind.THROUGHPUT: ThroughputRatioStats,
    Kind.CAPACITY: CapacityRatioStats, Kind.RATE_CAPACITY: RateCapacityRatioStats,
}


def stats_type(benchmark: str, unit: str | None) -> type[Stats]:
    """The record of a measurement's ``stats``, by its benchmark's kind (:func:`metric_for`)."""
    metric = metric_for(benchmark, unit)
    if metric is None:
        return OtherStats
    if metric.kind is Kind.COMPARISON:
        return _BY_COMPARED.get(metric.compares, OtherStats) if metric.compares else OtherStats
    return _BY_KIND.get(metric.kind, OtherStats)


# --------------------------------------------------------------------------- the measurement


@dataclass(frozen=True)
class Measurement(Record):
    """One recorded result of one test: a value with its unit, sample size and typed ``stats``.

    ``items`` are the scored items' dicts (:meth:`item_records` reads them), ``requests`` the
    timed requests', ``provenance`` the endpoint's. ``outcome`` (the test's, added when its
    report arrives) and ``run_id`` (added where measurements of several runs are listed) are
    written only when set. ``stats`` given as another kind's record, or as
    :class:`OtherStats`, is read as the benchmark's own kind.
    """

    model: str = ""
    benchmark: str = ""
    value: float = 0.0
    unit: str = ""
    n: int = 0
    params: dict[str, Any] = field(default_factory=dict)
    stats: Stats = field(default_factory=OtherStats)
    items: list[dict[str, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    provenance: dict[str, Any] = field(default_factory=dict)
    test_id: str = ""
    recorded_at: str = ""
    outcome: str | None = None
    run_id: str | None = None

    def __post_init__(self) -> None:
        expected = stats_type(self.benchmark, self.unit)
        if type(self.stats) is not expected:
            if not isinstance(self.stats, OtherStats):
                raise TypeError(f"a {self.benchmark!r} measurement in {self.unit!r} records "
                                f"{expected.__name__}, not {type(self.stats).__name__}")
            object.__setattr__(self, "stats", expected.from_dict(self.stats.to_dict()))

    def written(self) -> dict[str, Any]:
        data = {"model": self.model, "benchmark": self.benchmark, "value": self.value,
                "unit": self.unit, "n": self.n, "params": self.params,
                "stats": self.stats.to_dict(), "items": self.items, "requests": self.requests,
                "provenance": self.provenance, "test_id": self.test_id,
                "recorded_at": self.recorded_at}
        if self.outcome is not None:
            data["outcome"] = self.outcome
        if self.run_id is not None:
            data["run_id"] = self.run_id
        return data

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> Measurement:
        benchmark, unit = str(data.get("benchmark", "")), _str(data.get("unit")) or ""
        value = _float(data.get("value"))

        def listed(name: str) -> list[dict[str, Any]]:
            found = data.get(name)
            return [dict(v) for v in found if isinstance(v, Mapping)] \
                if isinstance(found, list) else []

        return cls(
            model=_str(data.get("model")) or "", benchmark=benchmark,
            value=math.nan if value is None else value, unit=unit, n=_int(data.get("n")) or 0,
            params=dict(_mapping(data.get("params"))),
            stats=stats_type(benchmark, unit).from_dict(data.get("stats")),
            items=listed("items"), requests=listed("requests"),
            provenance=dict(_mapping(data.get("provenance"))),
            test_id=_str(data.get("test_id")) or "", recorded_at=_str(data.get("recorded_at")) or "",
            outcome=_str(data.get("outcome")), run_id=_str(data.get("run_id")),
        )

    @property
    def passed(self) -> bool:
        """Whether the measurement's own test passed (a record without an outcome counts)."""
        return self.outcome in (None, "passed")

    def item_records(self) -> list[ItemRecord]:
        """The scored items."""
        return [ItemRecord.from_dict(item) for item in self.items]

    def request_records(self) -> list[RequestRecord]:
        """The timed requests (without the keys a workload adds to each: ``repeat``, ``step``,
        ``concurrency``)."""
        names = {f.name for f in fields(RequestRecord)}
        return [RequestRecord(**{k: v for k, v in r.items() if k in names}) for r in self.requests]


def measurements_of(data: Sequence[Mapping[str, Any]]) -> list[Measurement]:
    """The records of a results file's (or the store's) measurement dicts."""
    return [Measurement.from_dict(m) for m in data]


__all__ = [
    "DESIGN_BACK_TO_BACK", "DESIGN_INTERLEAVED", "SATURATED", "SERVER_QUEUED", "STOP_DECIDED",
    "STOP_FAILED", "STOP_FINAL", "AccuracySequence", "AccuracyStats", "AccuracyVerdictStats",
    "AtCapacity", "AttainmentInterval", "CacheState", "CapacityBracket", "CapacityRatio",
    "CapacityRatioStats", "CapacityStats", "CapacityStep", "ColdStart", "Contention",
    "GaugeSummary", "Interleaved", "InterleavedWindow", "Latency", "Measurement",
    "MetricsSample", "OpenLoop", "OtherStats", "RateBracket", "RateCapacityRatio",
    "RateCapacityRatioStats", "RateCapacityStats", "RateStep", "RateWindow", "Record",
    "SamplerCost", "Saturation", "ScreeningResult", "SequentialVerdict", "ServerMetricsSummary",
    "ServerMetricsWindow", "Shape", "SmokeStats", "StartupStats", "Stats", "StepDecision",
    "StepOutcome", "StepWindow", "ThroughputRatioStats", "ThroughputStats", "ThroughputWindow",
    "Window", "flags_text", "measurements_of", "side_flags", "stats_type",
]
