"""No INTERNALERROR: every place a run writes is checked before any test runs, and a disk that
fills up mid-run fails the test that met it in one line while the others run and nothing
measured is lost.

Driven as a hostile user would: real pytest runs of a user's benchmark (the public API) against
the fake server of tests/support/sse_server.py, real unwritable places (a file where a folder must be,
a read-only file system) and real full disks (a small tmpfs).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.sse_server import SseServer
from support.user_projects import (
    MODELS,
    assert_no_traceback,
    eval_bench,
    options,
    output,
    project,
    small_disk,
)

from pytest_modelsweep.cli import main
from pytest_modelsweep.store.database import Store

pytest_plugins = ("pytester",)


def _below_a_file(root: Path, name: str) -> str:
    (root / "afile").write_text("x")
    return str(root / "afile" / name)


def _a_folder(root: Path, name: str) -> str:
    (root / name).mkdir()
    return str(root / name)


# option, how the bad path is made, what the line says after "ERROR: OPTION PATH: "
BAD_OUTPUTS = [
    (
        "--results",
        lambda root: _a_folder(root, "results"),
        "a folder is there, not a file; pass the path of a file (in that folder or elsewhere)",
    ),
    (
        "--results",
        lambda root: _below_a_file(root, "r.json"),
        "cannot write there ({root}/afile is a file, not a folder); pass a path in a folder you "
        "can write to",
    ),
    (
        "--modelsweep-dir",
        lambda root: _below_a_file(root, "") + "",
        "a file is there, not a folder; pass a folder",
    ),
    (
        "--md",
        lambda root: _below_a_file(root, "r.md"),
        "cannot write there ({root}/afile is a file, not a folder); pass a path in a folder you "
        "can write to",
    ),
    (
        "$GITHUB_STEP_SUMMARY",
        lambda root: _a_folder(root, "summary"),
        "a folder is there, not a file; pass the path of a file (in that folder or elsewhere)",
    ),
    (
        "--html",
        lambda root: _below_a_file(root, "r.html"),
        "cannot write there ({root}/afile is a file, not a folder); pass a path in a folder you "
        "can write to",
    ),
    (
        "--junitxml",
        lambda root: _below_a_file(root, "junit.xml"),
        "cannot write there ({root}/afile is a file, not a folder); pass a path in a folder you "
        "can write to",
    ),
]


@pytest.mark.parametrize(
    ("option", "make", "reason"),
    BAD_OUTPUTS,
    ids=[f"{o}-{i}" for i, (o, _, _) in enumerate(BAD_OUTPUTS)],
)
def test_an_output_that_cannot_be_written_is_a_usage_error_before_any_test(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    option: str,
    make: object,
    reason: str,
) -> None:
    project(pytester, test_mine=eval_bench())
    path = make(pytester.path)  # type: ignore[operator]
    path = path.rstrip("/")
    args = ["--modelsweep-dir=work"]
    if option == "$GITHUB_STEP_SUMMARY":
        monkeypatch.setenv("GITHUB_STEP_SUMMARY", path)
    else:
        args.append(f"{option}={path}")
    with SseServer(served_names=MODELS) as server:
        result = pytester.runpytest(*options(server.base_url, *args))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.stderr.lines[0] == f"ERROR: {option} {path}: {reason.format(root=pytester.path)}"
    assert server.stats.bodies == []  # no test ran
    assert_no_traceback(result)


def test_a_read_only_file_system_is_found_before_any_test(
    pytester: pytest.Pytester,
    tmp_path: Path,
) -> None:
    """Root is not stopped by permission bits: the check writes (and removes) a probe file."""
    project(pytester, test_mine=eval_bench())
    with (
        small_disk(tmp_path / "ro", "64k", read_only=True) as disk,
        SseServer(served_names=MODELS) as server,
    ):
        result = pytester.runpytest(*options(server.base_url, f"--results={disk}/r.json"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.stderr.lines[0] == (
        f"ERROR: --results {disk}/r.json: cannot write there ({disk}: Read-only file system); "
        "pass a path in a folder you can write to"
    )
    assert server.stats.bodies == []
    assert_no_traceback(result)


@pytest.fixture
def results_file(pytester: pytest.Pytester) -> Path:
    """A real run's results file and store (the reference's benchmark)."""
    project(pytester, test_mine=eval_bench())
    with SseServer(served_names=MODELS) as server:
        pytester.runpytest(
            *options(
                server.base_url,
                "--model=ref",
                "-k",
                "not verdict",
                "--modelsweep-dir=work",
                "--results=r.json",
            ),
        ).assert_outcomes(passed=1)
    return pytester.path / "r.json"


@pytest.mark.parametrize(
    ("command", "option"),
    [
        (["merge", "{results}", "-o", "{bad}"], "-o"),
        (["report", "{results}", "--md", "{bad}"], "--md"),
        (["report", "{results}", "--html", "{bad}"], "--html"),
    ],
)
def test_the_modelsweep_command_checks_its_outputs_in_one_line(
    results_file: Path,
    command: list[str],
    option: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bad = _below_a_file(results_file.parent, "out")
    args = [part.format(results=results_file, bad=bad) for part in command]
    assert main(args) == 2
    captured = capsys.readouterr()
    assert captured.err == (
        f"modelsweep: error: {option} {bad}: cannot write there "
        f"({results_file.parent}/afile is a file, not a folder); pass a "
        "path in a folder you can write to\n"
    )
    # a good path in a folder not made yet is made
    good = results_file.parent / "reports" / "out"
    assert main([part.format(results=results_file, bad=good) for part in command]) == 0
    assert good.is_file()


def test_a_store_on_a_full_disk_fails_the_tests_that_met_it_in_one_line(
    pytester: pytest.Pytester,
    tmp_path: Path,
) -> None:
    """``database or disk is full``: the test whose items could not be stored fails in one line,
    the next tests still run, and every model's measurement is in the results."""
    project(pytester, test_mine=eval_bench(items=8, words=400))
    with small_disk(tmp_path / "disk", "512k") as disk, SseServer(served_names=MODELS) as server:
        result = pytester.runpytest(
            *options(
                server.base_url,
                "-k",
                "not verdict",
                f"--store={disk}/store.sqlite",
                "--modelsweep-dir=work",
                "--results=r.json",
                "-rf",
            ),
        )
    assert_no_traceback(result)
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == 3  # every test ran
    assert outcomes.get("passed", 0) >= 1 and outcomes.get("failed", 0) >= 1
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    line = (
        f"the store {disk}/store.sqlite: cannot write (database or disk is full); free "
        "space on its disk or pass --store elsewhere (the measurement is in the results)"
    )
    assert result.stdout.lines.count(line) == outcomes["failed"]  # each failure: that line
    measured = json.loads((pytester.path / "r.json").read_text())["measurements"]
    assert sorted(m["model"] for m in measured) == sorted(MODELS)  # nothing measured is lost
    assert all(m["n"] == 8 and m["value"] == 1.0 for m in measured)


