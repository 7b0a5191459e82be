"""What users import (``from pytest_modelsweep import EvalItem, ...``): the public API.

The package root loads them from here on first use: the plugin pays nothing for them.
"""

from ..core.metrics import register_accuracy_metric
from ..core.records import Completion, ItemRecord, ToolCall
from .evaluation import EvalItem, Evaluate, EvaluationResult, Score, Scorer, Summarise
from .prompts import MeasureThroughput, load_prompts

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
