"""The sweep file: which models run, how each is served and prompted.

A TOML file with ``[sweep]`` (name, reference), ``[serving]`` (identical for every model),
``[models.NAME]``, and optional ``[benchmarks.NAME]``, ``[verdicts]``, ``[screening]`` and
``[pricing]``. :data:`BUILTIN_SWEEPS` ship with the package. Every malformed value fails
here, naming the file, the key and what was expected.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal, get_args

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
            raise UnknownModelError(self._unknown(name)) from None

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

    def _unknown(self, name: str) -> str:
        return (f"unknown model {name!r} in sweep {self.name!r} ({self.path}); "
                f"known models: {', '.join(self.models)}")


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
            raise SweepError(f"--endpoint {redact(value)!r}: expected NAME=URL, e.g. "
                             "--endpoint qwen3-4b=http://10.0.0.5:8000")
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
            raise SweepError(f"sweep file {text_spec} not found; pass --sweep with a TOML file "
                             f"path or one of the built-in sweeps: {', '.join(BUILTIN_SWEEPS)}")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise SweepError(f"{path}: not valid TOML ({exc}); fix the file's syntax") from None
    except UnicodeDecodeError:
        raise SweepError(f"{path}: not UTF-8 text; a sweep file is TOML") from None
    return parse_sweep(data, str(path))


def parse_sweep(data: Mapping[str, Any], path: str = "<sweep>") -> Sweep:
    """Validate a decoded sweep document and build its records."""
    reader = _Reader(path)
    head = reader.table(data, "sweep")
    name = reader.string(head, "sweep", "name")
    description = reader.string(head, "sweep", "description", default="")
    reference = reader.string(head, "sweep", "reference")
    serving = _parse_serving(reader, reader.table(data, "serving"))
    screening = _parse_screening(reader, data.get("screening", {}))
    pricing = _parse_pricing(reader, data["pricing"]) if "pricing" in data else None
    benchmarks = _parse_benchmarks(reader, data.get("benchmarks", {}))
    verdicts = _parse_verdicts(reader, data.get("verdicts", {}))
    models_table = reader.table(data, "models")
    if not models_table:
        raise SweepError(f"{path}: [models] is empty; declare at least the reference model")
    models: dict[str, ModelSpec] = {}
    for model_name, entry in models_table.items():
        if not isinstance(entry, Mapping):
            raise SweepError(f"{path}: models.{model_name}: expected a table "
                             f"[models.{model_name}], got {type(entry).__name__}")
        models[model_name] = _parse_model(reader, model_name, entry)
    unknown_top = set(data) - {"sweep", "serving", "models", "screening", "pricing", "benchmarks",
                               "verdicts"}
    if unknown_top:
        raise SweepError(f"{path}: unknown top-level key(s) {', '.join(sorted(unknown_top))}; "
                         "expected [sweep], [serving], [benchmarks.*], [verdicts], [screening], "
                         "[pricing] and [models.*]")
    if reference not in models:
        raise SweepError(f"{path}: sweep.reference: {reference!r} is not one of the models "
                         f"({', '.join(models)}); add [models.{reference}] or fix the name")
    return Sweep(name=name, path=path, description=description, reference=reference,
                 serving=serving, models=models, screening=screening, pricing=pricing,
                 benchmarks=benchmarks, verdicts=verdicts)


_SERVING_KEYS = {
    "backend", "context_length", "max_num_seqs", "prefix_caching", "threads",
    "startup_timeout_s", "image", "dtype", "extra_args", "one_chip_per_worker",
}
_MODEL_KEYS = {
    "source", "served_name", "license", "prompting", "tool_call_parser", "bfcl_mode",
    "chat_template", "group", "backend", "api_key_env",
}


def _parse_serving(reader: _Reader, table: Mapping[str, Any]) -> ServingSettings:
    reader.no_unknown(table, "serving", _SERVING_KEYS)
    backend = reader.choice(table, "serving", "backend", get_args(Backend))
    threads = table.get("threads")
    if threads is not None:
        threads = reader.positive_int(table, "serving", "threads")
    image = reader.optional_string(table, "serving", "image")
    if backend == "vllm-docker" and (not image or "@sha256:" not in image):
        raise SweepError(f"{reader.path}: serving.image: expected an image pinned by digest "
                         f"(name@sha256:...), got {image!r}")
    extra = table.get("extra_args", [])
    if not isinstance(extra, list) or not all(isinstance(a, str) for a in extra):
        raise SweepError(f"{reader.path}: serving.extra_args: expected a list of strings")
    return ServingSettings(
        backend=backend,
        context_length=reader.positive_int(table, "serving", "context_length", default=4096),
        max_num_seqs=reader.positive_int(table, "serving", "max_num_seqs", default=16),
        prefix_caching=reader.boolean(table, "serving", "prefix_caching", default=True),
        threads=threads,
        startup_timeout_s=reader.positive_number(table, "serving", "startup_timeout_s",
                                                 default=600.0),
        image=image,
        dtype=reader.optional_string(table, "serving", "dtype"),
        extra_args=tuple(extra),
        one_chip_per_worker=reader.boolean(table, "serving", "one_chip_per_worker", default=False),
    )


def _parse_benchmarks(reader: _Reader, table: Any) -> BenchmarkSettings:
    """``[benchmarks.gsm8k]``: ``max_tokens`` (GSM8K's answer length limit)."""
    if not isinstance(table, Mapping):
        raise SweepError(f"{reader.path}: benchmarks: expected tables [benchmarks.NAME]")
    reader.no_unknown(table, "benchmarks", {"gsm8k"})
    gsm8k = table.get("gsm8k", {})
    if not isinstance(gsm8k, Mapping):
        raise SweepError(f"{reader.path}: benchmarks.gsm8k: expected a table [benchmarks.gsm8k]")
    reader.no_unknown(gsm8k, "benchmarks.gsm8k", {"max_tokens"})
    return BenchmarkSettings(gsm8k_max_tokens=reader.positive_int(
        gsm8k, "benchmarks.gsm8k", "max_tokens", default=DEFAULT_GSM8K_MAX_TOKENS))


def _parse_verdicts(reader: _Reader, table: Any) -> VerdictSettings:
    """``[verdicts]``: ``until_decided`` (true: accuracy benchmarks stop once decided)."""
    if not isinstance(table, Mapping):
        raise SweepError(f"{reader.path}: verdicts: expected a table [verdicts]")
    reader.no_unknown(table, "verdicts", {"until_decided"})
    return VerdictSettings(
        until_decided=reader.boolean(table, "verdicts", "until_decided", default=False))


def _parse_screening(reader: _Reader, table: Any) -> ScreeningSettings:
    if not isinstance(table, Mapping):
        raise SweepError(f"{reader.path}: screening: expected a table [screening]")
    reader.no_unknown(table, "screening",
                      {"licenses", "hbm_gib", "gpu_memory_utilization", "kv_headroom_gib"})
    licenses = table.get("licenses", ["apache-2.0", "mit"])
    if not isinstance(licenses, list) or not all(isinstance(x, str) for x in licenses):
        raise SweepError(f"{reader.path}: screening.licenses: expected a list of strings")
    util = reader.positive_number(table, "screening", "gpu_memory_utilization", default=0.9)
    if util > 1:
        raise SweepError(f"{reader.path}: screening.gpu_memory_utilization: expected a "
                         f"fraction in (0, 1], got {util}")
    return ScreeningSettings(
        licenses=tuple(x.lower() for x in licenses),
        hbm_gib=reader.positive_number(table, "screening", "hbm_gib", default=15.75),
        gpu_memory_utilization=util,
        kv_headroom_gib=reader.positive_number(table, "screening", "kv_headroom_gib", default=2.0),
    )


def _parse_pricing(reader: _Reader, table: Any) -> Pricing:
    """``[pricing]``: ``usd_per_hour`` (required), ``source``, ``as_of``, ``example``."""
    if not isinstance(table, Mapping):
        raise SweepError(f"{reader.path}: pricing: expected a table [pricing]")
    reader.no_unknown(table, "pricing", {"usd_per_hour", "source", "as_of", "example"})
    if "usd_per_hour" not in table:
        raise SweepError(f"{reader.path}: pricing.usd_per_hour: missing; give the machine's "
                         "price per hour in US dollars, e.g. usd_per_hour = 1.20")
    return Pricing(
        usd_per_hour=reader.positive_number(table, "pricing", "usd_per_hour"),
        source=reader.string(table, "pricing", "source", default=""),
        as_of=reader.string(table, "pricing", "as_of", default=""),
        example=reader.boolean(table, "pricing", "example", default=False),
    )


def _parse_model(reader: _Reader, name: str, entry: Mapping[str, Any]) -> ModelSpec:
    where = f"models.{name}"
    reader.no_unknown(entry, where, _MODEL_KEYS)
    if not name or any(c in "[]/=" or c.isspace() for c in name):
        raise SweepError(f"{reader.path}: {where}: model names may not be empty or contain "
                         "brackets, slashes, '=' or spaces (they become test ids and "
                         "--endpoint NAME=URL)")
    source = parse_source(reader.string(entry, where, "source"), f"{reader.path}: {where}.source")
    parser = reader.optional_string(entry, where, "tool_call_parser")
    backend = entry.get("backend")
    if backend is not None:
        backend = reader.choice(entry, where, "backend", get_args(Backend))
    return ModelSpec(
        name=name,
        source=source,
        served_name=reader.string(entry, where, "served_name", default=name),
        license=reader.string(entry, where, "license").lower(),
        prompting=reader.choice(entry, where, "prompting", get_args(Prompting)),
        tool_call_parser=parser or None,
        bfcl_mode=reader.choice(entry, where, "bfcl_mode", get_args(BfclMode), default="tools"),
        chat_template=reader.optional_string(entry, where, "chat_template"),
        group=reader.optional_string(entry, where, "group"),
        backend=backend,
        api_key_env=reader.optional_string(entry, where, "api_key_env") or None,
    )


def parse_source(text: str, where: str = "source") -> ModelSource:
    """Parse ``embedded:ID``, ``embedded-hf:ID``, ``hf:ORG/REPO[@REVISION]`` or ``path:FILE``."""
    kind, sep, rest = text.partition(":")
    if not sep or not rest or kind not in get_args(SourceKind):
        raise SweepError(f"{where}: expected 'embedded:ID', 'embedded-hf:ID', "
                         f"'hf:ORG/REPO[@REVISION]' or 'path:FILE', got {text!r}")
    revision = None
    if kind == "hf":
        rest, _, rev = rest.partition("@")
        revision = rev or None
        if rest.count("/") != 1:
            raise SweepError(f"{where}: expected a Hugging Face repo id ORG/REPO, got {rest!r}")
    return ModelSource(kind=kind, id=rest, revision=revision)  # type: ignore[arg-type]


class _Reader:
    """Typed access to TOML tables that fails with file, key and expectation."""

    _MISSING = object()

    def __init__(self, path: str) -> None:
        self.path = path

    def _fail(self, where: str, key: str, expected: str, value: Any) -> SweepError:
        got = "nothing" if value is self._MISSING else f"{value!r}"
        return SweepError(f"{self.path}: {where}.{key}: expected {expected}, got {got}")

    def table(self, data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
        value = data.get(key, self._MISSING)
        if not isinstance(value, Mapping):
            got = "nothing" if value is self._MISSING else type(value).__name__
            raise SweepError(f"{self.path}: [{key}]: expected a table, got {got}")
        return value

    def no_unknown(self, table: Mapping[str, Any], where: str, allowed: Iterable[str]) -> None:
        unknown = sorted(set(table) - set(allowed))
        if unknown:
            raise SweepError(f"{self.path}: {where}: unknown key(s) {', '.join(unknown)}; "
                             f"expected some of {', '.join(sorted(allowed))}")

    def string(self, table: Mapping[str, Any], where: str, key: str,
               default: Any = _MISSING) -> str:
        value = table.get(key, default)
        if not isinstance(value, str) or (not value and default is self._MISSING):
            raise self._fail(where, key, "a non-empty string", value)
        return value

    def optional_string(self, table: Mapping[str, Any], where: str, key: str) -> str | None:
        value = table.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self._fail(where, key, "a string", value)
        return value

    def choice(self, table: Mapping[str, Any], where: str, key: str, options: Sequence[str],
               default: Any = _MISSING) -> Any:
        value = table.get(key, default)
        if value not in options:
            raise self._fail(where, key, "one of " + ", ".join(repr(o) for o in options), value)
        return value

    def boolean(self, table: Mapping[str, Any], where: str, key: str, default: bool) -> bool:
        value = table.get(key, default)
        if not isinstance(value, bool):
            raise self._fail(where, key, "true or false", value)
        return value

    def positive_int(self, table: Mapping[str, Any], where: str, key: str,
                     default: Any = _MISSING) -> int:
        value = table.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise self._fail(where, key, "a positive integer", value)
        return value

    def positive_number(self, table: Mapping[str, Any], where: str, key: str,
                        default: Any = _MISSING) -> float:
        value = table.get(key, default)
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or not 0 < value < math.inf):  # TOML's nan and inf are floats too
            raise self._fail(where, key, "a positive number", value)
        return float(value)
