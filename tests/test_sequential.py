"""``--until-decided``: the real benches, stopped once their comparisons are decided.

The input is what the benches write: ``benches/test_accuracy.py`` (GSM8K on the shared data),
run in pytest subprocesses for a reference and two candidates, and a user's own benchmark
through ``evaluate`` called directly, each served by the decision page's fake server that answers each question right
or wrong as told (tests/test_decision_page.py). The reference is right on 6 items of every 10;
``SAME`` answers exactly as the reference does; ``WORSE`` is right on 1 of every 10. Every
verdict and gate row is checked against the confidence sequence computed here again from the
items the results file holds, and every request a server got is counted.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from support.decision_runs import (
    GSM8K,
    REFERENCE,
    SAME,
    SWEEP,
    WORSE,
    AnsweringServer,
)
from support.direct_calls import Recorded, attached, bench_settings
from support.paths import TWO_WORKERS
from support.requirements import SHARED_DATA_HINT, module_needs

from pytest_modelsweep.api.evaluation import EvalItem
from pytest_modelsweep.core.errors import DataError
from pytest_modelsweep.core.measurements import (
    AccuracyStats,
    AccuracyVerdictStats,
    Measurement,
)
from pytest_modelsweep.core.stats.sequences import paired_sequence, seeded_order
from pytest_modelsweep.core.sweep import SweepError, load_sweep
from pytest_modelsweep.data.gsm8k import load_gsm8k
from pytest_modelsweep.judging.rounds import until_decided
from pytest_modelsweep.judging.sequential import ORDER_SEED, sequential_gate_status
from pytest_modelsweep.store.database import Store
from pytest_modelsweep.workloads.accuracy import evaluate
from pytest_modelsweep.workloads.gsm8k import doc_to_text

ROOT = Path(__file__).resolve().parents[1]
module_requirement = module_needs(GSM8K.is_file(), SHARED_DATA_HINT)

LIMIT = 100
ROUND = 10
PROBLEMS = load_gsm8k(GSM8K)[:200] if GSM8K.is_file() else []
RIGHT: dict[str, Callable[[int], bool]] = {
    REFERENCE: lambda i: i % 10 < 6,
    SAME: lambda i: i % 10 < 6,
    WORSE: lambda i: i % 10 < 1,
}

USER_ITEMS = 60


def replies(right: Callable[[int], bool], problems: int = LIMIT) -> dict[str, str]:
    """Every GSM8K question of the first ``problems`` and the user's bench, answered right
    where ``right(i)``."""
    out = {}
    for i, problem in enumerate(PROBLEMS[:problems]):
        number = int(problem.answer.split("####")[-1].strip().replace(",", ""))
        out[doc_to_text(problem)] = f"#### {number if right(i) else number + 1}"
    for i in range(USER_ITEMS):
        out[f"What is {i} plus 7?"] = str(i + 7 if right(i) else i + 8)
    return out


def server(
    model: str,
    *,
    delay_s: float = 0.0,
    right: Callable[[int], bool] | None = None,
    problems: int = LIMIT,
    after: AnsweringServer | None = None,
) -> AnsweringServer:
    """The answering server, each answer after ``delay_s``, none before ``after`` was asked."""
    return AnsweringServer(
        model,
        replies(right or RIGHT[model], problems),
        chunk_delay_s=0.0,
        answer_delay_s=delay_s,
        after=after,
    )


@dataclass
class Run:
    results: dict[str, Any]
    markdown: str
    output: str
    returncode: int

    def measurement(self, model: str, benchmark: str) -> Measurement:
        found = [
            m
            for m in self.results["measurements"]
            if m["model"] == model and m["benchmark"] == benchmark
        ]
        assert found, (model, benchmark, self.output[-3000:])
        return Measurement.from_dict(found[-1])

    def accuracy(self, model: str, benchmark: str = "gsm8k") -> AccuracyStats:
        stats = self.measurement(model, benchmark).stats
        assert isinstance(stats, AccuracyStats)
        return stats

    def verdict(self, model: str, benchmark: str = "gsm8k") -> AccuracyVerdictStats:
        stats = self.measurement(model, f"verdict:{benchmark}").stats
        assert isinstance(stats, AccuracyVerdictStats)
        return stats


def command(
    path: Path, servers: Mapping[str, AnsweringServer], *args: str, sweep: str = SWEEP
) -> tuple[list[str], dict[str, str]]:
    """The pytest command of the benches (copied into ``path``) against the servers."""
    (path / "test_accuracy.py").write_text((ROOT / "benches" / "test_accuracy.py").read_text())
    (path / "seq.toml").write_text(sweep)
    env = {
        **os.environ,
        "HOME": str(path / "home"),
        "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
    }
    env.pop("GITHUB_STEP_SUMMARY", None)
    return (
        [
            sys.executable,
            "-m",
            "pytest",
            "--rootdir",
            str(path),
            "--sweep=seq.toml",
            f"--gsm8k-path={GSM8K}",
            f"--limit={LIMIT}",
            f"--round-size={ROUND}",
            *[f"--endpoint={name}={s.base_url}" for name, s in servers.items()],
            "--modelsweep-dir=work",
            "--results=r.json",
            "--md=r.md",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            *args,
        ],
        env,
    )


def run(path: Path, servers: Mapping[str, AnsweringServer], *args: str, sweep: str = SWEEP) -> Run:
    cmd, env = command(path, servers, *args, sweep=sweep)
    done = subprocess.run(
        cmd, cwd=path, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    output = done.stdout + done.stderr
    assert (path / "r.json").is_file(), output[-4000:]
    return Run(
        json.loads((path / "r.json").read_text()),
        (path / "r.md").read_text(),
        output,
        done.returncode,
    )


def serving(servers: Mapping[str, AnsweringServer], bench: Callable[[], Any]) -> Any:
    for s in servers.values():
        s.start()
    try:
        return bench()
    finally:
        for s in servers.values():
            s.stop()


def asked(s: AnsweringServer) -> list[str]:
    """The questions a server was asked, in order (the last message of each request)."""
    return [str(body["messages"][-1]["content"]) for body in s.stats.bodies]


def recomputed(
    candidate: Measurement,
    reference: Measurement,
    margin: float | None = None,
) -> tuple[Any, Any]:
    """The sequence and decision of candidate − reference from the items the two
    measurements hold, in the seeded order of their ids."""
    a = {r.item_id: r.credit for r in candidate.item_records()}
    b = {r.item_id: r.credit for r in reference.item_records()}
    order = seeded_order(set(a) | set(b), ORDER_SEED)
    sequence = paired_sequence(a, b, order, population=None)
    return sequence, sequence.decide(margin, final=True)


def check_verdict(run_: Run, candidate: str, verdict: str, stop: str) -> None:
    """The recorded verdict is the sequence's over the items both sides scored."""
    stats = run_.verdict(candidate)
    sequence, decision = recomputed(
        run_.measurement(candidate, "gsm8k"), run_.measurement(REFERENCE, "gsm8k")
    )
    assert stats.interval is None and stats.sequence is not None
    assert stats.verdict is not None and stats.verdict.value == verdict == decision.verdict.value
    seq = stats.sequence
    assert (seq.n, seq.population, seq.stop, seq.method) == (sequence.n, LIMIT, stop, "betting-iid")
    interval = decision.interval
    assert (seq.low, seq.high, seq.difference) == pytest.approx(
        (interval.low, interval.high, interval.difference)
    )
    assert stats.rule == "sequence+covers-zero"


