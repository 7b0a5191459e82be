"""The metric table: the benches' markers and benchmarks are in it, and gate and reports obey it."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from pytest_modelsweep.core import metrics
from pytest_modelsweep.core.measurements import measurements_of
from pytest_modelsweep.core.metrics import (
    MARKERS,
    METRICS,
    Kind,
    Metric,
    benchmarks_of,
    kind_of,
    markers,
    metric_for,
    rank,
    verdict_metric,
)
from pytest_modelsweep.core.options import Thresholds
from pytest_modelsweep.core.records import ItemRecord
from pytest_modelsweep.judging.gate import GateRow
from pytest_modelsweep.judging.gate import compare_with_baseline as compare_records
from pytest_modelsweep.report.tables import measurement_kind, records, summary_tables
from pytest_modelsweep.report.terminal import gate_table

BENCHES = Path(__file__).resolve().parents[1] / "benches"
PYTEST_OWN_MARKS = {"parametrize", "skip", "skipif", "xfail", "usefixtures", "filterwarnings"}


def bench_trees() -> list[ast.Module]:
    files = sorted(BENCHES.glob("test_*.py"))
    assert files, f"no bench files under {BENCHES}"
    return [ast.parse(path.read_text(), str(path)) for path in files]


def markers_used_in_benches() -> set[str]:
    """Every ``pytest.mark.<name>`` in the bench files, pytest's own marks left out, and every
    benchmark a bench declares (``pytest.mark.modelsweep_benchmark("name")`` marks it ``name``)."""
    used = set()
    for tree in bench_trees():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Attribute)
                and node.value.attr == "mark"
                and isinstance(node.value.value, ast.Name)
                and node.value.value.id == "pytest"
            ):
                used.add(node.attr)
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == metrics.BENCHMARK_MARKER
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                used.add(str(node.args[0].value))
    return used - PYTEST_OWN_MARKS


def benchmarks_recorded_in_benches() -> set[str]:
    """Benchmark names passed to ``record_measurement`` or ``evaluate`` or set as a parameter
    in benches, and recorded by the package on the benches' behalf (the workloads'
    ``record_measurement`` calls, the comparisons' ``Judged`` records): a literal, or a
    constant of the metric table."""
    names = set()
    package = Path(__file__).resolve().parents[1] / "pytest_modelsweep"
    recording = [
        package / "workloads" / "slo_search.py",
        package / "workloads" / "setting.py",
        package / "judging" / "kinds.py",
    ]
    for tree in [*bench_trees(), *(ast.parse(path.read_text()) for path in recording)]:
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            callee = node.func
            called = callee.attr if isinstance(callee, ast.Attribute) else getattr(callee, "id", "")
            position = {"record_measurement": 0, "evaluate": 0, "param": 0, "Judged": 1}
            if called not in position or len(node.args) <= position[called]:
                continue
            argument = node.args[position[called]]
            for named in (
                (argument.body, argument.orelse) if isinstance(argument, ast.IfExp) else (argument,)
            ):  # one of two, by the knob
                if isinstance(named, ast.Constant) and isinstance(named.value, str):
                    names.add(named.value)
                elif isinstance(named, ast.Name) and isinstance(
                    getattr(metrics, named.id, None), str
                ):
                    names.add(getattr(metrics, named.id))
    return names


def test_every_marker_of_the_benches_is_in_the_table() -> None:
    used = markers_used_in_benches()
    assert {
        "smoke",
        "throughput",
        "long_prompt",
        "gsm8k",
        "bfcl",
        "verdict",
        "screen",
        "modelsweep_benchmark",
    } <= used
    assert used - set(MARKERS) == set()


def test_every_benchmark_the_benches_record_is_in_the_table() -> None:
    recorded = benchmarks_recorded_in_benches()
    assert {
        "smoke",
        "throughput",
        "long_prompt",
        "gsm8k",
        "bfcl",
        "throughput_ratio",
        "screen",
        "capacity",
        "capacity_ratio",
    } <= recorded
    assert {name for name in recorded if metric_for(name) is None} == set()


def test_the_plugin_registers_the_tables_markers(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--markers")
    registered = {
        line.split(":")[0].removeprefix("@pytest.mark.")
        for line in result.stdout.lines
        if line.startswith("@pytest.mark.")
    }
    assert set(MARKERS) <= registered
    for name, help_text in MARKERS.items():
        result.stdout.fnmatch_lines([f"@pytest.mark.{name}: {help_text}"])


def test_markers_cover_every_metric_and_the_shared_ones() -> None:
    assert {metric.marker for metric in METRICS.values()} <= set(MARKERS)
    assert MARKERS["verdict"] == "paired comparison of a candidate with the reference"
    assert MARKERS["vllm"] == "needs a real vLLM server"
    assert MARKERS["gsm8k"] == "GSM8K accuracy, scored as lm-evaluation-harness scores it"
    assert all(MARKERS.values())


def test_comparisons_are_looked_up_by_their_recorded_names() -> None:
    verdict = metric_for("verdict:gsm8k")
    assert verdict is not None
    assert (verdict.kind, verdict.compares, verdict.unit, verdict.marker) == (
        Kind.COMPARISON,
        Kind.ACCURACY,
        "accuracy difference",
        "verdict",
    )
    assert verdict.label == "GSM8K accuracy verdict"
    ratio = metric_for("throughput_ratio")
    assert ratio is not None and (ratio.kind, ratio.compares) == (Kind.COMPARISON, Kind.THROUGHPUT)
    custom = metric_for("verdict:my_eval")  # a user's own accuracy benchmark, judged
    assert custom is not None and custom.compares is Kind.ACCURACY
    assert metric_for("nope") is None and kind_of("nope") is None
    assert metric_for("verdict:bfcl") == verdict_metric("bfcl")


def test_kinds_units_and_direction() -> None:
    assert benchmarks_of(Kind.ACCURACY) == ("gsm8k", "bfcl")
    assert benchmarks_of(Kind.THROUGHPUT) == ("throughput", "long_prompt", "open_loop")
    assert kind_of("smoke") is Kind.SMOKE and kind_of("screen") is Kind.SCREENING
    assert kind_of("rate_capacity") is Kind.RATE_CAPACITY and kind_of("startup") is Kind.STARTUP
    assert {METRICS[name].unit for name in benchmarks_of(Kind.THROUGHPUT)} == {"tokens/s"}
    # only a start is better lower (seconds from launch to first token)
    assert [m.name for m in METRICS.values() if not m.higher_is_better] == ["startup"]
    assert [name for name, metric in METRICS.items() if metric.gated] == [
        "gsm8k",
        "bfcl",
        "throughput",
        "long_prompt",
        "open_loop",
        "startup",
    ]
    assert rank("gsm8k") < rank("verdict:bfcl") == rank("bfcl") < rank("throughput") < rank("zzz")


# --------------------------------------------------------------------------- readers obey the table


def throughput_measurement(benchmark: str, values: list[float]) -> dict[str, Any]:
    # no "concurrency" parameter: only the table can say this is throughput
    return {
        "model": "a",
        "benchmark": benchmark,
        "value": sum(values) / len(values),
        "unit": "tokens/s",
        "n": 8,
        "params": {"output_tokens": 64},
        "stats": {"repeat_values": values},
        "provenance": {},
        "outcome": "passed",
    }


def accuracy_measurement(benchmark: str, correct: int) -> dict[str, Any]:
    items = [
        ItemRecord(
            item_id=f"q{i}", prompt_hash="p", correct=i < correct, response="", data_hash="d"
        ).to_dict()
        for i in range(100)
    ]
    return {
        "model": "a",
        "benchmark": benchmark,
        "value": correct / 100,
        "unit": "score",
        "n": 100,
        "params": {"limit": 100},
        "stats": {},
        "items": items,
        "provenance": {},
        "outcome": "passed",
    }


DECODE = Metric(
    "decode_speed",
    Kind.THROUGHPUT,
    "tokens/s",
    True,
    "Decode speed",
    "decode_speed",
    "decode-only throughput",
)
RECALL = Metric(
    "recall",
    Kind.ACCURACY,
    "score",
    True,
    "Recall accuracy",
    "recall",
    "needle-in-a-haystack recall",
)


def compare_with_baseline(
    current: list[dict[str, Any]],
    baseline: list[dict[str, Any]],
    thresholds: Thresholds,
    *,
    resamples: int,
) -> list[GateRow]:
    """The gate on measurement dicts as the results file holds them."""
    return compare_records(
        measurements_of(current), measurements_of(baseline), thresholds, resamples=resamples
    )


def test_an_unknown_name_is_read_by_its_unit() -> None:
    # tokens/s: a user's own throughput shape (modelsweep_benchmark(..., kind="throughput")),
    # gated and tabled as throughput under a title made from its name
    now, before = (
        throughput_measurement("decode_speed", [50.0, 51.0]),
        throughput_measurement("decode_speed", [100.0, 101.0]),
    )
    [row] = compare_with_baseline([now], [before], Thresholds(), resamples=200)
    assert row.benchmark == "decode_speed" and row.status == "regressed"
    assert measurement_kind(*records([now])) == "throughput"
    assert [(t.title, t.kind) for t in summary_tables(records([now]))] == [
        ("decode_speed throughput", "throughput")
    ]
    # a unit the table does not know: neither gated nor in a metric's table
    odd = {**now, "unit": "ms"}
    assert (
        compare_with_baseline([odd], [{**before, "unit": "ms"}], Thresholds(), resamples=200) == []
    )
    assert measurement_kind(*records([odd])) == "other"


def test_a_registered_throughput_metric_is_throughput_to_gate_and_report(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(METRICS, DECODE.name, DECODE)
    now, before = (
        throughput_measurement("decode_speed", [80.0, 81.0, 79.0]),
        throughput_measurement("decode_speed", [100.0, 101.0, 99.0]),
    )

    [row] = compare_with_baseline([now], [before], Thresholds(), resamples=500)
    assert row.status == "regressed" and row.benchmark == "decode_speed"
    assert "-20.0%" in gate_table([row])[2]  # throughput change in percent, not points

    assert measurement_kind(*records([now])) == "throughput"
    [table] = summary_tables(records([now]))
    assert (table.title, table.kind) == ("Decode speed", "throughput")
    assert markers()["decode_speed"] == "decode-only throughput"


def test_a_registered_accuracy_metric_is_accuracy_to_gate_and_report(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(METRICS, RECALL.name, RECALL)
    now, before = accuracy_measurement("recall", 60), accuracy_measurement("recall", 90)

    [row] = compare_with_baseline([now], [before], Thresholds(), resamples=500)
    assert row.status == "regressed" and row.note.startswith("n=100, discordant=30")
    assert "-30.0pp" in gate_table([row])[2]

    verdict = {
        "model": "b",
        "benchmark": "verdict:recall",
        "value": 0.0,
        "unit": "accuracy difference",
        "n": 100,
        "params": {},
        "stats": {},
    }
    tables = summary_tables(records([throughput_measurement("throughput", [10.0]), now, verdict]))
    assert [(t.title, t.kind) for t in tables] == [
        ("Verdicts", "verdicts"),
        ("Recall accuracy", "accuracy"),
        ("Throughput", "throughput"),
    ]


def test_reports_order_benchmarks_as_the_table_does(monkeypatch: pytest.MonkeyPatch) -> None:
    measurements = [throughput_measurement(name, [10.0]) for name in ("long_prompt", "throughput")]
    assert [t.title for t in summary_tables(records(measurements))] == [
        "Throughput",
        "Long-prompt throughput",
    ]
    reordered = {name: METRICS[name] for name in ("long_prompt", "throughput")}
    reordered.update({n: m for n, m in METRICS.items() if n not in reordered})
    monkeypatch.setattr(metrics, "METRICS", reordered)
    assert [t.title for t in summary_tables(records(measurements))] == [
        "Long-prompt throughput",
        "Throughput",
    ]


# --------------------------------------------------------------------------- a user's benchmark


def test_an_unknown_name_recorded_in_accuracy_is_an_accuracy_metric() -> None:
    metric = metric_for("quick_facts", "accuracy")
    assert metric is not None
    assert (metric.kind, metric.unit, metric.marker, metric.label, metric.gated) == (
        Kind.ACCURACY,
        "accuracy",
        "quick_facts",
        "quick_facts accuracy",
        True,
    )
    assert metric_for("quick_facts") is None
    throughput = metric_for("quick_facts", "tokens/s")  # the unit decides: a throughput shape
    assert throughput is not None and throughput.kind is Kind.THROUGHPUT
    assert metric_for("gsm8k", "tokens/s") is METRICS["gsm8k"]  # the table wins
    assert kind_of("quick_facts", "accuracy") is Kind.ACCURACY


def test_a_users_accuracy_benchmark_is_gated_in_points() -> None:
    now, before = accuracy_measurement("quick_facts", 60), accuracy_measurement("quick_facts", 90)
    now["unit"] = before["unit"] = "accuracy"
    [row] = compare_with_baseline([now], [before], Thresholds(), resamples=500)
    assert row.status == "regressed" and row.benchmark == "quick_facts"
    assert "-30.0pp" in gate_table([row])[2]
    assert measurement_kind(*records([now])) == "accuracy"
    [table] = summary_tables(records([now]))
    assert (table.title, table.kind) == ("quick_facts accuracy", "accuracy")


def test_partial_credit_is_compared_as_it_is() -> None:
    def credited(benchmark: str, credits: list[float]) -> dict[str, Any]:
        measurement = accuracy_measurement(benchmark, 0)
        measurement["unit"] = "accuracy"
        measurement["items"] = [
            ItemRecord(
                item_id=f"q{i}",
                prompt_hash="p",
                correct=False,
                response="",
                data_hash="d",
                score=credit,
            ).to_dict()
            for i, credit in enumerate(credits)
        ]
        return measurement

    # every item's credit changed (0.5 -> 0.25 or 0.75), none is right: the mean did not move
    now = credited("partial", [0.25, 0.75] * 50)
    [row] = compare_with_baseline(
        [now], [credited("partial", [0.5] * 100)], Thresholds(), resamples=200
    )
    assert (row.status, row.current, row.baseline) == ("ok", 0.5, 0.5)
    assert row.note.startswith("n=100, discordant=100")


def test_registering_gives_a_users_benchmark_its_title(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics, "METRICS", dict(METRICS))
    metric = metrics.register_accuracy_metric("quick_facts", "Quick facts accuracy")
    assert metrics.metric_for("quick_facts") == metric and metric.label == "Quick facts accuracy"
    assert metrics.metric_for("verdict:quick_facts").label == "Quick facts accuracy verdict"  # type: ignore[union-attr]
    assert metrics.benchmarks_of(Kind.ACCURACY) == ("gsm8k", "bfcl", "quick_facts")
    with pytest.raises(
        ValueError, match="'gsm8k' is modelsweep's built-in benchmark 'GSM8K accuracy'"
    ):
        metrics.register_accuracy_metric("gsm8k", "Mine")


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("my_eval", None),
        (
            "gsm8k",
            "'gsm8k' is modelsweep's built-in benchmark 'GSM8K accuracy' "
            "(benches/test_accuracy.py): yours would be pooled with its items",
        ),
        ("throughput", "'throughput' is modelsweep's throughput benchmark 'Throughput'"),
        ("verdict", "'verdict' is one of pytest's or modelsweep's own markers"),
        ("skipif", "'skipif' is one of pytest's or modelsweep's own markers"),
        ("my-eval", "'my-eval' is not a benchmark name: use a Python identifier"),
        ("_hidden", "'_hidden' is not a benchmark name"),
        (42, "42 is not a benchmark name"),
    ],
)
def test_benchmark_names(name: object, problem: str | None) -> None:
    found = metrics.benchmark_name_problem(name)
    assert found == problem if problem is None else found is not None and found.startswith(problem)
