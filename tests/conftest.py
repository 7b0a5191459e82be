"""Shared fixtures of the project's own tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_modelsweep.serving.provision import cache_root

# Read before pytester moves HOME: tests that start the embedded servers use the
# machine's real cache (llama-server is built there once, never per test).
REAL_CACHE = cache_root()
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture
def real_cache(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Point MODELSWEEP_CACHE at the machine's cache, also for pytester subprocesses."""
    monkeypatch.setenv("MODELSWEEP_CACHE", str(REAL_CACHE))
    yield REAL_CACHE
