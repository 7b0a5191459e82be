"""The decision page of a real run: the real benches against fake servers, read back.

The input is what the benches write, not hand-made dicts: ``benches/test_accuracy.py``
(GSM8K and BFCL on the shared data), ``benches/test_verdicts.py``, the c16 settings of
``benches/test_throughput.py`` with their ratio tests, ``benches/test_screen.py`` (recorded
Hub answers) and a user's own evaluation (``arith``, judged by ``judge_against_reference``
like GSM8K) run in a pytest subprocess for a reference and two candidates, each served by a
fake server that answers the questions it is given answers to. The tests compare every
decision-page cell of the Markdown and HTML files with figures read from the results file.
"""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from paths import SHARED_DATA
from requirements import SHARED_DATA_HINT, module_needs
from sse_server import HTTP500_BODY, ListingServer, fake_token_ids

from pytest_modelsweep.report.plots import matplotlib_available
from pytest_modelsweep.workloads.bfcl import load_bfcl
from pytest_modelsweep.workloads.gsm8k import doc_to_text, load_gsm8k

ROOT = Path(__file__).resolve().parents[1]
GSM8K = SHARED_DATA / "gsm8k" / "test.jsonl"
BFCL = SHARED_DATA / "bfcl"
HUB_FIXTURES = ROOT / "tests" / "data" / "hub_tpu_v5e.json"
module_requirement = module_needs(
    GSM8K.is_file() and (BFCL / "BFCL_v4_simple_python.json").is_file(), SHARED_DATA_HINT)

REFERENCE, SAME, WORSE = "gemma-4-e2b", "qwen3-4b", "phi-4-mini"
CANDIDATES = (SAME, WORSE)
LIMIT = 16
METRICS = ("gsm8k", "bfcl", "arith")
LABELS = {"gsm8k": "GSM8K", "bfcl": "BFCL", "arith": "arith"}
HOLDS = ("matches", "equivalent", "better")

# Which items each model answers right (the others get a wrong answer).
RIGHT = {
    "gsm8k": {REFERENCE: range(12), SAME: range(1, 14), WORSE: range(3)},
    "bfcl": {REFERENCE: range(12), SAME: range(12), WORSE: range(10)},
    "arith": {REFERENCE: range(10), SAME: range(10), WORSE: range(1, 11)},
}
ARITH = [(f"arith-{i:02d}", f"What is {i} plus {i + 7}?", 2 * i + 7) for i in range(12)]

SWEEP = f"""
[sweep]
name = "decision"
reference = "{REFERENCE}"

[serving]
backend = "vllm-docker"
image = "vllm/vllm-tpu@sha256:ea98ed065a86d3e69ec7142b9f4766aa3cd7e475d752e680f4ef7612745aca61"
max_num_seqs = 16

[screening]
licenses = ["apache-2.0", "mit"]
hbm_gib = 15.75
gpu_memory_utilization = 0.90
kv_headroom_gib = 2.0

[models.{REFERENCE}]
source = "hf:google/gemma-4-E2B-it"
license = "apache-2.0"
prompting = "chat"
bfcl_mode = "prompt"

[models.{SAME}]
source = "hf:Qwen/Qwen3-4B"
license = "apache-2.0"
prompting = "chat"
bfcl_mode = "prompt"

[models.{WORSE}]
source = "hf:example/phi-4-mini-unrecorded"  # not in the recorded Hub answers: no screening
license = "mit"
prompting = "chat"
bfcl_mode = "prompt"
"""

