"""Your own benchmark with the public API: a fresh project's benchmark file, against fake servers.

The pytester projects below import nothing but ``pytest`` and ``pytest_modelsweep``'s public
names; their sweep has a completion model (the reference) and a chat model (the candidate),
each attached with ``--endpoint`` to a fake server that answers arithmetic questions.
"""

from __future__ import annotations

import ast
import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.arithmetic import (
    SWEEP,
    ArithmeticServer,
    options,
)
from support.direct_calls import Recorded, attached, bench_settings
from support.paths import TWO_WORKERS

import pytest_modelsweep
from pytest_modelsweep.api.evaluation import (
    EvalItem,
    Score,
    render_completion_prompt,
    request_for,
    scored_record,
    summarise_items,
)
from pytest_modelsweep.client import parse_completion
from pytest_modelsweep.core.errors import DataError, MeasurementError, ScorerError
from pytest_modelsweep.core.outputs import OutputError
from pytest_modelsweep.core.records import Completion, ItemRecord
from pytest_modelsweep.data.gsm8k import Gsm8kProblem
from pytest_modelsweep.scoring.gsm8k import score_gsm8k_answer
from pytest_modelsweep.store.database import Store
from pytest_modelsweep.workloads.accuracy import evaluate
from pytest_modelsweep.workloads.gsm8k import gsm8k_eval_item

pytest_plugins = ("pytester",)


# A benchmark as a user writes it: the public API only.
MY_EVAL = """
import pytest
from pytest_modelsweep import Completion, EvalItem, Evaluate, Score

INSTRUCTION = {"role": "system", "content": "Answer with a number."}
ITEMS = [EvalItem(f"q{i:02d}",
                  messages=[INSTRUCTION, {"role": "user", "content": f"What is {i} + {2 * i}?"}],
                  answer=str(3 * i), max_tokens=8, stop=["\\n"]) for i in range(30)]

def first_number(completion: Completion, item: EvalItem) -> Score:
    answer = (completion.text or "").strip().split(" ")[0]
    return Score(answer == item.answer, answer=answer)

@pytest.mark.modelsweep_benchmark("my_eval")
def test_my_eval(evaluate: Evaluate) -> None:
    result = evaluate("my_eval", ITEMS, first_number, concurrency=4)
    print(f"{result.model}: {result.correct}/{result.n}, sent {result.sent}")

def test_plain() -> None:
    pass
"""


@pytest.fixture
def servers() -> Iterator[tuple[ArithmeticServer, ArithmeticServer]]:
    """The reference's server (wrong on q10, q12, ..., q18) and the candidate's (wrong on q01,
    q03, ..., q09): 25 of 30 each, and 10 items scored differently: enough for a verdict."""
    with (
        ArithmeticServer("ref-served", wrong=(10, 12, 14, 16, 18)) as reference,
        ArithmeticServer("cand-served", wrong=(1, 3, 5, 7, 9)) as candidate,
    ):
        yield reference, candidate


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    """A fresh project: its own sweep file and the benchmark file."""
    (pytester.path / "mine.toml").write_text(SWEEP)
    pytester.makepyfile(test_my_eval=MY_EVAL)
    return pytester


def run(project: pytest.Pytester, *args: str) -> pytest.RunResult:
    """pytest in a subprocess: a run that sends requests must not load httpx's lazily imported
    parts inside pytester's in-process run, which forgets them afterwards (and so makes a
    second copy of their exception classes for the tests that come later)."""
    return project.runpytest(*args)


def measurements(project: pytest.Pytester, name: str) -> dict[tuple[str, str], dict[str, Any]]:
    data = json.loads((project.path / name).read_text())
    return {(m["model"], m["benchmark"]): m for m in data["measurements"]}


