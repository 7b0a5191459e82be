"""Summary tables and the Markdown report, from hand-made measurement dicts."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from pytest_modelsweep.report.markdown import (
    append_step_summary,
    escape_markdown,
    markdown_report,
)
from pytest_modelsweep.report.tables import (
    format_percent,
    format_points,
    format_points_interval,
    format_rate,
    provenance_line,
    run_title,
    summary_tables,
    wilson_interval,
)

REF = "gemma3-270m"
CAND = "smollm2-135m"
PROV = {"server_name": "vllm", "server_version": "0.11.0",
        "image_digest": "sha256:ea98ed065a86d3e69ec7142b9f4766aa3cd7e475d752e680f4ef7612745aca61"}
RUN = {"run_id": "20250101T000000Z-abc123", "sweep_name": "tpu-v5e", "reference": REF,
       "project": {"commit": "0123456789abcdef0123", "dirty": False}}


def verdict(metric: str, difference: float, low: float, high: float, word: str, *,
            candidate: str = CAND, margin: float | None = None, confidence: float = 0.95,
            rule: str = "covers-zero") -> dict[str, Any]:
    stats = {"candidate": candidate, "reference": REF, "metric": metric, "verdict": word,
             "difference": difference, "low": low, "high": high, "confidence": confidence,
             "n": 1319, "resamples": 10_000, "method": "percentile", "seed": 0, "discordant": 212,
             "candidate_ahead": 80, "reference_ahead": 132, "candidate_mean": 0.3,
             "reference_mean": 0.34, "standard_error": 0.01, "bootstrap_standard_error": 0.01,
             "min_detectable_difference": 0.0312, "p_value": 0.001, "margin": margin, "rule": rule}
    return {"model": candidate, "benchmark": f"verdict:{metric}", "value": difference,
            "unit": "accuracy difference", "n": 1319,
            "params": {"reference": REF, "verdict": word, "holm": False, "margin": margin},
            "stats": stats, "items": [], "requests": [], "provenance": {}, "outcome": "passed"}


def accuracy(model: str, benchmark: str, value: float, n: int, *, limit: int | None = None,
             outcome: str = "passed", **stats: Any) -> dict[str, Any]:
    return {"model": model, "benchmark": benchmark, "value": value, "unit": "accuracy", "n": n,
            "params": {"limit": limit, "subset": limit is not None},
            "stats": {"n": n, "accuracy": value, **stats}, "items": [], "requests": [],
            "provenance": PROV, "outcome": outcome}


def window(value: float, ttft_p50_ms: float, fidelity: float, prompt: int | None) -> dict[str, Any]:
    """One repeat's stats in the shape ``ThroughputResult.as_stats()`` writes (ms latencies)."""
    def ms(mean: float, p50: float, p90: float, p99: float) -> dict[str, float]:
        return {"mean_ms": mean, "p50_ms": p50, "p90_ms": p90, "p99_ms": p99, "n": 4}

    return {"prompt_tokens": prompt or 24, "output_tokens": 256, "output_tokens_per_s": value,
            "fidelity": fidelity, "ttft": ms(200.0, ttft_p50_ms, 300.0, 400.0),
            "tpot": ms(20.0, 21.0, 30.0, 40.0), "itl": ms(19.0, 18.0, 25.0, 35.0),
            "e2e": ms(900.0, 880.0, 950.0, 990.0), "violations": []}


def setting(model: str, concurrency: int, values: list[float], *, prompt: int | None = None,
            benchmark: str = "throughput", ttft_p50_ms: list[float] | None = None,
            fidelity: list[float] | None = None) -> dict[str, Any]:
    """A throughput setting as benches/test_throughput.py records it, without request records
    (tests/test_report_real_run.py reads the bench's own output, requests included)."""
    ttfts = ttft_p50_ms or [100.0] * len(values)
    fidelities = fidelity or [1.0] * len(values)
    return {"model": model, "benchmark": benchmark, "value": sum(values) / len(values),
            "unit": "tokens/s", "n": 4 * len(values),
            "params": {"concurrency": concurrency, "prompt_tokens": prompt, "output_tokens": 256,
                       "timed_requests": 4, "repeats": len(values)},
            "stats": {"repeat_values": values,
                      "repeats": [window(v, t, f, prompt) for v, t, f in zip(values, ttfts, fidelities)]},
            "items": [], "requests": [], "provenance": PROV, "outcome": "passed"}


