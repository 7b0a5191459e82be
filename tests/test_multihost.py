"""One sweep over many hosts, end to end: real benches on each "host", one PostgreSQL store,
and a judging process that serves nothing.

The benches are the real ``benches/test_accuracy.py`` (GSM8K on the shared data, 30 items,
with its verdict tests), run in pytest subprocesses against fake OpenAI-compatible servers
attached with ``--endpoint`` (:class:`test_decision_page.AnsweringServer`: the reference and
the candidate answer different items right, 5 discordant each way, so the verdict is
"matches"). Two ways to spread the models:

- runs of their own joined by ``--sweep-run`` (a CI matrix job or a Kubernetes Job index
  per model): each measures one model; :func:`test_a_sweep_run_of_two_hosts_is_judged_by_a_process_that_serves_nothing`;
- one run whose xdist workers are on two "hosts" reached over ssh (``--tx ssh=…``) through
  a loopback sshd (tests/support/ssh_server.py), each worker owning one model:
  :func:`test_xdist_workers_on_two_hosts_over_ssh_write_one_store`.

The judging process runs ``pytest -m verdict --sweep-run NAME`` with no ``--endpoint`` and a
``PATH`` without docker: a model's server started by mistake would fail the run. Its
verdicts, gate and decision page cover the models every host measured.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.decision_runs import REFERENCE, SAME, SWEEP, AnsweringServer, replies_of
from support.paths import SHARED_DATA, UNUSED_PLUGINS
from support.postgres_server import ADMIN_PASSWORD
from support.requirements import SHARED_DATA_HINT, module_needs, need
from support.ssh_server import SshServer
from support.ssh_server import missing_reason as ssh_missing_reason
from support.stores import raw_sql

ROOT = Path(__file__).resolve().parents[1]
GSM8K = SHARED_DATA / "gsm8k" / "test.jsonl"
module_requirement = module_needs(
    GSM8K.is_file() and (SHARED_DATA / "bfcl" / "BFCL_v4_simple_python.json").is_file(),
    SHARED_DATA_HINT,
)
LIMIT = 30


@dataclass
class Session:
    """One pytest process: its exit status, output and results file."""

    ret: int
    output: str
    results: dict[str, Any]

    @property
    def run_id(self) -> str:
        return str(self.results["run"]["run_id"])

    def measurement(self, model: str, benchmark: str) -> dict[str, Any]:
        found = [
            m
            for m in self.results["measurements"]
            if m["model"] == model and m["benchmark"] == benchmark
        ]
        assert found, (model, benchmark, self.output[-3000:])
        return dict(found[-1])


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project with the real accuracy bench and the decision page's sweep (vLLM from a
    pinned image: nothing here can start one)."""
    (tmp_path / "test_accuracy.py").write_text(
        (ROOT / "benches" / "test_accuracy.py").read_text(encoding="utf-8"), encoding="utf-8"
    )
    (tmp_path / "decision.toml").write_text(SWEEP, encoding="utf-8")
    (tmp_path / "no-programs").mkdir()
    return tmp_path


@pytest.fixture
def servers() -> Iterator[dict[str, AnsweringServer]]:
    """The two models' fake servers, each answering its GSM8K questions."""
    running = {
        model: AnsweringServer(model, replies_of(model), chunk_delay_s=0.0)
        for model in (REFERENCE, SAME)
    }
    for server in running.values():
        server.start()
    yield running
    for server in running.values():
        server.stop()


def bench(
    project: Path,
    store: str,
    *args: str,
    results: str,
    serves_nothing: bool = False,
    password: str | None = None,
    timeout: int = 600,
) -> Session:
    """``pytest test_accuracy.py`` in ``project`` with ``--store``; ``serves_nothing``: no
    program on ``PATH`` (no docker, no git), so starting any server fails; ``password``:
    the store's, in ``PGPASSWORD``."""
    env = {
        **os.environ,
        "HOME": str(project / "home"),
        "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
    }
    env.pop("GITHUB_STEP_SUMMARY", None)
    if password is not None:
        env["PGPASSWORD"] = password
    if serves_nothing:
        env["PATH"] = str(project / "no-programs")
    # The bench as testpaths, not a path argument: xdist rewrites path arguments of remote
    # workers relative to rsync roots, and the "hosts" here share the folder instead.
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-o",
            "testpaths=test_accuracy.py",
            "--sweep=decision.toml",
            f"--gsm8k-path={GSM8K}",
            f"--limit={LIMIT}",
            f"--store={store}",
            "--modelsweep-dir=work",
            f"--results={results}",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            *args,
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    output = done.stdout + done.stderr
    path = project / results
    assert path.is_file(), output[-4000:]
    return Session(done.returncode, output, json.loads(path.read_text(encoding="utf-8")))


