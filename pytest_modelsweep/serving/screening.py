"""Candidate screening: the seed's licence and memory rule, read from the Hugging Face Hub.

A candidate is **accepted** when its licence is one of ``ScreeningSettings.licenses`` and
its bf16 weights leave room for the KV cache on one chip:
``hbm_gib × gpu_memory_utilization − weights_gib ≥ kv_headroom_gib`` (GiB = 2**30 bytes;
the rules in full: docs/tpu-v5e.md). A gated, missing or unreachable repo is a rejected
:class:`ScreeningResult` whose one-line reason names the fix, never an exception.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.hf_api import ModelInfo

from ..core.errors import DataError
from ..core.measurements import ScreeningResult
from ..core.sweep import ModelSpec, ScreeningSettings

GIB = 2**30
BF16_BYTES = 2

# Bytes per parameter of a checkpoint dtype (config.json names and safetensors names).
DTYPE_BYTES: dict[str, int] = {
    "float32": 4,
    "f32": 4,
    "float": 4,
    "bfloat16": 2,
    "bf16": 2,
    "float16": 2,
    "f16": 2,
    "half": 2,
    "float8_e4m3fn": 1,
    "f8_e4m3": 1,
    "float8_e5m2": 1,
    "f8_e5m2": 1,
    "int8": 1,
    "i8": 1,
    "u8": 1,
}
_SAFETENSORS_DTYPE_NAMES = {"BF16": "bfloat16", "F16": "float16", "F32": "float32"}

FetchConfig = Callable[[str, "str | None"], Mapping[str, Any]]
"""``fetch_config(repo, revision)`` → the repo's ``config.json`` as a mapping."""


class HubApi(Protocol):
    """What screening asks of :class:`huggingface_hub.HfApi` (one call)."""

    def model_info(
        self, repo_id: str, *, revision: str | None = None, files_metadata: bool = False
    ) -> ModelInfo: ...


class OfflineFixtureMissing(LookupError):
    """A repo that the offline fixtures file does not record."""


# -- the rule ---------------------------------------------------------------------
def budget_gib(settings: ScreeningSettings) -> float:
    """The chip memory vLLM may use: ``hbm_gib × gpu_memory_utilization``."""
    return settings.hbm_gib * settings.gpu_memory_utilization


def repo_license(info: ModelInfo) -> str | None:
    """The repo's licence, lower-cased: card ``license`` (its ``license_name`` if ``other``), else a tag."""
    card = info.card_data
    license_value: Any = None if card is None else card.get("license")
    license_name: Any = None if card is None else card.get("license_name")
    if isinstance(license_value, list):
        license_value = license_value[0] if license_value else None
    if isinstance(license_value, str) and license_value.strip():
        value = license_value.strip().lower()
        return (
            license_name.strip().lower()
            if value == "other" and isinstance(license_name, str) and license_name.strip()
            else value
        )
    tagged = (
        tag[len("license:") :].strip().lower()
        for tag in info.tags or []
        if tag.lower().startswith("license:") and len(tag) > len("license:")
    )
    return next(tagged, None)


def config_dtype(config: Mapping[str, Any]) -> str | None:
    """``torch_dtype`` (or transformers 5's ``dtype``), also inside ``text_config``."""
    for source in (config, config.get("text_config")):
        if isinstance(source, Mapping):
            for key in ("torch_dtype", "dtype"):
                dtype = source.get(key)
                if isinstance(dtype, str) and dtype.strip():
                    return dtype.strip().removeprefix("torch.")
    return None


def config_architecture(config: Mapping[str, Any]) -> str | None:
    """``architectures[0]`` of a config, or None."""
    names = config.get("architectures")
    return names[0] if isinstance(names, list) and names and isinstance(names[0], str) else None


@dataclass(frozen=True)
class _Weights:
    parameters: int | None
    source: str
    reason: str | None = None
    file_dtype: str | None = None


