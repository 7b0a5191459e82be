"""What comes from outside never breaks a run (issue 50): results files, journals, baselines,
store rows, server answers and output paths are checked where they enter, and a bad one is
one line naming the file or store, the run, the key and the fix.

Every hostile input is a real run's output corrupted: two runs of a user's benchmark (30
items, all answered right: an accuracy of 100%) and throughput shape against the fake server
of tests/support/sse_server.py, into one store, made once per test session.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from support.shared_runs import once_per_session
from support.sse_server import SseServer
from support.stores import raw_sql
from support.user_projects import (
    MODELS,
    SHAPE,
    SWEEP,
    assert_no_traceback,
    eval_bench,
    options,
    output,
    project,
)

from pytest_modelsweep.cli import main
from pytest_modelsweep.store.results import FIX, ResultsWriter

pytest_plugins = ("pytester",)

ROOT = Path(__file__).resolve().parents[1]
ITEMS = 30


@dataclass(frozen=True)
class RealRuns:
    folder: Path
    store: Path
    """Both runs."""
    one_run_store: Path
    """The first run only."""
    results: Path
    """The second run's results file."""
    first_results: Path
    runs: tuple[str, str]


def _pytest(folder: Path, *args: str) -> str:
    path = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    env.pop("GITHUB_STEP_SUMMARY", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return str(json.loads((folder / "r.json").read_text())["run"]["run_id"])


def make_runs(folder: Path) -> RealRuns:
    (folder / "mine.toml").write_text(SWEEP)
    (folder / "test_mine.py").write_text(eval_bench(items=ITEMS))
    (folder / "test_shape.py").write_text(SHAPE)
    with SseServer(served_names=MODELS) as server:
        args = options(
            server.base_url,
            "--model=ref",
            "--modelsweep-dir=work",
            "--store=store.sqlite",
            "--results=r.json",
            "-q",
        )
        first = _pytest(folder, *args, "--save-baseline=main")
        shutil.copy(folder / "store.sqlite", folder / "one.sqlite")
        shutil.copy(folder / "r.json", folder / "first.json")
        second = _pytest(folder, *args)
    return RealRuns(
        folder,
        folder / "store.sqlite",
        folder / "one.sqlite",
        folder / "r.json",
        folder / "first.json",
        (first, second),
    )


@pytest.fixture(scope="module")
def real_runs(tmp_path_factory: pytest.TempPathFactory) -> RealRuns:
    return once_per_session(tmp_path_factory, "hostile_inputs_runs", make_runs)


def results_data(real_runs: RealRuns) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(real_runs.results.read_text(encoding="utf-8"))
    return data


def accuracy_index(data: dict[str, Any]) -> int:
    return next(i for i, m in enumerate(data["measurements"]) if m["unit"] == "accuracy")


def throughput_index(data: dict[str, Any]) -> int:
    return next(i for i, m in enumerate(data["measurements"]) if m["requests"])


def write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def one_line_error(capsys: pytest.CaptureFixture[str], args: list[str]) -> str:
    """The one line ``modelsweep ARGS`` says on stderr as it exits 2."""
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("modelsweep: error: ") and err.count("\n") == 1, err
    return err.strip()


# --------------------------------------------------------------------------- 1: plots
def test_a_history_of_a_model_at_100_percent_draws_its_plot(
    real_runs: RealRuns, tmp_path: Path
) -> None:
    """30/30's Wilson bound is 0.9999999999999999: the value sits 1e-16 above its interval."""
    page = tmp_path / "history.html"
    assert (
        main(["history", "--sweep", "mine", "--store", str(real_runs.store), "--html", str(page)])
        == 0
    )
    html = page.read_text(encoding="utf-8")
    assert "could not be drawn" not in html
    assert html.count('<figure class="ms-plot">') == 2  # the accuracy and throughput series


def test_a_later_runs_html_report_draws_the_history_of_a_model_at_100_percent(
    pytester: pytest.Pytester, real_runs: RealRuns
) -> None:
    """pytest --html of a third run against that store: every test passes, and the report
    holds the History section."""
    project(pytester, test_mine=eval_bench(items=ITEMS))
    shutil.copy(real_runs.store, pytester.path / "store.sqlite")
    with SseServer(served_names=MODELS) as server:
        result = pytester.runpytest(
            *options(
                server.base_url,
                "--model=ref",
                "--modelsweep-dir=work",
                "--store=store.sqlite",
                "--html=r.html",
            ),
        )
    assert_no_traceback(result)
    assert result.ret == pytest.ExitCode.OK, output(result)[-3000:]
    html = (pytester.path / "r.html").read_text(encoding="utf-8")
    assert 'id="modelsweep-history"' in html and "could not be drawn" not in html


def test_a_plot_that_cannot_be_drawn_is_a_note_in_the_report(
    real_runs: RealRuns, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_modelsweep.report import plots

    def broken(*_: object) -> str:
        raise ValueError("'yerr' must not contain negative values")

    monkeypatch.setattr(plots, "accuracy_plot", broken)
    page = tmp_path / "r.html"
    assert main(["report", str(real_runs.results), "--html", str(page)]) == 0
    html = page.read_text(encoding="utf-8")
    assert (
        "the plot Accuracy could not be drawn (ValueError: &#x27;yerr&#x27; must not "
        "contain negative values)"
    ) in html
    assert "Throughput: Output tokens per second" in html  # the other plots are drawn


# --------------------------------------------------------------------------- 4, 8: results
def _no_run(data: dict[str, Any]) -> None:
    del data["run"]


def _run_text(data: dict[str, Any]) -> None:
    data["run"] = "r1"


def _requests_text(data: dict[str, Any]) -> None:
    data["measurements"][throughput_index(data)]["requests"] = "many"


def _request_start(data: dict[str, Any]) -> None:
    data["measurements"][throughput_index(data)]["requests"][0]["start"] = "early"


def _item_correct(data: dict[str, Any]) -> None:
    data["measurements"][accuracy_index(data)]["items"][3]["correct"] = "yes"


def _items_object(data: dict[str, Any]) -> None:
    data["measurements"][accuracy_index(data)]["items"] = {"q00": True}


def _stats_of_another_kind(data: dict[str, Any]) -> None:
    measurements = data["measurements"]
    measurements[throughput_index(data)]["stats"] = measurements[accuracy_index(data)]["stats"]


CORRUPTIONS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "no-run": (
        _no_run,
        "{where}: run: expected an object (the run's provenance), got NoneType None; " + FIX,
    ),
    "run-text": (
        _run_text,
        "{where}: run: expected an object (the run's provenance), got str 'r1'; " + FIX,
    ),
    "requests-text": (
        _requests_text,
        "{where}: run {run}: measurements[{tp}].requests: expected a list, got str 'many'; " + FIX,
    ),
    "request-start": (
        _request_start,
        "{where}: run {run}: measurements[{tp}].requests[0]"
        ".start: expected a number, got str 'early'; " + FIX,
    ),
    "item-correct": (
        _item_correct,
        "{where}: run {run}: measurements[{acc}].items[3].correct: "
        "expected true or false, got str 'yes'; " + FIX,
    ),
    "items-object": (
        _items_object,
        "{where}: run {run}: measurements[{acc}].items: expected a "
        "list, got dict {{'q00': True}}; " + FIX,
    ),
    "stats-of-another-kind": (
        _stats_of_another_kind,
        (
            "{where}: run {run}: measurements[{tp}].stats: none of the keys of a 'my_shape' "
            "measurement's ThroughputStats (it holds accuracy, correct, failed, figures, …): the "
            "stats of another kind of measurement (AccuracyStats); " + FIX
        ),
    ),
}


def corrupted(real_runs: RealRuns, folder: Path, name: str) -> tuple[Path, str]:
    """A copy of the real results file corrupted by ``name``, and its expected line."""
    data = results_data(real_runs)
    expected = CORRUPTIONS[name][1].format(
        where=folder / "bad.json",
        run=data["run"]["run_id"],
        tp=throughput_index(data),
        acc=accuracy_index(data),
    )
    CORRUPTIONS[name][0](data)
    return write(folder / "bad.json", data), expected


COMMANDS = {
    "results": ["results", "{bad}"],
    "report": ["report", "{bad}", "--md", "{out}"],
    "compare": ["compare", "{good}", "{bad}"],
    "merge": ["merge", "{bad}", "-o", "{out}"],
}


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("corruption", CORRUPTIONS)
def test_a_corrupted_results_file_is_one_line_naming_the_file_run_and_key(
    real_runs: RealRuns,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    corruption: str,
    command: str,
) -> None:
    bad, expected = corrupted(real_runs, tmp_path, corruption)
    args = [
        a.format(bad=bad, good=real_runs.results, out=tmp_path / "out") for a in COMMANDS[command]
    ]
    assert one_line_error(capsys, args) == f"modelsweep: error: {expected}"
    assert not (tmp_path / "out").exists()


def journal_of(real_runs: RealRuns, folder: Path) -> Path:
    """The real run's results as a killed run leaves them: its journal only."""
    data = results_data(real_runs)
    writer = ResultsWriter(folder / "killed.json", data["run"])
    writer.start()
    for measurement in data["measurements"]:
        writer.add(measurement)
    return writer.journal


@pytest.mark.parametrize("command", COMMANDS)
def test_a_journal_line_that_is_not_an_object_or_not_utf8_is_one_line(
    real_runs: RealRuns, tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    journal = journal_of(real_runs, tmp_path)
    lines = journal.read_bytes().splitlines(keepends=True)
    args = [
        a.format(bad=tmp_path / "killed.json", good=real_runs.results, out=tmp_path / "out")
        for a in COMMANDS[command]
    ]
    journal.write_bytes(b"".join([lines[0], b"[1, 2]\n", *lines[1:]]))
    assert one_line_error(capsys, args) == (
        f"modelsweep: error: {journal}: line 2: expected an object, got list; {FIX}"
    )
    journal.write_bytes(b"".join([lines[0], b'{"measurement": "caf\xe9"}\n', *lines[1:]]))
    line = one_line_error(capsys, args)
    assert line.startswith(
        f"modelsweep: error: {journal}: not a results journal ('utf-8' codec can't decode byte 0xe9"
    )
    assert line.endswith(FIX)


@pytest.mark.parametrize("where", ["results", "run-folder"])
def test_a_results_file_without_run_is_one_line_and_the_run_goes_on(
    pytester: pytest.Pytester, real_runs: RealRuns, where: str
) -> None:
    """At the ``--results`` path, or in the work folder's run that the store does not list as
    ended (an earlier run's folder whose items might be taken back)."""
    project(pytester, test_mine=eval_bench(items=ITEMS))
    data = results_data(real_runs)
    del data["run"]
    if where == "results":
        bad = write(pytester.path / "r.json", data)
    else:
        (pytester.path / "work" / "runs" / "killed").mkdir(parents=True)
        bad = write(pytester.path / "work" / "runs" / "killed" / "results.json", data)
    with SseServer(served_names=MODELS) as server:
        result = pytester.runpytest(
            *options(server.base_url, "--model=ref", "--modelsweep-dir=work", "--results=r.json"),
        )
    assert_no_traceback(result)
    result.assert_outcomes(passed=1, skipped=1)
    shown = bad.relative_to(pytester.path)
    assert (
        f"modelsweep: not taking answered items back from {shown}: {shown}: run: expected "
        f"an object (the run's provenance), got NoneType None; {FIX}"
    ) in output(result)


# --------------------------------------------------------------------------- 2: --baseline
@pytest.mark.parametrize("corruption", ["item-correct", "run-text", "requests-text"])
def test_a_baseline_results_file_that_does_not_read_is_refused_before_any_test(
    pytester: pytest.Pytester, real_runs: RealRuns, corruption: str
) -> None:
    """Items of a wrong type (case 2) passed the check and crashed the run's end; a text
    ``run`` or ``requests`` (case 8) was an INTERNALERROR."""
    project(pytester, test_mine=eval_bench(items=ITEMS))
    bad, expected = corrupted(real_runs, pytester.path, corruption)
    with SseServer(served_names=MODELS) as server:
        result = pytester.runpytest(
            *options(
                server.base_url,
                "--model=ref",
                "--modelsweep-dir=work",
                "--results=r.json",
                f"--baseline={bad}",
            ),
        )
    assert_no_traceback(result)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.stderr.lines[0] == f"ERROR: {expected}"
    assert server.stats.bodies == []


# --------------------------------------------------------------------------- 9: store rows
def corrupted_store(real_runs: RealRuns, folder: Path, value: str) -> tuple[Path, str]:
    """A copy of the real store whose second run's first measurement row is ``value``."""
    store = folder / "store.sqlite"
    shutil.copy(real_runs.store, store)
    run = real_runs.runs[1]
    raw_sql(
        str(store),
        f"UPDATE measurements SET measurement_json = '{value}' WHERE id = "
        f"(SELECT min(id) FROM measurements WHERE run_id = '{run}')",
    )
    return store, run


@pytest.mark.parametrize(
    "command",
    [
        ["report", "{run}", "--md", "{out}"],
        ["compare", "{first}", "{run}"],
        ["history", "--sweep", "mine"],
        ["runs"],
        ["merge", "{run}", "-o", "{out}"],
    ],
    ids=["report", "compare", "history", "runs", "merge"],
)
def test_a_store_row_that_is_not_json_is_one_line_naming_the_store_and_run(
    real_runs: RealRuns, tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    from pytest_modelsweep.store.database import STORE_ROW_FIX

    store, run = corrupted_store(real_runs, tmp_path, "{not json")
    args = [a.format(run=run, first=real_runs.runs[0], out=tmp_path / "out") for a in command]
    if command == ["runs"]:  # lists the runs without reading their rows
        assert main([*args, "--store", str(store)]) == 0
        return
    line = one_line_error(capsys, [*args, "--store", str(store)])
    assert line.startswith(
        f"modelsweep: error: {store}: run {run}: measurement: not JSON "
        "(Expecting property name enclosed in double quotes"
    )
    assert line.endswith(STORE_ROW_FIX)


def test_a_wrong_typed_store_row_names_the_store_and_the_run(
    real_runs: RealRuns, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_modelsweep.store.database import STORE_ROW_FIX

    rows = raw_sql(
        str(real_runs.store),
        "SELECT measurement_json FROM measurements WHERE "
        f"run_id = '{real_runs.runs[1]}' ORDER BY id",
    )[0]
    row = json.loads(rows[0][0])
    row["n"] = "thirty"
    store, run = corrupted_store(real_runs, tmp_path, json.dumps(row).replace("'", "''"))
    assert one_line_error(capsys, ["report", run, "--store", str(store)]) == (
        f"modelsweep: error: {store}: run {run}: measurements[0].n: expected an integer, got "
        f"str 'thirty'; {STORE_ROW_FIX}"
    )


def test_a_baseline_whose_store_row_is_not_json_is_refused_before_any_test(
    pytester: pytest.Pytester, real_runs: RealRuns
) -> None:
    project(pytester, test_mine=eval_bench(items=ITEMS))
    store = pytester.path / "store.sqlite"
    shutil.copy(real_runs.store, store)
    raw_sql(
        str(store),
        f"UPDATE measurements SET measurement_json = '[1' WHERE run_id = '{real_runs.runs[0]}'",
    )
    with SseServer(served_names=MODELS) as server:
        result = pytester.runpytest(
            *options(
                server.base_url,
                "--model=ref",
                "--modelsweep-dir=work",
                f"--store={store}",
                "--baseline=main",
            ),
        )
    assert_no_traceback(result)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.stderr.lines[0].startswith(
        f"ERROR: {store}: run {real_runs.runs[0]}: measurement: not JSON"
    )
    assert server.stats.bodies == []


# --------------------------------------------------------------------------- 3: outputs
@pytest.mark.parametrize(
    ("first", "second"),
    [("--results", "--md"), ("--results", "--llm-d-report"), ("--md", "--llm-d-report")],
)
def test_two_outputs_at_one_path_are_a_usage_error_before_any_test(
    pytester: pytest.Pytester, first: str, second: str
) -> None:
    project(pytester, test_mine=eval_bench())
    with SseServer(served_names=MODELS) as server:
        result = pytester.runpytest(
            *options(
                server.base_url,
                "--model=ref",
                "--modelsweep-dir=work",
                f"{first}=out.json",
                f"{second}=./out.json",
            ),
        )
    assert_no_traceback(result)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.stderr.lines[0] == (
        f"ERROR: {second} ./out.json: the same file as {first} "
        "out.json; "
        f"one would replace the other: pass {second} another path"
    )
    assert server.stats.bodies == [] and not (pytester.path / "out.json").exists()


def test_report_refuses_two_outputs_at_one_path(
    real_runs: RealRuns, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert one_line_error(
        capsys, ["report", str(real_runs.results), "--md", str(out), "--llm-d", str(out)]
    ) == (
        f"modelsweep: error: --llm-d {out}: the same file as --md {out}; one would replace "
        "the other: pass --llm-d another path"
    )
    assert not out.exists()


# --------------------------------------------------------------------------- 5: take-back
def test_a_new_store_takes_nothing_back_from_another_stores_results(
    pytester: pytest.Pytester, real_runs: RealRuns
) -> None:
    """The results path holds a healthy run of another store: the new store measures afresh."""
    project(pytester, test_mine=eval_bench(items=ITEMS))
    shutil.copy(real_runs.results, pytester.path / "r.json")
    with SseServer(served_names=MODELS) as server:
        result = pytester.runpytest(
            *options(
                server.base_url,
                "--model=ref",
                "--modelsweep-dir=work",
                "--store=new.sqlite",
                "--results=r.json",
                "-k",
                "my_eval",
            ),
        )
        sent = len(server.stats.bodies)
    assert_no_traceback(result)
    assert "answered items back" not in output(result)
    assert sent == ITEMS  # every item measured afresh


# --------------------------------------------------------------------------- 6: /v1/models
@pytest.mark.parametrize("key", ["created", "max_model_len"])
def test_a_nan_in_the_model_list_never_breaks_the_llmd_report(
    pytester: pytest.Pytester, key: str
) -> None:
    project(pytester, test_shape=SHAPE)
    with SseServer(served_names=MODELS, model_entry={key: math.nan}) as server:
        result = pytester.runpytest(
            *options(
                server.base_url,
                "--model=ref",
                "--modelsweep-dir=work",
                "--llm-d-report=llmd.json",
                "--timed-requests=2",
                "--repeats=2",
            ),
        )
    assert_no_traceback(result)
    assert result.ret == pytest.ExitCode.OK, output(result)[-2000:]
    document = json.loads(
        (pytester.path / "llmd.json").read_text(),
        parse_constant=lambda c: pytest.fail(f"not strict JSON: {c}"),
    )
    (report,) = document["reports"]
    entry = report["scenario"]["stack"][0]["native"]["config"]["server_settings"]["model_entry"]
    assert entry[key] is None


# --------------------------------------------------------------------------- 14, 16, 17: CLI
def test_history_json_of_a_one_run_store_is_json(
    real_runs: RealRuns, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert (
        main(["history", "--sweep", "mine", "--store", str(real_runs.one_run_store), "--json"]) == 0
    )
    document = json.loads(capsys.readouterr().out)
    assert document["runs"] == [real_runs.runs[0]] and document["series"] == []
    assert document["notes"] == [
        f"no history yet: {real_runs.one_run_store} holds one run of "
        f"sweep mine ({real_runs.runs[0]}); a history needs two or more"
    ]


DATA = Path(__file__).resolve().parent / "data"


@pytest.mark.parametrize("name", ["results_v1_every_kind.json", "results_v2_every_kind.json"])
def test_merge_takes_a_run_with_two_measurements_of_one_setting_as_it_is(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each file holds qwen3-4b's throughput ratio of both designs, in one run."""
    held = json.loads((DATA / name).read_text())["measurements"]
    capsys.readouterr()
    assert main(["merge", str(DATA / name), "-o", str(tmp_path / "m.json")]) == 0
    merged = json.loads((tmp_path / "m.json").read_text())["measurements"]
    assert [(m["model"], m["benchmark"]) for m in merged] == [
        (m["model"], m["benchmark"]) for m in held
    ]


def test_merge_of_two_runs_of_one_setting_names_both(
    real_runs: RealRuns, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = real_runs.runs
    line = one_line_error(
        capsys,
        [
            "merge",
            str(real_runs.first_results),
            str(real_runs.results),
            "-o",
            str(tmp_path / "m.json"),
        ],
    )
    assert line == (
        f"modelsweep: error: refusing to merge: ref my_eval was measured in run "
        f"{first} and in run {second}; a merged file holds each model's benchmark "
        "once: leave one of the runs out"
    )


def test_ctrl_c_in_a_modelsweep_command_is_one_line_and_exit_130() -> None:
    """Ctrl-C while ``modelsweep runs`` waits for a PostgreSQL server that never answers."""
    import signal
    import socket

    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen(1)
        port = listening.getsockname()[1]
        command = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pytest_modelsweep.cli",
                "runs",
                "--store",
                f"postgresql://u@127.0.0.1:{port}/store",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        listening.settimeout(30)
        connection, _ = listening.accept()  # it is waiting for the server's first answer
        with connection:
            command.send_signal(signal.SIGINT)
            out, err = command.communicate(timeout=30)
    assert command.returncode == 130
    assert (out, err) == ("", "modelsweep runs: interrupted (Ctrl-C)\n")


# --------------------------------------------------------------------------- 10: read-only
@pytest.mark.parametrize(
    "command",
    [
        ["runs"],
        ["history", "--sweep", "mine"],
        ["report", "{run}"],
        ["compare", "{first}", "{run}"],
    ],
    ids=["runs", "history", "report", "compare"],
)
def test_a_read_only_store_is_read_by_the_commands_that_only_read(
    real_runs: RealRuns, tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    """As a pull request reads main's store (docs/ci.md); nothing is written to it."""
    store = tmp_path / "main.sqlite"
    shutil.copy(real_runs.store, store)
    store.chmod(0o444)
    before = store.read_bytes()
    args = [a.format(run=real_runs.runs[1], first=real_runs.runs[0]) for a in command]
    capsys.readouterr()
    assert main([*args, "--store", str(store)]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert real_runs.runs[1] in out if command[0] in ("runs", "history") else out.strip()
    assert store.read_bytes() == before


# --------------------------------------------------------------------------- 12: /metrics
@pytest.mark.parametrize("bad", [math.inf, math.nan])
def test_a_non_finite_gauge_is_ignored_with_a_note_and_flags_nothing(
    real_runs: RealRuns, bad: float
) -> None:
    """The real run's first timed window as the sampler saw it, its server exposing ``+Inf``
    (or ``NaN``) requests waiting in one sample."""
    from pytest_modelsweep.core.measurements import Measurement, ThroughputStats
    from pytest_modelsweep.serving.server_metrics import summarize_samples

    data = results_data(real_runs)
    stats = Measurement.from_dict(data["measurements"][throughput_index(data)]).stats
    assert isinstance(stats, ThroughputStats)
    window = stats.repeats[0].server_metrics
    assert window is not None and len(window.samples) >= 2
    samples = list(window.samples)
    samples[-1] = replace(
        samples[-1], values={**samples[-1].values, "llamacpp:requests_deferred": bad}
    )
    summary = summarize_samples(window.server_kind, samples)
    assert summary.flag_line() is None and not summary.flagged
    assert summary.waiting is not None and summary.waiting.max == 0.0
    assert summary.ignored == {
        "waiting": f"llamacpp:requests_deferred was {bad!r} in 1 of {len(samples)} samples: ignored"
    }


# --------------------------------------------------------------------------- 11: open loop
@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (
            ["--timed-requests=1"],
            "degenerate: its 1 timed request offers no rate (fewer than two, "
            "or every one due at once)",
        ),
        (
            ["--timed-requests=6", "--burstiness=1e-300"],
            "degenerate: its 6 timed requests offer no rate (fewer than two, or every one due at "
            "once)",
        ),
    ],
    ids=["one-request", "every-gap-0"],
)
def test_a_degenerate_open_loop_window_is_flagged_and_never_passes(
    pytester: pytest.Pytester, args: list[str], reason: str
) -> None:
    from support.sse_server import ListingServer

    pytester.makepyfile(test_the_open_loop=(ROOT / "benches" / "test_open_loop.py").read_text())
    with ListingServer("smollm2-135m") as server:
        result = pytester.runpytest(
            f"--endpoint=smollm2-135m={server.base_url}",
            "--model=smollm2-135m",
            "--request-rate=20",
            "--repeats=1",
            "--modelsweep-dir=work",
            "--results=r.json",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            "-k",
            "test_open_loop and not rate_capacity",
            *args,
        )
    assert_no_traceback(result)
    result.assert_outcomes(failed=1)
    assert reason in output(result)
    (measurement,) = json.loads((pytester.path / "r.json").read_text())["measurements"]
    assert measurement["outcome"] == "failed"


# --------------------------------------------------------------------------- 13: PostgreSQL
def test_a_postgresql_port_that_never_answers_is_named_with_its_timeout() -> None:
    """A port that accepts and never answers (the URL's connect_timeout keeps the test short;
    without it the store waits docs/store.md's 10 s)."""
    import socket
    import time

    from pytest_modelsweep.core.errors import ModelsweepError
    from pytest_modelsweep.store.database import Store

    pytest.importorskip("psycopg")
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen(4)
        port = listening.getsockname()[1]
        url = f"postgresql://bench@127.0.0.1:{port}/store?connect_timeout=1"
        started = time.monotonic()
        with pytest.raises(ModelsweepError) as refused:
            Store(url, create=False)
        waited = time.monotonic() - started
    assert str(refused.value) == (
        f"{url}: no answer from 127.0.0.1:{port} within the connect timeout (1 s); check that "
        "the server is up and reachable, or the host in --store"
    )
    assert waited < 5


# --------------------------------------------------------------------------- 7: sequential
def test_until_decided_stops_a_model_whose_comparison_can_use_no_more_items(
    pytester: pytest.Pytester,
) -> None:
    """The reference failed every item: the candidate's verdict can use none of its items,
    so it sends one round, not all 40."""
    project(pytester, test_mine=eval_bench(items=40))
    with (
        SseServer(served_names=("ref",), default_fault="http500") as failing,
        SseServer(served_names=("cand",)) as healthy,
    ):
        result = pytester.runpytest(
            "--sweep=mine.toml",
            f"--endpoint=ref={failing.base_url}",
            f"--endpoint=cand={healthy.base_url}",
            "--model=ref",
            "--model=cand",
            "--until-decided",
            "--round-size=5",
            "--modelsweep-dir=work",
            "--results=r.json",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
        )
        sent = len(healthy.stats.bodies)
    assert_no_traceback(result)
    assert sent == 5, output(result)[-3000:]
    assert "my_eval cand: stopped after 5 of 40 items: no use" in output(result)
    measurements = json.loads((pytester.path / "r.json").read_text())["measurements"]
    (cand,) = [m for m in measurements if m["model"] == "cand" and m["benchmark"] == "my_eval"]
    assert cand["stats"]["sequence"]["stop"] == "no use"
