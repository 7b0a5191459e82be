"""The sweep file: which models run, how each is served and prompted.

A TOML file with ``[sweep]`` (name, reference), ``[serving]`` (identical for every model),
``[models.NAME]``, and optional ``[benchmarks.NAME]``, ``[verdicts]``, ``[screening]`` and
``[pricing]``. :data:`BUILTIN_SWEEPS` ship with the package. Every malformed value fails
here, naming the file, the key and what was expected.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal, cast, get_args

from .cost import Pricing
from .errors import SweepError, UnknownModelError
from .options import DEFAULTS
from .secrets import endpoint_url_problem, redact

Backend = Literal["llamacpp", "vllm", "vllm-docker"]
Prompting = Literal["chat", "completion"]
BfclMode = Literal["tools", "prompt"]
SourceKind = Literal["embedded", "hf", "path", "embedded-hf"]

BUILTIN_SWEEPS = ("embedded", "tpu-v5e", "vllm-cpu")
DEFAULT_GSM8K_MAX_TOKENS = 2048
"""GSM8K's answer length limit where a sweep sets none (the seed's; lm-eval's API default is 256)."""


@dataclass(frozen=True)
class ModelSource:
    """Where a model's weights come from: ``embedded:ID``, ``hf:REPO[@REV]``, ``path:FILE``
    or ``embedded-hf:ID`` (the embedded GGUF converted into a Hugging Face folder for vLLM)."""

    kind: SourceKind
    id: str
    revision: str | None = None

    def __str__(self) -> str:
        rev = f"@{self.revision}" if self.revision else ""
        return f"{self.kind}:{self.id}{rev}"


@dataclass(frozen=True)
class ModelSpec:
    """One model of a sweep, as the sweep file declares it."""

    name: str
    source: ModelSource
    served_name: str
    license: str
    prompting: Prompting
    tool_call_parser: str | None
    bfcl_mode: BfclMode
    chat_template: str | None = None
    group: str | None = None
    backend: Backend | None = None
    api_key_env: str | None = None
    """The environment variable holding this model's API key (else ``OPENAI_API_KEY``)."""


@dataclass(frozen=True)
class ServingSettings:
    """Serving settings that every model of the sweep gets identically."""

    backend: Backend
    context_length: int = 4096
    max_num_seqs: int = 16
    prefix_caching: bool = True
    threads: int | None = None
    startup_timeout_s: float = 600.0
    image: str | None = None
    dtype: str | None = None
    extra_args: tuple[str, ...] = ()
    one_chip_per_worker: bool = False
    accelerator: str | None = None
    """What serves each model, e.g. ``tpu-v5e``: a ``tpu-*`` sweep is checked for TPU pitfalls."""

    def as_dict(self) -> dict[str, Any]:
        """The settings provenance records (all but the startup timeout)."""
        data = {k: v for k, v in asdict(self).items() if k != "startup_timeout_s"}
        return {**data, "extra_args": list(self.extra_args)}


@dataclass(frozen=True)
class BenchmarkSettings:
    """Per-benchmark settings (``[benchmarks.NAME]``) that every model of the sweep gets identically."""

    gsm8k_max_tokens: int = DEFAULT_GSM8K_MAX_TOKENS
    """``[benchmarks.gsm8k] max_tokens`` (``--gsm8k-max-tokens`` overrides it)."""


@dataclass(frozen=True)
class VerdictSettings:
    """``[verdicts]``: ``until_decided`` as ``--until-decided``."""

    until_decided: bool = False


@dataclass(frozen=True)
class ScreeningSettings:
    """The candidate-screening rule: permitted licences and the chip's memory budget."""

    licenses: tuple[str, ...] = ("apache-2.0", "mit")
    hbm_gib: float = 15.75
    gpu_memory_utilization: float = 0.90
    kv_headroom_gib: float = 2.0


@dataclass(frozen=True)
class Sweep:
    """A parsed sweep file."""

    name: str
    path: str
    description: str
    reference: str
    serving: ServingSettings
    models: Mapping[str, ModelSpec]
    screening: ScreeningSettings = field(default_factory=ScreeningSettings)
    pricing: Pricing | None = None
    """The ``[pricing]`` table: what the machine one model is served on costs per hour."""
    benchmarks: BenchmarkSettings = field(default_factory=BenchmarkSettings)
    verdicts: VerdictSettings = field(default_factory=VerdictSettings)

    @property
    def candidates(self) -> list[str]:
        return [name for name in self.models if name != self.reference]

    def model(self, name: str) -> ModelSpec:
        try:
            return self.models[name]
        except KeyError:
            raise UnknownModelError(
                f"unknown model {name!r} in sweep {self.name!r} ({self.path}); "
                f"known models: {', '.join(self.models)}"
            ) from None

    def backend_of(self, name: str) -> Backend:
        return self.model(name).backend or self.serving.backend

    def select(self, names: Sequence[str], reference: str | None = None) -> Selection:
        """The models a run measures: the reference first, then the chosen candidates."""
        ref = reference or self.reference
        self.model(ref)
        for name in names:
            self.model(name)
        candidates = list(dict.fromkeys(names)) if names else self.candidates
        candidates = [c for c in candidates if c != ref]
        return Selection(reference=ref, candidates=tuple(candidates))


