"""Refusal to pair unlike results: different servers, images, settings, items or requests;
each check raises :class:`PairingError` in one line naming the first difference."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import ModelsweepError
from ..core.measurements import Measurement
from ..core.metrics import Kind, kind_of
from ..core.records import ItemRecord
from ..serving.endpoint import serving_identity


class PairingError(ModelsweepError):
    """Two results cannot be compared item by item."""


def _show(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def check_same_serving(
    candidate: str,
    candidate_provenance: dict[str, Any],
    reference: str,
    reference_provenance: dict[str, Any],
) -> None:
    """Raise :class:`PairingError` naming both values when the serving identities differ."""
    a = serving_identity(candidate_provenance)
    b = serving_identity(reference_provenance)
    flags_a, flags_b = a["serving_flags"], b["serving_flags"]
    differences = [
        f"{key} differs ({candidate}: {a.get(key)!r}, {reference}: {b.get(key)!r}); "
        "measure both with the same server build and image"
        for key in ("image_digest", "server_name", "server_version")
        if a.get(key) != b.get(key)
    ] + [
        f"serving setting {key} differs ({candidate}: {_show(flags_a.get(key))}, "
        f"{reference}: {_show(flags_b.get(key))}); serve every model with identical settings"
        for key in sorted(set(flags_a) | set(flags_b))
        if flags_a.get(key) != flags_b.get(key)
    ]
    if differences:
        raise PairingError(f"refusing to pair {candidate} with {reference}: {differences[0]}")


def check_same_items(
    candidate: str,
    candidate_items: Sequence[ItemRecord],
    reference: str,
    reference_items: Sequence[ItemRecord],
) -> None:
    """Raise :class:`PairingError` when the two item sets differ by id or by source data."""
    a = {r.item_id: r.data_hash for r in candidate_items}
    b = {r.item_id: r.data_hash for r in reference_items}
    only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
    if only_a or only_b:
        raise PairingError(
            f"refusing to pair {candidate} with {reference}: different items "
            f"({len(only_a)} only in {candidate}, e.g. {only_a[:3]}; {len(only_b)} only in "
            f"{reference}, e.g. {only_b[:3]}); run both on the same data and --limit"
        )
    changed = sorted(i for i in a if a[i] != b[i])
    if changed:
        raise PairingError(
            f"refusing to pair {candidate} with {reference}: {len(changed)} items have the same "
            f"id but different source data (e.g. {changed[:3]}); both must come from one data file"
        )


# --------------------------------------------------------------------------- request settings

NOT_REQUEST_PARAMS = frozenset(
    {
        "worker",
        "port",
        "repeat",
        "repeats",  # where and how often: not how requests were sent
        "prompting",
        "mode",  # how each model is prompted: its own (the prompt hashes cover it)
        "max_concurrency",  # the server's limit: compared by check_same_serving
        "launches",
        "cache",  # a cold start's count and cache state: its gate row compares them
        "sampling",
        "sampling_by_item",  # compared item by item
        "prompts_hash",
        "user_prompts",  # compared as the prompt source
        # a comparison's own record
        "reference",
        "verdict",
        "holm",
        "margin",
        "benchmark",
        "design",
    }
)
"""Measurement parameters that are not request settings (every other parameter is one)."""

KNOWN_REQUEST_PARAMS = frozenset(
    {
        "output_tokens",
        "timed_requests",
        "unique_prefixes",
        "max_tokens",
        "fewshot",
        "limit",
        "subset",
        "slo",
        "attainment_target",
        "step_confidence",
        "min_windows",
        "max_windows",
        "burstiness",
        "rate_sweep",
    }
)
"""Request settings of modelsweep's own benches: never part of a setting's identity, so that
measurements differing only in them are refused as unlike, not taken for two settings."""

COMPARED_KINDS = (Kind.ACCURACY, Kind.THROUGHPUT, Kind.CAPACITY, Kind.RATE_CAPACITY)

REQUEST_SETTING_ORDER = (
    "concurrency",
    "prompt_tokens",
    "output_tokens",
    "prompt source",
    "unique_prefixes",
    "timed_requests",
    "max_tokens",
    "limit",
    "subset",
    "slo",
    "attainment_target",
)
"""The request settings checked first, in this order (the others follow by name)."""

PROMPT_SOURCE = "prompt source"
DRAWN_PROMPTS = "drawn prompts"
NOT_RECORDED = "not recorded"
"""What a side that does not record a setting shows (e.g. written by an older modelsweep)."""


@dataclass(frozen=True)
class RequestSettings:
    """What one measurement's requests were sent with: ``settings`` by name (the ``prompt
    source`` among them), ``sampling`` per item id (None: not recorded), ``prompts``: item id
    → prompt hash."""

    model: str
    benchmark: str
    settings: Mapping[str, Any]
    sampling: Mapping[str, Mapping[str, Any]] | None = None
    prompts: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(
        cls, model: str, benchmark: str, params: Mapping[str, Any], items: Sequence[ItemRecord] = ()
    ) -> RequestSettings:
        """From a measurement's parameters and its scored items."""
        settings = {k: v for k, v in params.items() if k not in NOT_REQUEST_PARAMS}
        if "user_prompts" in params:
            digest = params.get("prompts_hash")
            settings[PROMPT_SOURCE] = (
                f"your prompts (hash {digest})" if isinstance(digest, str) else NOT_RECORDED
            )
        elif "concurrency" in params and "output_tokens" in params:
            settings[PROMPT_SOURCE] = DRAWN_PROMPTS
        sampling = None
        shared = params.get("sampling")
        if isinstance(shared, Mapping):
            by_item = params.get("sampling_by_item")
            by_item = by_item if isinstance(by_item, Mapping) else {}
            sampling = {r.item_id: {**shared, **(by_item.get(r.item_id) or {})} for r in items}
        return cls(model, benchmark, settings, sampling, {r.item_id: r.prompt_hash for r in items})

    @classmethod
    def of_measurement(cls, measurement: Measurement) -> RequestSettings:
        return cls.of(
            measurement.model, measurement.benchmark, measurement.params, measurement.item_records()
        )

    def ordered(self) -> list[str]:
        """The names of the settings, in the order they are checked."""
        first = [k for k in REQUEST_SETTING_ORDER if k in self.settings]
        return first + sorted(k for k in self.settings if k not in REQUEST_SETTING_ORDER)