@pytest.mark.parametrize("under_xdist", [False, True], ids=["plain", "xdist"])
def test_a_new_benchmark_is_stored_resumed_and_judged_against_the_reference(
    project: pytest.Pytester,
    servers: tuple[ArithmeticServer, ArithmeticServer],
    under_xdist: bool,
) -> None:
    reference, candidate = servers
    workers = list(TWO_WORKERS) if under_xdist else []
    first = run(project, *options(servers, "--results=first.json", *workers))
    first.assert_outcomes(passed=4)  # two models' tests, the candidate's verdict, the plain test
    assert "PytestUnknownMarkWarning" not in first.stdout.str()
    assert (len(reference.stats.bodies), len(candidate.stats.bodies)) == (30, 30)
    # the completion model got the messages as a plain transcript, the chat model the messages
    # (4 in flight: the servers see the requests in whatever order they arrive)
    assert "Answer with a number.\n\nUser: What is 0 + 0?\n\nAssistant:" in [
        body.get("prompt") for body in reference.stats.bodies
    ]
    assert [
        {"role": "system", "content": "Answer with a number."},
        {"role": "user", "content": "What is 0 + 0?"},
    ] in [body.get("messages") for body in candidate.stats.bodies]
    assert {b["stop"][0] for b in reference.stats.bodies + candidate.stats.bodies} == {"\n"}

    second = run(project, *options(servers, "--results=second.json", *workers))
    second.assert_outcomes(passed=4)
    assert (len(reference.stats.bodies), len(candidate.stats.bodies)) == (30, 30)  # nothing re-sent

    for name, sent, reused in (("first.json", 30, 0), ("second.json", 0, 30)):
        found = measurements(project, name)
        mine = found[("cand", "my_eval")]
        assert (mine["value"], mine["n"], mine["unit"]) == (25 / 30, 30, "accuracy")
        assert (mine["stats"]["sent"], mine["stats"]["reused"]) == (sent, reused)
        assert (mine["stats"]["correct"], mine["stats"]["failed"]) == (25, 0)
        # what every item was sampled with (stop sequences are the prompt format's, not here)
        assert mine["params"] == {
            "prompting": "chat",
            "limit": None,
            "subset": False,
            "sampling": {"max_tokens": 8, "temperature": 0.0},
        }
        assert mine["provenance"]["served_name"] == "cand-served"
        assert found[("ref", "my_eval")]["value"] == 25 / 30
        verdict = found[("cand", "verdict:my_eval")]
        assert verdict["params"]["reference"] == "ref"
        assert verdict["params"]["verdict"] == "matches"  # 5 items each way
        assert (verdict["n"], verdict["stats"]["interval"]["discordant"]) == (30, 10)
        assert verdict["value"] == pytest.approx(0.0)
        assert verdict["test_id"] == "test_my_eval.py::test_verdict[cand-my_eval]"


def test_marker_model_and_limit_select_as_for_the_built_ins(
    project: pytest.Pytester,
    servers: tuple[ArithmeticServer, ArithmeticServer],
) -> None:
    selected = project.runpytest(*options(servers, "--collect-only", "-q", "-m", "my_eval"))
    assert [line for line in selected.stdout.lines if "::" in line] == [
        "test_my_eval.py::test_my_eval[ref]",
        "test_my_eval.py::test_my_eval[cand]",
        "test_my_eval.py::test_verdict[cand-my_eval]",  # after the models' own tests
    ]
    verdicts = project.runpytest(*options(servers, "--collect-only", "-q", "-m", "verdict"))
    assert [line for line in verdicts.stdout.lines if "::" in line] == [
        "test_my_eval.py::test_verdict[cand-my_eval]"
    ]
    one = project.runpytest(*options(servers, "--collect-only", "-q", "--model=cand"))
    assert [line for line in one.stdout.lines if "::" in line] == [
        "test_my_eval.py::test_my_eval[cand]",
        "test_my_eval.py::test_verdict[cand-my_eval]",
        "test_my_eval.py::test_plain",
    ]

    limited = run(
        project,
        *options(servers, "-m", "my_eval", "--limit=5", "--results=r.json", "-s", "--md=r.md"),
    )
    limited.assert_outcomes(passed=3)
    # 5 items: the verdict is inconclusive, in the line and on the decision page, saying why
    limited.stdout.fnmatch_lines(
        [
            "*cand vs ref on my_eval: inconclusive (*; no verdict from "
            "it: only 5 items paired (*): score more items (raise --limit)"
        ]
    )
    page = (project.path / "r.md").read_text().replace("\\", "")
    assert (
        "cand vs the reference on my_eval: no verdict from its interval: only 5 items "
        "paired (the interval holds its 95% coverage from 30 items with 10 scored "
        "differently on): score more items (raise --limit)"
    ) in page
    reference, candidate = servers
    assert [len(reference.stats.bodies), len(candidate.stats.bodies)] == [5, 5]
    mine = measurements(project, "r.json")[("cand", "my_eval")]
    assert (mine["n"], mine["params"]["limit"], mine["params"]["subset"]) == (5, 5, True)
    assert [item["item_id"] for item in mine["items"]] == ["q00", "q01", "q02", "q03", "q04"]