@dataclass(frozen=True)
class Selection:
    """The reference and the candidates of one run, in run order."""

    reference: str
    candidates: tuple[str, ...]

    @property
    def models(self) -> tuple[str, ...]:
        return (self.reference, *self.candidates)


def parse_endpoint_option(values: Sequence[str], sweep: Sweep | None = None) -> dict[str, str]:
    """``["NAME=URL", ...]`` → ``{NAME: URL}`` (root URLs); a malformed value, a NAME not in
    ``sweep`` or a model named twice fails with the fix."""
    endpoints: dict[str, str] = {}
    for value in values:
        name, sep, url = value.partition("=")
        name, url = name.strip(), url.strip()
        if not sep or not name or not url:
            raise SweepError(
                f"--endpoint {redact(value)!r}: expected NAME=URL, e.g. "
                "--endpoint qwen3-4b=http://10.0.0.5:8000"
            )
        problem = endpoint_url_problem(url)
        if problem is not None:
            raise SweepError(f"--endpoint {name}={redact(url)}: {problem}")
        if sweep is not None:
            sweep.model(name)
        if name in endpoints:
            raise SweepError(f"--endpoint {name}= is given twice; give each model one URL")
        endpoints[name] = url.rstrip("/").removesuffix("/v1")
    return endpoints


def builtin_sweep_path(name: str) -> Path:
    resource = resources.files("pytest_modelsweep").joinpath("sweeps").joinpath(f"{name}.toml")
    return Path(str(resource))


def load_sweep(spec: str | Path | None = None) -> Sweep:
    """Load a sweep by built-in name (``embedded``, ``tpu-v5e``) or by path; default ``--sweep``'s."""
    if spec is None:
        spec = DEFAULTS.sweep
    text_spec = str(spec)
    if text_spec in BUILTIN_SWEEPS:
        path = builtin_sweep_path(text_spec)
    else:
        path = Path(text_spec)
        if not path.is_file():
            raise SweepError(
                f"sweep file {text_spec} not found; pass --sweep with a TOML file "
                f"path or one of the built-in sweeps: {', '.join(BUILTIN_SWEEPS)}"
            )
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise SweepError(f"{path}: not valid TOML ({exc}); fix the file's syntax") from None
    except UnicodeDecodeError:
        raise SweepError(f"{path}: not UTF-8 text; a sweep file is TOML") from None
    return parse_sweep(data, str(path))


def parse_sweep(data: Mapping[str, Any], path: str = "<sweep>") -> Sweep:
    """Validate a decoded sweep document and build its records."""
    head = _Table.required(path, data, "sweep")
    name, description = head.string("name"), head.string("description", default="")
    reference = head.string("reference")
    serving = _parse_serving(_Table.required(path, data, "serving"))
    screening = _parse_screening(_Table.optional(path, data, "screening"))
    pricing = _parse_pricing(_Table.optional(path, data, "pricing")) if "pricing" in data else None
    benchmarks = _Table.optional(path, data, "benchmarks", "tables [benchmarks.NAME]", {"gsm8k"})
    gsm8k = _Table.optional(path, benchmarks.data, "benchmarks.gsm8k", allowed={"max_tokens"})
    verdicts = _Table.optional(path, data, "verdicts", allowed={"until_decided"})
    until_decided = verdicts.boolean("until_decided", default=False)
    models_table = _Table.required(path, data, "models").data
    if not models_table:
        raise SweepError(f"{path}: [models] is empty; declare at least the reference model")
    models: dict[str, ModelSpec] = {}
    for model_name, entry in models_table.items():
        if not isinstance(entry, Mapping):
            raise SweepError(
                f"{path}: models.{model_name}: expected a table "
                f"[models.{model_name}], got {type(entry).__name__}"
            )
        models[model_name] = _parse_model(_Table(path, f"models.{model_name}", entry))
    unknown_top = set(data) - {
        "sweep",
        "serving",
        "models",
        "screening",
        "pricing",
        "benchmarks",
        "verdicts",
    }
    if unknown_top:
        raise SweepError(
            f"{path}: unknown top-level key(s) {', '.join(sorted(unknown_top))}; "
            "expected [sweep], [serving], [benchmarks.*], [verdicts], [screening], "
            "[pricing] and [models.*]"
        )
    if reference not in models:
        raise SweepError(
            f"{path}: sweep.reference: {reference!r} is not one of the models "
            f"({', '.join(models)}); add [models.{reference}] or fix the name"
        )
    return Sweep(
        name=name,
        path=path,
        description=description,
        reference=reference,
        serving=serving,
        models=models,
        screening=screening,
        pricing=pricing,
        benchmarks=BenchmarkSettings(
            gsm8k.positive_int("max_tokens", default=DEFAULT_GSM8K_MAX_TOKENS)
        ),
        verdicts=VerdictSettings(until_decided),
    )


