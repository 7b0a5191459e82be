"""Shared by the tests: moved from test_decision_page.py."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_modelsweep.data.bfcl import load_bfcl
from pytest_modelsweep.data.gsm8k import load_gsm8k
from pytest_modelsweep.workloads.gsm8k import doc_to_text
from support.paths import SHARED_DATA
from support.sse_server import HTTP500_BODY, ListingServer, SseServer, fake_token_ids

ROOT = Path(__file__).resolve().parents[2]


GSM8K = SHARED_DATA / "gsm8k" / "test.jsonl"


BFCL = SHARED_DATA / "bfcl"


HUB_FIXTURES = ROOT / "tests" / "data" / "hub_tpu_v5e.json"


REFERENCE, SAME, WORSE = "gemma-4-e2b", "qwen3-4b", "phi-4-mini"


CANDIDATES = (SAME, WORSE)


LIMIT = 30  # a verdict needs 30 items paired (stats.MIN_PAIRED_ITEMS)


# Which items each model answers right (the others get a wrong answer). A verdict needs 10
# items the two models score differently (stats.MIN_DISCORDANT): SAME and the reference each
# get 5 the other misses (matches), WORSE misses all 10 of the reference's GSM8K answers and
# differs from it on 12 BFCL and arith items, 6 each way (matches).
RIGHT = {
    "gsm8k": {REFERENCE: range(10), SAME: range(5, 15), WORSE: range(0)},
    "bfcl": {REFERENCE: range(10), SAME: range(5, 15), WORSE: range(6, 16)},
    "arith": {REFERENCE: range(10), SAME: range(5, 15), WORSE: range(6, 16)},
}


ARITH_ITEMS = 30


ARITH = [(f"arith-{i:02d}", f"What is {i} plus {i + 7}?", 2 * i + 7) for i in range(ARITH_ITEMS)]


SLO = "ttft=160ms"


SLOT_CHUNK_DELAY_S = 0.002
"""The capacity servers' pause between chunks (see the module's docstring)."""


TPU_PRICE = """
[pricing]
usd_per_hour = 1.20
source = "Google Cloud TPU pricing, v5e on-demand"
as_of = "2026-11-30"
"""


EXAMPLE_PRICE = """
[pricing]
usd_per_hour = 0.10
source = "a price for this test"
as_of = "2026-11-30"
example = true
"""


USD_PER_HOUR = 2.5


SWEEP = f"""
[sweep]
name = "decision"
reference = "{REFERENCE}"

[serving]
backend = "vllm-docker"
image = "vllm/vllm-tpu:v0.21.0"
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
USER_BENCH = """
import pytest
from pytest_modelsweep import Completion, EvalItem, Evaluate

PROBLEMS = PROBLEMS_HERE
ITEMS = [EvalItem(item_id, messages=[{"role": "user", "content": question}], answer=str(answer),
                  max_tokens=8) for item_id, question, answer in PROBLEMS]


def exact(completion: Completion, item: EvalItem) -> bool:
    return (completion.text or "").strip() == item.answer


@pytest.mark.modelsweep_benchmark("arith")
def test_arith(evaluate: Evaluate) -> None:
    evaluate("arith", ITEMS, exact, concurrency=4)
"""


USER_CONFTEST = """
# Nothing to register: a declared benchmark registers its own marker (arith).
"""


AFTER_S = 120.0
"""How long an :class:`AnsweringServer` waits at most for its ``after`` server's first question."""