def attached(servers: dict[str, AnsweringServer], *models: str) -> list[str]:
    return [f"--endpoint={model}={servers[model].base_url}" for model in models]


def judge(
    project: Path, store: str, *args: str, results: str, password: str | None = None
) -> Session:
    """The judging step: the GSM8K verdict test of the candidate, serving nothing."""
    return bench(
        project,
        store,
        "-m",
        "verdict and gsm8k",
        f"--model={REFERENCE}",
        f"--model={SAME}",
        "-rs",
        *args,
        results=results,
        serves_nothing=True,
        password=password,
    )


def started_no_server(project: Path, session: Session) -> None:
    logs = project / "work" / "runs" / session.run_id / "logs"
    assert not logs.exists(), sorted(p.name for p in logs.iterdir())


def modelsweep(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "pytest_modelsweep.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_a_sweep_run_of_two_hosts_is_judged_by_a_process_that_serves_nothing(
    project: Path,
    servers: dict[str, AnsweringServer],
    postgres_url: str,
) -> None:
    measure = ("-m", "gsm8k and not verdict", "--sweep-run=sr-1")
    host_a = bench(
        project,
        postgres_url,
        *measure,
        f"--model={REFERENCE}",
        *attached(servers, REFERENCE),
        results="a.json",
    )
    host_b = bench(
        project,
        postgres_url,
        *measure,
        f"--model={SAME}",
        *attached(servers, SAME),
        results="b.json",
    )
    assert host_a.ret == host_b.ret == 0, host_a.output[-3000:] + host_b.output[-3000:]

    judged = judge(
        project,
        postgres_url,
        "--sweep-run=sr-1",
        "--save-baseline=main",
        "--md=judged.md",
        results="judged.json",
    )
    assert judged.ret == 0, judged.output[-4000:]
    started_no_server(project, judged)
    verdict = judged.measurement(SAME, "verdict:gsm8k")
    assert verdict["params"]["verdict"] == "matches"
    assert verdict["stats"]["candidate_run"] == host_b.run_id
    assert verdict["stats"]["reference_run"] == host_a.run_id
    assert verdict["n"] == LIMIT and verdict["stats"]["interval"]["discordant"] == 10
    assert "saved sweep run sr-1 (3 runs) as baseline 'main'" in judged.output
    # the store's runs table: three runs of sweep run sr-1, each with its models, all ended
    rows = raw_sql(
        postgres_url,
        "SELECT run_id, models_json, finished_at IS NOT NULL FROM runs "
        "WHERE sweep_run = 'sr-1' ORDER BY started_at, run_id",
    )[0]
    assert {
        (run, json.loads(models)[0] if json.loads(models) else None, done)
        for run, models, done in rows
    } == {
        (host_a.run_id, REFERENCE, True),
        (host_b.run_id, SAME, True),
        (judged.run_id, None, True),
    }

    # the judging run's report covers both hosts' measurements; `modelsweep report
    # --sweep-run` writes the same one from the store, anywhere
    markdown = (project / "judged.md").read_text(encoding="utf-8")
    assert "sr-1 (sweep run of 3 runs)" in markdown
    assert (
        f"**{SAME} matches {REFERENCE} on every accuracy verdict (GSM8K); no throughput, "
        "capacity or cost was measured to choose among them.**"
    ) in markdown
    for model, session in ((REFERENCE, host_a), (SAME, host_b)):
        accuracy = session.measurement(model, "gsm8k")["value"]
        assert f"{100 * accuracy:.1f}%" in markdown
    assert modelsweep("report", "--sweep-run", "sr-1", "--store", postgres_url) == markdown + "\n"
    listed = modelsweep("runs", "--sweep-run", "sr-1", "--store", postgres_url)
    assert [line.split()[0] for line in listed.splitlines()] == [r[0] for r in rows]

    # a side from another sweep run is not used: sr-2 measures only the candidate, so the
    # reference (in sr-1, and the latest stored run) is missing there ...
    host_c = bench(
        project,
        postgres_url,
        "-m",
        "gsm8k and not verdict",
        "--sweep-run=sr-2",
        f"--model={SAME}",
        *attached(servers, SAME),
        results="c.json",
    )
    assert host_c.ret == 0, host_c.output[-3000:]
    alone = judge(
        project,
        postgres_url,
        "--sweep-run=sr-2",
        "--allow-unjudged",
        "--baseline=main",
        results="alone.json",
    )
    assert alone.ret == 0, alone.output[-4000:]
    # (the skip line is a test report's text, redacted as every report is: no user either)
    assert (
        f"no gsm8k items of {REFERENCE} in sweep run sr-2 (2 runs in the store "
        "postgresql://***@127.0.0.1:"
    ) in alone.output
    assert not any(m["benchmark"] == "verdict:gsm8k" for m in alone.results["measurements"])
    # ... while its gate compares the candidate (measured by host c) with the baseline, whose
    # candidate measurement is host b's, not the judging run's that saved it (the same
    # answers, reused from the store: no item changed, so no interval and nothing failed)
    (row,) = [row for row in alone.results["summary"]["gate"] if row["benchmark"] == "gsm8k"]
    assert (row["model"], row["status"]) == (SAME, "no interval")
    assert row["baseline"] == host_b.measurement(SAME, "gsm8k")["value"] == row["current"]
    assert row["note"].startswith(f"n={LIMIT}, discordant=0")
    # ... and without --sweep-run the latest stored run stands in, as before
    anywhere = judge(project, postgres_url, results="anywhere.json")
    assert anywhere.ret == 0, anywhere.output[-4000:]
    stats = anywhere.measurement(SAME, "verdict:gsm8k")["stats"]
    assert (stats["candidate_run"], stats["reference_run"]) == (host_c.run_id, host_a.run_id)


