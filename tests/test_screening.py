"""Candidate screening: the licence and memory rule, Hub failures, the table, the CLI, the bench."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.hub_fixtures import FakeHub, config_json, connect_error, hub_error, model_info

from pytest_modelsweep.cli import main
from pytest_modelsweep.core.errors import DataError
from pytest_modelsweep.core.sweep import (
    ModelSource,
    ModelSpec,
    ScreeningSettings,
    load_sweep,
)
from pytest_modelsweep.serving.screening import (
    OfflineHub,
    ScreeningResult,
    load_offline_fixtures,
    screen_candidate,
    screening_table,
)

pytest_plugins = ("pytester",)

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "tests" / "data" / "hub_tpu_v5e.json"
BENCH = ROOT / "benches" / "test_screen.py"
GIB = 2**30
SEED = ScreeningSettings()  # apache-2.0, mit; 15.75 GiB x 0.90; 2.0 GiB for the KV cache
BUDGET = 15.75 * 0.90

QWEN3_4B = 4_022_468_096
QWEN3_8B = 8_190_735_360
QWEN25_3B = 3_085_938_688
GEMMA4_E2B = 5_123_178_051


def spec(repo: str, name: str = "cand", revision: str | None = None) -> ModelSpec:
    return ModelSpec(
        name=name,
        source=ModelSource("hf", repo, revision),
        served_name=name,
        license="apache-2.0",
        prompting="chat",
        tool_call_parser=None,
        bfcl_mode="tools",
    )


def screen(
    hub: FakeHub, repo: str, settings: ScreeningSettings = SEED, **kw: str
) -> ScreeningResult:
    return screen_candidate(spec(repo, **kw), settings, api=hub, fetch_config=hub.fetch_config)


def qwen(repo: str, total: int, **kw: object) -> FakeHub:
    info = model_info(
        repo,
        license=kw.pop("license", "apache-2.0"),
        parameters={"BF16": total},
        config=config_json("Qwen3ForCausalLM"),
        **kw,
    )  # type: ignore[arg-type]
    return FakeHub({repo: info})


# -- the rule ---------------------------------------------------------------------


def test_accepted_with_exact_figures_and_no_config_download() -> None:
    hub = qwen("Qwen/Qwen3-4B", QWEN3_4B)
    result = screen(hub, "Qwen/Qwen3-4B", name="qwen3-4b")
    weights = 2 * QWEN3_4B / GIB
    assert result == ScreeningResult(
        model="qwen3-4b",
        repo="Qwen/Qwen3-4B",
        license="apache-2.0",
        architecture="Qwen3ForCausalLM",
        dtype="bfloat16",
        parameters=QWEN3_4B,
        weights_gib=weights,
        budget_gib=BUDGET,
        kv_headroom_gib=BUDGET - weights,
        accepted=True,
        reasons=(),
        weights_source="safetensors metadata",
    )
    assert (round(result.weights_gib or 0, 2), round(result.kv_headroom_gib or 0, 2)) == (
        7.49,
        6.68,
    )
    assert hub.info_calls == [("Qwen/Qwen3-4B", None, True)]
    assert hub.config_calls == []  # the Hub answer's config named architecture and dtype


def test_licence_rejection_qwen_research_from_license_name() -> None:
    hub = FakeHub(
        {
            "Qwen/Qwen2.5-3B-Instruct": model_info(
                "Qwen/Qwen2.5-3B-Instruct",
                license="other",
                license_name="qwen-research",
                tags=["transformers", "safetensors", "license:other"],
                parameters={"BF16": QWEN25_3B},
                config=config_json("Qwen2ForCausalLM"),
            )
        }
    )
    result = screen(hub, "Qwen/Qwen2.5-3B-Instruct")
    assert result.license == "qwen-research"
    assert result.accepted is False
    assert result.reasons == ("licence qwen-research is not one of apache-2.0, mit",)
    assert result.weights_gib == 2 * QWEN25_3B / GIB  # the memory rule alone would pass


def test_licence_from_tag_when_the_card_has_none_is_lower_cased() -> None:
    hub = FakeHub(
        {
            "o/m": model_info(
                "o/m",
                tags=["safetensors", "license:MIT"],
                parameters={"BF16": 1000},
                config=config_json("LlamaForCausalLM"),
            )
        }
    )
    result = screen(hub, "o/m")
    assert (result.license, result.accepted, result.reasons) == ("mit", True, ())


def test_unknown_licence_is_a_reason() -> None:
    hub = FakeHub(
        {
            "o/m": model_info(
                "o/m",
                tags=["safetensors"],
                parameters={"BF16": 1000},
                config=config_json("LlamaForCausalLM"),
            )
        }
    )
    assert screen(hub, "o/m").reasons == (
        "licence unknown (no card licence, no license: tag); the rule permits apache-2.0, mit",
    )


def test_memory_rejection_qwen3_8b() -> None:
    hub = qwen("Qwen/Qwen3-8B", QWEN3_8B)
    result = screen(hub, "Qwen/Qwen3-8B", name="qwen3-8b")
    weights = 2 * QWEN3_8B / GIB
    assert result.accepted is False
    assert result.weights_gib == weights
    assert round(weights, 2) == 15.26 and weights > BUDGET
    assert result.kv_headroom_gib == BUDGET - weights
    assert result.reasons == (
        (
            "memory: 15.26 GiB of bf16 weights leave -1.08 GiB of the 14.175 GiB budget "
            "(15.75 GiB HBM x 0.9); the KV cache needs 2.00 GiB"
        ),
    )


def test_headroom_exactly_the_minimum_passes_one_parameter_more_fails() -> None:
    settings = ScreeningSettings(hbm_gib=16.0, gpu_memory_utilization=1.0, kv_headroom_gib=2.0)
    at_limit = 14 * GIB // 2  # 14 GiB of bf16 weights leave exactly 2 GiB
    ok = screen(qwen("o/m", at_limit), "o/m", settings)
    over = screen(qwen("o/m", at_limit + 1), "o/m", settings)
    assert (ok.kv_headroom_gib, ok.accepted) == (2.0, True)
    assert over.accepted is False and over.reasons[0].startswith("memory: 14.00 GiB")


def test_gemma_4_e2b_published_total_gives_9_54_gib_not_the_seeds_8_97() -> None:
    hub = FakeHub(
        {
            "google/gemma-4-E2B-it": model_info(
                "google/gemma-4-E2B-it",
                license="apache-2.0",
                parameters={"BF16": GEMMA4_E2B},
                config=config_json("Gemma4ForConditionalGeneration", key="dtype"),
            )
        }
    )
    result = screen(hub, "google/gemma-4-E2B-it")
    assert result.weights_gib == 2 * GEMMA4_E2B / GIB
    assert round(result.weights_gib, 2) == 9.54  # the seed wrote 8.97 GiB (~4.82e9 parameters)
    assert (result.dtype, result.accepted) == ("bfloat16", True)


def test_total_missing_sums_parameters_per_dtype() -> None:
    info = model_info(
        "o/m",
        license="mit",
        parameters={"BF16": 3000, "F32": 500},
        total=0,
        config=config_json("LlamaForCausalLM"),
    )
    result = screen(FakeHub({"o/m": info}), "o/m")
    assert (result.parameters, result.dtype) == (3500, "bfloat16")


# -- weights without safetensors metadata -----------------------------------------------


def test_file_sizes_scaled_to_bf16_by_the_config_dtype() -> None:
    sizes = [
        ("model-00001-of-00002.safetensors", 4_000_000_000),
        ("model-00002-of-00002.safetensors", 1_000_000_000),
        ("onnx/model.safetensors", 999),
        ("README.md", 5000),
    ]
    info = model_info(
        "o/m",
        license="apache-2.0",
        siblings=sizes,
        config=config_json("LlamaForCausalLM", "float32"),
    )
    result = screen(FakeHub({"o/m": info}), "o/m")
    assert result.parameters == 1_250_000_000  # 5e9 bytes of float32
    assert result.weights_gib == 2 * 1_250_000_000 / GIB
    assert result.weights_source == "safetensors file sizes (float32, 4 bytes/parameter)"
    assert result.accepted is True


def test_only_pytorch_bin_weights_is_no_safetensors_weights() -> None:
    info = model_info(
        "o/m",
        license="apache-2.0",
        siblings=[("config.json", 600), ("pytorch_model.bin", 10_000)],
        config=config_json("LlamaForCausalLM"),
    )
    result = screen(FakeHub({"o/m": info}), "o/m")
    assert result.accepted is False and result.weights_gib is None
    assert result.reasons == (
        (
            "no safetensors weights (only pytorch_model.bin): vLLM TPU loads "
            "safetensors; pick a repo that publishes them"
        ),
    )


def test_no_weight_files_at_all_is_no_safetensors_weights() -> None:
    info = model_info(
        "o/m",
        license="apache-2.0",
        siblings=[("README.md", 10)],
        config=config_json("LlamaForCausalLM"),
    )
    assert screen(FakeHub({"o/m": info}), "o/m").reasons == (
        (
            "no safetensors weights (no weight files at all): vLLM TPU loads safetensors; "
            "pick a repo that publishes them"
        ),
    )


# -- Hub failures -----------------------------------------------------------------------


def test_gated_repo_names_the_fix() -> None:
    hub = FakeHub({"google/gemma-4-E2B-it": hub_error("gated", "google/gemma-4-E2B-it")})
    result = screen(hub, "google/gemma-4-E2B-it")
    assert (result.accepted, result.license, result.weights_gib) == (False, None, None)
    assert result.reasons == (
        (
            "gated repo: accept its licence on the Hub "
            "(https://huggingface.co/google/gemma-4-E2B-it) and set HF_TOKEN"
        ),
    )


def test_gated_config_download_is_the_gated_reason() -> None:
    # model_info of a gated repo answers; its files do not.
    info = model_info(
        "g/m",
        license="apache-2.0",
        parameters={"BF16": 1000},
        gated="manual",
        config={"architectures": ["GemmaForCausalLM"]},
    )
    hub = FakeHub({"g/m": info}, {"g/m": hub_error("gated", "g/m", "config.json")})
    result = screen(hub, "g/m")
    assert hub.config_calls == [("g/m", None)]
    assert result.reasons == (
        ("gated repo: accept its licence on the Hub (https://huggingface.co/g/m) and set HF_TOKEN"),
    )


def test_missing_repo_says_check_the_sweep() -> None:
    hub = FakeHub({"org/nope": hub_error("not_found", "org/nope")})
    assert screen(hub, "org/nope").reasons == (
        "repo not found: check source hf:org/nope in the sweep (a private repo also needs HF_TOKEN)",
    )


def test_missing_revision_says_check_the_revision() -> None:
    hub = FakeHub({"org/m": hub_error("revision_not_found", "org/m")})
    result = screen(hub, "org/m", revision="nope")
    assert hub.info_calls == [("org/m", "nope", True)]
    assert result.repo == "org/m@nope"
    assert result.reasons == (
        ("revision not found: check the @revision of source hf:org/m@nope in the sweep"),
    )


def test_unreachable_hub_says_run_with_network_or_offline_fixtures() -> None:
    result = screen(FakeHub({"o/m": connect_error()}), "o/m")
    assert result.accepted is False
    assert result.reasons == (
        (
            "the Hub could not be reached (ConnectError: [Errno -2] Name or "
            "service not known): run with network or use --offline-fixtures"
        ),
    )


def test_hub_server_error_is_a_reason_not_a_crash() -> None:
    result = screen(FakeHub({"o/m": hub_error("server_error", "o/m")}), "o/m")
    assert result.reasons[0].startswith("the Hub answered with an error (HfHubHTTPError: ")
    assert result.reasons[0].endswith("): retry, or use --offline-fixtures")


def test_missing_config_is_a_reason_and_the_rest_is_still_screened() -> None:
    info = model_info("o/m", license="apache-2.0", parameters={"BF16": QWEN3_4B})
    hub = FakeHub({"o/m": info})  # no config recorded: config.json answers EntryNotFound
    result = screen(hub, "o/m")
    assert hub.config_calls == [("o/m", None)]
    assert (result.architecture, result.dtype) == (None, "bfloat16")  # dtype from safetensors
    assert result.weights_gib == 2 * QWEN3_4B / GIB
    assert result.reasons == ("no config.json in o/m: vLLM cannot load the repo without it",)


def test_api_config_without_dtype_downloads_config_json_and_merges() -> None:
    info = model_info(
        "o/m",
        license="apache-2.0",
        parameters={"BF16": 1000},
        config={"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"},
    )
    hub = FakeHub({"o/m": info}, {"o/m": {"torch_dtype": "bfloat16", "hidden_size": 8}})
    result = screen(hub, "o/m")
    assert hub.config_calls == [("o/m", None)]
    assert (result.architecture, result.dtype, result.accepted) == (
        "Qwen3ForCausalLM",
        "bfloat16",
        True,
    )


def test_config_download_unreachable_falls_back_to_the_api_config() -> None:
    info = model_info(
        "o/m",
        license="apache-2.0",
        parameters={"BF16": 1000},
        config={"architectures": ["Qwen3ForCausalLM"]},
    )
    hub = FakeHub({"o/m": info}, {"o/m": connect_error()})
    result = screen(hub, "o/m")
    assert (result.architecture, result.accepted, result.reasons) == ("Qwen3ForCausalLM", True, ())


def test_non_hf_source_is_not_screened() -> None:
    embedded = load_sweep("embedded").model("smollm2-135m")
    result = screen_candidate(embedded, SEED, api=FakeHub({}))
    assert result.reasons == (
        ("screening applies to Hugging Face repos (source embedded:smollm2-135m-instruct-q4_1)"),
    )


# -- the table ----------------------------------------------------------------------------


def test_table_rows_are_aligned_with_figures_and_reasons() -> None:
    ok = screen(qwen("Qwen/Qwen3-4B", QWEN3_4B), "Qwen/Qwen3-4B", name="qwen3-4b")
    big = screen(qwen("Qwen/Qwen3-8B", QWEN3_8B), "Qwen/Qwen3-8B", name="qwen3-8b")
    gone = screen(FakeHub({"o/x": hub_error("not_found", "o/x")}), "o/x", name="x")
    assert screening_table([ok, big, gone]) == [
        (
            "model     repo           licence     arch              weights GiB  KV headroom GiB"
            "  verdict   reason"
        ),
        "--------  -------------  ----------  ----------------  -----------  ---------------"
        "  --------  " + "-" * len(big.reason),
        (
            "qwen3-4b  Qwen/Qwen3-4B  apache-2.0  Qwen3ForCausalLM         7.49             6.68"
            "  accepted"
        ),
        "qwen3-8b  Qwen/Qwen3-8B  apache-2.0  Qwen3ForCausalLM        15.26            -1.08"
        "  rejected  " + big.reason,
        "x         o/x            -           -                           -                -"
        "  rejected  " + gone.reason,
    ]


def test_result_dict_is_json_friendly() -> None:
    result = screen(qwen("Qwen/Qwen3-8B", QWEN3_8B), "Qwen/Qwen3-8B")
    data = json.loads(json.dumps(result.to_dict()))
    assert ScreeningResult.from_dict(data) == result
    assert data["accepted"] is False and result.verdict == "rejected"
    assert data["reasons"] == list(result.reasons)
    assert data["parameters"] == QWEN3_8B


# -- offline fixtures and the shipped file --------------------------------------------------


def test_shipped_fixtures_cover_every_repo_of_the_tpu_sweep_and_the_seed_rejects() -> None:
    fixtures = load_offline_fixtures(SHIPPED)
    sweep_repos = {m.source.id for m in load_sweep("tpu-v5e").models.values()}
    assert set(fixtures) == sweep_repos | {"Qwen/Qwen2.5-3B-Instruct", "Qwen/Qwen3-8B"}


def _params_from_dims(c: dict) -> int:
    h, heads, kv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    hd = c.get("head_dim", h // heads)
    qwen2_bias = (heads * hd + 2 * kv * hd) if c["model_type"] == "qwen2" else 0
    qk_norm = 2 * hd if c["model_type"] == "qwen3" else 0
    layer = (
        2 * h * heads * hd
        + 2 * h * kv * hd
        + qwen2_bias
        + qk_norm
        + 3 * h * c["intermediate_size"]
        + 2 * h
    )
    embeddings = c["vocab_size"] * h * (1 if c["tie_word_embeddings"] else 2)
    return embeddings + c["num_hidden_layers"] * layer + h


def test_shipped_totals_match_their_recorded_config_dimensions() -> None:
    checked = {}
    for repo, answer in load_offline_fixtures(SHIPPED).items():
        if "hidden_size" in answer["config"]:
            checked[repo] = _params_from_dims(answer["config"]) == answer["safetensors"]["total"]
    assert len(checked) == 9 and all(checked.values()), checked


def test_offline_hub_answers_from_the_file_and_names_a_missing_repo() -> None:
    hub = OfflineHub.from_file(SHIPPED)
    result = screen_candidate(
        spec("Qwen/Qwen2.5-3B-Instruct"), SEED, api=hub, fetch_config=hub.fetch_config
    )
    assert (result.license, result.parameters) == ("qwen-research", QWEN25_3B)
    missing = screen_candidate(spec("o/absent"), SEED, api=hub, fetch_config=hub.fetch_config)
    assert missing.reasons == (
        (
            f"o/absent is not in the offline fixtures {SHIPPED}: record its "
            "model_info there, or run with network"
        ),
    )


def test_malformed_fixtures_fail_with_the_file_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"o/m": [1, 2]}')
    with pytest.raises(
        DataError, match=r"bad.json: o/m: expected the model_info JSON object, got list"
    ):
        load_offline_fixtures(bad)
    bad.write_text("{not json")
    with pytest.raises(DataError, match=r"bad.json: not valid JSON"):
        load_offline_fixtures(bad)


# -- modelsweep screen ----------------------------------------------------------------------


def screen_main(argv: list[str]) -> int:
    """``modelsweep screen ARGV``'s exit status."""
    try:
        return main(["screen", *argv])
    except SystemExit as done:  # a usage error or --help
        return done.code if isinstance(done.code, int) else 0


