"""GSM8K loading, lm-eval's few-shot sampling and the requests built from them."""

from __future__ import annotations

import json
import random
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from support.requirements import SHARED_DATA_HINT, need
from support.sse_server import ListingServer

from pytest_modelsweep.core.errors import DataError
from pytest_modelsweep.core.sweep import ModelSource, ModelSpec, Prompting, load_sweep
from pytest_modelsweep.data import expect_full_set
from pytest_modelsweep.data.gsm8k import (
    FULL_TEST_SIZE,
    Gsm8kProblem,
    load_gsm8k,
    load_gsm8k_fewshot,
)
from pytest_modelsweep.workloads.gsm8k import (
    Gsm8kFewshot,
    build_gsm8k_request,
    chat_messages,
    completion_prompt,
)

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "gsm8k"


def need_data() -> None:
    need(
        (DATA / "test.jsonl").is_file(),
        f"shared GSM8K data not found at {DATA}; {SHARED_DATA_HINT}",
    )


def spec(prompting: Prompting) -> ModelSpec:
    return ModelSpec(
        name="m",
        source=ModelSource("embedded", "m"),
        served_name="m",
        license="mit",
        prompting=prompting,
        tool_call_parser=None,
        bfcl_mode="prompt",
    )


def problem(index: int, split: str = "train", question: str = "", answer: str = "") -> Gsm8kProblem:
    return Gsm8kProblem(
        item_id=f"gsm8k-{split}-{index:04d}",
        index=index,
        split=split,
        question=question or f"q{index}",
        answer=answer or f"a{index}\n#### {index}",
    )


def write(tmp_path: Path, lines: list[str], name: str = "test.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_real_test_and_train_splits() -> None:
    need_data()
    test = load_gsm8k(DATA / "test.jsonl")
    assert len(test) == 1319
    expect_full_set(test, FULL_TEST_SIZE, "GSM8K test", "test split")
    assert [p.item_id for p in test[:2]] == ["gsm8k-test-0000", "gsm8k-test-0001"]
    assert test[-1].item_id == "gsm8k-test-1318" and test[-1].index == 1318
    assert test[0].question.startswith("Janet\u2019s ducks lay 16 eggs per day.")
    assert test[0].answer.endswith("#### 18")
    assert load_gsm8k(DATA)[5] == test[5]  # a folder means <folder>/<split>.jsonl

    train = load_gsm8k_fewshot(DATA / "test.jsonl")
    assert (
        len(train) == 7473 and train[0].item_id == "gsm8k-train-0000" and train[0].split == "train"
    )


def test_malformed_json_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, ['{"question": "q", "answer": "#### 1"}', '{"question": "q", '])
    with pytest.raises(DataError) as info:
        load_gsm8k(path)
    assert str(info.value).startswith(f"{path}:2: not valid JSON")


def test_missing_field_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, ['{"question": "q", "answer": "#### 1"}', "", '{"question": "q"}'])
    with pytest.raises(DataError, match=r'test\.jsonl:3: missing field "answer"') as info:
        load_gsm8k(path)
    assert str(path) in str(info.value)


def test_wrong_type_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, ['{"question": "q", "answer": 18}'])
    with pytest.raises(DataError, match=r'test\.jsonl:1: field "answer" must be a string, got int'):
        load_gsm8k(path)
    path = write(tmp_path, ['["q", "a"]'], "list.jsonl")
    with pytest.raises(DataError, match=r"list\.jsonl:1: expected a JSON object"):
        load_gsm8k(path)


def test_missing_file_and_missing_train(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="GSM8K file not found"):
        load_gsm8k(tmp_path / "nope.jsonl")
    test = write(tmp_path, ['{"question": "q", "answer": "#### 1"}'])
    with pytest.raises(DataError, match=r"train\.jsonl: GSM8K train split not found"):
        load_gsm8k_fewshot(test)


def test_expect_full_test_set_rejects_a_short_set(tmp_path: Path) -> None:
    path = write(tmp_path, ['{"question": "q", "answer": "#### 1"}'] * 3)
    with pytest.raises(DataError, match=r"test\.jsonl: 3 GSM8K test records, expected 1319"):
        expect_full_set(load_gsm8k(path), FULL_TEST_SIZE, "GSM8K test", "test split")


def test_hub_loading_calls_datasets(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Any, ...]] = []

    def load_dataset(*args: Any, **kwargs: Any) -> list[dict[str, str]]:
        calls.append((args, kwargs))
        return [{"question": "q0", "answer": "#### 0"}, {"question": "q1", "answer": "#### 1"}]

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    problems = load_gsm8k(None, split="train")
    assert calls == [(("openai/gsm8k", "main"), {"split": "train"})]
    assert [p.item_id for p in problems] == ["gsm8k-train-0000", "gsm8k-train-0001"]
    assert problems[1].source == "hf:openai/gsm8k/main/train"