class AnsweringServer(ListingServer):
    """The fake streaming server, answering a request whose last message (or prompt) holds one
    of ``replies``' keys with that reply; ``fail`` keys get HTTP 500. Anything else (the
    throughput workload's prompts) gets the usual ``max_tokens`` tokens (``default_fault``
    applies to those: ``batch:2``, two tokens a chunk; ``short:12``, a broken server), after
    ``first_token_delay_s``. With ``slots`` it serves that many requests at once and queues
    the rest, as a batching server does beyond its ``max_num_seqs``. Each answer comes after
    ``answer_delay_s`` (so that a run can be killed between rounds), and none before the
    server ``after`` (if given) has been asked a question (at most :data:`AFTER_S` seconds).
    ``listing`` goes to :class:`ListingServer` (``vllm_version``, ``model_entry``)."""

    def __init__(
        self,
        served_name: str,
        replies: Mapping[str, str],
        *,
        chunk_delay_s: float,
        fail: Collection[str] = (),
        slots: int | None = None,
        first_token_delay_s: float = 0.0,
        default_fault: str = "",
        answer_delay_s: float = 0.0,
        after: SseServer | None = None,
        **listing: Any,
    ) -> None:
        super().__init__(
            served_name, chunk_delay_s=chunk_delay_s, default_fault=default_fault, **listing
        )
        self.replies = dict(replies)
        self.fail = set(fail)
        self.slots = slots
        self.first_token_delay_s = first_token_delay_s
        self.answer_delay_s = answer_delay_s
        self.after = after
        self._slots: asyncio.Semaphore | None = None

    async def _generate(self, path: str, data: dict[str, Any], writer: Any) -> bool:
        if self.slots is None:
            return await self._answer(path, data, writer)
        if self._slots is None:  # made in the server's own event loop
            self._slots = asyncio.Semaphore(self.slots)
        async with self._slots:
            return await self._answer(path, data, writer)

    async def _answer(self, path: str, data: dict[str, Any], writer: Any) -> bool:
        waited = 0.0
        while self.after is not None and not self.after.stats.bodies and waited < AFTER_S:
            await asyncio.sleep(0.01)
            waited += 0.01
        if self.answer_delay_s:
            await asyncio.sleep(self.answer_delay_s)
        chat = path.endswith("chat/completions")
        messages = data.get("messages") or [{}]
        asked = str(messages[-1].get("content", "")) if chat else str(data.get("prompt", ""))
        key = next((k for k in self.replies if k in asked), None)
        if key is None:
            if self.first_token_delay_s:
                await asyncio.sleep(self.first_token_delay_s)
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
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\n\r\n"
        )
        for piece in pieces:
            self._event(writer, b"data: " + self._chunk(chat, piece, None) + b"\n\n")
        final = self._chunk(
            chat, "", "stop", usage=(usage["prompt_tokens"], usage["completion_tokens"])
        )
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
            args = [
                f"{p}={next(v for v in values if v != '')!r}"
                for p, values in params.items()
                if any(v != "" for v in values)
            ]
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
        replies[record.messages[-1]["content"]] = (
            bfcl_call(record.ground_truth) if right else "[no_such_function(x=1)]"
        )
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
        found = [
            m
            for m in self.results["measurements"]
            if m["model"] == model
            and m["benchmark"] == benchmark
            and all(m["params"].get(k) == v for k, v in params.items())
        ]
        return found[-1] if found else None


def pytest_process(path: Path, *args: str, env_more: dict[str, str] | None = None) -> str:
    """A pytest run of the project at ``path`` in a process of its own (the benches' HOME, Hub
    fixtures and this checkout's package), its output."""
    env = {
        **os.environ,
        "HOME": str(path / "home"),
        "MODELSWEEP_HUB_FIXTURES": str(HUB_FIXTURES),
        "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
        **(env_more or {}),
    }
    env.pop("GITHUB_STEP_SUMMARY", None)
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--rootdir",
            str(path),
            *args,
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
        ],
        cwd=path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    return completed.stdout + completed.stderr


def run_benches(
    path: Path,
    servers: dict[str, AnsweringServer],
    *args: str,
    sweep: str = SWEEP,
    endpoints: tuple[str, ...] = (),
) -> Run:
    """The real benches (and the user's) in a pytest subprocess, against the servers
    (and any further ``--endpoint=NAME=URL``)."""
    for name in ("test_accuracy.py", "test_throughput.py", "test_screen.py", "test_capacity.py"):
        (path / name).write_text(
            (ROOT / "benches" / name).read_text(encoding="utf-8"), encoding="utf-8"
        )
    (path / "test_arith.py").write_text(
        USER_BENCH.replace("PROBLEMS_HERE", repr(ARITH)), encoding="utf-8"
    )
    (path / "conftest.py").write_text(USER_CONFTEST, encoding="utf-8")
    (path / "decision.toml").write_text(sweep, encoding="utf-8")
    attached = [f"--endpoint={name}={server.base_url}" for name, server in servers.items()]
    output = pytest_process(
        path,
        "--sweep=decision.toml",
        f"--gsm8k-path={GSM8K}",
        f"--bfcl-path={BFCL}",
        f"--limit={LIMIT}",
        *attached,
        *endpoints,
        "--modelsweep-dir=work",
        "--results=r.json",
        "--md=r.md",
        "--html=r.html",
        "--self-contained-html",
        *args,
    )
    assert (path / "r.json").is_file(), output[-4000:]
    return Run(
        path,
        json.loads((path / "r.json").read_text(encoding="utf-8")),
        (path / "r.md").read_text(encoding="utf-8"),
        (path / "r.html").read_text(encoding="utf-8"),
        output,
    )


