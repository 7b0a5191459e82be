"""Every kind of measurement the real benches record reads back into its typed record and
writes back the same JSON, text for text.

The input is what the benches write, not hand-made dicts: ``benches/test_smoke.py``,
``test_throughput.py`` (c1 and its ratio, back to back and again with ``--interleave``),
``test_accuracy.py`` (GSM8K on the shared data, with its verdict), ``test_capacity.py`` under
``--slo`` (and its ratio), ``test_screen.py`` (recorded Hub answers) and a user's own
``evaluate``, ``measure_throughput`` and ``record_measurement``, in pytest subprocesses for a
reference and a candidate served by the decision page's fake servers (priced, so that every
optional figure is there); then ``test_open_loop.py`` (an open loop at a rate, the rate sweep
under ``--slo`` and its ratio) against the same servers, and ``test_startup.py`` against the
fake launcher of ``tests/test_startup.py``. Every window holds the server's metrics. Each measurement of the results file and of the SQLite store goes
through ``Measurement.from_dict`` → ``to_dict``; every figure of a known kind is held by a
typed field (nothing is kept aside as read).

The four runs join one sweep run, so the last one's reports show them all: a decision page
with every column group, whose table must fit a 1,400-pixel-wide screen in Chromium.

``tests/data/results_v1_every_kind.json`` is a results file of schema
``pytest-modelsweep/results/1`` written by the code before the typed records (commit
432fbe3) by this module's run, one measurement of each kind and design, each with its first
two request and item records only (to keep the file small; the lists are not part of any
record's figures): it must read back the same way.
"""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import pytest
from support.requirements import SHARED_DATA_HINT, module_needs, need
from support.shared_runs import once_per_session
from test_decision_page import (
    BFCL,
    EXAMPLE_PRICE,
    GSM8K,
    HUB_FIXTURES,
    REFERENCE,
    SAME,
    SWEEP,
    WORSE,
    AnsweringServer,
    replies_of,
)
from test_report_browser import CHROMIUM, decision_table_width
from test_startup import FAKE, gguf

from pytest_modelsweep.core.measurements import (
    AccuracyStats,
    AccuracyVerdictStats,
    CapacityRatioStats,
    CapacityStats,
    Measurement,
    OtherStats,
    RateCapacityRatioStats,
    RateCapacityStats,
    Record,
    ScreeningResult,
    SmokeStats,
    StartupStats,
    ThroughputRatioStats,
    ThroughputStats,
)
from pytest_modelsweep.serving.provision import LLAMA_CPP_BUILD_NUMBER, LLAMA_CPP_COMMIT
from pytest_modelsweep.store.database import Store

ROOT = Path(__file__).resolve().parents[1]
TODAYS_FILE = ROOT / "tests" / "data" / "results_v1_every_kind.json"
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
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            *args,
        ],
        cwd=path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    return completed.stdout + completed.stderr


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


@pytest.fixture(scope="module")
def records_run(tmp_path_factory: pytest.TempPathFactory) -> RecordsRun:
    return once_per_session(tmp_path_factory, "records_run", run_every_kind)


def kept_aside(record: Record, where: str = "stats") -> Iterator[str]:
    """Where a record (or one inside it) holds a key as read instead of in a typed field."""
    if record.shape.kept:
        yield f"{where}: {sorted(record.shape.kept)}"
    for spec in fields(record):
        value = getattr(record, spec.name)
        inner = value if isinstance(value, tuple) else (value,)
        for index, item in enumerate(inner):
            if isinstance(item, Record):
                yield from kept_aside(item, f"{where}.{spec.name}[{index}]")


KINDS_BEFORE_OPEN_LOOP = {
    AccuracyStats,
    ThroughputStats,
    CapacityStats,
    SmokeStats,
    ScreeningResult,
    AccuracyVerdictStats,
    ThroughputRatioStats,
    CapacityRatioStats,
    OtherStats,
}
"""The kinds a results file written before the open loop and the cold start holds."""
EVERY_KIND = KINDS_BEFORE_OPEN_LOOP | {RateCapacityStats, RateCapacityRatioStats, StartupStats}


def check_every_kind_reads_back(
    measurements: list[dict[str, Any]], kinds_expected: set[type[Record]] = EVERY_KIND
) -> None:
    kinds = set()
    designs = set()
    for data in measurements:
        record = Measurement.from_dict(data)
        kinds.add(type(record.stats))
        assert json.dumps(record.to_dict()) == json.dumps(data), (data["benchmark"], data["model"])
        assert json.dumps(
            Measurement.from_dict(json.loads(json.dumps(record.to_dict()))).to_dict()
        ) == json.dumps(data)
        if not isinstance(record.stats, OtherStats):
            assert list(kept_aside(record.stats)) == [], (data["benchmark"], data["model"])
        if isinstance(record.stats, ThroughputRatioStats):
            designs.add(record.stats.design)
    assert kinds == kinds_expected
    assert designs == {"back-to-back", "interleaved"}