def test_hub_failure_is_a_data_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def load_dataset(*args: Any, **kwargs: Any) -> None:
        raise ConnectionError("no network")

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    with pytest.raises(
        DataError, match=r"hf:openai/gsm8k/main/test: could not load .*ConnectionError: no network"
    ):
        load_gsm8k(None)


def test_fewshot_reproduces_lm_evals_shared_generator() -> None:
    train = [problem(i) for i in range(50)]
    rnd = random.Random(1234)
    draws = [rnd.sample(train, 5) for _ in range(4)]
    sampler = Gsm8kFewshot(train)
    tests = [problem(i, "test", question=f"test question {i}") for i in range(4)]
    # asked out of order, each test index still gets its own draw of the one generator
    assert list(sampler.exemplars(tests[3])) == draws[3]
    assert list(sampler.exemplars(tests[0])) == draws[0]
    assert list(sampler.exemplars(tests[2])) == draws[2]
    assert Gsm8kFewshot(train, seed=1).exemplars(tests[0]) != tuple(draws[0])


def test_fewshot_drops_an_exemplar_equal_to_the_document() -> None:
    train = [problem(i) for i in range(50)]
    drawn = random.Random(1234).sample(train, 5)
    twin = Gsm8kProblem("gsm8k-test-0000", 0, "test", drawn[1].question, drawn[1].answer)
    assert list(Gsm8kFewshot(train).exemplars(twin)) == [
        drawn[0],
        *drawn[2:],
    ]  # as lm-eval: 4 shots


def test_fewshot_on_its_own_split_drops_the_document() -> None:
    train = [problem(i) for i in range(8)]
    drawn = random.Random(1234).sample(train, 6)
    doc = Gsm8kProblem("gsm8k-train-0000", 0, "train", drawn[2].question, drawn[2].answer)
    shots = Gsm8kFewshot(train, eval_split="train").exemplars(doc)
    assert list(shots) == [p for p in drawn if p != drawn[2]][:5]
    assert drawn[2] not in shots and len(shots) == 5


def test_real_fewshot_for_the_first_test_problem() -> None:
    need_data()
    train = load_gsm8k_fewshot(DATA)
    first = load_gsm8k(DATA)[0]
    expected = [train[i] for i in random.Random(1234).sample(range(len(train)), 5)]
    assert list(Gsm8kFewshot(train).exemplars(first)) == expected


SHOTS = [
    problem(1, question="One?", answer="1+1=2\n#### 2"),
    problem(2, question="Two?", answer="#### 3"),
]
TARGET = problem(0, "test", question="Target?", answer="#### 9")


def test_completion_prompt_is_lm_evals_fewshot_context() -> None:
    assert completion_prompt(TARGET, SHOTS) == (
        "Question: One?\nAnswer: 1+1=2\n#### 2\n\n"
        "Question: Two?\nAnswer: #### 3\n\n"
        "Question: Target?\nAnswer:"
    )


def test_chat_messages_are_fewshot_as_multiturn() -> None:
    assert chat_messages(TARGET, SHOTS) == [
        {"role": "user", "content": "Question: One?\nAnswer:"},
        {"role": "assistant", "content": "1+1=2\n#### 2"},
        {"role": "user", "content": "Question: Two?\nAnswer:"},
        {"role": "assistant", "content": "#### 3"},
        {"role": "user", "content": "Question: Target?\nAnswer:"},
    ]


def test_build_request_by_prompting() -> None:
    completion = build_gsm8k_request(TARGET, spec("completion"), SHOTS)
    assert completion.path == "/v1/completions" and completion.item_id == "gsm8k-test-0000"
    assert completion.payload == {
        "prompt": completion_prompt(TARGET, SHOTS),
        "max_tokens": 2048,
        "temperature": 0.0,
        "stop": ["Question:", "</s>", "<|im_end|>"],
        "seed": 1234,
    }
    chat = build_gsm8k_request(TARGET, spec("chat"), SHOTS, max_tokens=64)
    assert chat.path == "/v1/chat/completions"
    assert chat.payload["messages"] == chat_messages(TARGET, SHOTS)
    assert chat.payload["max_tokens"] == 64 and chat.payload["stop"] == [
        "Question:",
        "</s>",
        "<|im_end|>",
    ]
    assert "model" not in chat.payload and "model" not in completion.payload
    assert chat.prompt_hash != completion.prompt_hash