def by_title(measurements: list[dict[str, Any]]) -> dict[str, Any]:
    return {t.title: t for t in summary_tables(measurements)}


# --------------------------------------------------------------------------- formatting


def test_number_formats() -> None:
    assert format_percent(0.41234) == "41.2%"
    assert format_percent(float("nan")) == "n/a"
    assert format_percent(None) == "n/a"
    assert format_points(0.02) == "+2.0 pp"
    assert format_points(-0.0001) == "+0.0 pp"  # never "-0.0"
    assert format_points_interval(-0.0904, 0.01) == "[-9.0, +1.0] pp"
    assert format_rate(1234.56) == "1,234.6"


def test_wilson_interval() -> None:
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and math.isclose(high, 0.27753, abs_tol=1e-5)
    low, high = wilson_interval(5, 10)
    assert math.isclose(low, 0.23659, abs_tol=1e-5) and math.isclose(high, 0.76341, abs_tol=1e-5)
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_run_title_and_provenance_line() -> None:
    assert run_title(RUN) == "modelsweep: sweep tpu-v5e, reference gemma3-270m, commit 0123456789"
    assert run_title({**RUN, "project": {"commit": "abc", "dirty": True}}).endswith("commit abc (dirty)")
    assert run_title({}) == "modelsweep"
    line = provenance_line([accuracy(REF, "gsm8k", 0.5, 10)], RUN)
    assert line == "vllm 0.11.0, image sha256:ea98ed065a86 · run 20250101T000000Z-abc123 · 1 measurement"
    assert provenance_line([], {"serving": {"backend": "llamacpp"}}) == "llamacpp · 0 measurements"


# --------------------------------------------------------------------------- tables


def test_verdict_table_cells_and_order() -> None:
    tables = by_title([
        verdict("bfcl", 0.01, -0.03, 0.05, "matches"),
        verdict("gsm8k", -0.0409, -0.0612, -0.0204, "worse"),
        verdict("gsm8k", 0.0, -0.01, 0.012, "matches", candidate="a-model"),
    ])
    table = tables["Verdicts"]
    assert table.columns == ["candidate", "reference", "metric", "difference", "95% interval",
                             "n", "discordant", "detectable", "verdict"]
    assert table.rows == [  # GSM8K before BFCL, candidates in name order
        ["a-model", REF, "gsm8k", "+0.0 pp", "[-1.0, +1.2] pp", 1319, 212, "±3.1 pp", "matches"],
        [CAND, REF, "gsm8k", "-4.1 pp", "[-6.1, -2.0] pp", 1319, 212, "±3.1 pp", "worse"],
        [CAND, REF, "bfcl", "+1.0 pp", "[-3.0, +5.0] pp", 1319, 212, "±3.1 pp", "matches"],
    ]
    assert table.status_column == 8


def test_verdict_table_notes_margin_and_holm_levels() -> None:
    table = by_title([verdict("gsm8k", 0.005, -0.011, 0.019, "equivalent", margin=0.02,
                              confidence=0.975, rule="holm+equivalence-margin")])["Verdicts"]
    assert table.columns[4] == "interval"
    assert table.rows[0][4] == "[-1.1, +1.9] pp (97.5%)"
    assert "equivalence margin ±2.0 pp" in table.notes
    assert "intervals Holm-adjusted across the candidates" in table.notes


def test_gsm8k_table_lists_the_reference_first() -> None:
    table = by_title([
        accuracy(CAND, "gsm8k", 0.25, 200, limit=200, strict_match_accuracy=0.2,
                 truncated_rate=0.015, failed=2, outcome="failed"),
        accuracy(REF, "gsm8k", 0.40, 1319, strict_match_accuracy=0.375, truncated_rate=0.0, failed=0),
    ])["GSM8K accuracy"]
    assert table.columns == ["model", "accuracy", "95% interval", "strict-match", "n", "subset",
                             "truncated", "failed"]
    assert table.rows == [
        [REF, "40.0%", "37.4–42.7%", "37.5%", 1319, "full", "0.0%", 0],
        [CAND, "25.0%", "19.5–31.4%", "20.0%", 200, "first 200", "1.5%", 2],
    ]
    assert f"{CAND}: its test failed; see the test's report" in table.notes


