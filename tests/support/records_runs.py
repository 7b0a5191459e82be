"""Shared by the tests: moved from test_measurement_records.py."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_modelsweep.serving.provision import LLAMA_CPP_BUILD_NUMBER, LLAMA_CPP_COMMIT
from pytest_modelsweep.store.database import Store
from support.decision_runs import (
    BFCL,
    EXAMPLE_PRICE,
    GSM8K,
    REFERENCE,
    SAME,
    SWEEP,
    WORSE,
    AnsweringServer,
    pytest_process,
    replies_of,
)
from support.fake_launcher import FAKE, gguf
from support.requirements import SHARED_DATA_HINT, module_needs

ROOT = Path(__file__).resolve().parents[2]


module_requirement = module_needs(
    GSM8K.is_file() and (BFCL / "BFCL_v4_simple_python.json").is_file(), SHARED_DATA_HINT
)


# the decision page's sweep without its third model, at most 4 requests at once, priced
RECORDS_SWEEP = (
    SWEEP[: SWEEP.index(f"[models.{WORSE}]")].replace("max_num_seqs = 16", "max_num_seqs = 4")
    + EXAMPLE_PRICE
)


SLOTS = {REFERENCE: 2, SAME: 3}


SWEEP_RUN = "every-kind"
"""The four runs' sweep run (its last run's reports show them all)."""


BUILD_INFO = f"b{LLAMA_CPP_BUILD_NUMBER}-{LLAMA_CPP_COMMIT[:9]}"
"""What the fake launcher's servers answer at /props, as the embedded llama-server does."""


USER_BENCH = """
import pytest
from pytest_modelsweep import Completion, EvalItem, Evaluate, MeasureThroughput

ITEMS = [EvalItem(f"sum-{i}", messages=[{"role": "user", "content": f"What is {i} plus 1?"}],
                  answer=str(i + 1), max_tokens=4) for i in range(4)]


def exact(completion: Completion, item: EvalItem) -> bool:
    return (completion.text or "").strip() == item.answer


@pytest.mark.modelsweep_benchmark("sums")
def test_sums(evaluate: Evaluate) -> None:
    evaluate("sums", ITEMS, exact, concurrency=2)


@pytest.mark.modelsweep_benchmark("my_shape", kind="throughput")
@pytest.mark.parametrize("concurrency", [2], ids=lambda c: f"c{c}")
def test_my_shape(measure_throughput: MeasureThroughput, concurrency: int) -> None:
    measure_throughput("my_shape", ["summarise the report", "draft a reply"],
                       concurrency=concurrency, output_tokens=6)


def test_notes(model_name, record_measurement) -> None:
    record_measurement("notes", 1.5, "ratio", 1, stats={"seen": [1, 2], "why": "a user's own"})
"""


BENCHES = (
    "test_smoke.py",
    "test_throughput.py",
    "test_accuracy.py",
    "test_capacity.py",
    "test_screen.py",
    "test_open_loop.py",
)


@dataclass
class RecordsRun:
    path: Path
    results: list[dict[str, Any]]
    """Both results files' measurements (back to back, then the interleaved ratio)."""
    stored: list[dict[str, Any]]
    """The store's measurements of both runs."""


def pytest_run(path: Path, *args: str, env_more: dict[str, str] | None = None) -> str:
    """The records sweep's run of ``args`` in a process of its own, its output."""
    return pytest_process(
        path,
        "--sweep=records.toml",
        f"--gsm8k-path={GSM8K}",
        f"--bfcl-path={BFCL}",
        "--limit=30",
        "--repeats=2",
        # a queued request waits a whole request (~0.15 s) for its slot, one within the
        # slots a few ms: 110 ms survives a 100-ms stall of the machine and no queued request
        "--timed-requests=4",
        "--slo=ttft=110ms",
        "--contended-cores=64",
        "--contended-steal=1",
        "--modelsweep-dir=work",
        "--store=s.sqlite",
        f"--sweep-run={SWEEP_RUN}",
        *args,
        env_more=env_more,
    )


