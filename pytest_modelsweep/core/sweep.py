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
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, get_args

from .cost import Pricing
from .errors import SweepError, UnknownModelError
from .options import DEFAULTS
from .secrets import endpoint_url_problem, redact

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Backend = Literal["llamacpp", "vllm", "vllm-docker"]
Prompting = Literal["chat", "completion"]
BfclMode = Literal["tools", "prompt"]
SourceKind = Literal["embedded", "hf", "path", "embedded-hf"]
R = TypeVar("R", bound="DataclassInstance")

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
    bfcl_mode: BfclMode = "tools"
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
        for name in (ref, *names):
            self.model(name)
        candidates = dict.fromkeys(names) if names else self.candidates
        return Selection(reference=ref, candidates=tuple(c for c in candidates if c != ref))


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


def load_sweep(spec: str | Path | None = None) -> Sweep:
    """Load a sweep by built-in name (``embedded``, ``tpu-v5e``) or by path; default ``--sweep``'s."""
    text_spec = str(DEFAULTS.sweep if spec is None else spec)
    path = Path(text_spec)
    if text_spec in BUILTIN_SWEEPS:
        path = Path(str(resources.files("pytest_modelsweep") / "sweeps" / f"{text_spec}.toml"))
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
    name, description = head.value("name", "str"), head.value("description", "str", "")
    reference = head.value("reference", "str")
    serving = _parse_serving(_Table.required(path, data, "serving"))
    screening = _parse_screening(_Table.optional(path, data, "screening"))
    pricing = _parse_pricing(_Table.optional(path, data, "pricing")) if "pricing" in data else None
    benchmarks = _Table.optional(path, data, "benchmarks", "tables [benchmarks.NAME]", {"gsm8k"})
    gsm8k = _Table.optional(path, benchmarks.data, "benchmarks.gsm8k", allowed={"max_tokens"})
    verdicts = _Table.optional(path, data, "verdicts").record(VerdictSettings)
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
        benchmarks=BenchmarkSettings(gsm8k.value("max_tokens", "int", DEFAULT_GSM8K_MAX_TOKENS)),
        verdicts=verdicts,
    )


def _parse_serving(table: _Table) -> ServingSettings:
    serving = table.record(ServingSettings)
    if serving.backend == "vllm-docker" and not serving.image:
        raise SweepError(
            f"{table.path}: serving.image: the vllm-docker backend needs an image "
            "(a release tag; `modelsweep pin` writes it pinned by digest)"
        )
    return serving


def _parse_screening(table: _Table) -> ScreeningSettings:
    screening = table.record(ScreeningSettings)
    if screening.gpu_memory_utilization > 1:
        raise SweepError(
            f"{table.path}: screening.gpu_memory_utilization: expected a "
            f"fraction in (0, 1], got {screening.gpu_memory_utilization}"
        )
    return replace(screening, licenses=tuple(x.lower() for x in screening.licenses))


def _parse_pricing(table: _Table) -> Pricing:
    """``[pricing]``: ``usd_per_hour`` (required), ``source``, ``as_of``, ``example``."""
    if "usd_per_hour" not in table.data:
        table.no_unknown([spec.name for spec in fields(Pricing)])
        raise SweepError(
            f"{table.path}: pricing.usd_per_hour: missing; give the machine's "
            "price per hour in US dollars, e.g. usd_per_hour = 1.20"
        )
    return table.record(Pricing)


def _parse_model(table: _Table) -> ModelSpec:
    name = table.where.removeprefix("models.")

    def read() -> dict[str, Any]:
        if not name or any(c in "[]/=" or c.isspace() for c in name):
            raise SweepError(
                f"{table.path}: {table.where}: model names may not be empty or contain "
                "brackets, slashes, '=' or spaces (they become test ids and "
                "--endpoint NAME=URL)"
            )
        return {
            "name": name,
            "source": parse_source(
                table.value("source", "str"), f"{table.path}: {table.where}.source"
            ),
            "served_name": table.value("served_name", "str", name),
            "license": table.value("license", "str").lower(),
            "tool_call_parser": table.value("tool_call_parser", "str | None", None) or None,
            "api_key_env": table.value("api_key_env", "str | None", None) or None,
        }

    return table.record(ModelSpec, read)


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


_MISSING: Any = MISSING


_VALUES: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "str": ("a non-empty string", lambda v: isinstance(v, str)),
    "str | None": ("a string", lambda v: v is None or isinstance(v, str)),
    "int": ("a positive integer", lambda v: type(v) is int and v > 0),
    # TOML's nan and inf are floats too
    "float": ("a positive number", lambda v: type(v) in (int, float) and 0 < v < math.inf),
    "bool": ("true or false", lambda v: isinstance(v, bool)),
    "tuple[str, ...]": (
        "a list of strings",
        lambda v: isinstance(v, list | tuple) and all(isinstance(x, str) for x in v),
    ),
    **{
        name: ("one of " + ", ".join(map(repr, options)), options.__contains__)
        for name, options in (
            ("Backend", get_args(Backend)),
            ("Prompting", get_args(Prompting)),
            ("BfclMode", get_args(BfclMode)),
        )
    },
}
"""How a sweep value is checked, by its field's type as declared: what is expected, and the
test (``X | None`` also takes none)."""


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

    def value(self, key: str, kind: str, default: Any = _MISSING) -> Any:
        """``key``'s value checked as ``kind`` (:data:`_VALUES`), ``default`` when absent;
        without a default it must be given, and not as empty text."""
        expected, ok = _VALUES.get(kind) or _VALUES[kind.removesuffix(" | None")]
        value = self.data.get(key, default)
        if not (ok(value) or (value is None and kind.endswith(" | None"))) or (
            value == "" and default is _MISSING
        ):
            got = "nothing" if value is _MISSING else f"{value!r}"
            raise SweepError(f"{self.path}: {self.where}.{key}: expected {expected}, got {got}")
        return float(value) if kind == "float" else tuple(value) if kind[:5] == "tuple" else value

    def record(self, cls: type[R], read: Callable[[], dict[str, Any]] = dict) -> R:
        """``cls`` from this table, which holds only its fields' keys (``name`` is a model's
        table's own): the fields ``read()`` gives (called once the keys are checked), each other
        field read by :meth:`value` as its declared type."""
        keys = [f for f in fields(cls) if f.name != "name"]
        self.no_unknown([f.name for f in keys])
        given = read()
        return cls(
            **given,
            **{
                f.name: self.value(f.name, str(f.type), f.default)
                for f in keys
                if f.name not in given
            },
        )