def _value(value: Any) -> str:
    """A setting as a refusal shows it: text as it is, anything else as JSON."""
    return value if isinstance(value, str) else _show(value)


def _request_difference(
    candidate: str,
    a: RequestSettings,
    reference: str,
    b: RequestSettings,
) -> str | None:
    """The first difference between two measurements' request settings, in words, or None: a
    setting, a shared item's sampling, or (one model measured twice) a shared prompt hash."""
    names = a.ordered() + [k for k in b.ordered() if k not in a.settings]
    for name in names:
        x, y = a.settings.get(name, NOT_RECORDED), b.settings.get(name, NOT_RECORDED)
        if _show(x) != _show(y):
            return f"{name} differs ({candidate}: {_value(x)}, {reference}: {_value(y)})"
    shared = [i for i in a.prompts if i in b.prompts]
    if (a.sampling is None) != (b.sampling is None) and shared and a.model != b.model:
        # (one model measured twice: its prompt hashes, compared below, cover the sampling)
        side = candidate if a.sampling is None else reference
        return (
            f"the sampling settings of {side}'s requests (max_tokens, temperature, ...) are "
            f"{NOT_RECORDED} (measured by an older modelsweep)"
        )
    if a.sampling is not None and b.sampling is not None:
        for item_id in shared:
            x_item, y_item = a.sampling.get(item_id, {}), b.sampling.get(item_id, {})
            for name in list(x_item) + [k for k in y_item if k not in x_item]:
                x, y = x_item.get(name, NOT_RECORDED), y_item.get(name, NOT_RECORDED)
                if _show(x) != _show(y):
                    return (
                        f"item {item_id}'s {name} differs ({candidate}: {_value(x)}, "
                        f"{reference}: {_value(y)})"
                    )
    if a.model == b.model:
        for item_id in shared:
            if a.prompts[item_id] != b.prompts[item_id]:
                return (
                    f"item {item_id} was sent another request (prompt hash {candidate}: "
                    f"{a.prompts[item_id]}, {reference}: {b.prompts[item_id]})"
                )
    return None


def check_same_requests(
    candidate: str, a: RequestSettings, reference: str, b: RequestSettings
) -> None:
    """Raise :class:`PairingError` at the first difference of :func:`unlike_requests`."""
    refusal = unlike_requests(candidate, a, reference, b)
    if refusal is not None:
        raise PairingError(refusal)


def setting_identity(measurement: Measurement) -> dict[str, Any]:
    """The parameters that say *which* setting a measurement is (concurrency, prompt length,
    a user's own; an accuracy benchmark's category only): the same identity is compared."""
    params = measurement.params
    if kind_of(measurement.benchmark, measurement.unit) is Kind.ACCURACY:
        return {k: v for k, v in params.items() if k == "category"}
    return {
        k: v
        for k, v in params.items()
        if k not in NOT_REQUEST_PARAMS and k not in KNOWN_REQUEST_PARAMS
    }


def unlike_requests(
    candidate: str,
    a: RequestSettings,
    reference: str,
    b: RequestSettings,
) -> str | None:
    """The refusal to pair two measurements sent with different request settings, or None."""
    difference = _request_difference(candidate, a, reference, b)
    if difference is None:
        return None
    return (
        f"refusing to pair {candidate} with {reference} on {a.benchmark}: {difference}; "
        "measure both with the same request settings"
    )


def check_alike(measurements: Sequence[tuple[str, Measurement]]) -> None:
    """Raise :class:`PairingError` at the first two measurements of one compared benchmark and
    setting whose requests or items differ (each given with where it comes from)."""
    first: dict[tuple[str, str], tuple[str, Measurement]] = {}
    for where, measurement in measurements:
        if kind_of(measurement.benchmark, measurement.unit) not in COMPARED_KINDS:
            continue
        key = (measurement.benchmark, _show(setting_identity(measurement)))
        name = f"{measurement.model} in {where}"
        earlier, other = first.setdefault(key, (name, measurement))
        if other is measurement:
            continue
        check_same_requests(
            name,
            RequestSettings.of_measurement(measurement),
            earlier,
            RequestSettings.of_measurement(other),
        )
        if measurement.items or other.items:
            check_same_items(name, measurement.item_records(), earlier, other.item_records())


def measured_in_runs(
    measurements: Sequence[Mapping[str, Any]],
) -> list[tuple[str, Measurement]]:
    """A merged file's measurement dicts, each with where it comes from (``run R1``)."""
    return [(f"run {m.get('run_id')}", Measurement.from_dict(m)) for m in measurements]