def test_partial_credit_is_the_accuracy_and_the_verdicts_score(
    project: pytest.Pytester,
    servers: tuple[ArithmeticServer, ArithmeticServer],
) -> None:
    # half credit for the right number anywhere in the answer, full credit for an exact answer
    project.makepyfile(
        test_my_eval=MY_EVAL.replace(
            "return Score(answer == item.answer, answer=answer)",
            "return 1.0 if answer == item.answer and item.id < 'q10' else 0.5",
        )
    )
    result = run(project, *options(servers, "-m", "my_eval", "--results=r.json"))
    result.assert_outcomes(passed=3)
    found = measurements(project, "r.json")
    assert found[("ref", "my_eval")]["value"] == pytest.approx(20 / 30)
    assert found[("ref", "my_eval")]["stats"]["correct"] == 10
    scores = [item["score"] for item in found[("cand", "my_eval")]["items"]]
    assert scores[:3] == [1.0, 0.5, 1.0] and scores[10:] == [0.5] * 20
    # half credit lost on q01, q03, ..., q09; the reference's misses are all past q10
    assert found[("cand", "verdict:my_eval")]["value"] == pytest.approx(-2.5 / 30)


def test_a_benchmark_skipped_for_the_candidate_skips_its_verdict(
    project: pytest.Pytester,
    servers: tuple[ArithmeticServer, ArithmeticServer],
) -> None:
    project.makepyfile(
        test_my_eval=MY_EVAL.replace(
            "def test_my_eval(evaluate: Evaluate) -> None:",
            "def test_my_eval(evaluate: Evaluate, model_name: str) -> None:\n"
            "    if model_name == 'cand':\n        pytest.skip('no arithmetic for this model')",
        )
    )
    result = run(project, *options(servers, "-m", "my_eval", "-rs"))
    result.assert_outcomes(passed=1, skipped=2)
    assert result.ret == pytest.ExitCode.OK  # a skipped benchmark is not an unjudged comparison
    result.stdout.fnmatch_lines(
        [
            "SKIPPED*cand has no my_eval result: its test was skipped in this run "
            "(test_my_eval.py::test_my_eval[[]cand[]]); nothing to compare"
        ]
    )
    assert len(servers[1].stats.bodies) == 0  # nor was the candidate's server asked anything


def test_evaluate_in_an_undeclared_test_fails_naming_the_declaration(
    pytester: pytest.Pytester,
    servers: tuple[ArithmeticServer, ArithmeticServer],
) -> None:
    (pytester.path / "mine.toml").write_text(SWEEP)
    pytester.makepyfile(
        test_undeclared=MY_EVAL.replace('@pytest.mark.modelsweep_benchmark("my_eval")\n', "")
    )
    result = pytester.runpytest(*options(servers, "-k", "my_eval", "--model=ref"))
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "test_my_eval[[]ref[]] evaluates 'my_eval' but is declared as no benchmark: decorate it "
            "with @pytest.mark.modelsweep_benchmark('my_eval') (that adds -m my_eval and its verdicts)",
        ]
    )
    assert len(servers[0].stats.bodies) == 0


@pytest.mark.parametrize(
    ("declaration", "message"),
    [
        (
            '@pytest.mark.modelsweep_benchmark("my-eval")',
            "@pytest.mark.modelsweep_benchmark on test_my_eval: 'my-eval' is not a benchmark name: use a "
            "Python identifier that does not start with '_', e.g. 'my_eval'",
        ),
        (
            '@pytest.mark.modelsweep_benchmark("throughput")',
            "@pytest.mark.modelsweep_benchmark on test_my_eval: 'throughput' is modelsweep's throughput "
            "benchmark 'Throughput': name the accuracy benchmark otherwise",
        ),
        (
            "@pytest.mark.modelsweep_benchmark",
            "@pytest.mark.modelsweep_benchmark on test_my_eval: give it exactly one benchmark name, once, "
            'and optionally kind="accuracy" (the default) or kind="throughput", e.g. '
            '@pytest.mark.modelsweep_benchmark("my_eval")',
        ),
        # a built-in's name: its items, verdicts and baselines would be pooled with yours
        (
            '@pytest.mark.modelsweep_benchmark("gsm8k")',
            "@pytest.mark.modelsweep_benchmark on test_my_eval: 'gsm8k' is modelsweep's built-in "
            "benchmark 'GSM8K accuracy' (benches/test_accuracy.py): yours would be pooled with its "
            "items, verdicts and baselines; name yours otherwise, e.g. 'my_gsm8k'",
        ),
        (
            '@pytest.mark.modelsweep_benchmark("bfcl")',
            "@pytest.mark.modelsweep_benchmark on test_my_eval: 'bfcl' is modelsweep's built-in "
            "benchmark 'BFCL accuracy' (benches/test_accuracy.py): yours would be pooled with its "
            "items, verdicts and baselines; name yours otherwise, e.g. 'my_bfcl'",
        ),
    ],
)
def test_a_malformed_declaration_is_a_collection_error_in_one_line(
    pytester: pytest.Pytester,
    declaration: str,
    message: str,
) -> None:
    pytester.makepyfile(
        test_bad=MY_EVAL.replace('@pytest.mark.modelsweep_benchmark("my_eval")', declaration)
    )
    result = pytester.runpytest("--strict-markers", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*ERROR collecting test_bad.py*", message])


def test_a_users_own_test_verdict_beside_a_declared_benchmark_is_refused(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_clash=MY_EVAL + "\ndef test_verdict():\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "test_clash.py defines test_verdict, the name of the comparison tests modelsweep adds beside "
            "the declared benchmark 'my_eval': rename yours"
        ]
    )


