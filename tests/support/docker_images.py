"""The ``docker`` shim of ``tests/docker_shim/docker`` on PATH, holding the images a test
gives it; every call it answers is recorded (see the shim's docstring)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

SHIM_DIR = Path(__file__).resolve().parents[1] / "docker_shim"


def image_entry(reference: str, build: str = "1") -> dict[str, Any]:
    """What ``docker image inspect`` says of ``reference`` pulled from its registry: an
    ``Id`` and one repo digest, both sha256 of the reference and ``build`` (a rebuild of the
    tag is another ``build``)."""
    name = reference.split("@", 1)[0]
    repository = name.rsplit(":", 1)[0] if ":" in name.rsplit("/", 1)[-1] else name
    manifest = hashlib.sha256(f"manifest {reference} {build}".encode()).hexdigest()
    config = hashlib.sha256(f"config {reference} {build}".encode()).hexdigest()
    return {"Id": f"sha256:{config}", "RepoDigests": [f"{repository}@sha256:{manifest}"]}


class DockerShim:
    """The shim's images (reference → inspect entry) and the argv of each call it answered."""

    def __init__(self, folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.images_file = folder / "docker-images.json"
        self.log_file = folder / "docker-calls.jsonl"
        self.images: dict[str, dict[str, Any]] = {}
        self.save()
        monkeypatch.setenv("PATH", f"{SHIM_DIR}{os.pathsep}{os.environ.get('PATH', '')}")
        monkeypatch.setenv("MODELSWEEP_DOCKER_SHIM_IMAGES", str(self.images_file))
        monkeypatch.setenv("MODELSWEEP_DOCKER_SHIM_LOG", str(self.log_file))

    def hold(self, reference: str, entry: dict[str, Any] | None = None) -> dict[str, Any]:
        """Docker now holds ``reference`` (also under its repo digest, as Docker does)."""
        entry = entry or image_entry(reference)
        self.images[reference] = entry
        for digest in entry["RepoDigests"]:
            self.images[digest] = entry
        self.save()
        return entry

    def save(self) -> None:
        self.images_file.write_text(json.dumps(self.images), encoding="utf-8")

    def calls(self) -> list[list[str]]:
        if not self.log_file.exists():
            return []
        return [json.loads(line) for line in self.log_file.read_text().splitlines()]
