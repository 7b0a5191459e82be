"""JSON values as the results file and the store hold them: strict text (:func:`strict_json`:
a NaN or infinity is null, listed under :data:`NON_FINITE`), read back (:func:`restored`), and
a number read leniently where a figure is optional. Pure: no pytest.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Mapping
from typing import Any


def number_or_none(value: Any) -> float | None:
    """A JSON number (not a bool) as a float, anything else as None."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def int_or_none(value: Any) -> int | None:
    """A JSON integer (not a bool), anything else as None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


NON_FINITE = "non_finite"
"""The key listing what a written object held that JSON cannot: path → ``nan``/``inf``/``-inf``."""


def finite(value: Any) -> Any:
    """``value`` with each NaN or infinity as None; an object that held one lists them under
    :data:`NON_FINITE` (``stats.repeats[0].fidelity``: ``nan``), beside those listed before."""
    found: dict[str, str] = {}

    def walk(item: Any, path: str) -> Any:
        if isinstance(item, float) and not math.isfinite(item):
            found[path] = repr(item)
            return None
        if isinstance(item, Mapping):
            return {k: walk(v, f"{path}.{k}" if path else str(k)) for k, v in item.items()}
        if isinstance(item, list | tuple):
            return [walk(v, f"{path}[{i}]") for i, v in enumerate(item)]
        return item

    written = walk(value, "")
    if found and isinstance(written, dict):
        before = written.get(NON_FINITE)
        written[NON_FINITE] = {**(before if isinstance(before, dict) else {}), **found}
    return written


def strict_json(value: Any, **options: Any) -> str:
    """JSON text every parser reads (:func:`finite`); a non-finite float left is a ValueError."""
    return json.dumps(finite(value), allow_nan=False, **options)


def restored(data: Any) -> Any:
    """A dict :func:`finite` wrote, with each infinity it listed back in place (a NaN reads
    back from its null by itself)."""
    listed = data.get(NON_FINITE) if isinstance(data, Mapping) else None
    if not isinstance(listed, Mapping) or not any(v in ("inf", "-inf") for v in listed.values()):
        return data
    data = json.loads(json.dumps(data))  # a copy: the caller's dict stays as read
    for path, kind in listed.items():
        steps = [int(s) if s.isdigit() else s for s in re.findall(r"[^.\[\]]+", str(path))]
        parent = data
        for step in steps[:-1]:
            parent = parent[step] if isinstance(parent, dict | list) else None
        if kind in ("inf", "-inf") and isinstance(parent, dict | list) and steps:
            with contextlib.suppress(IndexError, KeyError, TypeError):
                if parent[steps[-1]] is None:
                    parent[steps[-1]] = float(kind)
    return data