def test_the_public_names_are_exported() -> None:
    assert sorted(pytest_modelsweep.__all__) == [
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
    assert pytest_modelsweep.EvalItem is EvalItem and pytest_modelsweep.Score is Score
    assert all(getattr(pytest_modelsweep, name) is not None for name in pytest_modelsweep.__all__)
    with pytest.raises(AttributeError):
        pytest_modelsweep.Nope  # type: ignore[attr-defined]  # noqa: B018


# --------------------------------------------------------------------------- items to requests


def test_an_item_follows_the_models_prompting() -> None:
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2 + 2?"}]
    both = EvalItem("a", messages=chat, prompt="Q: 2 + 2?\nA:", max_tokens=4, stop="\n", seed=7)
    assert request_for(both, "chat").path == "/v1/chat/completions"
    assert request_for(both, "chat").payload == {
        "messages": chat,
        "max_tokens": 4,
        "temperature": 0.0,
        "stop": ["\n"],
        "seed": 7,
    }
    assert request_for(both, "completion").payload == {
        "prompt": "Q: 2 + 2?\nA:",
        "max_tokens": 4,
        "temperature": 0.0,
        "stop": ["\n"],
        "seed": 7,
    }
    rendered = request_for(EvalItem("b", messages=chat), "completion")
    assert (rendered.path, rendered.payload["prompt"]) == (
        "/v1/completions",
        "Be brief.\n\nUser: 2 + 2?\n\nAssistant:",
    )
    plain = EvalItem("c", prompt="def fib(n):", extra_body={"top_k": 1})
    assert request_for(plain, "chat").path == "/v1/completions"  # a plain prompt stays one
    assert request_for(plain, "chat").payload["top_k"] == 1
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    with_tools = EvalItem("d", messages=chat, tools=tools)
    assert request_for(with_tools, "completion").path == "/v1/chat/completions"
    assert request_for(with_tools, "completion").payload["tools"] == tools


def test_a_transcript_continues_an_assistants_last_turn() -> None:
    turns = [{"role": "user", "content": "Say hi."}, {"role": "assistant", "content": "Hi"}]
    assert render_completion_prompt(turns) == "User: Say hi.\n\nAssistant: Hi"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({}, "item 'x': give messages (chat turns) or a prompt, or both"),
        (
            {"prompt": "p", "tools": [{}]},
            "item 'x': tools are sent with chat messages; give messages",
        ),
        ({"messages": "hello"}, "item 'x': messages must be a non-empty list"),
        (
            {"messages": [{"content": "no role"}]},
            "item 'x': message 0 must be a dict with a string",
        ),
        (
            {"prompt": "p", "max_tokens": 0},
            "item 'x': max_tokens must be a positive integer, got 0",
        ),
        ({"prompt": "p", "stop": [""]}, "item 'x': stop must be a list of non-empty strings"),
        (
            {"prompt": "p", "answer": {1, 2}},
            "item 'x': its messages, tools and answer must be JSON",
        ),
    ],
)
def test_a_malformed_item_is_refused_in_one_line(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(DataError) as refused:
        EvalItem("x", **fields)
    assert str(refused.value).startswith(message)


def test_data_hash_covers_the_source_not_the_settings() -> None:
    one = EvalItem("x", prompt="2 + 2?", answer="4", max_tokens=8)
    assert one.data_hash == EvalItem("x", prompt="2 + 2?", answer="4", max_tokens=64).data_hash
    assert one.data_hash != EvalItem("x", prompt="2 + 2?", answer="5").data_hash
    assert EvalItem("x", prompt="p", data_hash="given").data_hash == "given"


# --------------------------------------------------------------------------- completions to records


ITEM = EvalItem("q1", prompt="2 + 2?", answer="4")
REQUEST = request_for(ITEM, "completion")


def exact(completion: Completion, item: EvalItem) -> Score:
    answer = (completion.text or "").strip()
    return Score(answer == item.answer, answer=answer)


def test_an_answer_is_scored_and_a_missing_one_is_failed_without_the_scorer() -> None:
    right = scored_record("b", exact, ITEM, REQUEST, Completion(text=" 4", finish_reason="stop"))
    assert (right.correct, right.extracted, right.score, right.error) == (True, "4", None, None)
    assert right.data_hash == ITEM.data_hash and right.prompt_hash == REQUEST.prompt_hash
    assert "score" not in right.to_dict()  # a right/wrong record is stored as before

    def never(completion: Completion, item: EvalItem) -> bool:
        raise AssertionError("a failed item is never scored")

    failed = scored_record("b", never, ITEM, REQUEST, Completion.failed("HTTP 500"))
    assert (failed.outcome, failed.error) == ("failed", "HTTP 500")
    chat_item = EvalItem("q1", messages=[{"role": "user", "content": "hi"}])
    no_text = scored_record(
        "b", never, chat_item, request_for(chat_item, "chat"), Completion(text=None)
    )
    assert no_text.error == "choices[0].message.content is NoneType, not a string"


def test_partial_credit_is_kept_and_counted() -> None:
    def half(completion: Completion, item: EvalItem) -> float:
        return 0.5

    record = scored_record("b", half, ITEM, REQUEST, Completion(text="4", finish_reason="length"))
    assert (record.correct, record.score, record.credit) == (False, 0.5, 0.5)
    assert ItemRecord.from_dict(record.to_dict()) == record
    full = scored_record("b", lambda c, i: 1.0, ITEM, REQUEST, Completion(text="4"))
    assert (full.correct, full.credit) == (True, 1.0)
    assert summarise_items([record, full]) == {
        "n": 2,
        "items": 2,
        "failed": 0,
        "correct": 1,
        "accuracy": 0.75,
        "truncated_rate": 0.5,
    }


@pytest.mark.parametrize("returned", [2.0, -0.1, float("nan"), "yes", None, Score(1.5)])
def test_a_non_score_is_refused_naming_the_scorer(returned: Any) -> None:
    def bad_scorer(completion: Completion, item: EvalItem) -> Any:
        return returned

    with pytest.raises(ScorerError) as refused:
        scored_record("my_eval", bad_scorer, ITEM, REQUEST, Completion(text="4"))
    shown = returned.value if isinstance(returned, Score) else returned
    assert str(refused.value) == (
        f"scorer test_a_non_score_is_refused_naming_the_scorer.<locals>.bad_scorer returned "
        f"{shown!r} for my_eval item 'q1': expected True/False, a number in [0, 1], or "
        "Score(value, answer=...) with one"
    )


def test_an_answer_that_is_not_json_is_refused() -> None:
    with pytest.raises(ScorerError, match="an answer must be JSON data"):
        scored_record(
            "b", lambda c, i: Score(True, answer=object()), ITEM, REQUEST, Completion(text="4")
        )


# --------------------------------------------------------------------------- the built-ins on it


PROBLEM = Gsm8kProblem(
    "gsm8k-test-0000", 0, "test", "Tom has 2 bags of 9 apples. How many?", "2 * 9 = 18\n#### 18"
)


@pytest.mark.parametrize(
    ("text", "strict", "flexible"),
    [
        ("2 * 9 = 18\n#### 18", "18", "18"),
        ("The total is 18", None, "18"),
        ("#### 17", "17", "17"),
        (None, None, None),
    ],
)
def test_the_gsm8k_scorer_on_the_public_api_records_both_filters(
    text: str | None,
    strict: str | None,
    flexible: str | None,
) -> None:
    """The gsm8k bench's record (the conformance tests compare it with lm-eval's verdicts)."""
    item = gsm8k_eval_item(PROBLEM, [], max_tokens=64)
    request = request_for(item, "chat")
    completion = parse_completion(
        request.path,
        {
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ]
        },
    )
    ours = scored_record("gsm8k", score_gsm8k_answer, item, request, completion)
    assert (ours.item_id, ours.data_hash, ours.prompt_hash) == (
        PROBLEM.item_id,
        PROBLEM.data_hash,
        request.prompt_hash,
    )
    assert (ours.response, ours.completion) == (text or "", completion)
    if text is None:  # failed: never scored, so nothing extracted
        assert (ours.error, ours.correct, ours.extracted, ours.scores) == (
            "choices[0].message.content is NoneType, not a string",
            False,
            None,
            {},
        )
    else:
        assert ours.error is None
        assert ours.extracted == {"strict-match": strict, "flexible-extract": flexible}
        assert ours.scores == {"strict-match": strict == "18", "flexible-extract": flexible == "18"}
        assert ours.correct is (flexible == "18")


