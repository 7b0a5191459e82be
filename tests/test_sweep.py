"""The sweep file: built-in sweeps parse; every malformed value fails with file, key, expectation."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_modelsweep.core.errors import SweepError, UnknownModelError
from pytest_modelsweep.core.sweep import load_sweep, parse_endpoint_option, parse_source

VALID = """
[sweep]
name = "mini"
reference = "ref"

[serving]
backend = "llamacpp"

[models.ref]
source = "embedded:gemma3-270m-q4_k_m"
license = "gemma"
prompting = "completion"

[models.cand]
source = "hf:Org/Repo@abc123"
license = "Apache-2.0"
prompting = "chat"
tool_call_parser = "hermes"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sweep.toml"
    path.write_text(text)
    return path


def test_embedded_sweep_is_the_default_and_serves_identically() -> None:
    sweep = load_sweep()
    assert sweep.name == "embedded"
    assert sweep.reference == "gemma3-270m"
    assert sweep.candidates == ["smollm2-135m", "qwen2.5-coder-0.5b"]
    assert sweep.serving.context_length == 4096
    assert sweep.serving.max_num_seqs == 16
    assert sweep.serving.prefix_caching is True
    assert sweep.model("gemma3-270m").prompting == "completion"
    assert sweep.model("smollm2-135m").bfcl_mode == "prompt"
    qwen = sweep.model("qwen2.5-coder-0.5b")  # a quoted TOML key: the dots are in the name
    assert (qwen.prompting, qwen.bfcl_mode, qwen.tool_call_parser) == ("chat", "prompt", None)
    assert qwen.source.id == "qwen2.5-coder-0.5b-instruct-q4_k_m"
    # lm-evaluation-harness's own answer length limit for API models
    assert sweep.benchmarks.gsm8k_max_tokens == 256


def test_gsm8k_answer_length_is_a_sweep_setting(tmp_path: Path) -> None:
    assert load_sweep(write(tmp_path, VALID)).benchmarks.gsm8k_max_tokens == 2048  # none set
    sweep = load_sweep(write(tmp_path, VALID + "\n[benchmarks.gsm8k]\nmax_tokens = 96\n"))
    assert sweep.benchmarks.gsm8k_max_tokens == 96
    assert load_sweep("tpu-v5e").benchmarks.gsm8k_max_tokens == 2048  # the seed's


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            "[benchmarks.gsm8k]\nmax_tokens = 0\n",
            "benchmarks.gsm8k.max_tokens: expected a positive integer, got 0",
        ),
        (
            "[benchmarks.gsm8k]\nmax_tokens = 25.6\n",
            "benchmarks.gsm8k.max_tokens: expected a positive integer, got 25.6",
        ),
        (
            "[benchmarks.gsm8k]\nmax_token = 256\n",
            "benchmarks.gsm8k: unknown key(s) max_token; expected some of max_tokens",
        ),
        (
            "[benchmarks.mmlu]\nmax_tokens = 256\n",
            "benchmarks: unknown key(s) mmlu; expected some of gsm8k",
        ),
        ("benchmarks = 3\n", "benchmarks: expected tables [benchmarks.NAME]"),
    ],
)
def test_a_bad_benchmarks_table_names_the_key(tmp_path: Path, table: str, message: str) -> None:
    text = table + VALID if not table.startswith("[") else VALID + "\n" + table
    with pytest.raises(SweepError) as info:
        load_sweep(write(tmp_path, text))
    assert str(info.value) == f"{tmp_path / 'sweep.toml'}: {message}"


def test_tpu_sweep_has_the_seeds_models_and_a_release_tag_no_unresolved_digest() -> None:
    sweep = load_sweep("tpu-v5e")
    assert sweep.reference == "gemma-4-e2b"
    assert set(sweep.candidates) == {
        "qwen3-4b",
        "phi-4-mini",
        "smollm3-3b",
        "granite-3.3-2b",
        "qwen2.5-0.5b",
        "qwen2.5-1.5b",
        "smollm2-1.7b",
    }
    # a digest nothing here resolved would look checked: the sweep names a release tag, and
    # `modelsweep pin` writes the digest Docker resolves on the user's machine
    assert sweep.serving.image == "vllm/vllm-tpu:v0.21.0"
    assert "sha256" not in Path(sweep.path).read_text()
    assert sweep.serving.accelerator == "tpu-v5e"
    assert sweep.serving.extra_args[:2] == ("--max-num-batched-tokens", "512")
    assert sweep.model("qwen3-4b").source.id == "Qwen/Qwen3-4B"
    assert sweep.model("qwen3-4b").tool_call_parser == "hermes"
    assert sweep.model("smollm2-1.7b").tool_call_parser is None


