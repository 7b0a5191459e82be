"""Cold start through the real bench, with a fake launcher: a llama-server stand-in that
sleeps before it serves, started through the pool's own launch path (``MODELSWEEP_LLAMA_SERVER``
names it, as it names a llama-server built elsewhere), and the gate against a stored baseline.

The sweep serves two models from a small GGUF file (``source = "path:..."``: a valid header,
no tensors) with the llamacpp backend, so every launch is ``launch_llamacpp``'s: the file's
header read, the command line built, the process owned by a ``ServerProcess`` that waits for
``/health``, the server probed, then stopped.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support.fake_launcher import (
    FAKE,
    ROOT,
    gguf,
)

from pytest_modelsweep.core.measurements import Measurement, StartupStats
from pytest_modelsweep.report.decision import decision_page
from pytest_modelsweep.store.results import RunInfo

pytest_plugins = ("pytester",)

REFERENCE, CANDIDATE = "gemma3-270m", "smollm2-135m"
DELAY_S = 0.5
SLOWER_S = 1.5
"""With the fake's own start (an interpreter, a few imports: about half a second here), 0.5 s
then 1.5 s of sleep double the time from launch to first token or more (the gate's threshold is
+25%), and the sleep is most of a launch's time: the gate reads real launch times, so the
test runs alone (``timing``)."""


@pytest.fixture
def fake_launcher(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The sweep file; ``MODELSWEEP_LLAMA_SERVER`` set to the stand-in."""
    launcher = pytester.path / "llama-server"
    launcher.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE} "$@"\n')
    launcher.chmod(0o755)
    monkeypatch.setenv("MODELSWEEP_LLAMA_SERVER", str(launcher))
    monkeypatch.setenv("MODELSWEEP_CACHE", str(pytester.path / "cache"))
    model = gguf(pytester.path / "fake.gguf")
    sweep = pytester.path / "fake.toml"
    sweep.write_text(
        f'[sweep]\nname = "fake"\nreference = "{REFERENCE}"\n[serving]\nbackend = "llamacpp"\n'
        "startup_timeout_s = 60\n"
        + "".join(
            f'[models.{name}]\nsource = "path:{model}"\nlicense = "mit"\nprompting = "completion"\n'
            for name in (REFERENCE, CANDIDATE)
        )
    )
    pytester.makepyfile(test_the_startup=(ROOT / "benches" / "test_startup.py").read_text())
    return sweep


def run(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    sweep: Path,
    delay: float,
    *args: str,
) -> tuple[pytest.RunResult, list[Measurement], dict[str, object]]:
    monkeypatch.setenv("FAKE_START_DELAY_S", str(delay))
    result = pytester.runpytest(
        f"--sweep={sweep}",
        "--results=r.json",
        "--store=s.sqlite",
        "--modelsweep-dir=work",
        "-p",
        "no:cacheprovider",
        "-s",
        *args,
    )
    data = json.loads((pytester.path / "r.json").read_text())
    return result, [Measurement.from_dict(m) for m in data["measurements"]], data


@pytest.mark.timing
def test_a_start_is_timed_over_fresh_launches_and_a_server_twice_as_slow_fails_the_gate(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    fake_launcher: Path,
) -> None:
    result, found, _ = run(
        pytester,
        monkeypatch,
        fake_launcher,
        DELAY_S,
        "--save-baseline=main",
        "--startup-launches=3",
    )
    result.assert_outcomes(passed=2)
    for m in found:
        stats = m.stats
        assert isinstance(stats, StartupStats) and m.benchmark == "startup" and m.unit == "s"
        assert stats.backend == "llamacpp" and len(stats.launches) == 3 and stats.errors == []
        assert m.value == pytest.approx(stats.first_token_s)
        for launch in stats.launches:
            assert launch.first_token_s is not None
            assert DELAY_S < launch.ready_s < launch.first_token_s < DELAY_S + 30
            assert launch.cache.kind == "page-cache" and launch.cache.evicted
            assert "fake.gguf" in launch.cache.detail
        interval = stats.first_token_s_interval
        assert interval is not None and interval[0] < m.value < interval[1]
        assert stats.cache in ("cold", "warm")  # every launch the same, whichever it was
        assert m.provenance["how"] == "llamacpp" and "--alias" in m.provenance["launch_argv"]
        assert m.params == {"launches": 3, "backend": "llamacpp", "cache": stats.cache}
    assert (
        len(list((pytester.path / "work" / "runs").glob("*/logs/startup/cold-start-*/*.log"))) == 6
    )
    # the decision page's cold-start column: each model's start and how cold it was
    page = decision_page(
        found, RunInfo.of(json.loads((pytester.path / "r.json").read_text())["run"])
    )
    assert page is not None
    column = [c.title for c in page.columns].index("cold start")
    for row in page.rows:
        stats = next(m.stats for m in found if m.model == row.model)
        assert isinstance(stats, StartupStats) and stats.first_token_s is not None
        assert row.cells[column].text == f"{stats.first_token_s:.2f} s ({stats.cache})"
        assert row.cells[column].tip.startswith("3 launches; 95% interval ")
    result.stdout.fnmatch_lines(
        [
            f"*cold start {REFERENCE}: launch 1/3, ready * s, first token * s;"
            " page cache of fake.gguf *"
        ]
    )

    # the gate, against the candidate's stored starts (one model: the sleeps are the test's time)
    same, _, data = run(
        pytester, monkeypatch, fake_launcher, DELAY_S, "--baseline=main", f"--model={CANDIDATE}"
    )
    same.assert_outcomes(passed=1)
    assert same.ret == 0
    assert [row["status"] for row in data["summary"]["gate"]] == ["ok"]  # type: ignore[index]

    slow, found, data = run(
        pytester, monkeypatch, fake_launcher, SLOWER_S, "--baseline=main", f"--model={CANDIDATE}"
    )
    slow.assert_outcomes(passed=1)
    assert slow.ret == pytest.ExitCode.TESTS_FAILED
    (row,) = data["summary"]["gate"]  # type: ignore[index]
    assert row["status"] == "regressed", row
    assert row["benchmark"] == "startup" and row["change"] > 0.6 and row["low"] > 0.25
    slow.stdout.fnmatch_lines(
        [
            "*modelsweep baseline main: 1 regressed or not comparable*",
            "*startup*REGRESSED*starts *× as long, beyond +25%*",
        ]
    )


def test_attached_endpoints_skip_the_cold_start_with_the_reason(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_the_startup=(ROOT / "benches" / "test_startup.py").read_text())
    result = pytester.runpytest(
        f"--model={CANDIDATE}",
        f"--endpoint={CANDIDATE}=http://127.0.0.1:9",
        "-rs",
        "--modelsweep-dir=work",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(
        [
            f"*cold start needs a server this run launches: {CANDIDATE} is attached (--endpoint), "
            "so its start is not ours to time*"
        ]
    )