def _safetensors_weights(info: ModelInfo, dtype: str | None) -> _Weights:
    """Parameter count from safetensors metadata, else from file sizes, else a reason."""
    meta = info.safetensors
    if meta is not None:
        per_dtype = {k: int(v) for k, v in (meta.parameters or {}).items()}
        total = int(meta.total) if meta.total else sum(per_dtype.values())
        dtypes = [_SAFETENSORS_DTYPE_NAMES.get(name.upper(), name.lower()) for name in per_dtype]
        if total > 0:  # the file dtype: the one dtype of every parameter, if there is one
            return _Weights(
                total, "safetensors metadata", file_dtype=dtypes[0] if len(dtypes) == 1 else None
            )
    siblings = info.siblings
    if siblings is None:
        return _Weights(
            None,
            "",
            "weights unknown: the Hub answer lists no files "
            "(ask model_info with files_metadata=True)",
        )
    top_level = [s for s in siblings if "/" not in s.rfilename]
    files = [s for s in top_level if s.rfilename.endswith(".safetensors")]
    # Mistral-style repos carry the same weights twice: consolidated.* and model-*.
    files = [s for s in files if not s.rfilename.startswith("consolidated")] or files
    if not files:
        others = sorted(
            s.rfilename for s in top_level if s.rfilename.endswith((".bin", ".pt", ".pth", ".gguf"))
        )
        what = (
            f"only {', '.join(others[:3])}{' ...' if len(others) > 3 else ''}"
            if others
            else "no weight files at all"
        )
        return _Weights(
            None,
            "",
            f"no safetensors weights ({what}): vLLM TPU loads safetensors; "
            "pick a repo that publishes them",
        )
    if any(s.size is None for s in files):
        return _Weights(
            None, "", "safetensors file sizes unknown (ask model_info with files_metadata=True)"
        )
    size = sum(int(s.size or 0) for s in files)
    per_param = DTYPE_BYTES.get((dtype or "").lower())
    return (
        _Weights(size // BF16_BYTES, "safetensors file sizes (dtype unknown: 2 bytes/parameter)")
        if per_param is None
        else _Weights(
            size // per_param, f"safetensors file sizes ({dtype}, {per_param} bytes/parameter)"
        )
    )


# -- talking to the Hub -------------------------------------------------------------
def _network_errors() -> tuple[type[BaseException], ...]:
    """Connection-level errors of whichever HTTP client huggingface_hub uses."""
    errors: list[type[BaseException]] = [OSError]
    for module_name in ("httpx2", "httpx"):
        with contextlib.suppress(ImportError):
            transport = getattr(__import__(module_name), "TransportError", None)
            if isinstance(transport, type) and issubclass(transport, BaseException):
                errors.append(transport)
    return tuple(errors)


NETWORK_ERRORS = _network_errors()
_HUB_ERRORS: tuple[type[BaseException], ...] = (
    OfflineFixtureMissing,
    HfHubHTTPError,
    *NETWORK_ERRORS,
)


def _first_line(error: BaseException, limit: int = 160) -> str:
    text = next((line.strip() for line in str(error).splitlines() if line.strip()), "")
    text = f"{type(error).__name__}: {text}" if text else type(error).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


Reasons = tuple[tuple[type[BaseException] | tuple[type[BaseException], ...], str], ...]
"""(error types, reason) rows: the first row whose type an error is gives its reason."""
GATED = "gated repo: accept its licence on the Hub (https://huggingface.co/{repo}) and set HF_TOKEN"
HUB_REASONS: Reasons = (
    (OfflineFixtureMissing, "{message}"),
    (GatedRepoError, GATED),
    (
        RevisionNotFoundError,
        "revision not found: check the @revision of source {source} in the sweep",
    ),
    (
        RepositoryNotFoundError,
        "repo not found: check source {source} in the sweep (a private repo also needs HF_TOKEN)",
    ),
    (HfHubHTTPError, "the Hub answered with an error ({error}): retry, or use --offline-fixtures"),
    (
        BaseException,
        "the Hub could not be reached ({error}): run with network or use --offline-fixtures",
    ),
)
CONFIG_REASONS: Reasons = (
    (GatedRepoError, GATED),
    (
        LocalEntryNotFoundError,
        "config.json could not be downloaded ({error}): run with network or use --offline-fixtures",
    ),
    (
        (EntryNotFoundError, LookupError, FileNotFoundError),
        "no config.json in {repo}: vLLM cannot load the repo without it",
    ),
    (BaseException, "config.json could not be read ({error})"),
)


def error_reason(
    error: BaseException,
    reasons: Reasons,
    repo: str,
    source: str = "",
) -> str:
    """The one-line reason, with its fix, that ``reasons`` gives ``error``."""
    text = next(text for kinds, text in reasons if isinstance(error, kinds))
    return text.format(message=error, error=_first_line(error), repo=repo, source=source)


def hub_config(repo: str, revision: str | None) -> dict[str, Any]:
    """``config.json`` of a repo, downloaded with :func:`huggingface_hub.hf_hub_download`."""
    from huggingface_hub import hf_hub_download

    path = hf_hub_download(repo, "config.json", revision=revision)
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"hf_hub_download returned {type(path).__name__}, not a path")
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError("config.json is not a JSON object")
    return data