_SERVING_KEYS = {
    "backend",
    "context_length",
    "max_num_seqs",
    "prefix_caching",
    "threads",
    "startup_timeout_s",
    "image",
    "dtype",
    "extra_args",
    "one_chip_per_worker",
    "accelerator",
}
_MODEL_KEYS = {
    "source",
    "served_name",
    "license",
    "prompting",
    "tool_call_parser",
    "bfcl_mode",
    "chat_template",
    "group",
    "backend",
    "api_key_env",
}


def _parse_serving(table: _Table) -> ServingSettings:
    table.no_unknown(_SERVING_KEYS)
    backend = table.choice("backend", get_args(Backend))
    threads = None if table.data.get("threads") is None else table.positive_int("threads")
    image = table.optional_string("image")
    if backend == "vllm-docker" and not image:
        raise SweepError(
            f"{table.path}: serving.image: the vllm-docker backend needs an image "
            "(a release tag; `modelsweep pin` writes it pinned by digest)"
        )
    extra = table.data.get("extra_args", [])
    if not isinstance(extra, list) or not all(isinstance(a, str) for a in extra):
        raise SweepError(f"{table.path}: serving.extra_args: expected a list of strings")
    return ServingSettings(
        backend=backend,
        context_length=table.positive_int("context_length", default=4096),
        max_num_seqs=table.positive_int("max_num_seqs", default=16),
        prefix_caching=table.boolean("prefix_caching", default=True),
        threads=threads,
        startup_timeout_s=table.positive_number("startup_timeout_s", default=600.0),
        image=image,
        dtype=table.optional_string("dtype"),
        extra_args=tuple(extra),
        one_chip_per_worker=table.boolean("one_chip_per_worker", default=False),
        accelerator=table.optional_string("accelerator"),
    )


def _parse_screening(table: _Table) -> ScreeningSettings:
    table.no_unknown({"licenses", "hbm_gib", "gpu_memory_utilization", "kv_headroom_gib"})
    licenses = table.data.get("licenses", ["apache-2.0", "mit"])
    if not isinstance(licenses, list) or not all(isinstance(x, str) for x in licenses):
        raise SweepError(f"{table.path}: screening.licenses: expected a list of strings")
    util = table.positive_number("gpu_memory_utilization", default=0.9)
    if util > 1:
        raise SweepError(
            f"{table.path}: screening.gpu_memory_utilization: expected a "
            f"fraction in (0, 1], got {util}"
        )
    return ScreeningSettings(
        licenses=tuple(x.lower() for x in licenses),
        hbm_gib=table.positive_number("hbm_gib", default=15.75),
        gpu_memory_utilization=util,
        kv_headroom_gib=table.positive_number("kv_headroom_gib", default=2.0),
    )


def _parse_pricing(table: _Table) -> Pricing:
    """``[pricing]``: ``usd_per_hour`` (required), ``source``, ``as_of``, ``example``."""
    table.no_unknown({"usd_per_hour", "source", "as_of", "example"})
    if "usd_per_hour" not in table.data:
        raise SweepError(
            f"{table.path}: pricing.usd_per_hour: missing; give the machine's "
            "price per hour in US dollars, e.g. usd_per_hour = 1.20"
        )
    return Pricing(
        usd_per_hour=table.positive_number("usd_per_hour"),
        source=table.string("source", default=""),
        as_of=table.string("as_of", default=""),
        example=table.boolean("example", default=False),
    )


def _parse_model(table: _Table) -> ModelSpec:
    table.no_unknown(_MODEL_KEYS)
    name = table.where.removeprefix("models.")
    if not name or any(c in "[]/=" or c.isspace() for c in name):
        raise SweepError(
            f"{table.path}: {table.where}: model names may not be empty or contain "
            "brackets, slashes, '=' or spaces (they become test ids and "
            "--endpoint NAME=URL)"
        )
    source = parse_source(table.string("source"), f"{table.path}: {table.where}.source")
    parser = table.optional_string("tool_call_parser")
    backend = table.data.get("backend")
    if backend is not None:
        backend = table.choice("backend", get_args(Backend))
    return ModelSpec(
        name=name,
        source=source,
        served_name=table.string("served_name", default=name),
        license=table.string("license").lower(),
        prompting=table.choice("prompting", get_args(Prompting)),
        tool_call_parser=parser or None,
        bfcl_mode=table.choice("bfcl_mode", get_args(BfclMode), default="tools"),
        chat_template=table.optional_string("chat_template"),
        group=table.optional_string("group"),
        backend=backend,
        api_key_env=table.optional_string("api_key_env") or None,
    )


