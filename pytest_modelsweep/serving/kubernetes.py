"""Kubernetes manifests of a sweep for GKE TPU node pools: one Indexed Job measures, one Job judges.

``modelsweep k8s`` writes both (docs/kubernetes.md). The store's password never enters a
manifest: both read ``PGPASSWORD`` from a Secret, and a ``--store`` URL or a ``--pytest-arg``
with a credential in it is refused.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from ..core.errors import DataError
from ..core.secrets import redact
from ..core.store_location import StoreLocation
from ..core.sweep import ModelSpec, Sweep
from .vllm import vllm_server_args

TPU_RESOURCE = "google.com/tpu"
TPU_ACCELERATOR = "tpu-v5-lite-podslice"
"""GKE's node label value of TPU v5e (``cloud.google.com/gke-tpu-accelerator``)."""
TPU_TOPOLOGY = "1x1"
"""One chip a node: the sweep's unit, one model per chip."""
MODEL_IMPL_TYPES = {"jax": "flax_nnx", "torchax": "vllm"}
"""The sweep's ``group`` → tpu-inference's ``MODEL_IMPL_TYPE`` (its native Flax NNX models,
or vLLM's PyTorch model through torchax)."""
SERVER_PORT = 8000
TABLE_DIR = "/etc/modelsweep"
TABLE_FILE = "models.json"
REPORTS_DIR = "/reports"
TABLE_ENV = "MODELSWEEP_TABLE"
LAUNCHER = (
    "import json, os, sys; "
    f"table = json.load(open(os.environ.get('{TABLE_ENV}', '{TABLE_DIR}/{TABLE_FILE}'))); "
    "entry = table[os.environ['JOB_COMPLETION_INDEX']][sys.argv[1]]; "
    "os.environ.update(entry['env']); os.execvp(entry['argv'][0], entry['argv'])"
)
"""Both containers of a measuring pod: run the index's entry for ``serve`` or ``bench``."""
STORE_PASSWORD_KEY = "password"
HF_TOKEN_KEY = "token"
PASSWORD_FIX = (
    "put the password in the Secret the Jobs read as PGPASSWORD (kubectl create "
    "secret generic modelsweep-store --from-literal=password=…; --store-secret NAME)"
)
_DNS_PART = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"


@dataclass(frozen=True)
class JobSettings:
    """What ``modelsweep k8s`` is told besides the sweep."""

    sweep_arg: str
    """``--sweep`` as the bench image sees it: a built-in sweep's name or a path in the image."""
    sweep_run: str
    store: StoreLocation
    bench_image: str
    models: tuple[str, ...] = ()
    """The models to measure (default: every model of the sweep)."""
    store_secret: str = "modelsweep-store"
    hf_secret: str = "hf-token"
    namespace: str | None = None
    pytest_args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """Refuse, before anything is written, what Kubernetes would refuse (a namespace that
        is not a DNS-1123 label, a Secret name that is not a DNS-1123 subdomain, an empty
        image) and a pytest argument with a credential in it (a manifest would hold it)."""
        if self.namespace is not None and not (
            len(self.namespace) <= 63 and re.fullmatch(_DNS_PART, self.namespace)
        ):
            raise DataError(
                f"--namespace {self.namespace!r}: not a Kubernetes namespace; give "
                "at most 63 lower-case letters, digits and '-', starting and ending "
                "with a letter or digit, e.g. modelsweep"
            )
        for option, secret in (
            ("--store-secret", self.store_secret),
            ("--hf-secret", self.hf_secret),
        ):
            if not (len(secret) <= 253 and re.fullmatch(rf"{_DNS_PART}(\.{_DNS_PART})*", secret)):
                raise DataError(
                    f"{option} {secret!r}: not a Kubernetes Secret name; give at "
                    "most 253 lower-case letters, digits, '-' and '.', each "
                    "'.'-separated part starting and ending with a letter or digit, "
                    "e.g. modelsweep-store"
                )
        if not self.bench_image or any(char.isspace() for char in self.bench_image):
            raise DataError(
                f"--bench-image {self.bench_image!r}: empty or holds a space; give "
                "the image the bench and judge containers run, e.g. "
                "REGISTRY/NAME@sha256:…"
            )
        for arg in self.pytest_args:
            if redact(arg) != arg:
                raise DataError(
                    f"--pytest-arg {redact(arg)}: a credential in it would be "
                    "written into the manifests; give the store with --store, its "
                    f"URL without the password, and {PASSWORD_FIX}"
                )


