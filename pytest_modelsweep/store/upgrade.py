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

from ..core.jsontext import NON_FINITE, int_or_none, number_or_none, restored
from ..core.measurements import (
    RATE,
    AccuracyStats,
    AccuracyVerdictStats,
    SearchRatioStats,
    SearchStats,
    StepWindow,
    ThroughputRatioStats,
    ThroughputStats,
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
    if not isinstance(value, list):
        return value
    return [upgrade(dict(item)) if isinstance(item, Mapping) else item for item in value]


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
    slo = data.get("slo")
    return {
        "goodput_rps": number_or_none(data.get("goodput_rps")),
        "slo_attainment": number_or_none(data.get("slo_attainment")),
        "good": int_or_none(data.get("slo_good")) or 0,
        "requests": int_or_none(data.get("slo_requests")) or 0,
        "slo": _slo(slo) if isinstance(slo, Mapping) else None,
    }


def _slo(data: Mapping[str, Any]) -> Dict | None:
    names = ("ttft_ms", "tpot_ms", "e2e_ms")
    given = {name: data.get(name) for name in names}
    if any(not isinstance(v, int | float) or isinstance(v, bool) for v in given.values() if v):
        return None
    return {name: None if v is None else float(v) for name, v in given.items()}


def _cost(data: Mapping[str, Any]) -> Dict | None:
    """A setting's cost written beside its own keys; None without a readable price."""
    pricing = data.get("pricing")
    price = number_or_none(pricing.get("usd_per_hour")) if isinstance(pricing, Mapping) else None
    if price is None or not isinstance(pricing, Mapping):
        return None
    interval = data.get("usd_per_million_output_tokens_interval")
    low, high = interval if isinstance(interval, list) and len(interval) == 2 else (None, None)
    low, high = number_or_none(low), number_or_none(high)
    return {
        "usd_per_million_output_tokens": number_or_none(data.get("usd_per_million_output_tokens")),
        "interval": None if low is None or high is None else [low, high],
        "pricing": {
            "usd_per_hour": price,
            "source": str(pricing.get("source") or ""),
            "as_of": str(pricing.get("as_of") or ""),
            "example": pricing.get("example") is True,
        },
    }


def _metrics(data: Dict) -> Dict:
    return _renamed(data, {"series": "samples"})


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
        data["server_metrics"] = _metrics(dict(data["server_metrics"]))
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
    recorded = _picked(data, _names(StepWindow), "timed_requests") or _picked(
        data, _names(StepWindow), "contention"
    )
    if recorded is not None:
        data["recorded"] = {"_type": "StepWindow", **_window(recorded)}
    return _renamed(data, {"concurrency": "value"}) | {"knob": "concurrency"}


def _rate_step(data: Dict) -> Dict:
    """A rate step: its pooled ``attainment`` (whose counts are its own) as its ``interval``."""
    attainment = data.pop("attainment", None)
    if isinstance(attainment, Mapping):
        data["interval"] = attainment
        data.update({k: attainment[k] for k in ("good", "requests") if k in attainment})
    if isinstance(data.get("window"), Mapping):
        data["recorded"] = {"_type": "ThroughputWindow", **_window(dict(data.pop("window")))}
    return _renamed(data, {"rate": "value"}) | {"knob": RATE}


def _at_capacity(data: Dict) -> None:
    names = ["output_tokens_per_s", "goodput_rps", "slo_attainment"]
    at = _picked(data, [*names, "usd_per_million_output_tokens"], "output_tokens_per_s")
    _set(data, "at_capacity", at)


def _search(data: Dict, knob: str) -> Dict:
    _at_capacity(data)
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


def _stats(data: Dict, cls: type) -> Dict:
    """One measurement's ``stats`` of the record ``cls``, as schema 3 writes them."""
    if cls is AccuracyStats:
        own = _names(cls)
        return {k: v for k, v in data.items() if k in own} | {
            "figures": {k: v for k, v in data.items() if k not in own}
        }
    if cls is ThroughputStats:
        return _throughput(data)
    if issubclass(cls, SearchStats):
        return _search(data, cls().knob)
    if issubclass(cls, SearchRatioStats):
        return _search_ratio(data, cls().knob)
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
        data["stats"] = _stats(dict(stats), kind)
    return data


def upgrade_results(document: Any) -> Any:
    """A results document of schema 1 or 2 as schema 3 (any other as it is)."""
    if not isinstance(document, Mapping) or document.get("schema") not in OLDER:
        return document
    measurements = document.get("measurements")
    if isinstance(measurements, list):
        measurements = [upgrade_measurement(m) for m in measurements]
    return {**document, "schema": SCHEMA, "measurements": measurements}