def run_every_kind(path: Path) -> RecordsRun:
    """The benches and the user's tests, then the c1 ratio again with ``--interleave``."""
    for name in BENCHES:
        (path / name).write_text(
            (ROOT / "benches" / name).read_text(encoding="utf-8"), encoding="utf-8"
        )
    (path / "test_user.py").write_text(USER_BENCH, encoding="utf-8")
    (path / "records.toml").write_text(RECORDS_SWEEP, encoding="utf-8")
    servers = {
        model: AnsweringServer(
            model, replies_of(model), chunk_delay_s=0.0004, slots=slots, default_fault="batch:2"
        )
        for model, slots in SLOTS.items()
    }
    for server in servers.values():
        server.start()
    try:
        attached = [f"--endpoint={name}={server.base_url}" for name, server in servers.items()]
        closed = [name for name in BENCHES if name != "test_open_loop.py"]
        first = pytest_run(
            path,
            *closed,
            "test_user.py",
            *attached,
            "--results=r.json",
            "-k",
            "not c4 and not p1024 and not p3072 and not bfcl",
        )
        assert (path / "r.json").is_file(), first[-4000:]
        second = pytest_run(
            path,
            "test_throughput.py",
            *attached,
            "--results=r2.json",
            "--interleave",
            "-k",
            "test_throughput_ratio and c1 and not c16",
        )
        assert (path / "r2.json").is_file(), second[-4000:]
        # the open loop at 16 req/s, and the rate sweep from 4 req/s, 29 requests a step: a
        # sweep from 8 found both servers saturated at 8 under -n 4 on two cores (a 29-request
        # window's completions drifted 10% behind its sends), so no ratio; one from 2 spent
        # 43 s of this run's 102 on 2 and 4 req/s
        third = pytest_run(
            path,
            "test_open_loop.py",
            *attached,
            "--results=r3.json",
            "--request-rate=16",
            "--rate-sweep=4:64",
            "--timed-requests=29",
            "--slo=e2e=1000ms",
        )
        assert (path / "r3.json").is_file(), third[-4000:]
    finally:
        for server in servers.values():
            server.stop()
    (path / "test_startup.py").write_text(
        (ROOT / "benches" / "test_startup.py").read_text(encoding="utf-8"), encoding="utf-8"
    )
    launcher = path / "llama-server"
    launcher.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE} "$@"\n')
    launcher.chmod(0o755)
    (path / "startup.toml").write_text(
        f'[sweep]\nname = "decision"\nreference = "{REFERENCE}"\n[serving]\nbackend = "llamacpp"\n'
        + "".join(
            f'[models.{name}]\nsource = "path:{gguf(path / "fake.gguf")}"\n'
            'license = "mit"\nprompting = "completion"\n'
            for name in SLOTS
        )
    )
    # the last run of the sweep run: its reports are the whole sweep run's
    fourth = pytest_run(
        path,
        "test_startup.py",
        "--sweep=startup.toml",
        "--results=r4.json",
        "--startup-launches=2",
        "--html=r4.html",
        "--self-contained-html",
        "--md=r4.md",
        "--llm-d-report=r4.llmd.json",
        env_more={
            "MODELSWEEP_LLAMA_SERVER": str(launcher),
            "MODELSWEEP_CACHE": str(path / "cache"),
            "FAKE_START_DELAY_S": "0",
            "FAKE_BUILD_INFO": BUILD_INFO,
        },
    )
    assert (path / "r4.json").is_file(), fourth[-4000:]
    results = [
        m
        for name in ("r.json", "r2.json", "r3.json", "r4.json")
        for m in json.loads((path / name).read_text(encoding="utf-8"))["measurements"]
    ]
    store = Store(path / "s.sqlite")
    stored = [m for run in store.runs() for m in store.measurements(run["run_id"])]
    store.close()
    return RecordsRun(path, results, stored)
