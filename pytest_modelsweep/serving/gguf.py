"""The header of a GGUF model file: what model it says it is, read without loading it.

GGUF v2/v3 (llama.cpp's ``docs/gguf.md``): magic, version, tensor count, metadata pairs.
Only the scalar ``general.*`` values are kept; arrays (the vocabulary) are skipped.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from ..core.errors import ProvisionError

MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)

_SCALARS = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}
_STRING, _ARRAY = 8, 9
_MAX_KEY_BYTES = 1 << 16
_MAX_STRING_BYTES = 1 << 26
_MAX_PAIRS = 1 << 20

FILE_TYPES = {
    0: "F32",
    1: "F16",
    2: "Q4_0",
    3: "Q4_1",
    7: "Q8_0",
    8: "Q5_0",
    9: "Q5_1",
    10: "Q2_K",
    11: "Q3_K_S",
    12: "Q3_K_M",
    13: "Q3_K_L",
    14: "Q4_K_S",
    15: "Q4_K_M",
    16: "Q5_K_S",
    17: "Q5_K_M",
    18: "Q6_K",
    19: "IQ2_XXS",
    20: "IQ2_XS",
    21: "Q2_K_S",
    22: "IQ3_XS",
    23: "IQ3_XXS",
    24: "IQ1_S",
    25: "IQ4_NL",
    26: "IQ3_S",
    27: "IQ3_M",
    28: "IQ2_S",
    29: "IQ2_M",
    30: "IQ4_XS",
    31: "IQ1_M",
    32: "BF16",
    36: "TQ1_0",
    37: "TQ2_0",
    38: "MXFP4_MOE",
}
"""llama.cpp's ``llama_ftype`` (``general.file_type``): the quantization a file is labelled with."""


@dataclass(frozen=True)
class GgufHeader:
    """What a GGUF file says it holds."""

    version: int
    tensor_count: int
    architecture: str
    name: str
    file_type: str
    """The ``general.file_type`` label, e.g. ``Q4_K_M`` (``unknown`` when absent)."""
    general: dict[str, str | int | float | bool] = field(default_factory=dict)
    """Every scalar ``general.*`` value (license, basename, size label, ...)."""

    def as_dict(self) -> dict[str, str | int]:
        """The identifying fields, as provenance records them."""
        return {
            "gguf_version": self.version,
            "architecture": self.architecture,
            "name": self.name,
            "file_type": self.file_type,
        }


@dataclass(frozen=True)
class _Reader:
    handle: BinaryIO
    path: Path

    def bad(self, why: str) -> ProvisionError:
        return ProvisionError(
            f"{self.path}: not a readable GGUF file ({why}); fetch the model again"
        )

    def take(self, size: int) -> bytes:
        data = self.handle.read(size)
        if len(data) != size:
            raise self.bad("the header ends early")
        return data

    def scalar(self, fmt: str) -> str | int | float | bool:
        value: str | int | float | bool = struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]
        return value

    def count(self) -> int:
        return int(self.scalar("<Q"))

    def raw_string(self, limit: int = _MAX_STRING_BYTES) -> bytes:
        size = self.count()
        if size > limit:
            raise self.bad(f"a string of {size} bytes")
        return self.take(size)

    def string(self, limit: int = _MAX_STRING_BYTES) -> str:
        return self.raw_string(limit).decode("utf-8", "replace")

    def value(self, kind: int) -> str | int | float | bool | None:
        """A scalar or string value; arrays are skipped (None)."""
        if kind in _SCALARS:
            return self.scalar(_SCALARS[kind])
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            element, length = int(self.scalar("<I")), self.count()
            if element in _SCALARS:
                self.take(struct.calcsize(_SCALARS[element]) * length)
            elif element == _STRING:
                for _ in range(length):
                    self.raw_string()
            elif element == _ARRAY:
                for _ in range(length):
                    self.value(_ARRAY)
            else:
                raise self.bad(f"array element type {element}")
            return None
        raise self.bad(f"value type {kind}")


def read_gguf_header(path: Path) -> GgufHeader:
    """The header of ``path``; a file that is not GGUF v2/v3 raises :class:`ProvisionError`."""
    with open(path, "rb", buffering=1 << 20) as handle:
        reader = _Reader(handle, path)
        if handle.read(4) != MAGIC:
            raise reader.bad("it does not start with GGUF")
        version = int(reader.scalar("<I"))
        if version not in SUPPORTED_VERSIONS:
            raise reader.bad(f"GGUF version {version}, expected 2 or 3")
        tensors, pairs = reader.count(), reader.count()
        if pairs > _MAX_PAIRS:
            raise reader.bad(f"{pairs} metadata pairs")
        general: dict[str, str | int | float | bool] = {}
        for _ in range(pairs):
            key = reader.string(_MAX_KEY_BYTES)
            value = reader.value(int(reader.scalar("<I")))
            if key.startswith("general.") and value is not None:
                general[key.removeprefix("general.")] = value
    file_type = general.get("file_type")
    return GgufHeader(
        version=version,
        tensor_count=tensors,
        architecture=str(general.get("architecture", "")),
        name=str(general.get("name", "")),
        file_type=(
            FILE_TYPES.get(file_type, f"type {file_type}")
            if isinstance(file_type, int) and not isinstance(file_type, bool)
            else "unknown"
        ),
        general=general,
    )