def test_hosts_of_one_sweep_run_with_unlike_serving_settings_are_not_paired(
    project: Path,
    postgres_url: str,
) -> None:
    """Only like with like: the reference's host served 4,096 tokens a sequence, the
    candidate's 2,048 (its copy of the sweep says so: a server unlike its own sweep is
    refused on its host, before any request); the pairing check refuses the verdict, naming
    both."""
    lengths = {REFERENCE: 4096, SAME: 2048}
    (project / "decision-2048.toml").write_text(
        SWEEP.replace("[serving]\n", "[serving]\ncontext_length = 2048\n", 1), encoding="utf-8"
    )
    sweeps = {REFERENCE: "decision.toml", SAME: "decision-2048.toml"}
    servers = {
        # reporting itself as vLLM at a max_model_len, as a real one does
        model: AnsweringServer(
            model,
            replies_of(model),
            chunk_delay_s=0.0,
            vllm_version="0.11.0",
            model_entry={"max_model_len": length},
        )
        for model, length in lengths.items()
    }
    for server in servers.values():
        server.start()
    try:
        unlike = bench(
            project,
            postgres_url,
            "-m",
            "gsm8k and not verdict",
            "--sweep-run=unlike-own",
            f"--model={SAME}",
            f"--endpoint={SAME}={servers[SAME].base_url}",
            results="own.json",
        )
        assert (
            f"{SAME} at {servers[SAME].base_url} does not serve with the sweep's settings "
            "(max_model_len: the sweep declares 4096, the server says 2048)"
        ) in unlike.output
        for model in lengths:
            host = bench(
                project,
                postgres_url,
                "-m",
                "gsm8k and not verdict",
                "--sweep-run=unlike",
                f"--model={model}",
                f"--sweep={sweeps[model]}",
                f"--endpoint={model}={servers[model].base_url}",
                results=f"{model}.json",
            )
            assert host.ret == 0, host.output[-3000:]
    finally:
        for server in servers.values():
            server.stop()
    judged = judge(project, postgres_url, "--sweep-run=unlike", results="judged.json")
    assert judged.ret == pytest.ExitCode.TESTS_FAILED
    assert (
        f"refusing to pair {SAME} with {REFERENCE}: serving setting max_model_len differs "
        f"({SAME}: 2048, {REFERENCE}: 4096); serve every model with identical settings"
    ) in judged.output


def test_joining_a_sweep_run_of_another_sweep_is_a_usage_error(
    project: Path,
    servers: dict[str, AnsweringServer],
    tmp_path: Path,
) -> None:
    store = str(tmp_path / "store.sqlite")
    first = bench(
        project,
        store,
        "-m",
        "gsm8k and not verdict",
        "--sweep-run=one",
        f"--model={REFERENCE}",
        *attached(servers, REFERENCE),
        results="first.json",
    )
    assert first.ret == 0, first.output[-3000:]
    (project / "other.toml").write_text(SWEEP.replace('name = "decision"', 'name = "other"'))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "test_accuracy.py",
            "--sweep=other.toml",
            f"--store={store}",
            "--sweep-run=one",
            "-p",
            "no:cacheprovider",
        ],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == pytest.ExitCode.USAGE_ERROR
    assert (
        f"ERROR: --sweep-run one: its runs in {store} measured sweep decision, this run "
        "measures sweep other; one sweep run holds one sweep: pass the same --sweep, or "
        "another --sweep-run name"
    ) in done.stderr


@pytest.fixture
def sshd() -> Iterator[SshServer]:
    """A loopback sshd (tests/support/ssh_server.py); without one, a skip locally, a failure in CI."""
    reason = ssh_missing_reason()
    need(reason is None, reason or "")
    server = SshServer(hosts=("host-a", "host-b")).start()
    yield server
    server.stop()


