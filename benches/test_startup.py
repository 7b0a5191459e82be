"""Cold start: from launching a model's server to the first token of its first request.

``test_startup`` launches each model's server ``--startup-launches`` times (default 3),
each a fresh process through the same launch path as every other test's server, stopped
before the next, and records launch → ready (``/health`` answers) and launch → first token
(a short streamed completion sent as soon as the server is up), with 95% intervals of
their geometric means. Each launch says what was warm: llama-server's model file is
dropped from the page cache before every launch and its residency measured (a file still
resident is a warm start and is said to be); vLLM's torch.compile and XLA caches are
inspected (a warm compile cache is not a cold start). These tests run first among a
model's tests, before the run's own server of it starts. A model attached with
``--endpoint`` skips: its start is not this run's to time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


@pytest.mark.startup
def test_startup(model_name: str, measure_startup: Callable[[], Any]) -> None:
    measure_startup()