def _dns_label(text: str, limit: int) -> str:
    """``text`` as a DNS-1123 label of at most ``limit`` characters (Kubernetes names):
    ``text`` itself when it is one, else its lowercased, cut form and 8 hex of the sha256 of
    ``text``, so that texts differing only in case or past the cut get different labels."""
    label = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    if label and label == text and len(label) <= limit:
        return label
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{label[: limit - 9].rstrip('-')}-{digest}".lstrip("-")


def job_names(sweep: Sweep, sweep_run: str) -> tuple[str, str]:
    """The measuring and judging Jobs' names (well under 63 characters: pods add to them)."""
    base = _dns_label(f"modelsweep-{sweep.name}-{sweep_run}", 44)
    return f"{base}-measure", f"{base}-judge"


def _check_store(store: StoreLocation) -> str:
    """The store URL the pods are given; a file, or a password in the URL, is refused."""
    if store.kind != "postgresql":
        raise DataError(
            f"--store {store}: pods on different nodes cannot share a SQLite file; "
            "give --store postgresql://USER@HOST:PORT/DATABASE (docs/store.md)"
        )
    parts = urlsplit(store.url)
    if parts.password is not None or any(
        key == "password" for key, _ in parse_qsl(parts.query, keep_blank_values=True)
    ):
        raise DataError(
            f"--store {store}: a password in the URL would be written into the "
            f"manifest; give the URL without it and {PASSWORD_FIX}"
        )
    return store.shown


def _impl_type(spec: ModelSpec) -> str:
    if spec.group not in MODEL_IMPL_TYPES:
        raise DataError(
            f"model {spec.name}: group {spec.group!r} does not say which tpu-inference path "
            f'serves it; set group = "jax" or "torchax" in the sweep (docs/tpu-v5e.md, '
            "section 5), so that the Job pins MODEL_IMPL_TYPE"
        )
    return MODEL_IMPL_TYPES[spec.group]


def _image(sweep: Sweep) -> str:
    image = sweep.serving.image
    if sweep.serving.backend != "vllm-docker" or not image or "@sha256:" not in image:
        raise DataError(
            f"sweep {sweep.name}: the Job serves the sweep's vLLM image pinned by "
            'digest; give [serving] backend = "vllm-docker" and pin its image: '
            f"modelsweep pin --sweep {sweep.name} -o pinned.toml, then --sweep "
            "pinned.toml"
        )
    return image


def _secret_env(name: str, secret: str, key: str, **optional: bool) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key, **optional}}}


def _pytest_argv(settings: JobSettings, marker: str, *models: str) -> list[str]:
    """``python -m pytest`` of the benches marked ``marker`` of the sweep run, on ``models``."""
    return [
        "python",
        "-m",
        "pytest",
        "-o",
        "testpaths=benches",
        "-m",
        marker,
        "--sweep",
        settings.sweep_arg,
        *(a for m in models for a in ("--model", m)),
    ]


def model_table(sweep: Sweep, settings: JobSettings) -> dict[str, dict[str, Any]]:
    """Completion index → the model, its server's and its bench's command and environment."""
    store = _check_store(settings.store)
    table = {}
    for index, name in enumerate(settings.models or tuple(sweep.models)):
        spec = sweep.model(name)
        if spec.source.kind != "hf":
            raise DataError(
                f"model {name}: source {spec.source} is not a Hub repo; the Job's "
                "vLLM server serves hf: sources only"
            )
        table[str(index)] = {
            "model": name,
            "group": spec.group,
            "serve": {
                "argv": [
                    "vllm",
                    "serve",
                    spec.source.id,
                    *vllm_server_args(spec, sweep.serving, SERVER_PORT, "0.0.0.0")[2:],
                ],
                "env": {"MODEL_IMPL_TYPE": _impl_type(spec)},
            },
            # the bench checks the model's group against it (serving/observed.check_group)
            "bench": {
                "argv": [
                    *_pytest_argv(settings, "not verdict", name),
                    "--endpoint",
                    f"{name}=http://127.0.0.1:{SERVER_PORT}",
                    "--sweep-run",
                    settings.sweep_run,
                    "--store",
                    store,
                    *settings.pytest_args,
                ],
                "env": {"MODEL_IMPL_TYPE": _impl_type(spec)},
            },
        }
    return table