# A user's own evaluation: scored items in the store, a measurement, a verdict test.
USER_BENCH = '''
import pytest
from pytest_modelsweep.records import ApiRequest, ItemRecord
from pytest_modelsweep.workloads.accuracy import run_accuracy

PROBLEMS = PROBLEMS_HERE


def build(problem):
    item_id, question, _ = problem
    return ApiRequest(item_id=item_id, path="/v1/chat/completions", payload={
        "messages": [{"role": "user", "content": question}], "max_tokens": 8, "temperature": 0})


def score(problem, request, completion):
    item_id, _, answer = problem
    return ItemRecord(item_id=item_id, prompt_hash=request.prompt_hash, data_hash=item_id,
                      correct=completion.error is None and (completion.text or "").strip() == str(answer),
                      response=completion.text or "", error=completion.error, completion=completion)


@pytest.mark.arith
def test_arith(endpoint, bench_settings, result_store, record_measurement):
    run = run_accuracy(endpoint, "arith", PROBLEMS, build, score, store=result_store,
                       run_id=bench_settings.run_id)
    answered = [r for r in run.records if not r.failed]
    record_measurement("arith", sum(r.correct for r in answered) / len(answered), "accuracy",
                       len(answered), items=[r.to_dict() for r in run.records])


@pytest.mark.verdict
@pytest.mark.arith
def test_arith_verdict(candidate_name, judge_against_reference):
    judge_against_reference("arith")
'''
USER_CONFTEST = '''
def pytest_configure(config):
    config.addinivalue_line("markers", "arith: a user's own arithmetic evaluation")
'''


class AnsweringServer(ListingServer):
    """The fake streaming server, answering a request whose last message (or prompt) holds one
    of ``replies``' keys with that reply; ``fail`` keys get HTTP 500. Anything else (the
    throughput workload's prompts) gets the usual ``max_tokens`` tokens."""

    def __init__(self, served_name: str, replies: Mapping[str, str], *, chunk_delay_s: float,
                 fail: Collection[str] = ()) -> None:
        super().__init__(served_name, chunk_delay_s=chunk_delay_s)
        self.replies = dict(replies)
        self.fail = set(fail)

    async def _generate(self, path: str, data: dict[str, Any], writer: Any) -> bool:
        chat = path.endswith("chat/completions")
        messages = data.get("messages") or [{}]
        asked = str(messages[-1].get("content", "")) if chat else str(data.get("prompt", ""))
        key = next((k for k in self.replies if k in asked), None)
        if key is None:
            return await super()._generate(path, data, writer)
        if key in self.fail:
            return await self._respond(writer, 500, "application/json", HTTP500_BODY.encode())
        reply = self.replies[key]
        pieces = [(" " if i else "") + word for i, word in enumerate(reply.split(" "))]
        prompt = " ".join(str(m.get("content", "")) for m in messages) if chat else asked
        usage = {"prompt_tokens": len(fake_token_ids(prompt)), "completion_tokens": len(pieces)}
        if not data.get("stream"):
            choice: dict[str, Any] = {"index": 0, "finish_reason": "stop"}
            if chat:
                choice["message"] = {"role": "assistant", "content": reply}
            else:
                choice["text"] = reply
            body = json.dumps({"choices": [choice], "usage": usage}).encode()
            return await self._respond(writer, 200, "application/json", body)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     b"Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\n\r\n")
        for piece in pieces:
            self._event(writer, b"data: " + self._chunk(chat, piece, None) + b"\n\n")
        final = self._chunk(chat, "", "stop",
                            usage=(usage["prompt_tokens"], usage["completion_tokens"]))
        self._event(writer, b"data: " + final + b"\n\n")
        self._event(writer, b"data: [DONE]\n\n")
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True


def bfcl_call(ground_truth: list[dict[str, dict[str, list[Any]]]]) -> str:
    """BFCL's prompt-mode answer that its checker accepts: each call with its first accepted
    value of every parameter ("" marks an optional one, left out)."""
    calls = []
    for call in ground_truth:
        for name, params in call.items():
            args = [f"{p}={next(v for v in values if v != '')!r}" for p, values in params.items()
                    if any(v != "" for v in values)]
            calls.append(f"{name}({', '.join(args)})")
    return "[" + ", ".join(calls) + "]"


def replies_of(model: str) -> dict[str, str]:
    """Every question this model is asked (GSM8K, BFCL, arith), with its answer."""
    replies = {}
    for i, problem in enumerate(load_gsm8k(GSM8K)[:LIMIT]):
        number = int(problem.answer.split("####")[-1].strip().replace(",", ""))
        right = i in RIGHT["gsm8k"][model]
        replies[doc_to_text(problem)] = f"#### {number if right else number + 1}"
    for i, record in enumerate(load_bfcl(BFCL)[:LIMIT]):
        right = i in RIGHT["bfcl"][model]
        replies[record.messages[-1]["content"]] = (bfcl_call(record.ground_truth) if right
                                                   else "[no_such_function(x=1)]")
    for i, (_, question, answer) in enumerate(ARITH):
        replies[question] = str(answer if i in RIGHT["arith"][model] else answer + 1)
    return replies


