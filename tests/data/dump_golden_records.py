"""Read the v1/v2 goldens into records and dump them in a neutral form (class name + fields).

Run at commit 080a7c2, before results schema 3, as ``python tests/data/dump_golden_records.py
tests/data``: it wrote ``results_v1_every_kind.records.json`` and ``results_v2_...``, which
tests/test_results_versions.py compares today's reading with.
"""

import dataclasses
import enum
import json
import math
import sys
from pathlib import Path

from pytest_modelsweep.core.measurements import measurements_of
from pytest_modelsweep.store.results import load_results


def neutral(value):
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {"__class__": type(value).__name__}
        for f in dataclasses.fields(value):
            if f.name == "shape":
                continue
            out[f.name] = neutral(getattr(value, f.name))
        return out
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): neutral(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [neutral(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return value


for name in ("results_v1_every_kind.json", "results_v2_every_kind.json"):
    data = load_results(Path("tests/data") / name)
    records = measurements_of(data["measurements"], where=name)
    out = [neutral(r) for r in records]
    for r, o in zip(records, out):
        if type(r.stats).__name__ == "OtherStats":
            o["stats"]["values"] = neutral(dict(r.stats.values))
    Path(sys.argv[1], name.replace(".json", ".records.json")).write_text(
        json.dumps(out, indent=1, sort_keys=True) + "\n"
    )
    print(name, len(out))
