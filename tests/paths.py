"""Paths the project's tests share (read before pytester moves HOME)."""

from __future__ import annotations

from pathlib import Path

from pytest_modelsweep.serving.provision import cache_root

# Tests that start the embedded servers use the machine's real cache: llama-server is
# built there once, never per test.
REAL_CACHE = cache_root()
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