@dataclass
class Run:
    path: Path
    results: dict[str, Any]
    markdown: str
    html: str
    output: str

    def measurement(self, model: str, benchmark: str, **params: Any) -> dict[str, Any] | None:
        found = [m for m in self.results["measurements"] if m["model"] == model
                 and m["benchmark"] == benchmark
                 and all(m["params"].get(k) == v for k, v in params.items())]
        return found[-1] if found else None


def run_benches(path: Path, servers: dict[str, AnsweringServer], *args: str,
                sweep: str = SWEEP, endpoints: tuple[str, ...] = ()) -> Run:
    """The real benches (and the user's) in a pytest subprocess, against the servers
    (and any further ``--endpoint=NAME=URL``)."""
    for name in ("test_accuracy.py", "test_verdicts.py", "test_throughput.py", "test_screen.py"):
        (path / name).write_text((ROOT / "benches" / name).read_text(encoding="utf-8"),
                                 encoding="utf-8")
    (path / "test_arith.py").write_text(USER_BENCH.replace("PROBLEMS_HERE", repr(ARITH)),
                                        encoding="utf-8")
    (path / "conftest.py").write_text(USER_CONFTEST, encoding="utf-8")
    (path / "decision.toml").write_text(sweep, encoding="utf-8")
    env = {**os.environ, "HOME": str(path / "home"), "MODELSWEEP_HUB_FIXTURES": str(HUB_FIXTURES),
           "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    env.pop("GITHUB_STEP_SUMMARY", None)
    attached = [f"--endpoint={name}={server.base_url}" for name, server in servers.items()]
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "--rootdir", str(path), "--sweep=decision.toml",
         f"--gsm8k-path={GSM8K}", f"--bfcl-path={BFCL}", f"--limit={LIMIT}", *attached,
         *endpoints,
         "--modelsweep-dir=work", "--results=r.json", "--md=r.md", "--html=r.html",
         "--self-contained-html", "-p", "no:cacheprovider", "-p", "no:randomly", *args],
        cwd=path, env=env, capture_output=True, text=True, timeout=600, check=False)
    output = completed.stdout + completed.stderr
    assert (path / "r.json").is_file(), output[-4000:]
    return Run(path, json.loads((path / "r.json").read_text(encoding="utf-8")),
               (path / "r.md").read_text(encoding="utf-8"),
               (path / "r.html").read_text(encoding="utf-8"), output)


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """Accuracy (16 items each), verdicts, c16 throughput (2 repeats of 16 requests) and its
    ratios, screening: the reference and one candidate stream a token every 0.4 ms, the other
    candidate every 4 ms."""
    path = tmp_path_factory.mktemp("decision_run")
    delays = {REFERENCE: 0.0004, SAME: 0.0004, WORSE: 0.004}
    servers = {model: AnsweringServer(model, replies_of(model), chunk_delay_s=delay)
               for model, delay in delays.items()}
    for server in servers.values():
        server.start()
    try:
        run = run_benches(path, servers, "test_accuracy.py", "test_verdicts.py",
                          "test_throughput.py", "test_screen.py", "test_arith.py",
                          "-k", "c16 or not test_throughput", "--repeats=2",
                          "--timed-requests=16",
                          # the fake servers serve from this process, whose CPU counts as
                          # "other": with the default limit a busy machine flags them contended
                          "--contended-cores=64")
    finally:
        for server in servers.values():
            server.stop()
    # only the worse candidate's tests may fail, and a ratio verdict on the other's timing noise
    failed = {f["test_id"] for f in run.results["summary"].get("failures", [])}
    assert all(WORSE in test or test.startswith("test_throughput.py::test_throughput_ratio[")
               for test in failed), run.output[-4000:]
    return run


UNREACHABLE = "smollm3-3b"


