"""``modelsweep k8s``: the Indexed Job that measures the tpu-v5e sweep on GKE TPU nodes and the Job
that judges it, checked against the Kubernetes API's schema offline and read back.

The schema check is kubernetes-validate (the ``dev`` extra): it carries the OpenAPI schemas
of many Kubernetes versions as JSON Schema, so no cluster and no network is needed; the
strict schemas refuse a field the API does not have. The manifests are those the command
writes for the built-in sweep, read back as YAML; each model's entry is compared with the
sweep file and with the ``docker run`` the plugin itself would start for the model.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.docker_images import DockerShim

from pytest_modelsweep.cli import main
from pytest_modelsweep.core.sweep import load_sweep
from pytest_modelsweep.serving.kubernetes import (
    LAUNCHER,
    MODEL_IMPL_TYPES,
    TABLE_ENV,
    job_names,
)
from pytest_modelsweep.serving.vllm import vllm_argv

ROOT = Path(__file__).resolve().parents[1]
STORE = "postgresql://bench@db.example.internal:5432/sweep"
SECRET = "pg-pass-9917-sekrit"
BENCH_IMAGE = "ghcr.io/acme/bench@sha256:" + "ab" * 32
SWEEP_RUN = "2026-11-30.a"
# the first version GKE runs native sidecars on (beta, on by default), and the newest known
VERSIONS = ("1.29", "latest")

kubernetes_validate = pytest.importorskip(
    "kubernetes_validate", reason="pip install -e '.[dev]' (kubernetes-validate)"
)


def validate(document: dict[str, Any], version: str) -> str:
    """The document checked against the strict schema of ``version``; the version used."""
    if version == "latest":
        version = kubernetes_validate.latest_version()
    return str(kubernetes_validate.validate(document, version, strict=True))


@pytest.fixture
def pinned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> str:
    """The tpu-v5e sweep pinned by ``modelsweep pin`` (Docker: the shim holding its tag):
    a Job serves an image pinned by digest only."""
    shim = DockerShim(tmp_path, monkeypatch)
    shim.hold(load_sweep("tpu-v5e").serving.image or "")
    path = tmp_path / "tpu-v5e.pinned.toml"
    assert main(["pin", "--sweep", "tpu-v5e", "-o", str(path)]) == 0
    capsys.readouterr()
    return str(path)


def k8s(
    tmp_path: Path, *args: str, capsys: pytest.CaptureFixture[str], sweep: str = "tpu-v5e"
) -> tuple[int, str, str]:
    status = main(
        [
            "k8s",
            "--sweep",
            sweep,
            "--sweep-run",
            SWEEP_RUN,
            "--bench-image",
            BENCH_IMAGE,
            "-o",
            str(tmp_path / "k8s"),
            *args,
        ]
    )
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.fixture
def written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, pinned: str
) -> dict[str, list[dict[str, Any]]]:
    """The two manifests of the pinned tpu-v5e sweep, written with a store password in the
    environment (which must stay out of them)."""
    monkeypatch.setenv("PGPASSWORD", SECRET)
    status, out, err = k8s(tmp_path, "--store", STORE, capsys=capsys, sweep=pinned)
    assert status == 0, err
    files = sorted((tmp_path / "k8s").iterdir())
    # "2026-11-30.a" is no DNS-1123 label: its readable form and 8 hex of its sha256
    assert [f.name for f in files] == [
        "modelsweep-tpu-v5e-2026-11-30-a-9b5830a6-judge.yaml",
        "modelsweep-tpu-v5e-2026-11-30-a-9b5830a6-measure.yaml",
    ]
    assert f"kubectl apply -f {files[1]}" in out and f"kubectl apply -f {files[0]}" in out
    for path in files:
        assert SECRET not in path.read_text(encoding="utf-8")
    return {
        "judge": list(yaml.safe_load_all(files[0].read_text(encoding="utf-8"))),
        "measure": list(yaml.safe_load_all(files[1].read_text(encoding="utf-8"))),
    }


@pytest.mark.parametrize("version", VERSIONS)
def test_both_jobs_validate_against_the_kubernetes_api_schema(
    written: dict[str, list[dict[str, Any]]],
    version: str,
) -> None:
    kinds = [(doc["apiVersion"], doc["kind"]) for docs in written.values() for doc in docs]
    assert sorted(kinds) == [("batch/v1", "Job"), ("batch/v1", "Job"), ("v1", "ConfigMap")]
    for documents in written.values():
        for document in documents:
            validate(document, version)


def test_the_schema_check_refuses_a_field_the_api_does_not_have(
    written: dict[str, list[dict[str, Any]]],
) -> None:
    job = written["measure"][1]
    job["spec"]["template"]["spec"]["initContainers"][0]["restartPolcy"] = "Always"
    with pytest.raises(kubernetes_validate.ValidationError, match="restartPolcy"):
        validate(job, "latest")
    job = written["judge"][0]
    job["spec"]["backoffLimit"] = "none"
    with pytest.raises(kubernetes_validate.ValidationError, match="'none' is not of type"):
        validate(job, "latest")


def _table(written: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    config_map, job = written["measure"]
    volume = next(v for v in job["spec"]["template"]["spec"]["volumes"] if "configMap" in v)
    assert volume["configMap"]["name"] == config_map["metadata"]["name"]
    table: dict[str, dict[str, Any]] = json.loads(config_map["data"]["models.json"])
    return table


def test_one_completion_index_and_one_chip_per_model(
    written: dict[str, list[dict[str, Any]]],
    pinned: str,
) -> None:
    sweep = load_sweep(pinned)
    _, job = written["measure"]
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == spec["parallelism"] == len(sweep.models) == 8
    pod = spec["template"]["spec"]
    assert pod["nodeSelector"] == {
        "cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice",
        "cloud.google.com/gke-tpu-topology": "1x1",
    }
    (server,) = pod["initContainers"]
    (bench,) = pod["containers"]
    assert server["restartPolicy"] == "Always"  # a native sidecar: it ends with the bench
    assert server["resources"] == {
        "requests": {"google.com/tpu": "1"},
        "limits": {"google.com/tpu": "1"},
    }
    assert "resources" not in bench  # the chip is the server's
    assert server["image"] == sweep.serving.image and "@sha256:" in server["image"]
    assert bench["image"] == BENCH_IMAGE
    probe = server["startupProbe"]
    assert probe["periodSeconds"] * probe["failureThreshold"] >= sweep.serving.startup_timeout_s
    table = _table(written)
    assert list(table) == [str(i) for i in range(8)]
    assert [entry["model"] for entry in table.values()] == list(sweep.models)


def test_each_model_is_served_with_the_sweeps_flags_and_its_group_pinned(
    written: dict[str, list[dict[str, Any]]],
    pinned: str,
) -> None:
    sweep = load_sweep(pinned)
    for index, entry in _table(written).items():
        spec = sweep.model(entry["model"])
        serve = entry["serve"]
        assert serve["env"] == {"MODEL_IMPL_TYPE": MODEL_IMPL_TYPES[str(spec.group)]}
        assert entry["group"] == spec.group
        # the same vLLM command line the plugin runs in `docker run` of the pinned image,
        # but for the address: in the pod the kubelet's probe reaches it on the pod's address
        docker = vllm_argv(spec, sweep.serving, 8000, "0.0.0.0")
        assert serve["argv"] == docker[docker.index(str(sweep.serving.image)) + 1 :], index
        argv = " ".join(serve["argv"])
        assert f"vllm serve {spec.source.id} --served-model-name {spec.name} " in argv
        assert (
            "--max-model-len 4096 --max-num-seqs 16 --enable-prefix-caching --dtype bfloat16"
        ) in argv
        assert argv.endswith(" --max-num-batched-tokens 512")  # the sweep's extra_args
        if spec.tool_call_parser:
            assert f" --enable-auto-tool-choice --tool-call-parser {spec.tool_call_parser} " in argv
        else:
            assert "--tool-call-parser" not in argv
    groups = {
        entry["model"]: entry["serve"]["env"]["MODEL_IMPL_TYPE"]
        for entry in _table(written).values()
    }
    assert groups["gemma-4-e2b"] == "flax_nnx" and groups["phi-4-mini"] == "vllm"


def test_each_pods_bench_measures_its_model_into_the_sweep_run(
    written: dict[str, list[dict[str, Any]]],
    pinned: str,
) -> None:
    for entry in _table(written).values():
        argv = entry["bench"]["argv"]
        model = entry["model"]
        assert argv[:5] == ["python", "-m", "pytest", "-o", "testpaths=benches"]
        pairs = dict(zip(argv[5::2], argv[6::2], strict=False))
        assert pairs["-m"] == "not verdict"
        assert pairs["--model"] == model and pairs["--sweep"] == pinned
        assert pairs["--endpoint"] == f"{model}=http://127.0.0.1:8000"
        assert pairs["--sweep-run"] == SWEEP_RUN and pairs["--store"] == STORE


def test_the_store_password_comes_from_a_secret(
    written: dict[str, list[dict[str, Any]]],
) -> None:
    containers = [
        *written["measure"][1]["spec"]["template"]["spec"]["containers"],
        *written["judge"][0]["spec"]["template"]["spec"]["containers"],
    ]
    for container in containers:
        (password,) = [e for e in container["env"] if e["name"] == "PGPASSWORD"]
        assert password == {
            "name": "PGPASSWORD",
            "valueFrom": {"secretKeyRef": {"name": "modelsweep-store", "key": "password"}},
        }
    server = written["measure"][1]["spec"]["template"]["spec"]["initContainers"][0]
    assert server["env"] == [
        {
            "name": "HF_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token", "optional": True}},
        }
    ]


def test_the_judging_job_serves_nothing_and_judges_every_model(
    written: dict[str, list[dict[str, Any]]],
) -> None:
    (job,) = written["judge"]
    pod = job["spec"]["template"]["spec"]
    assert "nodeSelector" not in pod and "initContainers" not in pod
    (judge,) = pod["containers"]
    assert "resources" not in judge and judge["image"] == BENCH_IMAGE
    script = judge["command"][2]
    assert judge["command"][:2] == ["sh", "-c"]
    command = script.split(";")[0].split()
    assert command[:7] == ["python", "-m", "pytest", "-o", "testpaths=benches", "-m", "verdict"]
    assert "--endpoint" not in command
    models = [command[i + 1] for i, word in enumerate(command) if word == "--model"]
    assert models == list(load_sweep("tpu-v5e").models)
    for option, value in (
        ("--sweep-run", SWEEP_RUN),
        ("--store", STORE),
        ("--md", "/reports/report.md"),
        ("--html", "/reports/report.html"),
    ):
        assert command[command.index(option) + 1] == value
    assert "cat /reports/report.md; exit $status" in script


def test_each_container_runs_its_index_entry(
    written: dict[str, list[dict[str, Any]]],
    tmp_path: Path,
    pinned: str,
) -> None:
    """The launcher both containers run, executed for index 2: it picks the entry of
    JOB_COMPLETION_INDEX and runs its command with its environment (here ``vllm`` and
    ``python`` are programs that print what they were given)."""
    table = tmp_path / "models.json"
    table.write_text(written["measure"][0]["data"]["models.json"], encoding="utf-8")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for program in ("vllm", "python"):
        (bin_dir / program).write_text('#!/bin/sh\necho "$0 MODEL_IMPL_TYPE=$MODEL_IMPL_TYPE $*"\n')
        (bin_dir / program).chmod(0o755)
    env = {"PATH": str(bin_dir), TABLE_ENV: str(table), "JOB_COMPLETION_INDEX": "2"}
    command = written["measure"][1]["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[:3] == ["python3", "-c", LAUNCHER]
    outputs = {
        role: subprocess.run(
            [sys.executable, "-c", LAUNCHER, role],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        for role in ("serve", "bench")
    }
    assert outputs["serve"].startswith(
        f"{bin_dir}/vllm MODEL_IMPL_TYPE=vllm serve microsoft/Phi-4-mini-instruct "
        "--served-model-name phi-4-mini "
    )
    # the bench is told the implementation its server was given, to check the model's group
    assert outputs["bench"].startswith(
        f"{bin_dir}/python MODEL_IMPL_TYPE=vllm -m pytest -o testpaths=benches -m not verdict "
        f"--sweep {pinned} --model phi-4-mini "
    )


@pytest.mark.parametrize(
    ("store", "said"),
    [
        (
            "postgresql://bench:" + SECRET + "@db/sweep",
            "a password in the URL would be written into the manifest",
        ),
        (
            "postgresql://bench@db/sweep?password=" + SECRET,
            "a password in the URL would be written into the manifest",
        ),
        ("runs/store.sqlite", "pods on different nodes cannot share a SQLite file"),
    ],
)
def test_a_store_the_pods_cannot_use_or_a_password_in_it_is_refused(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    store: str,
    said: str,
) -> None:
    status, _, err = k8s(tmp_path, "--store", store, capsys=capsys)
    assert status == 2 and said in err and SECRET not in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "k8s").exists()


def test_a_sweep_whose_image_is_not_pinned_is_refused_naming_modelsweep_pin(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, _, err = k8s(tmp_path, "--store", STORE, capsys=capsys)
    assert status == 2 and len(err.strip().splitlines()) == 1
    assert (
        "the Job serves the sweep's vLLM image pinned by digest; give [serving] backend = "
        '"vllm-docker" and pin its image: modelsweep pin --sweep tpu-v5e -o pinned.toml'
    ) in err
    assert not (tmp_path / "k8s").exists()


def test_a_model_without_a_group_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (ROOT / "pytest_modelsweep" / "sweeps" / "tpu-v5e.toml").read_text(encoding="utf-8")
    sweep = tmp_path / "tpu.toml"
    sweep.write_text(text.replace('group = "torchax"\n', "", 1), encoding="utf-8")
    status = main(
        [
            "k8s",
            "--sweep",
            str(sweep),
            "--sweep-run",
            "r1",
            "--store",
            STORE,
            "--bench-image",
            BENCH_IMAGE,
            "-o",
            str(tmp_path / "k8s"),
        ]
    )
    err = capsys.readouterr().err
    assert status == 2
    assert (
        "model phi-4-mini: group None does not say which tpu-inference path serves it; set "
        'group = "jax" or "torchax" in the sweep'
    ) in err


def test_the_sweep_run_and_the_store_are_needed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(["k8s", "--sweep", "tpu-v5e", "--bench-image", BENCH_IMAGE])
    assert status == 2
    assert "k8s: give --sweep-run and --store" in capsys.readouterr().err
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_modelsweep.cli",
            "k8s",
            "--sweep-run",
            "r1",
            "--store",
            STORE,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert done.returncode == 2 and "--bench-image" in done.stderr


def test_job_names_differ_for_sweep_runs_that_differ_in_case_or_past_the_cut() -> None:
    sweep = load_sweep("tpu-v5e")
    assert job_names(sweep, "2026-11-30") == (
        "modelsweep-tpu-v5e-2026-11-30-measure",
        "modelsweep-tpu-v5e-2026-11-30-judge",
    )
    runs = ["run-1", "Run-1", "RUN-1", "run.1", "run_1", "x" * 128, "x" * 127 + "y"]
    names = [name for run in runs for name in job_names(sweep, run)]
    assert len(set(names)) == len(names)
    for name in names:
        assert len(name) <= 52 and re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name), name


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--namespace", "Team_A"), "--namespace 'Team_A': not a Kubernetes namespace"),
        (("--namespace", ""), "--namespace '': not a Kubernetes namespace"),
        (
            ("--store-secret", "Store Secret"),
            "--store-secret 'Store Secret': not a Kubernetes Secret",
        ),
        (("--hf-secret", "hf-.token"), "--hf-secret 'hf-.token': not a Kubernetes Secret name"),
        (("--bench-image", ""), "--bench-image '': empty"),
    ],
)
def test_a_bad_namespace_secret_name_or_image_is_refused_before_writing(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    args: tuple[str, str],
    said: str,
) -> None:
    status, _, err = k8s(tmp_path, "--store", STORE, *args, capsys=capsys)
    assert status == 2 and said in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "k8s").exists()


def test_the_kubectl_lines_quote_every_argument(
    tmp_path: Path, pinned: str, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "k 8s; rm -rf ~"
    status = main(
        [
            "k8s",
            "--sweep",
            pinned,
            "--sweep-run",
            "r1",
            "--store",
            STORE,
            "--bench-image",
            BENCH_IMAGE,
            "--namespace",
            "bench",
            "-o",
            str(folder),
        ]
    )
    out = capsys.readouterr().out
    assert status == 0
    commands = [shlex.split(line) for line in out.splitlines()[3:]]
    assert commands[1] == [
        "kubectl",
        "-n",
        "bench",
        "apply",
        "-f",
        str(folder / "modelsweep-tpu-v5e-r1-measure.yaml"),
    ]
    assert commands[3] == [
        "kubectl",
        "-n",
        "bench",
        "apply",
        "-f",
        str(folder / "modelsweep-tpu-v5e-r1-judge.yaml"),
    ]
    assert commands[4] == [
        "kubectl",
        "-n",
        "bench",
        "logs",
        "-f",
        "job/modelsweep-tpu-v5e-r1-judge",
    ]


@pytest.mark.parametrize(
    "arg",
    [
        f"--store=postgresql://u:{SECRET}@db/sweep",
        f"--store=postgresql://u@db/sweep?password={SECRET}",
    ],
)
def test_a_pytest_arg_with_a_password_is_refused_before_writing(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    arg: str,
) -> None:
    status, _, err = k8s(tmp_path, "--store", STORE, f"--pytest-arg={arg}", capsys=capsys)
    assert status == 2 and "a credential in it would be written into the manifests" in err
    assert "PGPASSWORD" in err and SECRET not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "k8s").exists()