def test_every_kind_the_benches_record_reads_back_as_written(records_run: RecordsRun) -> None:
    check_every_kind_reads_back(records_run.results)


def test_the_stores_measurements_read_back_as_stored(records_run: RecordsRun) -> None:
    assert len(records_run.stored) == len(records_run.results)
    check_every_kind_reads_back(records_run.stored)


def test_the_typed_fields_are_the_recorded_figures(records_run: RecordsRun) -> None:
    """A few figures of each kind, typed, against the results file's own keys."""
    for data in records_run.results:
        record, raw = Measurement.from_dict(data), data["stats"]
        stats = record.stats
        if isinstance(stats, ThroughputStats):
            assert list(stats.repeat_values) == raw["repeat_values"] and len(stats.repeats) == 2
            assert stats.cost is not None and stats.cost.pricing.example is True
            assert stats.goodput is not None and stats.goodput.requests == raw["slo_requests"]
        elif isinstance(stats, CapacityStats):
            # at most its server's slots: a queued request waits beyond the SLO
            assert stats.capacity == raw["capacity"] and 0 < stats.capacity <= SLOTS[record.model]
            assert [step.concurrency for step in stats.steps] == [
                s["concurrency"] for s in raw["steps"]
            ]
        elif isinstance(stats, AccuracyStats) and record.benchmark == "gsm8k":
            assert (stats.n, stats.accuracy) == (raw["n"], raw["accuracy"]) == (30, record.value)
            assert stats.strict_match_accuracy == raw["strict_match_accuracy"]
        elif isinstance(stats, AccuracyVerdictStats) and record.benchmark == "verdict:gsm8k":
            assert stats.interval is not None and stats.interval.n == raw["n"] == 30
            assert stats.verdict is not None and stats.verdict.value == record.params["verdict"]
        elif isinstance(stats, CapacityRatioStats):
            assert stats.ratio is not None
            assert stats.ratio.candidate.capacity / stats.ratio.reference.capacity == 1.5
        elif isinstance(stats, SmokeStats):
            assert stats.completion_tokens == raw["completion_tokens"] > 0
        elif isinstance(stats, OtherStats):
            assert dict(stats.values) == {"seen": [1, 2], "why": "a user's own"}
        elif isinstance(stats, RateCapacityStats):
            assert stats.capacity_rps == raw["capacity_rps"] == record.value
            assert [step.rate for step in stats.steps] == [s["rate"] for s in raw["steps"]]
            window = stats.steps[0].recorded
            assert window is not None and window.open_loop is not None
            assert (
                window.open_loop.seed == raw["steps"][0]["window"]["open_loop"]["arrivals"]["seed"]
            )
        elif isinstance(stats, StartupStats):
            assert [c.ready_s for c in stats.launches] == [c["ready_s"] for c in raw["launches"]]
            assert stats.first_token_s == raw["first_token_s"] == record.value
        if isinstance(stats, ThroughputStats) and record.provenance.get("how") == "attach":
            # every window of every setting sampled the server's metrics, as the server names them
            for window in stats.repeats:
                server = window.server_metrics
                assert server is not None and server.samples, (record.benchmark, record.model)
                assert [s.to_dict() for s in server.samples] == (
                    raw["repeats"][stats.repeats.index(window)]["server_metrics"]["series"]
                )
            assert (record.benchmark == "open_loop") == all(
                w.open_loop is not None for w in stats.repeats
            )


DECISION_GROUPS = (
    "accuracy vs reference",
    "throughput at c16",
    "capacity under the SLO",
    "req/s under the SLO",
    "cost",
    "cold start",
    "screening",
)