def test_build_request_with_the_sampler() -> None:
    train = [problem(i) for i in range(20)]
    sampler = Gsm8kFewshot(train)
    request = build_gsm8k_request(TARGET, spec("completion"), sampler)
    expected = random.Random(1234).sample(train, 5)
    assert request.payload["prompt"] == completion_prompt(TARGET, expected)
    assert request.payload["prompt"].count("Question:") == 6
    assert json.loads(json.dumps(request.payload)) == request.payload


def test_the_answer_length_is_the_sweeps_unless_the_option_overrides_it(
    pytester: pytest.Pytester,
) -> None:
    """The real GSM8K bench sends the sweep's ``[benchmarks.gsm8k] max_tokens``, records it
    in the measurement, and ``--gsm8k-max-tokens`` overrides it; an answer stored under one
    limit is not reused under another (the limit is part of the request, so of its hash)."""
    need_data()
    root = Path(__file__).resolve().parents[1]
    pytester.makepyfile(test_accuracy=(root / "benches" / "test_accuracy.py").read_text())
    embedded = Path(load_sweep("embedded").path).read_text()
    assert "\nmax_tokens = 256\n" in embedded
    sweep = pytester.path / "capped.toml"
    sweep.write_text(embedded.replace("\nmax_tokens = 256\n", "\nmax_tokens = 5\n"))

    with ListingServer("gemma3-270m") as server:

        def run(*args: str) -> tuple[list[int], dict[str, Any]]:
            sent = len(server.stats.bodies)
            result = pytester.runpytest(
                "-m",
                "gsm8k",
                f"--gsm8k-path={DATA / 'test.jsonl'}",
                "--limit",
                "2",
                "--sweep",
                str(sweep),
                "--model",
                "gemma3-270m",
                "--endpoint",
                f"gemma3-270m={server.base_url}",
                "--store",
                "store.sqlite",
                "--results",
                "results.json",
                *args,
            )
            assert result.ret == 0 and result.parseoutcomes()["passed"] == 1
            [measurement] = json.loads((pytester.path / "results.json").read_text())["measurements"]
            return [body["max_tokens"] for body in server.stats.bodies[sent:]], measurement[
                "params"
            ]

        sent, params = run()
        assert sent == [5, 5] and params["max_tokens"] == 5
        sent, params = run("--gsm8k-max-tokens", "9")  # stored answers were cut at 5: sent again
        assert sent == [9, 9] and params["max_tokens"] == 9
        sent, params = run("--gsm8k-max-tokens", "9")  # the same limit: reused, nothing sent
        assert sent == [] and params["max_tokens"] == 9


def test_a_file_that_is_not_utf8_names_file_and_line(tmp_path: Path) -> None:
    """Saved as Latin-1 (``é`` as the byte 0xe9 on line 3): one line naming where, and the fix."""
    path = tmp_path / "test.jsonl"
    path.write_bytes(
        b'{"question": "q", "answer": "#### 1"}\n' * 2
        + '{"question": "caf\u00e9?", "answer": "#### 2"}\n'.encode("latin-1")
    )
    with pytest.raises(DataError) as info:
        load_gsm8k(path)
    assert str(info.value) == (
        f"{path}:3: not UTF-8 text (byte 0xe9 at column 18); GSM8K files "
        "are UTF-8: convert it (e.g. iconv -f latin1 -t utf-8)"
    )


def test_a_run_on_a_file_that_is_not_utf8_fails_in_one_line(pytester: pytest.Pytester) -> None:
    """The built-in bench on such a file: each model's GSM8K test fails with that one line."""
    from support.sse_server import SseServer

    models = tuple(load_sweep("embedded").models)
    pytester.makepyfile(
        test_accuracy=(Path(__file__).parents[1] / "benches" / "test_accuracy.py").read_text()
    )
    data = pytester.path / "gsm8k"
    data.mkdir()
    (data / "train.jsonl").write_text('{"question": "q", "answer": "#### 1"}\n')
    (data / "test.jsonl").write_bytes(b'{"question": "\xff", "answer": "#### 1"}\n')
    with SseServer(served_names=models) as server:
        result = pytester.runpytest(
            "-k",
            "gsm8k and not verdict",
            f"--gsm8k-path={data / 'test.jsonl'}",
            *(f"--endpoint={m}={server.base_url}" for m in models),
            "-p",
            "no:cacheprovider",
        )
    result.assert_outcomes(errors=len(models))
    line = (
        f"{data / 'test.jsonl'}:1: not UTF-8 text (byte 0xff at column 15); GSM8K files are "
        "UTF-8: convert it (e.g. iconv -f latin1 -t utf-8)"
    )
    assert result.stdout.lines.count(line) == len(models)
    assert "Traceback" not in result.stdout.str() and server.stats.bodies == []
