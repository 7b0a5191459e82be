"""pytest-modelsweep: LLM serving benchmarks as pytest test cases.

The names below are the public API for writing your own benchmark, stable by name
(docs/writing-benchmarks.md). The plugin imports this package in every pytest run, so the
names are loaded on first use (``from pytest_modelsweep import EvalItem``), not here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .core import __version__ as __version__

if TYPE_CHECKING:
    from .api import *  # noqa: F403 (the names of __all__, for type checkers)

__all__ = [
    "Completion",
    "EvalItem",
    "Evaluate",
    "EvaluationResult",
    "ItemRecord",
    "MeasureThroughput",
    "Score",
    "Scorer",
    "Summarise",
    "ToolCall",
    "load_prompts",
    "register_accuracy_metric",
]


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import api

    value = getattr(api, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