def table_json(table: Mapping[str, Mapping[str, Any]]) -> str:
    """The model table as JSON a person reads: an entry's fields one a line."""
    entries = (
        f" {json.dumps(index)}: {{\n"
        + ",\n".join(f"  {json.dumps(key)}: {json.dumps(value)}" for key, value in entry.items())
        + "\n }"
        for index, entry in table.items()
    )
    return "{\n" + ",\n".join(entries) + "\n}\n"


def _metadata(name: str, settings: JobSettings, sweep: Sweep) -> dict[str, Any]:
    return {
        "name": name,
        "labels": {
            "app.kubernetes.io/name": "modelsweep",
            "modelsweep/sweep": _dns_label(sweep.name, 63),
            "modelsweep/sweep-run": _dns_label(settings.sweep_run, 63),
        },
        "annotations": {"modelsweep/sweep-run": settings.sweep_run},
        **({"namespace": settings.namespace} if settings.namespace else {}),
    }


def _job(
    name: str, settings: JobSettings, sweep: Sweep, spec: dict[str, Any], pod: dict[str, Any]
) -> dict[str, Any]:
    """A Job of the sweep run: ``spec``'s limits, pods that are never restarted."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _metadata(name, settings, sweep),
        "spec": {
            **spec,
            "ttlSecondsAfterFinished": 7 * 24 * 3600,
            "template": {
                "metadata": {"labels": _metadata(name, settings, sweep)["labels"]},
                "spec": {"restartPolicy": "Never", **pod},
            },
        },
    }


def measuring_job(sweep: Sweep, settings: JobSettings) -> list[dict[str, Any]]:
    """The ConfigMap of the model table and the Indexed Job that measures every model."""
    name, _ = job_names(sweep, settings.sweep_run)
    table = model_table(sweep, settings)
    probe_period = 10
    server = {
        "name": "server",
        "image": _image(sweep),
        "restartPolicy": "Always",  # a native sidecar: it ends with the bench
        "command": ["python3", "-c", LAUNCHER, "serve"],
        "ports": [{"name": "http", "containerPort": SERVER_PORT}],
        "env": [_secret_env("HF_TOKEN", settings.hf_secret, HF_TOKEN_KEY, optional=True)],
        "resources": {"requests": {TPU_RESOURCE: "1"}, "limits": {TPU_RESOURCE: "1"}},
        "startupProbe": {
            "httpGet": {"path": "/health", "port": SERVER_PORT},
            "periodSeconds": probe_period,
            "failureThreshold": max(1, -(-int(sweep.serving.startup_timeout_s) // probe_period)),
        },
        "volumeMounts": [
            {"name": "models", "mountPath": TABLE_DIR, "readOnly": True},
            {"name": "dshm", "mountPath": "/dev/shm"},
            {"name": "hf-cache", "mountPath": "/root/.cache/huggingface"},
        ],
    }
    bench = {
        "name": "bench",
        "image": settings.bench_image,
        "command": ["python3", "-c", LAUNCHER, "bench"],
        "env": [_secret_env("PGPASSWORD", settings.store_secret, STORE_PASSWORD_KEY)],
        "volumeMounts": [{"name": "models", "mountPath": TABLE_DIR, "readOnly": True}],
    }
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": _metadata(name, settings, sweep),
            "data": {TABLE_FILE: table_json(table)},
        },
        _job(
            name,
            settings,
            sweep,
            {
                "completionMode": "Indexed",
                "completions": len(table),
                "parallelism": len(table),
                "backoffLimitPerIndex": 1,  # a pod lost once is run again: it reuses stored items
            },
            {
                "nodeSelector": {
                    "cloud.google.com/gke-tpu-accelerator": TPU_ACCELERATOR,
                    "cloud.google.com/gke-tpu-topology": TPU_TOPOLOGY,
                },
                "tolerations": [
                    {"key": TPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}
                ],
                "initContainers": [server],
                "containers": [bench],
                "volumes": [
                    {"name": "models", "configMap": {"name": name}},
                    {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}},
                    {"name": "hf-cache", "emptyDir": {}},
                ],
            },
        ),
    ]


def judging_job(sweep: Sweep, settings: JobSettings) -> dict[str, Any]:
    """The Job that draws the verdicts of the sweep run and writes the reports; no chip."""
    _, name = job_names(sweep, settings.sweep_run)
    pytest_argv = [
        *_pytest_argv(settings, "verdict", *(settings.models or sweep.models)),
        "--sweep-run",
        settings.sweep_run,
        "--store",
        _check_store(settings.store),
        "--md",
        f"{REPORTS_DIR}/report.md",
        "--html",
        f"{REPORTS_DIR}/report.html",
        "--self-contained-html",
        "--results",
        f"{REPORTS_DIR}/results.json",
        *settings.pytest_args,
    ]
    return _job(
        name,
        settings,
        sweep,
        {"backoffLimit": 0},
        {
            "containers": [
                {
                    "name": "judge",
                    "image": settings.bench_image,
                    "command": [
                        "sh",
                        "-c",
                        f"{shlex.join(pytest_argv)}; status=$?; cat {REPORTS_DIR}/report.md; "
                        "exit $status",
                    ],
                    "env": [_secret_env("PGPASSWORD", settings.store_secret, STORE_PASSWORD_KEY)],
                    "volumeMounts": [{"name": "reports", "mountPath": REPORTS_DIR}],
                }
            ],
            "volumes": [{"name": "reports", "emptyDir": {}}],
        },
    )


def write_manifests(sweep: Sweep, settings: JobSettings, folder: Path) -> dict[str, Path]:
    """Write ``NAME-measure.yaml`` and ``NAME-judge.yaml`` into ``folder``; their paths."""
    import yaml

    class Dumper(yaml.SafeDumper):  # type: ignore[misc]  # (no stubs: SafeDumper is Any)
        """Text of several lines (the model table) as a literal block, as written."""

    def text(dumper: Any, value: str) -> Any:
        return dumper.represent_scalar(
            "tag:yaml.org,2002:str", value, style="|" if "\n" in value else None
        )

    Dumper.add_representer(str, text)
    # [ConfigMap, Job] and [Job]; refusals come before anything is written
    manifests = {"measure": measuring_job(sweep, settings), "judge": [judging_job(sweep, settings)]}
    folder.mkdir(parents=True, exist_ok=True)
    written = {
        kind: folder / f"{name}.yaml"
        for kind, name in zip(manifests, job_names(sweep, settings.sweep_run), strict=True)
    }
    for kind, path in written.items():
        path.write_text(
            f"# modelsweep k8s: sweep {sweep.name}, sweep run {settings.sweep_run} "
            f"({kind}); docs/kubernetes.md\n"
            + yaml.dump_all(manifests[kind], Dumper=Dumper, sort_keys=False, width=100),
            encoding="utf-8",
        )
    return written


def apply_commands(sweep: Sweep, settings: JobSettings, paths: Mapping[str, Path]) -> Sequence[str]:
    """The commands that run the two Jobs, in order (judging after measuring has ended), every
    argument quoted for the shell."""
    kubectl = shlex.join(["kubectl", *(("-n", settings.namespace) if settings.namespace else ())])
    measure, judge = (shlex.quote(f"job/{name}") for name in job_names(sweep, settings.sweep_run))
    wait = f"{kubectl} wait --timeout=24h {measure}"
    return [
        f"{kubectl} create secret generic {shlex.quote(settings.store_secret)} --from-literal="
        f'{STORE_PASSWORD_KEY}="$PGPASSWORD"   # once',
        f"{kubectl} apply -f {shlex.quote(str(paths['measure']))}",
        f"{wait} --for=condition=complete & {wait} --for=condition=failed & wait -n; kill %1 %2",
        f"{kubectl} apply -f {shlex.quote(str(paths['judge']))}",
        f"{kubectl} logs -f {judge}",
    ]