def test_screen_main_on_the_tpu_sweep_accepts_all_eight(capsys: pytest.CaptureFixture[str]) -> None:
    code = screen_main(["--sweep", "tpu-v5e", "--offline-fixtures", str(SHIPPED)])
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    rows = out[3:-1]
    assert [r.split()[0] for r in rows] == [
        "gemma-4-e2b",
        "qwen3-4b",
        "phi-4-mini",
        "smollm3-3b",
        "granite-3.3-2b",
        "qwen2.5-0.5b",
        "qwen2.5-1.5b",
        "smollm2-1.7b",
    ]
    assert rows[0].split()[-4:] == ["Gemma4ForConditionalGeneration", "9.54", "4.63", "accepted"]
    assert out[-1] == "8 accepted, 0 rejected"


def test_screen_main_prints_the_licence_and_memory_rejections(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = screen_main(
        [
            "--sweep",
            "tpu-v5e",
            "--offline-fixtures",
            str(SHIPPED),
            "--model",
            "qwen3-4b",
            "--repo",
            "Qwen/Qwen2.5-3B-Instruct",
            "--repo",
            "hf:Qwen/Qwen3-8B",
        ]
    )
    out = capsys.readouterr().out.splitlines()
    assert code == 1
    assert out[0] == (
        "sweep tpu-v5e: licence in apache-2.0, mit; 15.75 GiB HBM x 0.9 = 14.175 GiB, "
        f"of which >= 2 GiB must stay for the KV cache; from offline fixtures {SHIPPED}"
    )
    licence, memory = out[4], out[5]
    assert licence.split()[:6] == [
        "Qwen2.5-3B-Instruct",
        "Qwen/Qwen2.5-3B-Instruct",
        "qwen-research",
        "Qwen2ForCausalLM",
        "5.75",
        "8.43",
    ]
    assert licence.endswith("rejected  licence qwen-research is not one of apache-2.0, mit")
    assert memory.split()[:7] == [
        "Qwen3-8B",
        "Qwen/Qwen3-8B",
        "apache-2.0",
        "Qwen3ForCausalLM",
        "15.26",
        "-1.08",
        "rejected",
    ]
    assert memory.endswith("the KV cache needs 2.00 GiB")
    assert out[-1] == "1 accepted, 2 rejected"


def test_screen_main_embedded_sweep_screens_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert screen_main([]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "0 accepted, 0 rejected, 3 not screened (not Hugging Face repos: gemma3-270m "
        "(embedded:gemma3-270m-q4_k_m), smollm2-135m (embedded:smollm2-135m-instruct-q4_1), "
        "qwen2.5-coder-0.5b (embedded:qwen2.5-coder-0.5b-instruct-q4_k_m))"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--bogus"],
            (
                "modelsweep screen: error: unrecognized arguments: --bogus "
                "(see modelsweep screen --help)"
            ),
        ),
        (
            ["--sweep"],
            (
                "modelsweep screen: error: argument --sweep: expected one argument "
                "(see modelsweep screen --help)"
            ),
        ),
        (
            ["--sweep", "tpu-v5e", "--model", "qwen9"],
            "modelsweep screen: unknown model 'qwen9' in sweep",
        ),
        (
            ["--repo", "no-slash"],
            "modelsweep screen: --repo no-slash: expected a Hugging Face repo id",
        ),
        (
            ["--sweep", "tpu-v5e", "--offline-fixtures", "/nonexistent/hub.json"],
            "modelsweep screen: /nonexistent/hub.json: cannot read the offline Hub fixtures",
        ),
    ],
)
def test_screen_main_usage_errors_exit_2_with_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert screen_main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), lines