# --------------------------------------------------------------------------- runs


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Run, dict[str, AnsweringServer]]:
    """GSM8K, a reference and both candidates, one process (no -n)."""
    path = tmp_path_factory.mktemp("plain")
    servers = {model: server(model) for model in RIGHT}
    return serving(
        servers, lambda: run(path, servers, "test_accuracy.py", "-k", "gsm8k", "--until-decided")
    ), servers


def test_a_much_worse_candidate_stops_early_an_equal_one_runs_to_the_end(
    plain_run: tuple[Run, dict[str, AnsweringServer]],
) -> None:
    result, servers = plain_run
    worse, same, reference = (result.accuracy(m) for m in (WORSE, SAME, REFERENCE))
    assert worse.sequence is not None and same.sequence is not None
    assert reference.sequence is not None
    # the worse candidate stopped at a round's end, decided, well before the data's end
    assert worse.sequence.stop == "decided" and worse.n % ROUND == 0 and worse.n <= 40
    assert worse.sequence.used == worse.n == len(asked(servers[WORSE]))
    check_verdict(result, WORSE, "worse", "decided")
    # the equal one cannot be decided without a margin: every item, matches
    assert (same.sequence.stop, same.n, len(asked(servers[SAME]))) == ("final", LIMIT, LIMIT)
    check_verdict(result, SAME, "matches", "final")
    # without -n the candidates' tests come after the reference's: it scored every item
    assert (reference.n, reference.sequence.stop) == (LIMIT, "final")
    # items went out in the seeded order, the same for every model
    order = seeded_order([p.item_id for p in PROBLEMS[:LIMIT]], ORDER_SEED)
    text = {p.item_id: doc_to_text(p) for p in PROBLEMS[:LIMIT]}
    assert sorted(asked(servers[WORSE])) == sorted(text[i] for i in order[: worse.n])
    assert result.returncode != 0  # the worse verdict fails its test (--fail-on worse)


