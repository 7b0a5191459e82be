"""pytest-modelsweep: LLM serving benchmarks as pytest test cases.

The names below are the public API for writing your own benchmark
(docs/writing-benchmarks.md): a test declared with
``@pytest.mark.modelsweep_benchmark("my_eval")`` calls the ``evaluate`` fixture
with :class:`EvalItem` items and a :data:`Scorer`; one declared with
``kind="throughput"`` calls ``measure_throughput`` with prompts (:func:`load_prompts`).
They are stable by name.
The plugin imports this package in every pytest run, so the names are loaded on
first use (``from pytest_modelsweep import EvalItem``), not here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .evaluation import EvalItem, Evaluate, EvaluationResult, Score, Scorer, Summarise
    from .metrics import register_accuracy_metric
    from .prompts import MeasureThroughput, load_prompts
    from .records import Completion, ItemRecord, ToolCall

__version__ = "0.1.0"

_PUBLIC = {
    "Completion": "records",
    "EvalItem": "evaluation",
    "Evaluate": "evaluation",
    "EvaluationResult": "evaluation",
    "ItemRecord": "records",
    "MeasureThroughput": "prompts",
    "Score": "evaluation",
    "Scorer": "evaluation",
    "Summarise": "evaluation",
    "ToolCall": "records",
    "load_prompts": "prompts",
    "register_accuracy_metric": "metrics",
}
"""Public name → the module that defines it."""

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
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])