def test_the_example_evaluation_uses_only_the_public_api_in_at_most_30_lines() -> None:
    example = Path(__file__).resolve().parents[1] / "benches" / "examples" / "test_quick_facts.py"
    text = example.read_text()
    imported = {
        alias.name
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    imported |= {
        node.module or "" for node in ast.walk(ast.parse(text)) if isinstance(node, ast.ImportFrom)
    }
    assert imported <= {"__future__", "json", "pathlib", "pytest", "pytest_modelsweep"}
    docstring_end = ast.parse(text).body[0].end_lineno or 0
    code = [
        line
        for line in text.splitlines()[docstring_end:]
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert len(code) <= 30


def test_the_guide_shows_the_example_as_it_is() -> None:
    root = Path(__file__).resolve().parents[1]
    example = (root / "benches" / "examples" / "test_quick_facts.py").read_text()
    code = example[example.index("import json") :]
    assert code in (root / "docs" / "writing-benchmarks.md").read_text()


# --------------------------------------------------------------------------- evaluate, called

ITEMS = [
    EvalItem(
        f"q{i:02d}",
        messages=[
            {"role": "system", "content": "Answer with a number."},
            {"role": "user", "content": f"What is {i} + {2 * i}?"},
        ],
        answer=str(3 * i),
        max_tokens=8,
        stop=["\n"],
    )
    for i in range(30)
]
"""MY_EVAL's items, as the fixture gets them."""


def first_number(completion: Completion, item: EvalItem) -> Score:
    """MY_EVAL's scorer."""
    answer = (completion.text or "").strip().split(" ")[0]
    return Score(answer == item.answer, answer=answer)


def test_evaluate_scores_stores_and_then_reuses_every_item(tmp_path: Path) -> None:
    store = Store(tmp_path / "store.sqlite")
    results, recorded = [], Recorded()
    with ArithmeticServer("cand", wrong=(1, 3, 5, 7, 9)) as server:
        for run_id in ("first", "second"):
            results.append(
                evaluate(
                    lambda: attached(server.base_url, "cand", "chat"),
                    "my_eval",
                    iter(ITEMS),
                    first_number,
                    prompting="chat",
                    settings=bench_settings(run_id=run_id),
                    record=recorded,
                    store=store,
                    concurrency=4,
                )
            )
    store.close()
    assert len(server.stats.bodies) == 30  # the second run sent nothing
    assert [(r.sent, r.reused) for r in results] == [(30, 0), (0, 30)]
    for result, measurement in zip(results, recorded, strict=True):
        assert (result.model, result.n, result.correct, result.failed) == ("cand", 30, 25, 0)
        assert result.accuracy == measurement.value == 25 / 30
        assert (measurement.benchmark, measurement.unit, measurement.n) == (
            "my_eval",
            "accuracy",
            30,
        )
        assert measurement.params == {
            "prompting": "chat",
            "limit": None,
            "subset": False,
            "sampling": {"max_tokens": 8, "temperature": 0.0},
        }
        assert measurement.provenance["served_name"] == "cand"
        assert [item["item_id"] for item in measurement.items] == [item.id for item in ITEMS]
        assert measurement.stats == result.stats


def test_evaluate_sends_only_the_first_limit_items() -> None:
    recorded = Recorded()
    with ArithmeticServer("ref") as server:
        result = evaluate(
            lambda: attached(server.base_url, "ref"),
            "my_eval",
            ITEMS,
            first_number,
            prompting="completion",
            settings=bench_settings(limit=5),
            record=recorded,
            store=None,
        )
    assert (result.n, len(server.stats.bodies)) == (5, 5)
    assert "Answer with a number.\n\nUser: What is 0 + 0?\n\nAssistant:" in [
        body["prompt"] for body in server.stats.bodies
    ]
    (measurement,) = recorded
    assert (measurement.params["limit"], measurement.params["subset"]) == (5, True)
    assert [item["item_id"] for item in measurement.items] == ["q00", "q01", "q02", "q03", "q04"]


@pytest.mark.parametrize(
    ("items", "concurrency", "line"),
    [
        (["q00"], 4, "my_eval: items must be EvalItem, got str"),
        ([], 4, "my_eval: no items to evaluate"),
        (ITEMS[:2] * 2, 4, "my_eval: two items have the id 'q00'; ids must be unique"),
        (ITEMS, 0, "my_eval: concurrency must be a positive integer, got 0"),
    ],
    ids=["not-items", "none", "twice", "concurrency"],
)
def test_evaluate_refuses_bad_input_in_one_line_before_a_server_is_asked_for(
    items: list[Any], concurrency: int, line: str
) -> None:
    def no_server() -> Any:
        raise AssertionError("a server was asked for")

    recorded = Recorded()
    with pytest.raises(DataError) as info:
        evaluate(
            no_server,
            "my_eval",
            items,
            first_number,
            prompting="chat",
            settings=bench_settings(),
            record=recorded,
            store=None,
            concurrency=concurrency,
        )
    assert str(info.value) == line
    assert recorded == []


@pytest.mark.parametrize("returned", [2.0, "yes"])
def test_a_scorer_returning_no_score_fails_the_evaluation_in_one_line(returned: Any) -> None:
    def first_number(completion: Completion, item: EvalItem) -> Any:
        return returned

    with ArithmeticServer("ref") as server, pytest.raises(ScorerError) as info:
        evaluate(
            lambda: attached(server.base_url, "ref"),
            "my_eval",
            ITEMS[:1],
            first_number,
            prompting="completion",
            settings=bench_settings(),
            record=Recorded(),
            store=None,
        )
    assert str(info.value) == (
        f"scorer test_a_scorer_returning_no_score_fails_the_evaluation_in_one_line.<locals>."
        f"first_number returned {returned!r} for my_eval item 'q00': expected True/False, a "
        "number in [0, 1], or Score(value, answer=...) with one"
    )


def test_evaluate_records_what_it_measured_before_saying_the_store_failed() -> None:
    recorded = Recorded()
    with ArithmeticServer("ref") as server, pytest.raises(OutputError) as info:
        evaluate(
            lambda: attached(server.base_url, "ref"),
            "my_eval",
            ITEMS[:3],
            first_number,
            prompting="chat",
            settings=bench_settings(),
            record=recorded,
            store=None,
            store_failure="the store s.sqlite: cannot write (disk full)",
        )
    assert str(info.value) == (
        "the store s.sqlite: cannot write (disk full) (the measurement is in the results)"
    )
    assert [(m.value, m.n) for m in recorded] == [(1.0, 3)]


def test_an_answer_from_another_model_fails_that_item_in_one_line() -> None:
    """A proxy that routes a request to another model is exactly the lie a benchmark must
    catch: that item is failed (never scored as this model's), the rest are recorded, and
    the evaluation fails naming it."""
    recorded = Recorded()
    with (
        ArithmeticServer("ref", answered_by={3: "llama-70b-fallback"}) as server,
        pytest.raises(MeasurementError) as info,
    ):
        evaluate(
            lambda: attached(server.base_url, "ref"),
            "my_eval",
            ITEMS[:5],
            first_number,
            prompting="chat",
            settings=bench_settings(),
            record=recorded,
            store=None,
        )
    assert str(info.value) == (
        "1 of 5 my_eval requests got no answer (first: answered by model "
        "'llama-70b-fallback', not 'ref' that was asked for: the server (or a proxy "
        "before it) routes to another model; point --endpoint at the server of this model, or "
        "fix its served_name in the sweep); re-run to resend them (completed items are reused)"
    )
    (measurement,) = recorded
    assert (measurement.value, measurement.n) == (1.0, 4)
    assert [item["item_id"] for item in measurement.items if item["error"]] == ["q03"]


# --------------------------------------------------------------------------- declarations a hostile user gets wrong


def test_two_tests_declaring_one_benchmark_are_one_collection_error(
    pytester: pytest.Pytester,
) -> None:
    """Their items would pool into one benchmark's verdicts (n=6 from 3 + 3)."""
    pytester.makepyfile(
        test_a=MY_EVAL, test_b=MY_EVAL.replace("def test_my_eval", "def test_my_eval_again")
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "@pytest.mark.modelsweep_benchmark on test_my_eval_again: 'my_eval' is declared already, "
            "by test_a.py::test_my_eval; one test per benchmark (two would pool their items in one "
            "measurement's verdicts): name one of them otherwise"
        ]
    )


def test_a_declared_benchmark_that_never_evaluates_fails_in_one_line(
    pytester: pytest.Pytester,
    servers: tuple[ArithmeticServer, ArithmeticServer],
) -> None:
    """Once it passed, and its verdict blamed "its own test's failure" about a test that
    passed: now each model's test fails naming the fix, and the verdict names that test."""
    (pytester.path / "mine.toml").write_text(SWEEP)
    pytester.makepyfile(
        test_lazy=MY_EVAL.replace(
            '    result = evaluate("my_eval", ITEMS, first_number, concurrency=4)\n'
            '    print(f"{result.model}: {result.correct}/{result.n}, sent {result.sent}")\n',
            "    pass  # forgot to call evaluate\n",
        )
    )
    result = run(pytester, *options(servers, "-m", "my_eval"))
    result.assert_outcomes(failed=3)
    for model in ("ref", "cand"):
        result.stdout.fnmatch_lines(
            [
                f"*_ test_my_eval[[]{model}[]] _*",
                f"test_my_eval[{model}] is declared @pytest.mark.modelsweep_benchmark('my_eval') but "
                "measured nothing: call evaluate('my_eval', items, scorer) (or, for a throughput "
                "benchmark, measure_throughput('my_eval', ...)) in it, or remove the declaration",
            ]
        )
    result.stdout.fnmatch_lines(
        [  # now true: its own test failed
            "cand recorded no my_eval result in this run (test_lazy.py::test_my_eval[[]cand[]] "
            "failed); its own test's failure says why"
        ]
    )
    assert "Traceback" not in result.stdout.str()
    assert [len(s.stats.bodies) for s in servers] == [0, 0]


def test_a_streamed_answer_from_another_model_fails_that_request() -> None:
    """The streaming client reads the first event's model too (throughput windows)."""
    from support.sse_server import SseServer

    from pytest_modelsweep.client import stream_requests
    from pytest_modelsweep.core.records import ApiRequest

    requests = [
        ApiRequest(
            f"r{i}",
            "/v1/completions",
            {"prompt": "x", "max_tokens": 3, **({"test_fault": "othermodel"} if i == 1 else {})},
        )
        for i in range(3)
    ]
    with SseServer(served_names=("m",)) as server:
        records = asyncio.run(stream_requests(server.v1, "m", requests, 2, timeout_s=10))
    assert [r.error for r in records] == [
        None,
        "answered by model 'another-model', not 'm' that was asked for: the server (or a "
        "proxy before it) routes to another model; point --endpoint at the server of this "
        "model, or fix its served_name in the sweep",
        None,
    ]


def test_each_answer_is_stored_once(pytester: pytest.Pytester) -> None:
    """A long answer is in the store once (its item's row) and in the results once (the
    measurement's item), not four times; both read back whole."""
    from support.sse_server import SseServer
    from support.stores import all_text
    from support.user_projects import MODELS, eval_bench, project
    from support.user_projects import options as user_options

    from pytest_modelsweep.store.database import Store
    from pytest_modelsweep.store.results import load_results

    words = 2000
    answer = "".join(f" w{i}" for i in range(words))
    project(pytester, test_mine=eval_bench(items=3, words=words))
    with SseServer(served_names=MODELS) as server:
        run(
            pytester,
            *user_options(
                server.base_url,
                "--model=ref",
                "-k",
                "not verdict",
                "--store=store.sqlite",
                "--results=r.json",
            ),
        ).assert_outcomes(passed=1)
    stored_text = all_text(str(pytester.path / "store.sqlite"))  # every value of every table
    assert stored_text.count(answer) == 3  # 3 items, each answer once (was 4 times each)
    assert (pytester.path / "r.json").read_text().count(answer) == 3  # (was twice each)
    # read back: the store's measurement and the results' items carry every answer whole
    results = load_results(pytester.path / "r.json")["measurements"][0]
    store = Store(pytester.path / "store.sqlite", create=False)
    stored = store.measurements(store.runs()[0]["run_id"])[0]
    store.close()
    for measurement in (results, stored):
        records = [ItemRecord.from_dict(i) for i in measurement["items"]]
        assert [r.response for r in records] == [answer] * 3
        assert all(r.completion is not None and r.completion.text == answer for r in records)