def test_the_records_read_back_and_the_reports_say_after_how_many_items(
    plain_run: tuple[Run, dict[str, AnsweringServer]],
) -> None:
    result, _ = plain_run
    for written in result.results["measurements"]:
        assert Measurement.from_dict(written).to_dict() == written
    worse, stats = result.accuracy(WORSE), result.verdict(WORSE)
    assert stats.sequence is not None and worse.sequence is not None
    used = f"{stats.sequence.n} of {LIMIT} items"
    # the decision page's cell and note, the verdict table's note, the accuracy's subset
    assert f"{stats.sequence.n} of {LIMIT} items \\[" in result.markdown
    assert f"{WORSE} vs the reference on GSM8K: decided after {used}" in result.markdown
    assert f"{WORSE} on gsm8k: decided after {used}" in result.markdown
    assert f"sequential: {worse.n} of {LIMIT} items, decided" in result.markdown
    assert f"{SAME} on gsm8k: undecided after all {LIMIT} items" in result.markdown
    assert f"worse, decided after {used}" in result.output


def test_models_on_two_workers_stop_together(tmp_path: Path) -> None:
    """-n 2, the reference and the worse candidate (the sweep's ``[verdicts]`` on instead of
    the option): the reference stops as soon as its one candidate is decided."""
    # the reference waits only for a candidate whose test has started: its server answers
    # once the candidate's has been asked (else, on a loaded machine, it could score all its
    # items before the other worker's test starts), then slowly
    worse = server(WORSE)
    servers = {REFERENCE: server(REFERENCE, delay_s=0.2, after=worse), WORSE: worse}
    sweep = SWEEP + "\n[verdicts]\nuntil_decided = true\n"
    result = serving(
        servers,
        lambda: run(
            tmp_path,
            servers,
            "test_accuracy.py",
            "-k",
            "gsm8k",
            "--model",
            REFERENCE,
            "--model",
            WORSE,
            *TWO_WORKERS,
            sweep=sweep,
        ),
    )
    reference, worse = result.accuracy(REFERENCE), result.accuracy(WORSE)
    assert worse.sequence is not None and reference.sequence is not None
    assert worse.sequence.stop == reference.sequence.stop == "decided", result.output[-3000:]
    assert reference.n == worse.n < LIMIT
    assert (len(asked(servers[REFERENCE])), len(asked(servers[WORSE]))) == (reference.n, worse.n)
    check_verdict(result, WORSE, "worse", "decided")


