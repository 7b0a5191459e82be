"""Which xdist scheduler a run gets: the user's, unless it collects modelsweep tests.

xdist asks for its scheduler before any worker has collected, so :class:`SchedulingByCollection`
starts as the user's and decides once every collection is in: no modelsweep test, the user's
goes on; under ``--dist load`` (``-n N`` alone), :class:`.by_model.ModelScheduling` takes
over; under any other mode, a usage error (each model's server lives on one worker).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

OURS = "load"
"""The ``--dist`` mode under which modelsweep tests are scheduled by model."""


class SchedulingByCollection:
    """Delegates to the user's scheduler until the collections show modelsweep tests."""

    def __init__(self, config: pytest.Config, log: Any, dist: str, user: Any) -> None:
        self.config = config
        self.log = log
        self.dist = dist
        self.current = user
        self.decided = False
        self._nodes: list[Any] = []
        self._collections: list[tuple[Any, Sequence[str]]] = []

    # -- what DSession tells every scheduler before the choice ---------------------
    def add_node(self, node: Any) -> None:
        self._nodes.append(node)
        self.current.add_node(node)

    def add_node_collection(self, node: Any, collection: Sequence[str]) -> None:
        self._collections.append((node, collection))
        self.current.add_node_collection(node, collection)

    def remove_node(self, node: Any) -> str | None:
        if node in self._nodes:
            self._nodes.remove(node)
        self._collections = [(n, c) for n, c in self._collections if n is not node]
        return self.current.remove_node(node)  # type: ignore[no-any-return]

    @property
    def collection_is_completed(self) -> bool:
        completed = bool(self.current.collection_is_completed)
        if completed and not self.decided:
            self._decide()
        return completed

    def _decide(self) -> None:
        self.decided = True
        from ...core.modelids import ModelIdParser
        from ...core.sweep import load_sweep

        sweep = load_sweep(self.config.option.sweep)
        parser = ModelIdParser(sweep.models)
        collected = {test for _, collection in self._collections for test in collection}
        if not any(parser.model_of(test) is not None for test in collected):
            return
        if self.dist != OURS:
            raise pytest.UsageError(
                f"--dist {self.dist} would spread one model's tests over several xdist workers, "
                "but each model's server must run on exactly one worker (one chip per model): use "
                "-n N alone (modelsweep then schedules by model), or --dist each to measure every "
                "model on every worker"
            )
        from .by_model import ModelScheduling

        ours = ModelScheduling(self.config, self.log, parser)
        for node in self._nodes:
            ours.add_node(node)
        for node, collection in self._collections:
            ours.add_node_collection(node, collection)
        self.current = ours

    # -- everything else goes to the chosen scheduler ------------------------------
    def __getattr__(self, name: str) -> Any:
        return getattr(self.current, name)
