"""``modelsweep history``: a store of real runs of the throughput bench against fake servers,
the newest served measurably slower (twice the delay a token) after a commit; a run
under other request settings stands apart. The change rule on synthetic series."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from support.browser import CHROMIUM, chromium
from support.requirements import need
from support.shared_runs import once_per_session
from support.sse_server import ListingServer

from pytest_modelsweep.cli import main
from pytest_modelsweep.core.stats.changes import change_points, max_t_test
from pytest_modelsweep.report.plots import matplotlib_available

ROOT = Path(__file__).resolve().parents[1]
MODEL = "smollm2-135m"
SELECTION = "test_throughput and c1 and not c16 and not ratio"
CHROMIUM_MISSING = (
    "chromium is not installed (apt-get install -y chromium): this test opens "
    "the history in a real headless browser"
)


@dataclass(frozen=True)
class HistoryRuns:
    folder: Path
    store: Path
    one_run_store: Path
    runs: list[str]
    """The six like runs, oldest first (the last served slower)."""
    apart: str
    """The run made with another --timed-requests, before them."""


def _git(folder: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=folder,
        check=True,
        capture_output=True,
    )


def _bench(folder: Path, url: str, *args: str) -> str:
    """One run of the real throughput bench (c1, 2 repeats of 2 timed requests); its id."""
    path = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "HOME": str(folder / "home"), "PYTHONPATH": os.pathsep.join(path)}
    env.pop("GITHUB_STEP_SUMMARY", None)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "test_throughput.py",
            "-k",
            SELECTION,
            "--timed-requests",
            "2",
            "--repeats",
            "2",
            "--model",
            MODEL,
            "--endpoint",
            f"{MODEL}={url}",
            "--modelsweep-dir",
            "work",
            "--store",
            "store.sqlite",
            "--results",
            "r.json",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            *args,
        ],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return str(json.loads((folder / "r.json").read_text())["run"]["run_id"])


def make_runs(folder: Path) -> HistoryRuns:
    (folder / "test_throughput.py").write_text(
        (ROOT / "benches" / "test_throughput.py").read_text(encoding="utf-8"), encoding="utf-8"
    )
    _git(folder, "init", "-q")
    _git(folder, "add", "test_throughput.py")
    _git(folder, "commit", "-qm", "first")
    # Real time: beside other tests (-n 4 on two cores) the like runs came out contended, with
    # repeat intervals 10x wide, and the rule rightly found no step (or, at 1 ms a token, a
    # false one), so these tests run in the serial timing step, on a quiet machine
    with (
        ListingServer(MODEL, chunk_delay_s=0.002) as fast,
        ListingServer(MODEL, chunk_delay_s=0.004) as slow,
    ):
        apart = _bench(folder, fast.base_url, "--timed-requests", "3")
        assert (
            main(["store", "copy", str(folder / "store.sqlite"), str(folder / "one.sqlite")]) == 0
        )
        runs = [_bench(folder, fast.base_url) for _ in range(5)]
        _git(folder, "commit", "-q", "--allow-empty", "-m", "slower")
        runs.append(_bench(folder, slow.base_url, "--html", "report.html", "--self-contained-html"))
    return HistoryRuns(folder, folder / "store.sqlite", folder / "one.sqlite", runs, apart)


@pytest.fixture(scope="module")
def history_runs(tmp_path_factory: pytest.TempPathFactory) -> HistoryRuns:
    return once_per_session(tmp_path_factory, "history_runs", make_runs)


def history(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["history", *args])
    out, err = capsys.readouterr()
    return code, out, err


# --------------------------------------------------------------------------- the rule
def test_the_change_rule_finds_a_step_where_it_is_and_none_in_an_unchanged_series() -> None:
    rng = np.random.default_rng(9)
    noise = rng.normal(0.0, 0.05, 12)
    flat = [math.log(100.0) + e for e in noise]
    assert change_points(flat) == []
    stepped = [x + (math.log(0.75) if i >= 8 else 0.0) for i, x in enumerate(flat)]
    (change,) = change_points(stepped)
    assert change.index == 8 and change.p_value <= 0.05
    assert math.exp(change.after - change.before) == pytest.approx(0.75, rel=0.08)
    # the newest run alone may have changed; a far-off first run alone is no change
    last = [*flat[:6], flat[6] + math.log(0.3)]
    assert [c.index for c in change_points(last)] == [6]
    assert change_points([flat[0] + math.log(0.3), *flat[1:7]]) == []
    # a run's own repeats floor the noise: runs that agree closer than that are unchanged
    close = [0.0, 0.001, 0.0, 0.001, 0.011, 0.012, 0.011]
    assert [c.index for c in change_points(close)] == [4]
    assert change_points(close, [0.01**2] * 7) == []
    # the same statistic and p-value each time (a fixed seed), and two runs are no series
    assert max_t_test(stepped) == max_t_test(stepped)
    assert change_points(flat[:2]) == []


# --------------------------------------------------------------------------- the command
def _main_series(document: dict[str, object]) -> dict[str, object]:
    series = document["series"]
    assert isinstance(series, list)
    (found,) = [s for s in series if s["setting"] == "concurrency=1" and not s["apart"]]
    assert isinstance(found, dict)
    return found


@pytest.mark.timing  # the runs' figures are real time: see make_runs
def test_history_marks_the_slower_runs_step_and_no_other(
    history_runs: HistoryRuns,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    code, out, err = history(capsys, "--store", str(history_runs.store), "--json")
    assert code == 0, err
    document = json.loads(out)
    assert document["sweep"] == "embedded"
    assert document["runs"] == [history_runs.apart, *history_runs.runs]
    series = _main_series(document)
    points = series["points"]
    assert isinstance(points, list)
    assert [p["run_id"] for p in points] == history_runs.runs
    assert [p["change"] for p in points] == [False] * 5 + [True]
    (change,) = series["changes"]  # type: ignore[misc]
    assert change["run_id"] == history_runs.runs[-1]
    assert 0.3 < change["after"] / change["before"] < 0.7 and change["p_value"] <= 0.05
    first, *middle, slowest = points
    assert first["decision"] == "unjudged" and "first run" in first["why"]
    noisy = ("contended", "unstable")
    for point in [*middle, slowest]:
        assert point["low"] < point["value"] < point["high"]
        if point["decision"] == "unjudged":  # a busy machine: never judged, said why
            assert point["why"].startswith(noisy), point
    assert all(p["decision"] != "regression" for p in middle), middle
    assert slowest["decision"] in ("regression", "unjudged")
    # labels: the commit changed with the slower run
    commits = [p["commit"] for p in points]
    assert len(set(commits[:5])) == 1 and commits[5] != commits[0] and commits[5]
    # the run under other request settings: a series of its own, and the line why
    (apart,) = [s for s in document["series"] if s["apart"]]
    assert [p["run_id"] for p in apart["points"]] == [history_runs.apart]
    assert "timed_requests" in apart["apart"] and "other request settings" in apart["apart"]

    md = tmp_path / "out" / "history.md"
    code, out, err = history(
        capsys,
        "--store",
        str(history_runs.store),
        "--md",
        str(md),
        "--benchmark",
        "throughput",
        "--setting",
        "concurrency=1",
    )
    assert code == 0, err
    assert out.strip() == f"Markdown history: {md}"
    markdown = md.read_text(encoding="utf-8")
    rows = [line for line in markdown.splitlines() if line.startswith("| 2")]
    changed = [row for row in rows if row.rstrip(" |").endswith("CHANGE")]
    assert len(changed) == 1 and history_runs.runs[-1] in changed[0], markdown
    assert f"changes: at run {history_runs.runs[-1]}:" in markdown
    assert "apart: measured under other request settings" in markdown
    assert "none beyond run-to-run noise" not in markdown


class _HistoryPage(HTMLParser):
    """The History section of a dumped DOM: its table rows' cells and its plots."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.images: list[str] = []
        self._depth = 0  # inside #modelsweep-history
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "section" and attributes.get("id") == "modelsweep-history":
            self._depth = 1
        elif self._depth and tag == "section":
            self._depth += 1
        if not self._depth:
            return
        if tag == "tr":
            self.rows.append([])
        elif tag == "td":
            self._cell = []
        elif tag == "img":
            self.images.append(attributes.get("src") or "")

    def handle_endtag(self, tag: str) -> None:
        if self._depth and tag == "td" and self._cell is not None:
            self.rows[-1].append("".join(self._cell).strip())
            self._cell = None
        elif self._depth and tag == "section":
            self._depth -= 1

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _history_page(page: Path, profile: Path) -> _HistoryPage:
    parsed = _HistoryPage()
    parsed.feed(chromium(page, profile, "--dump-dom"))
    return parsed


