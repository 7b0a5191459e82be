"""Shared by the tests: moved from test_startup.py."""

from __future__ import annotations

import os
import struct
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


FAKE = ROOT / "tests" / "support" / "fake_llama_server.py"


def gguf(path: Path) -> Path:
    """A GGUF v3 file with a header and no tensors (llama-server's stand-in reads nothing)."""

    def text(value: str) -> bytes:
        return struct.pack("<Q", len(value.encode())) + value.encode()

    pairs = [("general.architecture", "fake"), ("general.name", "Fake")]
    body = (
        b"GGUF"
        + struct.pack("<IQQ", 3, 0, len(pairs))
        + b"".join(text(key) + struct.pack("<I", 8) + text(value) for key, value in pairs)
    )
    with open(path, "wb") as handle:
        handle.write(body + b"\0" * 65536)
        handle.flush()
        os.fsync(handle.fileno())  # clean pages: the bench's eviction can drop them
    return path