def test_bfcl_table_error_types_by_count() -> None:
    # "errors": the failed count's name in results written before failed items had their own
    table = by_title([accuracy(REF, "bfcl", 0.6, 400, parse_failures=7, errors=1,
                               error_types={"value_error:string": 30, "ast_decoder:decoder_failed": 7,
                                            "type_error:simple": 30})])["BFCL accuracy"]
    assert table.rows == [[REF, "60.0%", "55.1–64.7%", 400, "full", 7, 1,
                           "type_error:simple 30, value_error:string 30, ast_decoder:decoder_failed 7"]]


def test_throughput_table_summarises_repeats() -> None:
    measurements = [
        setting(CAND, 16, [510.0, 530.0], ttft_p50_ms=[120.0, 140.0], fidelity=[1.0, 0.995]),
        setting(CAND, 1, [40.04]),
        setting(REF, 1, [35.0], ttft_p50_ms=[90.0]),
        setting(REF, 4, [100.0], prompt=1024, benchmark="long_prompt"),
    ]
    tables = by_title(measurements)
    throughput = tables["Throughput"]
    assert throughput.columns == [
        "model", "concurrency", "prompt tokens", "tokens/s", "range", "repeats", "CV", "flags",
        "TTFT p50 (ms)", "TTFT p90 (ms)", "TTFT p99 (ms)", "TPOT p50 (ms)", "TPOT p90 (ms)",
        "TPOT p99 (ms)", "ITL p50 (ms)", "ITL p90 (ms)", "ITL p99 (ms)", "fidelity"]
    latencies = ["300.0", "400.0", "21.0", "30.0", "40.0", "18.0", "25.0", "35.0"]
    assert throughput.rows == [
        [REF, 1, "short", "35.0", "n/a", 1, "n/a", "", "90.0", *latencies, "1.000"],
        [CAND, 1, "short", "40.0", "n/a", 1, "n/a", "", "100.0", *latencies, "1.000"],
        # median over the repeats' TTFT p50 (no request records); the lowest fidelity
        [CAND, 16, "short", "520.0", "510.0–530.0", 2, "2.7%", "", "130.0", *latencies, "0.995"],
    ]
    assert "256 output tokens per request" in throughput.notes
    assert "short: 24-token prompts" in throughput.notes
    assert "latencies: median over repeats of each repeat's percentile" in throughput.notes
    assert tables["Long-prompt throughput"].rows == [
        [REF, 4, "1,024", "100.0", "n/a", 1, "n/a", "", "100.0", *latencies, "1.000"],
    ]


def test_throughput_flags_and_a_ratio_without_an_interval() -> None:
    noisy = setting(CAND, 4, [100.0, 60.0, 140.0])
    noisy["stats"].update(cv=0.4, unstable=True, contended=False, contended_windows=0)
    [row] = by_title([noisy])["Throughput"].rows
    assert row[6:8] == ["40.0%", "unstable"]
    nan = float("nan")
    ratio = {"model": CAND, "benchmark": "throughput_ratio", "value": 0.9, "unit": "ratio", "n": 1,
             "params": {"concurrency": 1, "prompt_tokens": None},
             "stats": {"low": nan, "high": nan, "reference": REF}}
    [ratio_row] = by_title([ratio])["Throughput relative to the reference"].rows
    assert ratio_row[-2:] == ["0.90×", "no interval"]


def test_ratio_table() -> None:
    ratio = {"model": CAND, "benchmark": "throughput_ratio", "value": 1.4567, "unit": "ratio", "n": 3,
             "params": {"concurrency": 16, "prompt_tokens": 3072},
             "stats": {"low": 1.40, "high": 1.516, "reference": REF}}
    single = {**ratio, "params": {"concurrency": 1, "prompt_tokens": None},
              "stats": {"low": 0.9, "high": 0.9, "reference": REF, "degenerate": True}, "value": 0.9}
    table = by_title([ratio, single])["Throughput relative to the reference"]
    assert table.columns == ["candidate", "reference", "concurrency", "prompt tokens", "ratio",
                             "95% interval"]
    assert table.rows == [
        [CAND, REF, 1, "short", "0.90×", "n/a (single repeat)"],
        [CAND, REF, 16, "3,072", "1.46×", "[1.40, 1.52]"],
    ]