_CONFIG_ERRORS: tuple[type[BaseException], ...] = (
    EntryNotFoundError,
    LookupError,
    ValueError,
    *NETWORK_ERRORS,
)


def _resolve_config(
    info: ModelInfo, repo: str, revision: str | None, fetch_config: FetchConfig
) -> tuple[Mapping[str, Any] | None, str | None]:
    """(config, reason): the Hub answer's config if it names architecture and dtype, else
    config.json; without that, a Hub answer naming the architecture (not of a gated repo)."""
    answered = info.config if isinstance(info.config, Mapping) else None
    if answered is not None and config_architecture(answered) and config_dtype(answered):
        return answered, None
    try:
        fetched = fetch_config(repo, revision)
    except _CONFIG_ERRORS as error:
        if (
            not isinstance(error, GatedRepoError)
            and answered is not None
            and config_architecture(answered)
        ):
            return answered, None
        return None, error_reason(error, CONFIG_REASONS, repo)
    if not isinstance(fetched, Mapping):
        return None, "config.json could not be read (not a JSON object)"
    return {**(answered or {}), **fetched}, None


def screen_candidate(
    spec: ModelSpec,
    settings: ScreeningSettings,
    *,
    api: HubApi | None = None,
    fetch_config: FetchConfig | None = None,
) -> ScreeningResult:
    """Screen one sweep model against the licence and memory rule (one ``model_info`` call)."""
    source = spec.source
    repo = source.id
    shown_repo = f"{repo}@{source.revision}" if source.revision else repo
    budget = budget_gib(settings)

    rejected = ScreeningResult(model=spec.name, repo=shown_repo, budget_gib=budget)
    if source.kind != "hf":
        return replace(
            rejected, reasons=(f"screening applies to Hugging Face repos (source {source})",)
        )
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi()
    try:
        info = api.model_info(repo, revision=source.revision, files_metadata=True)
    except _HUB_ERRORS as error:
        return replace(rejected, reasons=(error_reason(error, HUB_REASONS, repo, str(source)),))

    reasons: list[str] = []
    license_id = repo_license(info)
    allowed = tuple(x.lower() for x in settings.licenses)
    if license_id is None:
        reasons.append(
            f"licence unknown (no card licence, no license: tag); "
            f"the rule permits {', '.join(allowed)}"
        )
    elif license_id not in allowed:
        reasons.append(f"licence {license_id} is not one of {', '.join(allowed)}")

    config, config_reason = _resolve_config(info, repo, source.revision, fetch_config or hub_config)
    dtype = config_dtype(config) if config is not None else None

    weights = _safetensors_weights(info, dtype)
    dtype = dtype or weights.file_dtype
    weights_gib = headroom = None
    if weights.parameters is None:
        reasons.append(weights.reason or "weights unknown")
    else:
        weights_gib = BF16_BYTES * weights.parameters / GIB
        headroom = budget - weights_gib
        if headroom < settings.kv_headroom_gib:
            reasons.append(
                f"memory: {weights_gib:.2f} GiB of bf16 weights leave {headroom:.2f} GiB of the "
                f"{budget:.3f} GiB budget ({settings.hbm_gib:g} GiB HBM x "
                f"{settings.gpu_memory_utilization:g}); the KV cache needs "
                f"{settings.kv_headroom_gib:.2f} GiB"
            )
    if config_reason:
        reasons.append(config_reason)
    return ScreeningResult(
        model=spec.name,
        repo=shown_repo,
        license=license_id,
        architecture=config_architecture(config) if config is not None else None,
        dtype=dtype,
        parameters=weights.parameters,
        weights_gib=weights_gib,
        budget_gib=budget,
        kv_headroom_gib=headroom,
        accepted=not reasons,
        reasons=tuple(reasons),
        weights_source=weights.source,
    )


