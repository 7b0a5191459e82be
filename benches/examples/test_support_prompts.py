"""Support prompts: a throughput benchmark over your own prompts, the example to copy.

20 customer-support requests (``support_prompts.txt``, written for this example), sent in
turn with exactly 1 or 4 in flight, 128 generated tokens each, every prompt behind a lead
word of its own so that the prefix cache cannot help. ``pytest benches/examples -m
support_prompts`` measures every model of the sweep and each candidate's throughput ÷ the
reference's (``test_throughput_ratio[<candidate>-support_prompts-c4]``). The walk-through is
docs/writing-benchmarks.md, "Throughput benchmarks".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_modelsweep import MeasureThroughput, load_prompts

PROMPTS = load_prompts(Path(__file__).with_name("support_prompts.txt"))


@pytest.mark.modelsweep_benchmark("support_prompts", kind="throughput")
@pytest.mark.parametrize("concurrency", [1, 4], ids=lambda c: f"c{c}")
def test_support_prompts(measure_throughput: MeasureThroughput, concurrency: int) -> None:
    measure_throughput("support_prompts", PROMPTS, concurrency=concurrency, output_tokens=128)
