"""What the pytest objects of a run tell modelsweep: its state, a test's model, a test's records.

This module sits below both :mod:`~pytest_modelsweep.plugin` and
:mod:`~pytest_modelsweep.fixtures`, so neither imports the other. "Which model
is this test for" is answered here only: from a collected item's parameters
(:func:`model_of_item`) or, where only a test id is at hand (xdist's
scheduler, test reports), from the id (:class:`~pytest_modelsweep.modelids.ModelIdParser`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .state import RunState

run_state_key = pytest.StashKey["RunState"]()
"""``config.stash[run_state_key]``: the run's one :class:`~pytest_modelsweep.state.RunState`."""

measurements_key = pytest.StashKey[list[dict[str, Any]]]()
"""``item.stash[measurements_key]``: what a test recorded, carried on its report."""

MODEL_PARAMS = ("model_name", "candidate_name")
"""The parameters that make a test a modelsweep test (the plugin parametrizes them)."""


def model_of_item(item: pytest.Item) -> str | None:
    """The model a collected test belongs to (its ``model_name`` or ``candidate_name`` parameter)."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    for param in MODEL_PARAMS:
        value = callspec.params.get(param)
        if isinstance(value, str):
            return value
    return None


def has_param_values(item: pytest.Item, params: Mapping[str, Any]) -> bool:
    """Whether a collected test runs with ``params`` (a parameter it lacks counts as None)."""
    callspec = getattr(item, "callspec", None)
    values = callspec.params if callspec is not None else {}
    return all(values.get(name) == value for name, value in params.items())


def tests_in_session(
    session: pytest.Session, model: str, benchmark: str,
    params: Mapping[str, Any] | None = None,
) -> list[str]:
    """This session's (every worker's) tests that record ``model``'s own ``benchmark`` result;
    with ``params``, only those whose parameters have these values, e.g.
    ``{"concurrency": 16, "prompt_tokens": None}``."""
    return [
        item.nodeid for item in session.items
        if model_of_item(item) == model
        and item.get_closest_marker(benchmark) is not None
        and item.get_closest_marker("verdict") is None
        and (params is None or has_param_values(item, params))
    ]