def test_with_every_group_the_decision_table_fits_a_1400_px_screen(
    records_run: RecordsRun,
    tmp_path: Path,
) -> None:
    """The sweep run's HTML report (pytest-html's, the page ``--html`` writes), with every
    column group of the decision page, laid out by Chromium in a 1,400-pixel-wide window: the
    table and the page's margin fit in it (a column per part, the layout before, needed 1,805
    pixels here). The Markdown's table is as narrow: a column per group."""
    report = (records_run.path / "r4.html").read_text(encoding="utf-8")
    start = report.index('<section class="modelsweep" id="modelsweep-decision">')
    section = report[start : report.index("</section>", start)]
    head = html.unescape(
        re.sub(r"<[^>]+>", " ", section[section.index("<thead>") : section.index("</thead>")])
    )
    assert all(group in head for group in DECISION_GROUPS), head
    assert "Not measured for any model" not in section
    markdown = (records_run.path / "r4.md").read_text(encoding="utf-8")
    header = next(
        line
        for line in markdown.split("### Decision: which model to serve")[1].splitlines()
        if line.startswith("| model |")
    )
    assert len(re.split(r"(?<!\\)\|", header)) - 2 == 2 + len(DECISION_GROUPS), header
    need(
        CHROMIUM is not None,
        "chromium is not installed (apt-get install -y chromium): this "
        "test lays the report out in a real headless browser",
    )
    widths = decision_table_width(records_run.path / "r4.html", tmp_path / "profile", 1400)
    assert widths["window"] == 1400, widths
    assert widths["table"] <= 1400, widths


def test_the_ratio_table_names_each_ratios_benchmark_and_design(records_run: RecordsRun) -> None:
    """The user's ``my_shape`` ratio at c2 beside the built-in ``throughput`` ratios at c1 and
    c16, back to back and (c1) interleaved: each row names its benchmark (a user's prompts:
    ``own``) and design, in both reports, from the ratio records' own parameters."""
    ratios = [m for m in records_run.results if m["benchmark"] == "throughput_ratio"]
    expected = sorted(
        [
            m["model"],
            m["params"]["reference"],
            m["params"]["benchmark"],
            str(m["params"]["concurrency"]),
            "short" if m["params"]["benchmark"] == "throughput" else "own",
            m["params"]["design"],
            f"{m['value']:.2f}×",
        ]
        for m in ratios
    )
    assert {(row[2], row[3], row[5]) for row in expected} == {
        ("my_shape", "2", "back-to-back"),
        ("throughput", "1", "back-to-back"),
        ("throughput", "1", "interleaved"),
        ("throughput", "16", "back-to-back"),
    }
    markdown = (records_run.path / "r4.md").read_text(encoding="utf-8")
    block = markdown.split("### Throughput relative to the reference\n", 1)[1].split("\n### ")[0]
    shown = [
        [
            html.unescape(re.sub(r"\\(.)", r"\1", c.strip()))
            for c in re.split(r"(?<!\\)\|", line)[1:-1]
        ]
        for line in block.splitlines()
        if line.startswith("| ")
    ]
    assert shown[0][:6] == [
        "candidate",
        "reference",
        "benchmark",
        "concurrency",
        "prompt tokens",
        "design",
    ]
    assert sorted(row[:7] for row in shown[2:]) == expected
    report = (records_run.path / "r4.html").read_text(encoding="utf-8")
    table = report[report.index("<h3>Throughput relative to the reference</h3>") :]
    table = table[: table.index("</table>")]
    cells = [
        [html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
        for row in re.findall(r"<tr>(.*?)</tr>", table)
    ]
    assert sorted(row[:7] for row in cells if row) == expected


def test_the_reports_name_the_build_llama_server_reports(records_run: RecordsRun) -> None:
    """The cold start's servers, launched through llama-server's launch path (the fake
    launcher, answering /props with llama-server's build as the embedded one does), record
    that build and where the binary came from; both reports' provenance line says it."""
    version = f"{BUILD_INFO} (MODELSWEEP_LLAMA_SERVER)"  # a binary not built from the sdist
    started = [m["provenance"] for m in records_run.results if m["benchmark"] == "startup"]
    assert len(started) == len(SLOTS)
    assert all(
        (p["server_name"], p["server_version"], p["how"])
        == ("llama.cpp llama-server", version, "llamacpp")
        for p in started
    )
    said = f"llama.cpp llama-server {version}"
    markdown = (records_run.path / "r4.md").read_text(encoding="utf-8").splitlines()
    assert said in html.unescape(re.sub(r"\\(.)", r"\1", markdown[2])), markdown[2]
    report = (records_run.path / "r4.html").read_text(encoding="utf-8")
    line = re.search(r'<p class="ms-provenance">(.*?)</p>', report)
    assert line is not None and said in html.unescape(line.group(1)), line


def test_a_results_file_of_todays_schema_reads_back_as_written() -> None:
    data = json.loads(TODAYS_FILE.read_text(encoding="utf-8"))
    assert data["schema"] == "pytest-modelsweep/results/1"
    check_every_kind_reads_back(data["measurements"], KINDS_BEFORE_OPEN_LOOP)