@pytest.fixture(scope="module")
def failed_reference_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """GSM8K and its verdicts only, the reference's server failing one of the 6 items; a
    third candidate's server is not there at all (a closed port)."""
    path = tmp_path_factory.mktemp("failed_reference")
    replies = {model: replies_of(model) for model in (REFERENCE, *CANDIDATES)}
    second = doc_to_text(load_gsm8k(GSM8K)[1])
    servers = {model: AnsweringServer(model, replies[model], chunk_delay_s=0.0,
                                      fail={second} if model == REFERENCE else set())
               for model in replies}
    for server in servers.values():
        server.start()
    try:
        sweep = SWEEP + (f'[models.{UNREACHABLE}]\nsource = "hf:HuggingFaceTB/SmolLM3-3B"\n'
                         'license = "apache-2.0"\nprompting = "chat"\nbfcl_mode = "prompt"\n')
        return run_benches(path, servers, "test_accuracy.py", "test_verdicts.py",
                           "-k", "gsm8k", "--limit=6", sweep=sweep,
                           endpoints=(f"--endpoint={UNREACHABLE}=http://127.0.0.1:9",))
    finally:
        for server in servers.values():
            server.stop()


# --------------------------------------------------------------------------- reading the pages


def _unescape_markdown(cell: str) -> str:
    return html.unescape(re.sub(r"\\(.)", r"\1", cell.strip()).replace("<br>", "\n"))


def markdown_decision(text: str) -> tuple[str, dict[str, dict[str, str]], list[str], str]:
    """The Markdown decision page: (answer, model -> column -> cell, reasons, Pareto line)."""
    block = text.split("### Decision: which model to serve\n", 1)[1].split("\n### ", 1)[0]
    lines = block.splitlines()
    answer = _unescape_markdown(next(line for line in lines if line.startswith("**")).strip("*"))
    rows = [line for line in lines if line.startswith("| ")]

    def cells(line: str) -> list[str]:
        return [_unescape_markdown(c) for c in re.split(r"(?<!\\)\|", line)[1:-1]]

    header = cells(rows[0])
    table = {}
    for line in rows[2:]:
        row = dict(zip(header, cells(line)))
        table[row["model"].removesuffix(" (reference)")] = row
    reasons = [_unescape_markdown(line) for line in lines if re.match(r"\\\[\d+\\\] ", line)]
    pareto = next(_unescape_markdown(line) for line in lines
                  if line.startswith(("Pareto front", "No Pareto plot")))
    return answer, table, reasons, pareto


def html_decision(text: str) -> tuple[str, dict[str, dict[str, str]], list[str], str]:
    """The HTML decision page, read the same way (cells by their ``data-column``)."""
    start = text.index('<section class="modelsweep" id="modelsweep-decision">')
    section = text[start:text.index("</section>", start)]
    answer_match = re.search(r'<p class="ms-answer">(.*?)</p>', section, re.DOTALL)
    assert answer_match is not None
    table = {}
    for model, body in re.findall(r'<tr class="ms-(?:reference|candidate)" data-model="([^"]*)">'
                                  r"(.*?)</tr>", section, re.DOTALL):
        row = {html.unescape(column): html.unescape(cell) for column, cell in
               re.findall(r'<td [^>]*data-column="([^"]*)"[^>]*>(.*?)</td>', body, re.DOTALL)}
        table[html.unescape(model)] = row
    reasons = [html.unescape(r) for r in re.findall(r'<li data-note="\d+">(.*?)</li>', section)]
    pareto = next(html.unescape(p) for p in re.findall(r'<p class="ms-notes">(.*?)</p>', section)
                  if html.unescape(p).startswith(("Pareto front", "No Pareto plot")))
    return html.unescape(answer_match.group(1)), table, reasons, pareto


def decision(run: Run, kind: str) -> tuple[str, dict[str, dict[str, str]], list[str], str]:
    return markdown_decision(run.markdown) if kind == "markdown" else html_decision(run.html)


def numbers(text: str) -> list[float]:
    return [float(n.replace(",", "")) for n in re.findall(r"[-+]?\d[\d,]*\.?\d*", text)]


def reason_of(cell: str, reasons: list[str]) -> str:
    """The reason line a cell's ``[n]`` points to."""
    match = re.search(r"\[(\d+)\]$", cell)
    assert match is not None, f"the cell {cell!r} does not say why"
    line = reasons[int(match.group(1)) - 1]
    assert line.startswith(f"[{match.group(1)}] ")
    return line


def verdict_word(cell: str) -> str:
    return cell.strip("*").lower()


KINDS = ["markdown", "html"]


# --------------------------------------------------------------------------- the run itself


