"""The image a Docker launch actually ran, read from Docker itself (``docker image inspect``),
and ``modelsweep pin``: a sweep whose image tag is replaced by the digest Docker resolved."""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from typing import Any

from ..core.errors import EndpointError

DIGEST = re.compile(r"@(sha256:[0-9a-f]{64})$")


@dataclass(frozen=True)
class ImageFacts:
    """What Docker says of a local image: its ``Id`` and its ``RepoDigests``."""

    image: str
    id: str
    repo_digests: tuple[str, ...]

    def digest(self) -> str:
        """The registry digest of the image run (``sha256:…`` of its repository's manifest),
        else, for an image never pushed or pulled by digest, its local ``Id``."""
        wanted, repository = pinned_digest(self.image), repository_of(self.image)
        if wanted is not None and any(e.partition("@")[2] == wanted for e in self.repo_digests):
            return wanted
        named = (entry.partition("@") for entry in self.repo_digests)
        return next(
            (
                digest
                for name, _, digest in named
                if name == repository or name.endswith("/" + repository)
            ),
            self.repo_digests[0].partition("@")[2] if self.repo_digests else self.id,
        )

    def as_dict(self) -> dict[str, Any]:
        return {"image": self.image, "id": self.id, "repo_digests": list(self.repo_digests)}


def pinned_digest(image: str) -> str | None:
    """``sha256:…`` of an image named by digest (``name@sha256:…``), else None."""
    match = DIGEST.search(image)
    return match.group(1) if match else None


def repository_of(image: str) -> str:
    """``vllm/vllm-tpu`` of ``vllm/vllm-tpu:v1``, ``vllm/vllm-tpu@sha256:…`` or ``host:5000/x:t``."""
    name = image.split("@", 1)[0]
    return name.rsplit(":", 1)[0] if ":" in name.rsplit("/", 1)[-1] else name


def _docker(args: list[str], docker: str, timeout_s: float, fix: str) -> str:
    """``docker ARGS``'s output; EndpointError naming ``fix`` when it fails."""
    try:
        done = subprocess.run(
            [docker, *args], capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except FileNotFoundError:
        raise EndpointError(
            f"{docker} not found; install Docker (and let this user run it "
            "without sudo) to serve or pin the sweep's image"
        ) from None
    except subprocess.TimeoutExpired:
        raise EndpointError(
            f"`{docker} {' '.join(args)}` took over {timeout_s:.0f} s; check "
            "that the Docker daemon is running"
        ) from None
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or ["no answer"])[-1]
        raise EndpointError(f"docker {' '.join(args)} failed ({said}); {fix}")
    return done.stdout


def inspect_image(image: str, *, docker: str = "docker", timeout_s: float = 60.0) -> ImageFacts:
    """``docker image inspect IMAGE``: the image as this machine holds it (EndpointError when
    Docker does not have it or does not answer)."""
    out = _docker(
        ["image", "inspect", image], docker, timeout_s, f"pull it first: docker pull {image}"
    )
    try:
        entry = json.loads(out)[0]
        return ImageFacts(
            image, str(entry["Id"]), tuple(str(d) for d in entry.get("RepoDigests") or ())
        )
    except (ValueError, LookupError, TypeError):
        raise EndpointError(
            f"docker image inspect {image} did not answer with an image "
            f"description (got {out[:80]!r})"
        ) from None


def observed_image(image: str, *, docker: str = "docker") -> ImageFacts:
    """The image Docker ran for ``image``; one pinned by digest must be that digest."""
    facts = inspect_image(image, docker=docker)
    wanted = pinned_digest(image)
    if wanted is not None and facts.digest() != wanted:
        raise EndpointError(
            f"the sweep pins {image} but Docker ran an image whose digests are "
            f"{', '.join(facts.repo_digests) or facts.id}; docker pull {image}"
        )
    return facts


def pin_image(image: str, *, docker: str = "docker", pull: bool = True) -> str:
    """``image`` named by the digest Docker resolves for it: ``docker pull`` (unless ``pull``
    is False), then ``docker image inspect``; ``repo@sha256:…``."""
    if pull:
        _docker(
            ["pull", image],
            docker,
            3600.0,
            "check the tag and that this machine reaches the registry",
        )
    facts = inspect_image(image, docker=docker)
    digest = facts.digest()
    if not digest.startswith("sha256:") or not facts.repo_digests:
        raise EndpointError(
            f"{image} has no registry digest (a local build?); push it to a "
            "registry, or pin it yourself as name@sha256:..."
        )
    return f"{repository_of(image)}@{digest}"


IMAGE_LINE = re.compile(r'^(\s*image\s*=\s*)"([^"]*)"(.*)$', re.MULTILINE)


def pinned_sweep_text(text: str, pinned: str, *, source: str) -> str:
    """The sweep file ``text`` with its ``[serving]`` ``image`` replaced by ``pinned``."""
    lines = text.splitlines(keepends=True)
    table = ""
    for index, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("["):
            table = stripped
            continue
        match = IMAGE_LINE.match(line.rstrip("\n"))
        if table == "[serving]" and match:
            lines[index] = (
                f'{match.group(1)}"{pinned}"  '
                f"# modelsweep pin: {match.group(2)} resolved by docker\n"
            )
            return "".join(lines)
    raise EndpointError(f'{source}: no image = "..." line in [serving] to pin')
