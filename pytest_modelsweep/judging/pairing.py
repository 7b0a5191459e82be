"""Refusal to pair unlike results: different servers, images, settings or items."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..core.errors import ModelsweepError
from ..core.records import ItemRecord
from ..serving.endpoint import serving_identity


class PairingError(ModelsweepError):
    """Two results cannot be compared item by item."""


def _show(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def check_same_serving(
    candidate: str, candidate_provenance: dict[str, Any],
    reference: str, reference_provenance: dict[str, Any],
) -> None:
    """Raise :class:`PairingError` naming both values when the serving identities differ."""
    a = serving_identity(candidate_provenance)
    b = serving_identity(reference_provenance)
    for key in ("image_digest", "server_name", "server_version"):
        if a.get(key) != b.get(key):
            raise PairingError(
                f"refusing to pair {candidate} with {reference}: {key} differs "
                f"({candidate}: {a.get(key)!r}, {reference}: {b.get(key)!r}); "
                "measure both with the same server build and image"
            )
    flags_a, flags_b = a["serving_flags"], b["serving_flags"]
    for key in sorted(set(flags_a) | set(flags_b)):
        if flags_a.get(key) != flags_b.get(key):
            raise PairingError(
                f"refusing to pair {candidate} with {reference}: serving setting {key} differs "
                f"({candidate}: {_show(flags_a.get(key))}, {reference}: {_show(flags_b.get(key))}); "
                "serve every model with identical settings"
            )


def check_same_items(
    candidate: str, candidate_items: Sequence[ItemRecord],
    reference: str, reference_items: Sequence[ItemRecord],
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
