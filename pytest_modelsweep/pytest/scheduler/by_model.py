"""A pytest-xdist load-scope scheduler whose scope is the model: each model's tests on one
worker (not ``--dist loadgroup``, which pytest 9.2 with pytest-xdist 3.8 stops honouring)."""

from __future__ import annotations

from typing import Any

import pytest
from xdist.scheduler.loadscope import LoadScopeScheduling

from ...core.modelids import ModelIdParser


class ModelScheduling(LoadScopeScheduling):  # type: ignore[misc]
    """Scope = model; tests that belong to no model are each their own scope."""

    def __init__(self, config: pytest.Config, log: Any, parser: ModelIdParser) -> None:
        super().__init__(config, log)
        self.parser = parser

    def _split_scope(self, nodeid: str) -> str:
        model = self.parser.model_of(nodeid)
        return f"model:{model}" if model is not None else nodeid

    def schedule(self) -> None:
        """Scopes in collection order, the reference's first (``--loadscope-reorder`` could
        queue a candidate, whose comparisons wait for the reference, ahead of it)."""
        option = self.config.option
        reorder = getattr(option, "loadscopereorder", True)
        option.loadscopereorder = False
        try:
            super().schedule()
        finally:
            option.loadscopereorder = reorder
