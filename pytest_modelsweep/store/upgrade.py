"""Results of schemas 1 and 2 as schema 3: one dict-to-dict upgrade, used by every reader (the
results file and its journal, the store's rows when it is opened, ``modelsweep store copy``).

Schemas 1 and 2 wrote some records' keys into their parent's object, under other names, or
only while a flag held; schema 3 writes each record as cattrs does (docs/results-schema.md,
"Schemas 1 and 2"). A value of the wrong type is left where it is, for the reader to refuse
in one line. Pure: no pytest.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any

from ..core.jsontext import NON_FINITE, restored
from ..core.measurements import (
    RATE,
    AccuracyStats,
    AccuracyVerdictStats,
    SearchRatioStats,
    SearchStats,
    ThroughputRatioStats,
    ThroughputStats,
    knob_of,
    stats_type,
)
from ..core.stats.bootstrap import PairedInterval
from ..core.stats.intervals import RatioInterval

SCHEMA = "pytest-modelsweep/results/3"
"""The results schema written; :data:`OLDER` are read through :func:`upgrade_measurement`."""
OLDER = ("pytest-modelsweep/results/1", "pytest-modelsweep/results/2")

Dict = dict[str, Any]


def _names(cls: type) -> list[str]:
    return [spec.name for spec in fields(cls)]


def _picked(data: Mapping[str, Any], names: list[str], when: str) -> Dict | None:
    """The keys ``names`` of ``data`` as one nested object, when ``data`` holds ``when``."""
    return {k: data[k] for k in names if k in data} if when in data else None


def _each(value: Any, upgrade: Callable[[Dict], Dict]) -> Any:
    """Each object of a list upgraded (anything else as it is, for the reader to refuse)."""
    return (
        [upgrade(dict(item)) if isinstance(item, Mapping) else item for item in value]
        if isinstance(value, list)
        else value
    )


def _set(data: Dict, name: str, value: Any) -> None:
    if value is not None:
        data[name] = value


def _renamed(data: Dict, names: Mapping[str, str]) -> Dict:
    for old, new in names.items():
        if old in data:
            data[new] = data.pop(old)
    return data


def _goodput(data: Mapping[str, Any]) -> Dict | None:
    """Goodput written beside a window's (or a setting's) own keys."""
    if "slo_good" not in data and "goodput_rps" not in data:
        return None
    goodput = _picked(data, ["goodput_rps", "slo_attainment", "slo"], "slo_good") or {}
    return goodput | {"good": data.get("slo_good", 0), "requests": data.get("slo_requests", 0)}


def _cost(data: Mapping[str, Any]) -> Dict | None:
    """A setting's cost written beside its own keys; None without a price."""
    return (
        {
            "usd_per_million_output_tokens": data.get("usd_per_million_output_tokens"),
            "interval": data.get("usd_per_million_output_tokens_interval"),
            "pricing": data["pricing"],
        }
        if "pricing" in data
        else None
    )


def _window(data: Dict) -> Dict:
    """A timed window: its goodput and open loop's arrivals nested, ``priced`` by its cost."""
    _set(data, "goodput", _goodput(data))
    data["priced"] = "usd_per_million_output_tokens" in data
    if isinstance(data.get("open_loop"), Mapping):
        loop = dict(data["open_loop"])
        arrivals = loop.pop("arrivals", None)
        if isinstance(arrivals, Mapping):
            names = ("rate", "burstiness", "ramp_up", "describe", "seed")
            loop.update({k: arrivals[k] for k in names if k in arrivals})
        data["open_loop"] = loop
    if isinstance(data.get("server_metrics"), Mapping):
        data["server_metrics"] = _renamed(dict(data["server_metrics"]), {"series": "samples"})
    return data


def _throughput(data: Dict) -> Dict:
    _renamed(data, {"output_tokens_per_s_interval": "interval"})
    _set(data, "goodput", _goodput(data))
    _set(data, "cost", _cost(data))
    data["repeats"] = _each(data.get("repeats"), _window)
    return data


_DECISION = {
    "window": "windows",
    "step_good": "good",
    "step_requests": "requests",
    "interval_confidence": "confidence",
    "design_effect": "design_effect",
}


_STEP_WINDOW = [
    "ttft",
    "tpot",
    "e2e",
    "fidelity",
    "contention",
    "server_metrics",
    "usd_per_million_output_tokens",
]
"""A concurrency step's window's figures (its timed requests are the step's ``requests``)."""


def _concurrency_step(data: Dict) -> Dict:
    """A concurrency step: its decision's keys as its ``interval``, an older step's outcome
    told by its window, its window's figures as ``recorded``."""
    decided = "outcome" in data and "attainment_interval" in data
    bounds = data.get("attainment_interval")
    if decided and isinstance(bounds, list) and len(bounds) == 2:
        data["interval"] = {"low": bounds[0], "high": bounds[1]}
        data["interval"].update({new: data[old] for old, new in _DECISION.items() if old in data})
    if not decided:
        broken = data.get("violations") or not data.get("requests")
        data["outcome"] = "broken" if broken else "pass" if data.get("passed") is True else "miss"
    recorded = {k: data[k] for k in _STEP_WINDOW if k in data}
    if "timed_requests" in data or "contention" in data:  # its requests: the step's own
        data["recorded"] = _window(recorded)
    return _renamed(data, {"concurrency": "value"}) | {"knob": "concurrency"}


