"""The modelsweep command: models, results, compare (exit status), merge (refuses unlike images)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_modelsweep.api.evaluation import summarise_items
from pytest_modelsweep.cli import main
from pytest_modelsweep.core.measurements import AccuracyStats, Measurement
from pytest_modelsweep.core.records import ItemRecord
from pytest_modelsweep.store.results import SCHEMA


def results_file(
    path: Path, correct: int, digest: str | None = "sha256:aaa", model: str = "qwen3-4b"
) -> Path:
    """A run's results file with one GSM8K measurement of 100 items, ``correct`` of them right,
    recorded as ``evaluate`` records one."""
    items = [
        ItemRecord(
            item_id=f"q{i}", prompt_hash="p", correct=i < correct, response="", data_hash="d"
        )
        for i in range(100)
    ]
    prov = {
        "server_name": "vllm",
        "server_version": "0.30",
        "image_digest": digest,
        "server_settings": {"max_model_len": 4096},
    }
    stats = AccuracyStats.of(summarise_items(items), {}, sent=100, reused=0, wall_s=1.0)
    measurement = Measurement(
        model,
        "gsm8k",
        stats.accuracy,
        "accuracy",
        stats.n,
        params={"limit": 100},
        stats=stats,
        items=[item.to_dict() for item in items],
        provenance=prov,
        test_id="t",
        outcome="passed",
    )
    doc = {
        "schema": SCHEMA,
        "run": {"run_id": path.stem, "sweep_name": "tpu-v5e"},
        "endpoints": {},
        "summary": {},
        "measurements": [measurement.to_dict()],
    }
    path.write_text(json.dumps(doc))
    return path


def test_models_lists_the_sweep(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "--sweep", "tpu-v5e"]) == 0
    out = capsys.readouterr().out
    assert "reference gemma-4-e2b" in out
    assert "qwen3-4b" in out and "hermes" in out and "hf:Qwen/Qwen3-4B" in out


def test_results_prints_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["results", str(results_file(tmp_path / "a.json", 50))]) == 0
    out = capsys.readouterr().out
    assert "run a, sweep tpu-v5e" in out
    assert "qwen3-4b" in out and "gsm8k" in out and "0.5 accuracy" in out


def test_compare_exit_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = results_file(tmp_path / "before.json", 60)
    assert main(["compare", str(before), str(results_file(tmp_path / "same.json", 60))]) == 0
    assert main(["compare", str(before), str(results_file(tmp_path / "worse.json", 30))]) == 1
    out = capsys.readouterr().out
    assert "REGRESSED" in out and "-30.0pp" in out


def test_merge_refuses_different_images(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = results_file(tmp_path / "a.json", 50, "sha256:aaa")
    b = results_file(tmp_path / "b.json", 50, "sha256:bbb", model="gemma-4-e2b")
    assert main(["merge", str(a), str(b), "-o", str(tmp_path / "m.json")]) == 2
    err = capsys.readouterr().err
    assert (
        "refusing to merge runs served by different images: sha256:aaa (run a); sha256:bbb (run b)"
        in err
    )
    assert not (tmp_path / "m.json").exists()


def test_merge_joins_runs_of_one_image(tmp_path: Path) -> None:
    a = results_file(tmp_path / "a.json", 50)
    b = results_file(tmp_path / "b.json", 40, model="gemma-4-e2b")
    assert main(["merge", str(a), str(b), "-o", str(tmp_path / "m.json")]) == 0
    merged = json.loads((tmp_path / "m.json").read_text())
    assert [m["run_id"] for m in merged["measurements"]] == ["a", "b"]
    assert merged["summary"] == {"merged": 2}


def test_missing_results_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["results", str(tmp_path / "nope.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("modelsweep: error:") and "no results file" in err and "\n" not in err


def test_compare_help_names_the_gated_benchmarks(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", "--help"])
    assert exit_info.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert (
        "compares accuracy: gsm8k, bfcl and every other benchmark recorded in the unit "
        "accuracy (your own); throughput: throughput, long_prompt, open_loop; startup: "
        "startup (other measurements are not gated)"
    ) in out
    assert "smoke" not in out


# --------------------------------------------------------------------------- merge refuses what compares ambiguously


def _user_runs(pytester: pytest.Pytester, *limits: int) -> list[Path]:
    """Real runs of a user's benchmark (10 items) on the reference, one per ``--limit``."""
    from support.sse_server import SseServer
    from support.user_projects import MODELS, eval_bench, options, project

    project(pytester, test_mine=eval_bench(items=10))
    paths = []
    with SseServer(served_names=MODELS) as server:
        for k, limit in enumerate(limits):
            path = pytester.path / f"run{k}.json"
            pytester.runpytest(
                *options(
                    server.base_url,
                    "--model=ref",
                    "-k",
                    "not verdict",
                    "--modelsweep-dir=work",
                    f"--limit={limit}",
                    f"--results={path}",
                ),
            ).assert_outcomes(passed=1)
            paths.append(path)
    return paths


def test_merge_refuses_a_run_given_twice(
    pytester: pytest.Pytester,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (run,) = _user_runs(pytester, 4)
    run_id = json.loads(run.read_text())["run"]["run_id"]
    out = pytester.path / "merged.json"
    assert main(["merge", str(run), str(run), "-o", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"modelsweep: error: refusing to merge run {run_id} twice "
        f"(given as {run} and {run}); give each run once\n"
    )
    assert not out.exists()


def test_merge_refuses_one_benchmark_measured_under_two_settings(
    pytester: pytest.Pytester,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A 4-item and a 5-item run of one model's benchmark: the merged file would hold two
    measurements of it, and a comparison of it would pick one of them."""
    first, second = _user_runs(pytester, 4, 5)
    ids = [json.loads(p.read_text())["run"]["run_id"] for p in (first, second)]
    out = pytester.path / "merged.json"
    assert main(["merge", str(first), str(second), "-o", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"modelsweep: error: refusing to merge: ref my_eval was measured under different "
        f"settings: limit=4, subset=True in run {ids[0]}, limit=5, subset=True in run {ids[1]}; "
        "a merged file holds each model's benchmark once: leave one of the runs out\n"
    )
    assert not out.exists()