def test_the_run_recorded_what_the_page_reads(real_run: Run) -> None:
    for candidate in CANDIDATES:
        for metric in METRICS:
            assert real_run.measurement(candidate, f"verdict:{metric}") is not None, metric
        assert real_run.measurement(candidate, "throughput_ratio", concurrency=16) is not None
    for model in (REFERENCE, *CANDIDATES):
        assert real_run.measurement(model, "throughput", concurrency=16) is not None
        assert (real_run.measurement(model, "screen") is None) is (model == WORSE)
        for metric in METRICS:
            measured = real_run.measurement(model, metric)
            assert measured is not None and measured["n"] == (12 if metric == "arith" else LIMIT)
            assert measured["value"] == pytest.approx(len(RIGHT[metric][model]) / measured["n"])
    verdicts = {m["model"]: m["stats"]["verdict"] for m in real_run.results["measurements"]
                if m["benchmark"] == "verdict:gsm8k"}
    assert verdicts == {SAME: "matches", WORSE: "worse"}


# --------------------------------------------------------------------------- every cell


@pytest.mark.parametrize("kind", KINDS)
def test_each_accuracy_group_shows_its_verdict_difference_and_interval(real_run: Run, kind: str) -> None:
    _, table, _, _ = decision(real_run, kind)
    assert set(table) == {REFERENCE, *CANDIDATES}
    titles = list(table[SAME])
    # the user's own evaluation sits beside GSM8K's and BFCL's, in report order
    assert [t for t in titles if t.endswith(" verdict") and t.split()[0] in LABELS.values()] == [
        "GSM8K verdict", "BFCL verdict", "arith verdict"]
    for candidate in CANDIDATES:
        for metric in METRICS:
            measured = real_run.measurement(candidate, f"verdict:{metric}")
            assert measured is not None
            stats = measured["stats"]
            label = LABELS[metric]
            assert verdict_word(table[candidate][f"{label} verdict"]) == stats["verdict"]
            shown = numbers(table[candidate][f"{label} difference [95% interval]"])
            expected = [100 * stats["difference"], 100 * stats["low"], 100 * stats["high"]]
            assert shown == pytest.approx(expected, abs=0.051), (candidate, metric)
    for metric in METRICS:
        reference = real_run.measurement(REFERENCE, metric)
        assert reference is not None
        assert table[REFERENCE][f"{LABELS[metric]} verdict"] == "reference"
        shown = table[REFERENCE][f"{LABELS[metric]} difference [95% interval]"]
        assert shown.startswith(f"{100 * reference['value']:.1f}% (")  # and its Wilson interval


@pytest.mark.parametrize("kind", KINDS)
def test_the_c16_throughput_cells_are_the_ratio_measurements(real_run: Run, kind: str) -> None:
    _, table, _, _ = decision(real_run, kind)
    for candidate in CANDIDATES:
        ratio = real_run.measurement(candidate, "throughput_ratio", concurrency=16)
        assert ratio is not None
        stats = ratio["stats"]
        shown = numbers(table[candidate]["c16 ratio [95% interval]"])
        assert shown[:3] == pytest.approx([ratio["value"], stats["low"], stats["high"]], abs=0.0051)
        assert verdict_word(table[candidate]["c16 verdict"]) == stats["verdict"]
    reference = real_run.measurement(REFERENCE, "throughput", concurrency=16)
    assert reference is not None
    shown = numbers(table[REFERENCE]["c16 ratio [95% interval]"])
    assert shown == pytest.approx([reference["value"]], abs=0.051)
    assert table[REFERENCE]["c16 verdict"] == "reference"