# -- the table ----------------------------------------------------------------------
TABLE_HEADER = (
    "model",
    "repo",
    "licence",
    "arch",
    "weights GiB",
    "KV headroom GiB",
    "verdict",
    "reason",
)
_RIGHT = {4, 5}


def _gib(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def screening_table(results: Iterable[ScreeningResult]) -> list[str]:
    """Aligned text rows: model, repo, licence, arch, weights GiB, KV headroom GiB, verdict, reason."""
    rows = [
        (
            r.model,
            r.repo,
            r.license or "-",
            r.architecture or "-",
            _gib(r.weights_gib),
            _gib(r.kv_headroom_gib),
            r.verdict,
            r.reason,
        )
        for r in results
    ]
    widths = [max(len(row[i]) for row in [TABLE_HEADER, *rows]) for i in range(len(TABLE_HEADER))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in _RIGHT else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))
        ).rstrip()

    return [line(TABLE_HEADER), line(["-" * w for w in widths]), *map(line, rows)]


# -- offline fixtures ---------------------------------------------------------------
def load_offline_fixtures(path: str | Path) -> dict[str, dict[str, Any]]:
    """Recorded Hub answers: ``{repo id: model_info(repo, files_metadata=True) JSON + "config"}``;
    top-level keys starting with ``_`` are comments; a malformed file raises DataError."""
    file = Path(path)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise DataError(
            f"{file}: cannot read the offline Hub fixtures ({exc.strerror}); "
            "pass an existing JSON file"
        ) from None
    except ValueError as exc:
        raise DataError(
            f"{file}: not valid JSON ({exc}); the offline Hub fixtures are one "
            "JSON object {{repo id: model_info answer}}"
        ) from None
    if not isinstance(data, dict):
        raise DataError(
            f"{file}: expected a JSON object {{repo id: model_info answer}}, "
            f"got {type(data).__name__}"
        )
    fixtures: dict[str, dict[str, Any]] = {
        repo: answer for repo, answer in data.items() if not repo.startswith("_")
    }
    for repo, answer in fixtures.items():
        if not isinstance(answer, dict):
            raise DataError(
                f"{file}: {repo}: expected the model_info JSON object, got {type(answer).__name__}"
            )
        if "config" in answer and not isinstance(answer["config"], dict):
            raise DataError(f"{file}: {repo}.config: expected the config.json object")
    return fixtures


class OfflineHub:
    """A :class:`HubApi` and config fetcher that answer from recorded fixtures, never the network."""

    def __init__(self, fixtures: Mapping[str, Mapping[str, Any]], origin: str = "fixtures") -> None:
        self.fixtures = dict(fixtures)
        self.origin = origin

    @classmethod
    def from_file(cls, path: str | Path) -> OfflineHub:
        return cls(load_offline_fixtures(path), origin=str(path))

    def _answer(self, repo: str) -> Mapping[str, Any]:
        try:
            return self.fixtures[repo]
        except KeyError:
            raise OfflineFixtureMissing(
                f"{repo} is not in the offline fixtures {self.origin}: record its model_info "
                "there, or run with network"
            ) from None

    def model_info(
        self, repo_id: str, *, revision: str | None = None, files_metadata: bool = False
    ) -> ModelInfo:
        data = {
            "id": repo_id,
            **{k: v for k, v in self._answer(repo_id).items() if not k.startswith("_")},
        }
        try:
            return ModelInfo(**data)  # type: ignore[no-untyped-call]
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(
                f"{self.origin}: {repo_id}: not a model_info answer ({type(exc).__name__}: {exc}); "
                "record the JSON of GET /api/models/REPO?blobs=true"
            ) from None

    def fetch_config(self, repo: str, revision: str | None) -> Mapping[str, Any]:
        config = self._answer(repo).get("config")
        if not isinstance(config, Mapping):
            raise LookupError(f"{repo}: no config recorded in {self.origin}")
        return config