def test_a_killed_run_continues_its_sequence_without_resending(tmp_path: Path) -> None:
    """Killed while the reference is half way, the run again: stored answers are reused
    round by round, only the rest is sent, and the sequence ends as an unbroken one does."""
    servers = {model: server(model, delay_s=0.2) for model in (REFERENCE, WORSE)}
    args = (
        "test_accuracy.py",
        "-k",
        "gsm8k",
        "--model",
        REFERENCE,
        "--model",
        WORSE,
        "--until-decided",
    )
    store = tmp_path / "work" / "store.sqlite"

    def killed() -> int:
        cmd, env = command(tmp_path, servers, *args)  # the servers' ports are known now
        first = subprocess.Popen(
            cmd,
            cwd=tmp_path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 300
        stored = 0
        while time.monotonic() < deadline and first.poll() is None and stored < 3 * ROUND:
            time.sleep(0.05)
            if not store.is_file():
                continue
            try:
                with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
                    stored = db.execute(
                        "SELECT COUNT(*) FROM items WHERE model = ?", (REFERENCE,)
                    ).fetchone()[0]
            except sqlite3.Error:
                stored = 0
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
        return stored

    def both() -> tuple[int, Run]:
        stored = killed()
        return stored, run(tmp_path, servers, *args)

    stored, result = serving(servers, both)
    assert 3 * ROUND <= stored < LIMIT
    reference, worse = result.accuracy(REFERENCE), result.accuracy(WORSE)
    assert reference.sequence is not None and worse.sequence is not None
    # nothing stored was sent again: each question asked once over both runs (at most the
    # answers in flight at the kill twice), and the second run reused what the first stored
    questions = asked(servers[REFERENCE])
    assert len(questions) - len(set(questions)) <= 16
    assert reference.reused >= stored and reference.sent == LIMIT - reference.reused
    assert (reference.n, reference.sequence.stop) == (LIMIT, "final")
    check_verdict(result, WORSE, "worse", "decided")
    assert worse.n <= 40


def test_a_users_own_benchmark_stops_when_decided(tmp_path: Path) -> None:
    """``evaluate`` in rounds (``until_decided``), as the fixture calls it with
    ``--until-decided --round-size=5``: the reference, whose candidate has not started, goes to
    the order's end; the worse candidate then stops once its verdict is decided."""
    store = Store(tmp_path / "store.sqlite")
    items = [
        EvalItem(
            f"add-{i:03d}",
            messages=[{"role": "user", "content": f"What is {i} plus 7?"}],
            answer=str(i + 7),
            max_tokens=8,
        )
        for i in range(USER_ITEMS)
    ]
    lines: list[str] = []

    def no_baseline() -> list[Measurement]:
        raise DataError("--baseline 'base': no such baseline")

    def evaluated(model: str, served: AnsweringServer) -> AccuracyStats:
        result = evaluate(
            lambda: attached(served.base_url, model, "chat"),
            "adding",
            items,
            lambda completion, item: (completion.text or "").strip() == item.answer,
            prompting="chat",
            settings=bench_settings(),
            record=Recorded(),
            store=store,
            concurrency=4,
            rounds=partial(
                until_decided,
                store=store,
                run_id="run",
                model=model,
                round_size=5,
                wait_s=60.0,
                reference=REFERENCE,
                candidates=[WORSE],
                tests_of=lambda name, benchmark, params: [f"test_{benchmark}[{name}]"],
                margin=None,
                baseline=no_baseline,
                progress=lines.append,
            ),
        )
        return result.stats

    servers = {model: server(model) for model in (REFERENCE, WORSE)}
    reference, worse = serving(
        servers,
        lambda: (evaluated(REFERENCE, servers[REFERENCE]), evaluated(WORSE, servers[WORSE])),
    )
    store.close()
    assert reference.sequence is not None and worse.sequence is not None
    assert (reference.n, reference.sequence.stop) == (USER_ITEMS, "final")
    assert worse.sequence.stop == "decided" and worse.n < USER_ITEMS
    assert (worse.sequence.population, worse.sequence.round_size) == (USER_ITEMS, 5)
    assert worse.n % 5 == 0 and worse.sent == worse.n == len(asked(servers[WORSE]))
    assert worse.sequence.comparisons[0].startswith(f"{WORSE} vs {REFERENCE}: ")
    assert f"adding {WORSE}: no baseline to stop by (--baseline 'base': no such baseline)" in lines


# --------------------------------------------------------------------------- the gate

GATE_ITEMS = 200


@pytest.fixture(scope="module")
def gate_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Measurement]:
    """A baseline ``base`` of the reference's GSM8K on 200 items (every item scored), and its
    measurement."""
    path = tmp_path_factory.mktemp("gate")
    servers = {REFERENCE: server(REFERENCE, problems=GATE_ITEMS)}
    result = serving(
        servers,
        lambda: run(
            path,
            servers,
            "test_accuracy.py",
            "-k",
            "gsm8k",
            "--model",
            REFERENCE,
            f"--limit={GATE_ITEMS}",
            "--save-baseline=base",
        ),
    )
    assert result.returncode == 0, result.output[-3000:]
    return path, result.measurement(REFERENCE, "gsm8k")