@pytest.mark.parametrize("kind", KINDS)
def test_screening_cells_are_the_screen_measurements(real_run: Run, kind: str) -> None:
    _, table, reasons, _ = decision(real_run, kind)
    for model in (REFERENCE, SAME):
        screen = real_run.measurement(model, "screen")
        assert screen is not None
        assert table[model]["licence"] == screen["stats"]["license"]
        headroom = table[model]["memory headroom"]
        assert numbers(headroom) == pytest.approx([screen["stats"]["kv_headroom_gib"]], abs=0.051)
        assert headroom.endswith("(rejected)") is (not screen["stats"]["accepted"])
    # the Hub answers lack this one: its screening failed, and its cells say so
    [failure] = [f for f in real_run.results["summary"]["failures"]
                 if f["test_id"] == f"test_screen.py::test_screen[{WORSE}]"]
    licence = table[WORSE]["licence"]
    assert licence.startswith("not screened [")
    why = reason_of(licence, reasons)
    assert f"{WORSE}'s test_screen failed: {failure['message'].removeprefix('Failed: ')[:60]}" in why
    assert table[WORSE]["memory headroom"] == licence.replace("not screened", "—")
    assert "failed tests (test_screen)" in table[WORSE]["flags"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_group_no_model_was_measured_in_says_why_once(real_run: Run, kind: str) -> None:
    """No capacity or cost measurement in this run: those groups leave the table, in one line
    that points to why; every cell left points to a reason, and every reason is pointed to."""
    _, table, reasons, _ = decision(real_run, kind)
    assert not any(m["benchmark"] in ("capacity", "capacity_ratio")
                   or "usd_per_million_output_tokens" in m["stats"]
                   for m in real_run.results["measurements"])
    text = real_run.markdown if kind == "markdown" else html.unescape(real_run.html)
    line = re.search(r"Not measured for any model: capacity under the SLO (\\?\[\d+\\?\]); "
                     r"cost (\\?\[\d+\\?\])\.", text)
    assert line is not None
    capacity, cost = (note.replace("\\", "") for note in line.groups())
    assert "no capacity measurement in this run" in reason_of(capacity, reasons)
    assert "no $/1M output tokens in this run" in reason_of(cost, reasons)
    assert not any(column.startswith(("capacity", "$/1M", "cost")) for column in table[SAME])
    pointed = {reason_of(capacity, reasons), reason_of(cost, reasons)}
    for row in table.values():
        for column, cell in row.items():
            if column in ("model", "flags"):
                continue
            if re.search(r"\[\d+\]$", cell):
                pointed.add(reason_of(cell, reasons))
            else:
                assert cell and "—" not in cell and "not " not in cell, (column, cell)
    assert pointed == set(reasons)


@pytest.mark.parametrize("kind", KINDS)
def test_flags_come_from_the_throughput_measurements(real_run: Run, kind: str) -> None:
    _, table, _, _ = decision(real_run, kind)
    for model in (REFERENCE, *CANDIDATES):
        c16 = real_run.measurement(model, "throughput", concurrency=16)
        assert c16 is not None
        flags = table[model]["flags"]
        assert ("unstable (c16)" in flags) is c16["stats"]["unstable"]
        assert ("contended (c16)" in flags) is c16["stats"]["contended"]
        assert "failed items" not in flags and "cannot conclude" not in flags


# --------------------------------------------------------------------------- answer and Pareto


@pytest.mark.parametrize("kind", KINDS)
def test_the_answer_names_the_candidates_that_hold_the_references_accuracy(
    real_run: Run, kind: str,
) -> None:
    answer, _, _, _ = decision(real_run, kind)
    holding = [c for c in CANDIDATES if all(
        (m := real_run.measurement(c, f"verdict:{metric}")) is not None
        and m["stats"]["verdict"] in HOLDS for metric in METRICS)]
    assert holding == [SAME]
    assert answer.startswith(f"{SAME} matches {REFERENCE} on every accuracy verdict "
                             "(GSM8K, BFCL, arith); not phi-4-mini (worse on GSM8K")
    ratio = real_run.measurement(SAME, "throughput_ratio", concurrency=16)
    assert ratio is not None
    assert answer.endswith(f"highest c16 throughput ratio: {SAME} ({ratio['value']:.2f}× the "
                           f"reference, {ratio['stats']['verdict']}).")


def independent_front(points: dict[str, tuple[float, float]]) -> set[str]:
    """The models no other model beats on both axes (higher is better on both)."""
    return {name for name, (x, y) in points.items()
            if not any(ox >= x and oy >= y and (ox > x or oy > y)
                       for other, (ox, oy) in points.items() if other != name)}


@pytest.mark.parametrize("kind", KINDS)
def test_the_pareto_front_is_the_undominated_models(real_run: Run, kind: str) -> None:
    _, _, _, line = decision(real_run, kind)
    points = {REFERENCE: (1.0, 0.0)}
    for candidate in CANDIDATES:
        ratio = real_run.measurement(candidate, "throughput_ratio", concurrency=16)
        verdict = real_run.measurement(candidate, "verdict:gsm8k")
        assert ratio is not None and verdict is not None
        points[candidate] = (ratio["value"], verdict["stats"]["difference"])
    front = independent_front(points)
    assert WORSE not in front  # slower and less accurate than the reference
    assert line.startswith("Pareto front (GSM8K difference against c16 throughput ratio): ")
    named = line.split("): ", 1)[1].rstrip(".").split(", ")
    assert set(named) == front
    assert named == sorted(front, key=lambda model: points[model][0])


@pytest.mark.skipif(not matplotlib_available(), reason="matplotlib is not installed")
def test_the_pareto_plot_marks_the_front_in_the_html(real_run: Run) -> None:
    import base64

    start = real_run.html.index('<section class="modelsweep" id="modelsweep-decision">')
    section = real_run.html[start:real_run.html.index("</section>", start)]
    match = re.search(r'<figure class="ms-plot ms-pareto"><img alt="Pareto plot[^"]*" '
                      r'src="data:image/svg\+xml;base64,([^"]+)"', section)
    assert match is not None
    svg = base64.b64decode(match.group(1)).decode("utf-8")
    _, _, _, line = html_decision(real_run.html)
    front = line.split("): ", 1)[1].rstrip(".").split(", ")
    for model in (REFERENCE, *CANDIDATES):
        assert (f"{model} (front)" in svg or f"{model} (reference) (front)" in svg) is (
            model in front), model
    assert ("Pareto front" in svg) is (len(front) > 1)  # the step line, from point to point
    assert "matches the reference on every accuracy verdict" in svg


def test_the_page_comes_first_in_both_reports(real_run: Run) -> None:
    assert real_run.markdown.index("### Decision: which model to serve") < real_run.markdown.index(
        "### Verdicts")
    page = real_run.html.index('id="modelsweep-decision"')
    assert page < real_run.html.index('id="modelsweep-summary"')
    assert page < real_run.html.index('<p class="run-count">')  # above pytest-html's counts


# --------------------------------------------------------------------------- a failed item


@pytest.mark.parametrize("kind", KINDS)
def test_a_failed_reference_item_stops_the_verdict_cell(failed_reference_run: Run, kind: str) -> None:
    run = failed_reference_run
    assert not any(m["benchmark"].startswith("verdict:") for m in run.results["measurements"])
    reference = run.measurement(REFERENCE, "gsm8k")
    assert reference is not None and reference["outcome"] == "failed"
    failed_items = [i for i in reference["items"] if i["error"]]
    assert len(failed_items) == 1 and len(reference["items"]) == 6
    answer, table, reasons, _ = decision(run, kind)
    for candidate in CANDIDATES:
        cell = table[candidate]["GSM8K verdict"]
        assert cell.startswith("cannot conclude [")
        assert not any(word in cell for word in HOLDS + ("worse", "inconclusive"))
        why = reason_of(cell, reasons)
        assert f"1 of 6 gsm8k items of the reference {REFERENCE} failed" in why
        assert "HTTP 500" in why
        assert table[candidate]["GSM8K difference [95% interval]"] == cell.replace(
            "cannot conclude", "—")
        assert "cannot conclude (GSM8K vs reference)" in table[candidate]["flags"]
    assert "failed items (gsm8k 1 of 6)" in table[REFERENCE]["flags"]
    assert table[REFERENCE]["GSM8K difference [95% interval]"].startswith("cannot conclude [")
    # the candidate whose server was not there recorded nothing: no row, but named
    assert UNREACHABLE not in table
    text = run.markdown if kind == "markdown" else html.unescape(run.html)
    assert re.search(r"Not in the table: 2 failed tests of models that recorded nothing: "
                     rf"test_accuracy\.py::test_gsm8k\[{UNREACHABLE}\]: ",
                     text.replace("\\", "")) is not None
    assert answer.startswith(f"No answer: no candidate matches {REFERENCE} on every accuracy "
                             "verdict (GSM8K): ")
    for candidate in CANDIDATES:
        said = re.search(rf"{candidate} cannot conclude on GSM8K (\[\d+\])", answer)
        assert said is not None
        assert "items of the reference" in reason_of(said.group(1), reasons)