def run_real(path: Path) -> Run:
    """Accuracy (30 items each), verdicts, c16 throughput (2 repeats of 16 requests) and its
    ratios, screening, priced by the sweep's ``[pricing]``: the reference and one candidate
    stream a token every 0.4 ms, the other candidate every 4 ms."""
    delays = {REFERENCE: 0.0004, SAME: 0.0004, WORSE: 0.004}
    servers = {
        model: AnsweringServer(model, replies_of(model), chunk_delay_s=delay)
        for model, delay in delays.items()
    }
    for server in servers.values():
        server.start()
    try:
        run = run_benches(
            path,
            servers,
            "test_accuracy.py",
            "test_throughput.py",
            "test_screen.py",
            "test_arith.py",
            "-k",
            "c16 or not test_throughput",
            "--repeats=2",
            "--timed-requests=16",
            # the fake servers serve from this process, whose CPU counts as
            # "other": with the default limit a busy machine flags them contended
            "--contended-cores=64",
            "--contended-steal=1",
            sweep=SWEEP + TPU_PRICE,
        )
    finally:
        for server in servers.values():
            server.stop()
    # only the worse candidate's tests may fail, and a ratio verdict on the other's timing noise
    failed = {f["test_id"] for f in run.results["summary"].get("failures", [])}
    assert all(
        WORSE in test or test.startswith("test_throughput.py::test_throughput_ratio[")
        for test in failed
    ), run.output[-4000:]
    return run


UNREACHABLE = "smollm3-3b"


EXTRA_MODEL = (
    f'[models.{UNREACHABLE}]\nsource = "hf:HuggingFaceTB/SmolLM3-3B"\n'
    'license = "apache-2.0"\nprompting = "chat"\nbfcl_mode = "prompt"\n'
)


CAPACITY_SWEEP = SWEEP.replace("max_num_seqs = 16", "max_num_seqs = 4")


def serving(servers: Mapping[str, AnsweringServer], bench: Callable[[], Run]) -> Run:
    """``bench()`` while the servers run."""
    for server in servers.values():
        server.start()
    try:
        return bench()
    finally:
        for server in servers.values():
            server.stop()


def slotted(
    model: str, slots: int | None, *, first_token_delay_s: float = 0.0, fault: str = "batch:2"
) -> AnsweringServer:
    """A capacity server (see the module's docstring)."""
    replies = replies_of(model) if model in (*CANDIDATES, REFERENCE) else {}
    return AnsweringServer(
        model,
        replies,
        chunk_delay_s=SLOT_CHUNK_DELAY_S,
        slots=slots,
        first_token_delay_s=first_token_delay_s,
        default_fault=fault,
    )


def failed_tests(run: Run) -> set[str]:
    return {f["test_id"] for f in run.results["summary"].get("failures", [])}


def run_capacity_only(path: Path) -> Run:
    """c16 throughput (2 repeats) and capacity only, priced by --usd-per-hour: the reference
    serves 3 requests at once, one candidate 4 (the maximum), one sends its first token after
    0.2 s (capacity 0), and one stops every stream after 12 tokens (a broken search)."""
    servers = {
        REFERENCE: slotted(REFERENCE, 3),
        SAME: slotted(SAME, 4),
        WORSE: slotted(WORSE, None, first_token_delay_s=0.2),
        UNREACHABLE: slotted(UNREACHABLE, None, fault="short:12"),
    }
    run = serving(
        servers,
        lambda: run_benches(
            path,
            servers,
            "test_throughput.py",
            "test_capacity.py",
            "-k",
            "c16 or capacity",
            "--repeats=2",
            f"--slo={SLO}",
            f"--usd-per-hour={USD_PER_HOUR}",
            "--contended-cores=64",
            "--contended-steal=1",
            sweep=CAPACITY_SWEEP + EXTRA_MODEL,
        ),
    )
    # the broken server's tests, the capacity-0 candidate's ratio (worse), c16 ratios on noise
    assert all(
        UNREACHABLE in test
        or test == f"test_capacity.py::test_capacity_ratio[{WORSE}]"
        or test.startswith("test_throughput.py::test_throughput_ratio[")
        for test in failed_tests(run)
    ), run.output[-4000:]
    return run


def run_failed_reference(path: Path) -> Run:
    """GSM8K and its verdicts, the reference's server failing one of the 6 items, and c16
    throughput with no price; a third candidate's server is not there at all (a closed
    port)."""
    replies = {model: replies_of(model) for model in (REFERENCE, *CANDIDATES)}
    second = doc_to_text(load_gsm8k(GSM8K)[1])
    servers = {
        model: AnsweringServer(
            model, replies[model], chunk_delay_s=0.0, fail={second} if model == REFERENCE else set()
        )
        for model in replies
    }
    return serving(
        servers,
        lambda: run_benches(
            path,
            servers,
            "test_accuracy.py",
            "test_throughput.py",
            "-k",
            "gsm8k or c16",
            "--limit=6",
            "--repeats=2",
            "--timed-requests=16",
            "--contended-cores=64",
            "--contended-steal=1",
            sweep=SWEEP + EXTRA_MODEL,
            endpoints=(f"--endpoint={UNREACHABLE}=http://127.0.0.1:9",),
        ),
    )