def test_valid_custom_sweep(tmp_path: Path) -> None:
    sweep = load_sweep(write(tmp_path, VALID))
    cand = sweep.model("cand")
    assert cand.license == "apache-2.0"
    assert cand.source.revision == "abc123"
    assert cand.served_name == "cand"
    assert sweep.select([]).models == ("ref", "cand")


def test_unknown_model_lists_the_known_ones(tmp_path: Path) -> None:
    sweep = load_sweep(write(tmp_path, VALID))
    with pytest.raises(UnknownModelError) as info:
        sweep.select(["qwen9"])
    assert "unknown model 'qwen9'" in str(info.value)
    assert "known models: ref, cand" in str(info.value)


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            lambda t: t.replace('prompting = "chat"', 'prompting = "poem"'),
            "models.cand.prompting: expected one of 'chat', 'completion', got 'poem'",
        ),
        (
            lambda t: t.replace('reference = "ref"', 'reference = "nope"'),
            "sweep.reference: 'nope' is not one of the models",
        ),
        (
            lambda t: t.replace('backend = "llamacpp"', "backend = 3"),
            "serving.backend: expected one of",
        ),
        (
            lambda t: t.replace(
                '[serving]\nbackend = "llamacpp"',
                '[serving]\nbackend = "llamacpp"\nmax_num_seqs = -4',
            ),
            "serving.max_num_seqs: expected a positive integer, got -4",
        ),
        (
            lambda t: t.replace('license = "gemma"', 'license = "gemma"\ncolour = "red"'),
            "models.ref: unknown key(s) colour",
        ),
        (
            lambda t: t.replace('source = "hf:Org/Repo@abc123"', 'source = "Org/Repo"'),
            "models.cand.source: expected 'embedded:ID'",
        ),
        (
            lambda t: t.replace(
                '[serving]\nbackend = "llamacpp"', '[serving]\nbackend = "vllm-docker"'
            ),
            "serving.image: the vllm-docker backend needs an image",
        ),
        (
            lambda t: t.replace('[sweep]\nname = "mini"\n', "[sweep]\n"),
            "sweep.name: expected a non-empty string, got nothing",
        ),
        (
            lambda t: t.replace("[models.cand]", '[models."a=b"]'),  # --endpoint a=b=URL cannot
            "models.a=b: model names may not be empty or contain brackets, slashes, '=' or spaces",
        ),
    ],
)
def test_malformed_sweep_names_file_key_and_expectation(
    tmp_path: Path, edit: object, expected: str
) -> None:
    path = write(tmp_path, edit(VALID))  # type: ignore[operator]
    with pytest.raises(SweepError) as info:
        load_sweep(path)
    message = str(info.value)
    assert message.startswith(str(path))
    assert expected in message
    assert "\n" not in message


def test_not_toml(tmp_path: Path) -> None:
    path = write(tmp_path, "[sweep\nname=")
    with pytest.raises(SweepError, match="not valid TOML"):
        load_sweep(path)


def test_missing_file_names_the_builtins(tmp_path: Path) -> None:
    with pytest.raises(SweepError) as info:
        load_sweep(tmp_path / "absent.toml")
    assert "not found" in str(info.value) and "embedded, tpu-v5e" in str(info.value)


def test_dotted_model_names_must_be_quoted_in_toml(tmp_path: Path) -> None:
    text = (
        VALID + '\n[models.qwen2.5-1b]\nsource = "hf:Qwen/X"\nlicense = "mit"\nprompting = "chat"\n'
    )
    with pytest.raises(SweepError, match=r"models\.qwen2: unknown key"):
        load_sweep(write(tmp_path, text))


def test_parse_source_forms() -> None:
    assert str(parse_source("hf:Qwen/Qwen3-4B@main")) == "hf:Qwen/Qwen3-4B@main"
    assert parse_source("embedded:x").kind == "embedded"
    with pytest.raises(SweepError, match="ORG/REPO"):
        parse_source("hf:justaname")


def test_endpoint_option_parsing() -> None:
    assert parse_endpoint_option(["a=http://h:1/v1/", "b=https://x"]) == {
        "a": "http://h:1",
        "b": "https://x",
    }
    with pytest.raises(SweepError, match="expected NAME=URL"):
        parse_endpoint_option(["http://h:1"])
    with pytest.raises(SweepError, match="must start with http:// or https://"):
        parse_endpoint_option(["a=localhost:8000"])


def test_endpoint_option_is_checked_against_the_sweep() -> None:
    sweep = load_sweep("embedded")
    assert parse_endpoint_option(["smollm2-135m=http://h:1"], sweep) == {
        "smollm2-135m": "http://h:1"
    }
    with pytest.raises(UnknownModelError, match="unknown model 'qwen9'"):
        parse_endpoint_option(["qwen9=http://h:1"], sweep)
    with pytest.raises(SweepError, match="--endpoint smollm2-135m= is given twice"):
        parse_endpoint_option(["smollm2-135m=http://h:1", "smollm2-135m=http://h:2"], sweep)
