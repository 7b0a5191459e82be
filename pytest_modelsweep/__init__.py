"""pytest-modelsweep: LLM serving benchmarks as pytest test cases.

The names below are the public API for writing your own benchmark
(docs/writing-benchmarks.md): a test declared with
``@pytest.mark.modelsweep_benchmark("my_eval")`` calls the ``evaluate`` fixture
with :class:`EvalItem` items and a :data:`Scorer`. They are stable by name.
Importing them loads nothing heavy (the plugin imports this package in every run).
"""

from __future__ import annotations

from .evaluation import EvalItem, Evaluate, EvaluationResult, Score, Scorer, Summarise
from .metrics import register_accuracy_metric
from .records import Completion, ItemRecord, ToolCall

__version__ = "0.1.0"

__all__ = [
    "Completion",
    "EvalItem",
    "Evaluate",
    "EvaluationResult",
    "ItemRecord",
    "Score",
    "Scorer",
    "Summarise",
    "ToolCall",
    "register_accuracy_metric",
]