def parse_source(text: str, where: str = "source") -> ModelSource:
    """Parse ``embedded:ID``, ``embedded-hf:ID``, ``hf:ORG/REPO[@REVISION]`` or ``path:FILE``."""
    kind, sep, rest = text.partition(":")
    if not sep or not rest or kind not in get_args(SourceKind):
        raise SweepError(
            f"{where}: expected 'embedded:ID', 'embedded-hf:ID', "
            f"'hf:ORG/REPO[@REVISION]' or 'path:FILE', got {text!r}"
        )
    revision = None
    if kind == "hf":
        rest, _, rev = rest.partition("@")
        revision = rev or None
        if rest.count("/") != 1:
            raise SweepError(f"{where}: expected a Hugging Face repo id ORG/REPO, got {rest!r}")
    return ModelSource(kind=kind, id=rest, revision=revision)  # type: ignore[arg-type]


_MISSING: Any = object()


@dataclass(frozen=True)
class _Table:
    """One table of a sweep file (``where``: its dotted name): typed access that fails naming
    the file, the key and what was expected."""

    path: str
    where: str
    data: Mapping[str, Any]

    @classmethod
    def required(cls, path: str, data: Mapping[str, Any], key: str) -> _Table:
        value = data.get(key, _MISSING)
        if not isinstance(value, Mapping):
            got = "nothing" if value is _MISSING else type(value).__name__
            raise SweepError(f"{path}: [{key}]: expected a table, got {got}")
        return cls(path, key, value)

    @classmethod
    def optional(
        cls,
        path: str,
        data: Mapping[str, Any],
        where: str,
        expected: str = "",
        allowed: Iterable[str] | None = None,
    ) -> _Table:
        """``data``'s table at the last part of ``where`` (``{}`` when absent), which holds
        only ``allowed`` keys."""
        value = data.get(where.rpartition(".")[2], {})
        if not isinstance(value, Mapping):
            raise SweepError(f"{path}: {where}: expected {expected or f'a table [{where}]'}")
        table = cls(path, where, value)
        if allowed is not None:
            table.no_unknown(allowed)
        return table

    def no_unknown(self, allowed: Iterable[str]) -> None:
        unknown = sorted(set(self.data) - set(allowed))
        if unknown:
            raise SweepError(
                f"{self.path}: {self.where}: unknown key(s) {', '.join(unknown)}; "
                f"expected some of {', '.join(sorted(allowed))}"
            )

    def _get(self, key: str, default: Any, expected: str, ok: Callable[[Any], bool]) -> Any:
        value = self.data.get(key, default)
        if not ok(value):
            got = "nothing" if value is _MISSING else f"{value!r}"
            raise SweepError(f"{self.path}: {self.where}.{key}: expected {expected}, got {got}")
        return value

    def string(self, key: str, default: Any = _MISSING) -> str:
        return cast(
            str,
            self._get(
                key,
                default,
                "a non-empty string",
                lambda v: isinstance(v, str) and (bool(v) or default is not _MISSING),
            ),
        )

    def optional_string(self, key: str) -> str | None:
        return cast(
            str | None, self._get(key, None, "a string", lambda v: v is None or isinstance(v, str))
        )

    def choice(self, key: str, options: Sequence[str], default: Any = _MISSING) -> Any:
        return self._get(
            key,
            default,
            "one of " + ", ".join(repr(o) for o in options),
            lambda value: value in options,
        )

    def boolean(self, key: str, default: bool) -> bool:
        return cast(bool, self._get(key, default, "true or false", lambda v: isinstance(v, bool)))

    def positive_int(self, key: str, default: Any = _MISSING) -> int:
        return cast(
            int,
            self._get(
                key,
                default,
                "a positive integer",
                lambda v: not isinstance(v, bool) and isinstance(v, int) and v > 0,
            ),
        )

    def positive_number(self, key: str, default: Any = _MISSING) -> float:
        # TOML's nan and inf are floats too
        return float(
            self._get(
                key,
                default,
                "a positive number",
                lambda v: (
                    not isinstance(v, bool) and isinstance(v, int | float) and 0 < v < math.inf
                ),
            )
        )