def _rate_step(data: Dict) -> Dict:
    """A rate step: its pooled ``attainment`` (whose counts are its own) as its ``interval``."""
    attainment = data.pop("attainment", None)
    if isinstance(attainment, Mapping):
        data["interval"] = attainment
        data.update({k: attainment[k] for k in ("good", "requests") if k in attainment})
    if isinstance(data.get("window"), Mapping):
        data["recorded"] = _window(dict(data.pop("window")))
    return _renamed(data, {"rate": "value"}) | {"knob": RATE}


_AT_CAPACITY = [
    "output_tokens_per_s",
    "goodput_rps",
    "slo_attainment",
    "usd_per_million_output_tokens",
]


def _search(data: Dict, knob: str) -> Dict:
    _set(data, "at_capacity", _picked(data, _AT_CAPACITY, "output_tokens_per_s"))
    if knob == RATE:
        data.pop("capacity", None)
        data.setdefault("stopped", "")
        names = {
            "capacity_rps": "capacity",
            "start_rps": "start",
            "max_rps": "maximum",
            "inconclusive_rates": "inconclusive",
            "stopped": "reason",
        }
        data["steps"] = _each(data.get("steps"), _rate_step)
    else:
        names = {"max_concurrency_source": "source"}
        data["steps"] = _each(data.get("steps"), _concurrency_step)
    return _renamed(data, names) | {"knob": knob}


def _bracket(data: Mapping[str, Any], role: str, capacity: str, knob: str) -> Dict:
    side = {"capacity": data.get(capacity), "knob": knob}
    bracket = data.get(f"{role}_bracket")
    if isinstance(bracket, list) and len(bracket) == 2:
        side.update(last_pass=bracket[0], first_fail=bracket[1])
    return side


def _search_ratio(data: Dict, knob: str) -> Dict:
    """A capacity ratio: its ratio and both brackets as one ``ratio`` object."""
    rate = knob == RATE
    low, high, rps = ("low", "high", "_rps") if rate else ("bracket_low", "bracket_high", "")
    if "ratio" in data:
        data["ratio"] = {
            "ratio": data["ratio"],
            "low": data.get(low),
            "high": math.inf if data.get(high) is None else data[high],
            **{
                role: _bracket(data, role, f"{role}_capacity{rps}", knob)
                for role in ("candidate", "reference")
            },
            "confidence": None if rate else data.get("confidence"),
        }
    dropped = ("candidate_max_concurrency", "reference_max_concurrency") if rate else ()
    for name in (*dropped, *(() if rate else ("confidence",))):
        data.pop(name, None)
    return data | {"knob": knob}


def _stats(data: Dict, cls: type, knob: str) -> Dict:
    """One measurement's ``stats`` of the record ``cls``, as schema 3 writes them."""
    if cls is AccuracyStats:
        own = _names(cls)
        return {k: v for k, v in data.items() if k in own} | {
            "figures": {k: v for k, v in data.items() if k not in own}
        }
    if cls is ThroughputStats:
        return _throughput(data)
    if issubclass(cls, SearchStats):
        return _search(data, knob)
    if issubclass(cls, SearchRatioStats):
        return _search_ratio(data, knob)
    if cls is AccuracyVerdictStats:
        _set(data, "interval", _picked(data, _names(PairedInterval), "difference"))
    if cls is ThroughputRatioStats:
        _set(data, "interval", _picked(data, _names(RatioInterval), "ratio"))
        names = ["windows", "candidate_values", "reference_values"]
        _set(data, "interleaved", _picked(data, names, "windows"))
    return data


def upgrade_measurement(data: Any) -> Any:
    """A measurement dict of schema 1 or 2 as schema 3 writes it (anything that is not an
    object, or has stats that are not one, as it is: the reader refuses it)."""
    if not isinstance(data, Mapping):
        return data
    data = dict(restored(data))
    data.pop(NON_FINITE, None)
    benchmark, unit, stats = data.get("benchmark"), data.get("unit"), data.get("stats")
    if isinstance(benchmark, str) and isinstance(stats, Mapping):
        kind = stats_type(benchmark, unit if isinstance(unit, str) else None)
        data["stats"] = _stats(dict(stats), kind, knob_of(benchmark))
    return data


def upgrade_results(document: Any) -> Any:
    """A results document of schema 1 or 2 as schema 3 (any other as it is)."""
    if not isinstance(document, Mapping) or document.get("schema") not in OLDER:
        return document
    measurements = _each(document.get("measurements"), upgrade_measurement)
    return {**document, "schema": SCHEMA, "measurements": measurements}