def test_screen_main_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert screen_main(["--help"]) == 0
    assert "--offline-fixtures PATH" in capsys.readouterr().out


# -- the bench, run by pytest -----------------------------------------------------------------


def test_bench_screens_the_tpu_sweep_offline(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copy(BENCH, pytester.path / "test_screen.py")
    monkeypatch.setenv("MODELSWEEP_HUB_FIXTURES", str(SHIPPED))
    result = pytester.runpytest(
        "-m", "screen", "--sweep", "tpu-v5e", "--results", "results.json", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=8)
    measurements = json.loads((pytester.path / "results.json").read_text())["measurements"]
    by_model = {m["model"]: m for m in measurements}
    assert list(by_model) == [
        "gemma-4-e2b",
        "qwen3-4b",
        "phi-4-mini",
        "smollm3-3b",
        "granite-3.3-2b",
        "qwen2.5-0.5b",
        "qwen2.5-1.5b",
        "smollm2-1.7b",
    ]
    qwen3 = by_model["qwen3-4b"]
    assert (qwen3["benchmark"], qwen3["unit"], qwen3["n"]) == ("screen", "GiB", 1)
    assert qwen3["value"] == BUDGET - 2 * QWEN3_4B / GIB
    assert qwen3["stats"]["parameters"] == QWEN3_4B and qwen3["stats"]["accepted"] is True


def test_bench_fails_a_rejected_model_with_its_reason(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copy(BENCH, pytester.path / "test_screen.py")
    fixtures = json.loads(SHIPPED.read_text())
    fixtures["Qwen/Qwen3-4B"]["safetensors"] = {"parameters": {"BF16": QWEN3_8B}, "total": QWEN3_8B}
    del fixtures["microsoft/Phi-4-mini-instruct"]
    path = pytester.path / "hub.json"
    path.write_text(json.dumps(fixtures))
    monkeypatch.setenv("MODELSWEEP_HUB_FIXTURES", str(path))
    result = pytester.runpytest(
        "-m",
        "screen",
        "--sweep",
        "tpu-v5e",
        "--model",
        "qwen3-4b",
        "--model",
        "phi-4-mini",
        "--results",
        "results.json",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            (
                "qwen3-4b (Qwen/Qwen3-4B) rejected: memory: 15.26 GiB of bf16 weights leave -1.08 GiB "
                "of the 14.175 GiB budget (15.75 GiB HBM x 0.9); the KV cache needs 2.00 GiB"
            ),
            (
                "phi-4-mini (microsoft/Phi-4-mini-instruct) rejected: microsoft/Phi-4-mini-instruct is not "
                f"in the offline fixtures {path}: record its model_info there, or run with network"
            ),
        ]
    )
    measurements = json.loads((pytester.path / "results.json").read_text())["measurements"]
    assert [(m["model"], m["outcome"], m["value"]) for m in measurements] == [
        ("qwen3-4b", "failed", BUDGET - 2 * QWEN3_8B / GIB),  # no figure for the unread repo
    ]


def test_bench_skips_models_that_are_not_hub_repos(pytester: pytest.Pytester) -> None:
    shutil.copy(BENCH, pytester.path / "test_screen.py")
    result = pytester.runpytest("-m", "screen", "-rs", "-p", "no:cacheprovider")
    result.assert_outcomes(skipped=3)  # the embedded sweep's three models
    result.stdout.fnmatch_lines(
        [
            "SKIPPED*screening applies to Hugging Face repos (source embedded:gemma3-270m-q4_k_m)",
        ]
    )
