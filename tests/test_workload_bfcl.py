"""BFCL loading, BFCL's schema conversion and prompt, and the requests built from them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from support.requirements import SHARED_DATA_HINT, need

from pytest_modelsweep.core.errors import DataError
from pytest_modelsweep.core.sweep import BfclMode, ModelSource, ModelSpec, Prompting
from pytest_modelsweep.data import bfcl, expect_full_set
from pytest_modelsweep.data.bfcl import FULL_SIZE, BfclRecord, load_bfcl
from pytest_modelsweep.workloads.bfcl import (
    bfcl_function_docs,
    bfcl_skip_reason,
    bfcl_system_prompt,
    build_bfcl_request,
    to_openai_tools,
)

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "bfcl"
HINT = " Note that the provided function is in Python 3 syntax."


def spec(
    prompting: Prompting = "chat", parser: str | None = "hermes", mode: BfclMode = "tools"
) -> ModelSpec:
    return ModelSpec(
        name="tiny",
        source=ModelSource("embedded", "tiny"),
        served_name="tiny",
        license="mit",
        prompting=prompting,
        tool_call_parser=parser,
        bfcl_mode=mode,
    )


def fn(name: str = "f") -> dict[str, Any]:
    return {
        "name": name,
        "description": "d",
        "parameters": {"type": "dict", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
    }


def rec(ident: str, name: str = "f") -> dict[str, Any]:
    return {"id": ident, "question": [[{"role": "user", "content": "q"}]], "function": [fn(name)]}


def ans(ident: str, name: str = "f") -> dict[str, Any]:
    return {"id": ident, "ground_truth": [{name: {"a": [1]}}]}


def write_pair(folder: Path, records: list[Any], answers: list[Any]) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    records_path = folder / "BFCL_v4_simple_python.json"
    answers_path = folder / "possible_answer_BFCL_v4_simple_python.json"
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    records_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    lines = [a if isinstance(a, str) else json.dumps(a) for a in answers]
    answers_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return records_path, answers_path


def by_id(records: list[BfclRecord], ident: str) -> BfclRecord:
    return next(r for r in records if r.id == ident)


@pytest.fixture(scope="module")
def real() -> list[BfclRecord]:
    need(DATA.is_dir(), f"shared BFCL data not found at {DATA}; {SHARED_DATA_HINT}")
    return load_bfcl(DATA)


def test_real_records_joined_with_answers(real: list[BfclRecord]) -> None:
    assert len(real) == 400
    expect_full_set(real, FULL_SIZE, "BFCL simple", "simple_python category")
    assert [r.id for r in real[:2]] == ["simple_python_0", "simple_python_1"]
    assert len({r.id for r in real}) == 400
    first = real[0]
    assert first.question == [
        [
            {
                "role": "user",
                "content": "Find the area of a triangle with a base of 10 units and height of 5 units.",
            }
        ]
    ]
    assert first.function[0]["name"] == "calculate_triangle_area"
    assert first.ground_truth == [
        {"calculate_triangle_area": {"base": [10], "height": [5], "unit": ["units", ""]}}
    ]
    assert all(next(iter(r.ground_truth[0])) == r.function[0]["name"] for r in real)
    assert by_id(real, "simple_python_1").data_hash != first.data_hash


def test_records_file_path_works_too(tmp_path: Path) -> None:
    records_path, _ = write_pair(tmp_path, [rec("simple_python_0")], [ans("simple_python_0")])
    assert [r.id for r in load_bfcl(records_path)] == ["simple_python_0"]


def test_bfcl_package_layout(tmp_path: Path) -> None:
    _, answers_path = write_pair(tmp_path, [rec("simple_python_0")], [ans("simple_python_0")])
    (tmp_path / "possible_answer").mkdir()
    shutil.move(answers_path, tmp_path / "possible_answer" / "BFCL_v4_simple_python.json")
    assert load_bfcl(tmp_path)[0].ground_truth == [{"f": {"a": [1]}}]


def test_malformed_line_names_file_and_line(tmp_path: Path) -> None:
    records_path, _ = write_pair(
        tmp_path, [rec("simple_python_0"), '{"id": "simple_python_1", '], [ans("simple_python_0")]
    )
    with pytest.raises(DataError) as info:
        load_bfcl(tmp_path)
    assert str(info.value).startswith(f"{records_path}:2: not valid JSON")


def test_record_without_answer(tmp_path: Path) -> None:
    records_path, answers_path = write_pair(
        tmp_path, [rec("simple_python_0"), rec("simple_python_1")], [ans("simple_python_0")]
    )
    with pytest.raises(DataError) as info:
        load_bfcl(tmp_path)
    assert str(info.value).startswith(
        f"{records_path}:2: record 'simple_python_1' has no possible answer in {answers_path}"
    )


def test_answer_without_record(tmp_path: Path) -> None:
    _, answers_path = write_pair(
        tmp_path, [rec("simple_python_0")], [ans("simple_python_0"), ans("simple_python_9")]
    )
    with pytest.raises(DataError, match=r"answer 'simple_python_9' has no record") as info:
        load_bfcl(tmp_path)
    assert str(info.value).startswith(f"{answers_path}:2:")


@pytest.mark.parametrize(
    ("record", "answer", "message"),
    [
        (
            {"id": "simple_python_0", "function": [fn()]},
            ans("simple_python_0"),
            r'BFCL_v4_simple_python\.json:1: missing field "question"',
        ),
        (
            {**rec("simple_python_0"), "question": [{"role": "user", "content": "q"}]},
            ans("simple_python_0"),
            r'\.json:1: field "question" must be',
        ),
        (
            {**rec("simple_python_0"), "function": [{"name": "f"}]},
            ans("simple_python_0"),
            r"\.json:1: function 'f' needs \"parameters\"",
        ),
        (
            {**rec("simple_python_0"), "id": 0},
            ans("simple_python_0"),
            r'\.json:1: field "id" must be a string',
        ),
        (
            rec("simple_python_0"),
            {"id": "simple_python_0"},
            r'possible_answer_BFCL_v4_simple_python\.json:1: missing field "ground_truth"',
        ),
        (
            rec("simple_python_0"),
            {"id": "simple_python_0", "ground_truth": [{"f": {"a": 1}}]},
            r"\.json:1: field \"ground_truth\" must be",
        ),
    ],
)
def test_missing_or_wrong_fields(tmp_path: Path, record: Any, answer: Any, message: str) -> None:
    write_pair(tmp_path, [record], [answer])
    with pytest.raises(DataError, match=message):
        load_bfcl(tmp_path)


def test_duplicate_id_and_missing_files(tmp_path: Path) -> None:
    write_pair(tmp_path, [rec("simple_python_0"), rec("simple_python_0")], [ans("simple_python_0")])
    with pytest.raises(
        DataError, match=r"\.json:2: duplicate id 'simple_python_0' \(first on line 1\)"
    ):
        load_bfcl(tmp_path)
    with pytest.raises(DataError, match="BFCL records file not found"):
        load_bfcl(tmp_path / "empty")
    (tmp_path / "possible_answer_BFCL_v4_simple_python.json").unlink()
    with pytest.raises(DataError, match="BFCL possible answers not found"):
        load_bfcl(tmp_path)


def test_short_set_is_rejected_for_a_full_run(tmp_path: Path) -> None:
    write_pair(tmp_path, [rec("simple_python_0")], [ans("simple_python_0")])
    with pytest.raises(DataError, match=r"1 BFCL simple records, expected 400"):
        expect_full_set(load_bfcl(tmp_path), FULL_SIZE, "BFCL simple", "simple_python category")


def test_hub_download_tries_v4_then_v3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub
    from huggingface_hub.errors import EntryNotFoundError

    records_path, answers_path = write_pair(tmp_path, [rec("simple_0")], [ans("simple_0")])
    calls: list[dict[str, Any]] = []

    def download(**kwargs: Any) -> str:
        calls.append(kwargs)
        if kwargs["filename"].startswith(("BFCL_v4", "possible_answer/BFCL_v4")):
            raise EntryNotFoundError("no such file")
        return str(
            answers_path if kwargs["filename"].startswith("possible_answer/") else records_path
        )

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    records = load_bfcl(None)
    assert [r.id for r in records] == ["simple_0"]
    assert (
        records[0].source
        == "hf:gorilla-llm/Berkeley-Function-Calling-Leaderboard/BFCL_v3_simple.json"
    )
    assert [c["filename"] for c in calls] == [
        "BFCL_v4_simple_python.json",
        "BFCL_v3_simple.json",
        "possible_answer/BFCL_v3_simple.json",
    ]
    assert all(c["repo_id"] == bfcl.HUB_REPO and c["repo_type"] == "dataset" for c in calls)


def test_hub_without_any_candidate(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub
    from huggingface_hub.errors import EntryNotFoundError

    def download(**kwargs: Any) -> str:
        raise EntryNotFoundError("no such file")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    with pytest.raises(
        DataError,
        match=r"none of the BFCL simple-python files exist .*BFCL_v4_simple_python\.json.*BFCL_v3_simple\.json",
    ):
        load_bfcl(None)

    def offline(**kwargs: Any) -> str:
        raise OSError("offline")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", offline)
    with pytest.raises(DataError, match=r"could not download BFCL data .*OSError: offline"):
        load_bfcl(None)


def test_schema_conversion_on_real_records(real: list[BfclRecord]) -> None:
    tuple_record = by_id(real, "simple_python_83")
    [tool] = to_openai_tools(tuple_record.function)
    assert tool["type"] == "function"
    assert tool["function"]["name"] == "calculate_distance"
    params = tool["function"]["parameters"]
    assert params["type"] == "object" and params["required"] == ["coord1", "coord2", "unit"]
    assert params["properties"]["coord1"] == {
        "type": "array",
        "description": "The first coordinate as (latitude, longitude).",
        "items": {"type": "number"},
    }
    assert params["properties"]["unit"]["type"] == "string"
    assert tuple_record.function[0]["parameters"]["type"] == "dict"  # the record is not modified

    [any_tool] = to_openai_tools(by_id(real, "simple_python_109").function)
    assert any_tool["function"]["name"] == "random_forest_train"
    assert any_tool["function"]["parameters"]["properties"]["data"]["type"] == "string"
    [dotted] = to_openai_tools(by_id(real, "simple_python_109").function, underscore_to_dot=False)
    assert dotted["function"]["name"] == "random_forest.train"

    [float_tool] = to_openai_tools(by_id(real, "simple_python_118").function)
    alpha = float_tool["function"]["parameters"]["properties"]["alpha"]
    assert alpha == {
        "type": "number",
        "format": "float",
        "description": "Significance level for hypothesis testing. This is a float type value.",
    }
    assert float_tool["function"]["parameters"]["properties"]["array_1"]["items"] == {
        "type": "integer"
    }

    [dict_tool] = to_openai_tools(by_id(real, "simple_python_89").function)
    conditions = dict_tool["function"]["parameters"]["properties"]["conditions"]
    assert conditions["type"] == "object"
    assert conditions["properties"]["school"]["type"] == "string"

    [list_of_dicts] = to_openai_tools(by_id(real, "simple_python_96").function)
    items = list_of_dicts["function"]["parameters"]["properties"]["conditions"]["items"]
    assert items["type"] == "object" and items["properties"]["field"]["type"] == "string"

    gorilla_types = {"dict", "float", "tuple", "any", "integer", "string", "array", "boolean"}
    for record in real:
        dumped = json.dumps(to_openai_tools(record.function))
        for gorilla in gorilla_types - {"integer", "string", "array", "boolean"}:
            assert f'"type": "{gorilla}"' not in dumped, record.id


def test_function_docs_get_the_python_hint(real: list[BfclRecord]) -> None:
    docs = bfcl_function_docs(real[0])
    assert (
        docs[0]["description"]
        == "Calculate the area of a triangle given its base and height." + HINT
    )
    assert (
        real[0].function[0]["description"]
        == "Calculate the area of a triangle given its base and height."
    )


def test_system_prompt_is_bfcls_default() -> None:
    docs = [fn("math.factorial")]
    prompt = bfcl_system_prompt(docs)
    assert prompt.startswith(
        "You are an expert in composing functions.You are given a question and a set of possible functions."
    )
    assert (
        "you MUST put it in the format of [func_name1(params_name1=params_value1, params_name2=params_value2...), "
        "func_name2(params)].  You SHOULD NOT include any other text in the response.\n\n"
    ) in prompt
    assert (
        "\n\nHere is a list of functions in json format that you can invoke.\n[\n    {\n" in prompt
    )
    head, _, listing = prompt.partition("that you can invoke.\n")
    assert json.loads(listing) == docs and listing.endswith("]\n")
    assert "If none of the functions can be used, point it out." in head


RECORD = BfclRecord(
    id="simple_python_1",
    question=[[{"role": "user", "content": "What is 5 factorial?"}]],
    function=[fn("math.factorial")],
    ground_truth=[{"math.factorial": {"a": [5]}}],
)


def test_tools_request() -> None:
    request = build_bfcl_request(RECORD, spec())
    assert request.path == "/v1/chat/completions" and request.item_id == "simple_python_1"
    assert request.payload == {
        "messages": [{"role": "user", "content": "What is 5 factorial?"}],
        "tools": to_openai_tools(bfcl_function_docs(RECORD)),
        "max_tokens": 1024,
        "temperature": 0.0,
    }
    assert request.payload["tools"][0]["function"]["name"] == "math_factorial"
    assert request.payload["tools"][0]["function"]["description"] == "d" + HINT


def test_prompt_request_for_chat_models() -> None:
    request = build_bfcl_request(RECORD, spec(parser=None, mode="prompt"), max_tokens=256)
    assert request.path == "/v1/chat/completions"
    system, user = request.payload["messages"]
    assert system == {"role": "system", "content": bfcl_system_prompt(bfcl_function_docs(RECORD))}
    assert user == {"role": "user", "content": "What is 5 factorial?"}
    assert "tools" not in request.payload and request.payload["max_tokens"] == 256


def test_prompt_request_merges_an_existing_system_message() -> None:
    with_system = BfclRecord(
        id="x",
        question=[[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "q"}]],
        function=[fn()],
        ground_truth=[{"f": {"a": [1]}}],
    )
    messages = build_bfcl_request(with_system, spec(mode="prompt")).payload["messages"]
    assert len(messages) == 2
    assert (
        messages[0]["content"]
        == bfcl_system_prompt(bfcl_function_docs(with_system)) + "\n\nBe brief."
    )


def test_prompt_request_for_completion_models() -> None:
    request = build_bfcl_request(RECORD, spec(prompting="completion", parser=None, mode="prompt"))
    assert request.path == "/v1/completions"
    prompt = request.payload["prompt"]
    system = bfcl_system_prompt(bfcl_function_docs(RECORD))
    assert prompt == system.rstrip("\n") + "\n\nUser: What is 5 factorial?\n\nAssistant:"
    assert request.payload["stop"] == ["\n\n", "\nUser:", "</s>", "<|im_end|>"]
    assert request.payload["temperature"] == 0.0


def test_skip_reason() -> None:
    assert bfcl_skip_reason(spec(parser=None, mode="tools")) == (
        'no tool-call parser for tiny (set bfcl_mode = "prompt" to use BFCL\'s prompt mode)'
    )
    assert bfcl_skip_reason(spec(parser="hermes", mode="tools")) is None
    assert bfcl_skip_reason(spec(parser=None, mode="prompt")) is None


@pytest.mark.parametrize("which", ["records", "answers"])
def test_a_file_that_is_not_utf8_names_file_and_line(tmp_path: Path, which: str) -> None:
    records_path, answers_path = write_pair(
        tmp_path, [rec("simple_python_0")], [ans("simple_python_0")]
    )
    bad = records_path if which == "records" else answers_path
    bad.write_bytes(bad.read_bytes() + b'{"id": "x\x96"}\n')  # cp1252's en dash
    with pytest.raises(DataError) as info:
        load_bfcl(tmp_path)
    assert str(info.value) == (
        f"{bad}:2: not UTF-8 text (byte 0x96 at column 10); BFCL files "
        "are UTF-8: convert it (e.g. iconv -f latin1 -t utf-8)"
    )