@pytest.mark.timing  # the runs' figures are real time: see make_runs
def test_history_page_and_the_pytest_html_section_in_chromium(
    history_runs: HistoryRuns,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    need(CHROMIUM is not None, CHROMIUM_MISSING)
    page = tmp_path / "history.html"
    code, _out, err = history(capsys, "--store", str(history_runs.store), "--html", str(page))
    assert code == 0, err
    for where in (page, history_runs.folder / "report.html"):
        shown = _history_page(where, tmp_path / "profile")
        rows = [row for row in shown.rows if row and row[0] in history_runs.runs]
        assert [row[0] for row in rows] == history_runs.runs, where
        assert [row[-1] for row in rows] == [""] * 5 + ["CHANGE"], where
        if matplotlib_available():
            assert len(shown.images) == 2  # the series and the one apart
            assert all(src.startswith("data:image/svg+xml;base64,") for src in shown.images)


# --------------------------------------------------------------------------- bad input
@pytest.mark.timing  # the runs' figures are real time: see make_runs
def test_bad_input_is_one_line_naming_the_fix(
    history_runs: HistoryRuns,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    code, out, err = history(capsys, "--store", str(history_runs.one_run_store))
    assert code == 0 and err == ""
    assert out == (
        f"no history yet: {history_runs.one_run_store} holds one run of sweep "
        f"embedded ({history_runs.apart}); a history needs two or more\n"
    )

    code, out, err = history(capsys, "--store", str(tmp_path / "none.sqlite"))
    assert (code, out) == (2, "")
    assert err == (
        f"modelsweep: error: {tmp_path / 'none.sqlite'}: no store there; run pytest "
        "benches first or pass --store\n"
    )

    code, out, err = history(capsys, "--store", str(history_runs.store), "--sweep", "tpu-v5e")
    assert (code, out) == (2, "")
    assert err == (
        f"modelsweep: error: {history_runs.store}: no runs of sweep 'tpu-v5e' (it "
        "holds embedded); pass --sweep with a sweep it holds, or run pytest benches "
        "with --store there first\n"
    )

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    code, out, err = history(
        capsys, "--store", str(history_runs.store), "--html", str(blocker / "history.html")
    )
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert err.startswith("modelsweep: error: ") and "--html" in err, err

    with pytest.raises(SystemExit) as usage:
        history(capsys, "--store", str(history_runs.store), "--setting", "concurrency")
    assert usage.value.code == 2
    assert "expected KEY=VALUE (e.g. concurrency=4)" in capsys.readouterr().err