def test_xdist_workers_on_two_hosts_over_ssh_write_one_store(
    project: Path,
    servers: dict[str, AnsweringServer],
    postgres_url: str,
    sshd: SshServer,
) -> None:
    """``--tx ssh=host-a… --tx ssh=host-b…``: one run, its two workers on two "hosts", each
    owning one model (the model-per-worker scheduler), writing items into one PostgreSQL
    database; then a third process that serves nothing draws the verdict and the page. The
    store's password is in no argument: each process, remote workers included (ssh's
    ``SendEnv``), finds it in ``PGPASSWORD``."""
    store = postgres_url.replace(f":{ADMIN_PASSWORD}@", "@")
    workers = [
        sshd.tx(host, python=sys.executable, chdir=project, env={"MODELSWEEP_CHIP": "0"})
        for host in ("host-a", "host-b")
    ]
    measured = bench(
        project,
        store,
        "-m",
        "gsm8k and not verdict",
        "--sweep-run=ssh-1",
        f"--model={REFERENCE}",
        f"--model={SAME}",
        "--dist=load",
        *(f"--tx={tx}" for tx in workers),
        *UNUSED_PLUGINS,
        "-v",
        *attached(servers, REFERENCE, SAME),
        results="measured.json",
        password=ADMIN_PASSWORD,
    )
    assert measured.ret == 0, measured.output[-4000:] + sshd.log_text()[-2000:]
    assert sshd.logins() == 2  # each worker came in over ssh
    # each model's tests ran whole on one worker, and the two models on different workers
    workers_of = {
        model: {
            line.split("]")[0].strip("[")
            for line in measured.output.splitlines()
            if line.startswith("[gw") and f"[{model}]" in line and "PASSED" in line
        }
        for model in (REFERENCE, SAME)
    }
    assert all(len(found) == 1 for found in workers_of.values()), workers_of
    assert workers_of[REFERENCE] != workers_of[SAME]
    # the workers recorded the models this run measures (xdist's controller collects nothing)
    ((planned,),) = raw_sql(
        postgres_url, f"SELECT models_json FROM runs WHERE run_id = '{measured.run_id}'"
    )[0]
    assert json.loads(planned) == sorted([REFERENCE, SAME])
    # the workers wrote the scored items into the one database, the controller the rest
    items = raw_sql(
        postgres_url,
        "SELECT model, count(*) FROM run_items WHERE run_id = "
        f"'{measured.run_id}' GROUP BY model ORDER BY model",
    )[0]
    assert dict(items) == {REFERENCE: LIMIT, SAME: LIMIT}

    judged = judge(
        project,
        store,
        "--sweep-run=ssh-1",
        "--md=judged.md",
        "--html=judged.html",
        "--self-contained-html",
        results="judged.json",
        password=ADMIN_PASSWORD,
    )
    assert judged.ret == 0, judged.output[-4000:]
    started_no_server(project, judged)
    verdict = judged.measurement(SAME, "verdict:gsm8k")
    assert verdict["params"]["verdict"] == "matches"
    assert verdict["stats"]["candidate_run"] == verdict["stats"]["reference_run"] == measured.run_id
    markdown = (project / "judged.md").read_text(encoding="utf-8")
    html = (project / "judged.html").read_text(encoding="utf-8")
    assert "### Decision: which model to serve" in markdown
    assert "Decision: which model to serve" in html
    for model in (REFERENCE, SAME):
        accuracy = measured.measurement(model, "gsm8k")["value"]
        assert f"{100 * accuracy:.1f}%" in markdown
    written = [path for path in project.rglob("*") if path.is_file()]
    assert not [path for path in written if ADMIN_PASSWORD.encode() in path.read_bytes()]


def test_a_remote_worker_owns_the_chip_its_tx_gives_it() -> None:
    """Workers on several hosts do not count chips together: ``--tx …//env:MODELSWEEP_CHIP=N``
    gives a worker chip N of its own host (a local ``-n`` worker gets its index)."""
    from pytest_modelsweep.serving.vllm import one_chip_env

    assert one_chip_env("gw1", {"MODELSWEEP_CHIP": "0"}) == {
        "TPU_VISIBLE_CHIPS": "0",
        "TPU_CHIPS_PER_PROCESS_BOUNDS": "1,1,1",
        "TPU_PROCESS_BOUNDS": "1,1,1",
        "TPU_PROCESS_PORT": "8476",
    }
    assert one_chip_env("gw3", {"TPU_VISIBLE_CHIPS": "0"})["TPU_VISIBLE_CHIPS"] == "3"
