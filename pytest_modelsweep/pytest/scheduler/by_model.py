"""A pytest-xdist scheduler that keeps each model's tests on one worker.

It is a load-scope scheduler whose scope is the model: one work unit per
model, handed whole to one worker. It does not depend on ``--dist loadgroup``,
which pytest 9.2 with pytest-xdist 3.8 silently stops honouring (tests of one
group land on several workers); the plugin's start-once guard
(:class:`~pytest_modelsweep.serving.pool.EndpointPool`) fails loudly if a
model's server is ever asked to start on a second worker anyway.
"""

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
        """Hand out scopes in collection order: the reference's first, then the candidates'.

        xdist's ``--loadscope-reorder`` (on by default) would sort scopes by size, and a
        worker could then hold a candidate (whose comparison tests wait for the
        reference's results) ahead of the reference itself in its own queue. In
        collection order a worker that gets both always runs the reference first.
        """
        option = self.config.option
        reorder = getattr(option, "loadscopereorder", True)
        option.loadscopereorder = False
        try:
            super().schedule()
        finally:
            option.loadscopereorder = reorder