def test_summary_table_order_and_other_measurements() -> None:
    smoke = {"model": REF, "benchmark": "smoke", "value": 12.345, "unit": "tokens/s", "n": 1,
             "params": {"max_tokens": 32}, "stats": {}, "outcome": "passed"}
    tables = summary_tables([
        smoke, setting(REF, 1, [10.0]), setting(REF, 1, [10.0], prompt=1024, benchmark="long_prompt"),
        accuracy(REF, "bfcl", 0.5, 10), accuracy(REF, "gsm8k", 0.5, 10),
        {"model": CAND, "benchmark": "throughput_ratio", "value": 1.0, "unit": "ratio", "n": 3,
         "params": {"concurrency": 1}, "stats": {"low": 0.9, "high": 1.1, "reference": REF}},
        verdict("gsm8k", 0.0, -0.1, 0.1, "matches"),
    ])
    assert [t.title for t in tables] == [
        "Verdicts", "GSM8K accuracy", "BFCL accuracy", "Throughput relative to the reference",
        "Throughput", "Long-prompt throughput", "Other measurements",
    ]
    assert tables[-1].rows == [[REF, "smoke", "max_tokens=32", "12.3 tokens/s", 1, "passed"]]
    assert summary_tables([]) == []


# --------------------------------------------------------------------------- Markdown


def test_markdown_escapes_cells() -> None:
    assert escape_markdown("a|b") == "a\\|b"
    assert escape_markdown("<script>alert('x')</script>") == "&lt;script&gt;alert('x')&lt;/script&gt;"
    assert escape_markdown("one\ntwo\r\nthree") == "one<br>two<br>three"
    assert escape_markdown("R&D *bold* _it_ `code` [link](x)") == (
        "R&amp;D \\*bold\\* \\_it\\_ \\`code\\` \\[link\\](x)")


def test_markdown_report_reads_as_a_pull_request_comment() -> None:
    nasty = "evil|<script>alert(1)</script>\nmodel"
    text = markdown_report([
        accuracy(REF, "gsm8k", 0.4, 1319, strict_match_accuracy=0.375, truncated_rate=0.0, errors=0),
        accuracy(nasty, "gsm8k", 0.3, 1319, strict_match_accuracy=0.25, truncated_rate=0.0, errors=0),
        verdict("gsm8k", -0.1, -0.13, -0.07, "worse", candidate=nasty),
        verdict("gsm8k", 0.0, -0.02, 0.02, "matches"),
    ], RUN)
    lines = text.splitlines()
    assert lines[:4] == [
        "## modelsweep: sweep tpu-v5e, reference gemma3-270m, commit 0123456789",
        "",
        "vllm 0.11.0, image sha256:ea98ed065a86 · run 20250101T000000Z-abc123 · 4 measurements",
        "",
    ]
    escaped = "evil\\|&lt;script&gt;alert(1)&lt;/script&gt;<br>model"
    assert lines[4] == "### Decision: which model to serve"  # first, then the tables
    verdicts = lines.index("### Verdicts")
    assert lines[verdicts:verdicts + 8] == [
        "### Verdicts",
        "",
        "2 comparisons: 1 worse, 1 matches",
        "",
        "| candidate | reference | metric | difference | 95% interval | n | discordant | detectable | verdict |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
        f"| {escaped} | gemma3-270m | gsm8k | -10.0 pp | \\[-13.0, -7.0\\] pp | 1319 | 212 | ±3.1 pp | **WORSE** |",
        "| smollm2-135m | gemma3-270m | gsm8k | +0.0 pp | \\[-2.0, +2.0\\] pp | 1319 | 212 | ±3.1 pp | **MATCHES** |",
    ]
    assert "### GSM8K accuracy" in lines
    assert text.index("### Verdicts") < text.index("### GSM8K accuracy")
    assert f"| {escaped} | 30.0% | 27.6–32.6% | 25.0% | 1319 | full | 0.0% | 0 |" in lines
    assert "<script>" not in text and "\nmodel" not in text


def test_markdown_without_measurements() -> None:
    text = markdown_report([], {})
    assert text == "## modelsweep\n\n0 measurements\n\nNo measurements were recorded.\n"


def test_append_step_summary(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    assert append_step_summary("# hi\n") is None
    target = tmp_path / "summary.md"
    target.write_text("earlier step\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    assert append_step_summary("## one") == target
    assert append_step_summary("## two\n") == target
    assert target.read_text(encoding="utf-8") == "earlier step\n## one\n## two\n"