def test_a_results_journal_on_a_full_disk_fails_the_test_that_met_it_in_one_line(
    pytester: pytest.Pytester,
    tmp_path: Path,
) -> None:
    """The journal ``results.json.partial.jsonl`` cannot grow: that test fails in one line,
    the next tests still run, the results file at the end says in one line why it could not be
    written either, and the store (on another disk) holds every measurement."""
    project(pytester, test_mine=eval_bench(items=8, words=400))
    with small_disk(tmp_path / "disk", "32k") as disk, SseServer(served_names=MODELS) as server:
        result = pytester.runpytest(
            *options(
                server.base_url,
                "-k",
                "not verdict",
                "--store=store.sqlite",
                "--modelsweep-dir=work",
                f"--results={disk}/r.json",
                "-rf",
            ),
        )
        leftover = sorted(p.name for p in disk.iterdir())
    assert_no_traceback(result)
    result.assert_outcomes(passed=2, failed=1)  # every test ran
    journal = f"{disk}/r.json.partial.jsonl"
    result.stdout.fnmatch_lines(
        [
            "*_ test_my_eval?cand? _*",
            f"the results journal {journal}: cannot write (No space left on device); free space on "
            "its disk or pass --results elsewhere; the measurements are kept and written at the end",
            f"modelsweep: the results file {disk}/r.json: cannot write (No space left on device); "
            "free space on its disk or pass --results elsewhere",
        ]
    )
    assert leftover == []  # neither a cut journal nor a half-written file is left
    store = Store(pytester.path / "store.sqlite", create=False)
    (run,) = store.runs()
    assert sorted(m["model"] for m in store.measurements(run["run_id"])) == sorted(MODELS)
    assert run["status"] == "ended (exit status 1)"
    store.close()


def test_cannot_write_after_the_start_is_one_line_at_the_end(
    pytester: pytest.Pytester,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--md`` and the step summary written at the end, on a disk that filled up meanwhile."""
    project(pytester, test_mine=eval_bench(items=2, words=4))
    with small_disk(tmp_path / "disk", "16k") as disk, SseServer(served_names=MODELS) as server:
        monkeypatch.setenv("GITHUB_STEP_SUMMARY", f"{disk}/summary.md")
        # the folder takes the report at the start, and is full by the end: another writer
        # (this conftest, first at the session's end) filled it
        pytester.makeconftest(f"""
import pytest

@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish():
    with open({str(disk / "filler")!r}, 'wb', buffering=0) as handle:
        try:
            while True:
                handle.write(b'x' * 1024)
        except OSError:
            pass
""")
        result = pytester.runpytest(
            *options(
                server.base_url,
                "--model=ref",
                "-k",
                "not verdict",
                "--modelsweep-dir=work",
                f"--md={disk}/r.md",
            ),
        )
    assert_no_traceback(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert (
        f"modelsweep: --md {disk}/r.md: cannot write (No space left on device); free space "
        f"on its disk or write it elsewhere; $GITHUB_STEP_SUMMARY {disk}/summary.md: cannot "
        "write (No space left on device); free space on its disk or write it elsewhere"
        in output(result)
    )