def gate_run(
    path: Path, right: Callable[[int], bool], threshold: str
) -> tuple[Run, AnsweringServer]:
    servers = {REFERENCE: server(REFERENCE, right=right, problems=GATE_ITEMS)}
    result = serving(
        servers,
        lambda: run(
            path,
            servers,
            "test_accuracy.py",
            "-k",
            "gsm8k",
            "--model",
            REFERENCE,
            f"--limit={GATE_ITEMS}",
            "--until-decided",
            "--round-size=20",
            "--baseline=base",
            f"--fail-on-regression=accuracy:{threshold}",
            "--no-reuse",
        ),
    )
    return result, servers[REFERENCE]


def check_gate_row(result: Run, baseline: Measurement, status: str, threshold: float) -> None:
    rows = result.results["summary"]["gate"]
    assert len(rows) == 1, rows
    row = rows[0]
    now = result.measurement(REFERENCE, "gsm8k")
    a = {r.item_id: r.credit for r in now.item_records()}
    b = {r.item_id: r.credit for r in baseline.item_records()}
    sequence = paired_sequence(a, b, seeded_order(set(a) | set(b), ORDER_SEED), population=None)
    assert sequential_gate_status(sequence, threshold, final=False) == row["status"] == status
    assert sequence.n == now.n < GATE_ITEMS
    assert f"sequential, decided after {now.n} of {GATE_ITEMS} items" in row["note"]
    interval = sequence.interval()
    assert (row["low"], row["high"]) == pytest.approx((interval.low, interval.high))


def test_the_gate_stops_once_a_regression_is_certain(gate_store: tuple[Path, Measurement]) -> None:
    path, baseline = gate_store
    result, answered = gate_run(path, lambda i: i % 10 < 2, "5pp")
    check_gate_row(result, baseline, "regressed", 0.05)
    assert "regressed: a drop beyond 5pp is certain" in result.output
    assert len(asked(answered)) == result.measurement(REFERENCE, "gsm8k").n
    assert result.returncode != 0  # a regression fails the session


def test_the_gate_stops_once_no_regression_is_certain(gate_store: tuple[Path, Measurement]) -> None:
    path, baseline = gate_store
    result, answered = gate_run(path, RIGHT[REFERENCE], "10pp")
    check_gate_row(result, baseline, "ok", 0.10)
    assert "ok: no drop beyond 10pp is certain" in result.output
    assert len(asked(answered)) == result.measurement(REFERENCE, "gsm8k").n
    assert result.returncode == 0, result.output[-3000:]


# --------------------------------------------------------------------------- bad input


def test_bad_settings_are_refused_in_one_line(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--round-size=0")
    result.stderr.fnmatch_lines(["*--round-size: expected a positive integer*"])
    result = pytester.runpytest("--until-decided", "--holm")
    result.stderr.fnmatch_lines(["*--holm adjusts fixed-n bootstrap intervals*drop one*"])
    sweep = pytester.path / "bad.toml"
    sweep.write_text(SWEEP + "\n[verdicts]\nuntil_decided = 1\n")
    with pytest.raises(SweepError, match=r"verdicts.until_decided: expected true or false"):
        load_sweep(sweep)
    sweep.write_text(SWEEP + "\n[verdicts]\nuntil_decide = true\n")
    with pytest.raises(SweepError, match=r"verdicts: unknown key\(s\) until_decide"):
        load_sweep(sweep)
