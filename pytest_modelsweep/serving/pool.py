"""One endpoint per model per run: created on first need, never started twice, stopped at the end."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ..core.errors import EndpointError, ModelsweepError, ServerStartedTwiceError
from ..core.secrets import key_from_env, split_credentials
from ..core.sweep import Sweep
from .endpoint import Endpoint, Provenance
from .listener import serving_process
from .llamacpp import launch_llamacpp
from .observed import check_group, read_back_sources
from .pitfalls import serving_pitfall
from .probe import probe_server
from .process import ServerProcess
from .provision import Progress, ensure_embedded_model
from .vllm import launch_vllm, serving_record


def launch_endpoint(
    sweep: Sweep, name: str, log_dir: Path, progress: Progress, *, worker_id: str = "main"
) -> tuple[Endpoint, ServerProcess]:
    """Start model ``name``'s server with its sweep's backend; the caller owns (and stops)
    the process. The pool's one launch path, also the cold-start measurement's."""
    spec = sweep.model(name)
    if sweep.backend_of(name) == "llamacpp":
        return launch_llamacpp(spec, sweep.serving, log_dir, progress)
    return launch_vllm(
        spec,
        sweep.serving,
        log_dir,
        progress,
        worker_id=worker_id,
        credentials=key_from_env(spec.api_key_env),
    )


@dataclass
class _Entry:
    endpoint: Endpoint | None = None
    process: ServerProcess | None = None
    error: ModelsweepError | None = None


class EndpointPool:
    """Owns every endpoint of one process of the run: ``get(name)`` attaches or launches on
    first use (a failed start keeps failing); a second launch of a model in the run (its claim
    ``<run_dir>/started/<model>``) is a :class:`ServerStartedTwiceError`."""

    def __init__(
        self,
        sweep: Sweep,
        *,
        attach: Mapping[str, str],
        run_dir: Path,
        worker_id: str,
        progress: Progress,
        models: Sequence[str] = (),
    ) -> None:
        self.sweep = sweep
        self.models = tuple(models)
        self.attach = dict(attach)
        self.run_dir = run_dir
        self.worker_id = worker_id
        self.progress = progress
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()
        self._files_checked = False

    def get(self, name: str) -> Endpoint:
        """The endpoint of model ``name``, attached or started on first call."""
        with self._lock:
            entry = self._entries.get(name)
            if entry is None:
                entry = self._entries[name] = self._open(name)
            if entry.error is not None:
                raise entry.error
            assert entry.endpoint is not None
            down = entry.endpoint.breaker.recheck()
            if down is not None:
                raise EndpointError(down)
            if entry.process is not None and not entry.process.alive():
                raise EndpointError(
                    f"the server of {name} exited (code {entry.process.exit_code()}) during the "
                    f"run; see its log {entry.process.log_path}"
                )
            return entry.endpoint

    def _open(self, name: str) -> _Entry:
        self.sweep.model(name)  # an unknown name fails here
        try:
            self._check_model_files()
            if self._entries.get(name) is not None:  # its file was refused
                return self._entries[name]
            if (pitfall := serving_pitfall(self.sweep.serving)) is not None:
                raise EndpointError(f"{name}: {pitfall}")
            process: ServerProcess | None = None
            if name in self.attach:
                endpoint = self._attach(name, self.attach[name])
            else:
                self._claim(name)
                endpoint, process = launch_endpoint(
                    self.sweep, name, self.run_dir / "logs", self.progress, worker_id=self.worker_id
                )
            return _Entry(replace(endpoint, accelerator=self.sweep.serving.accelerator), process)
        except ModelsweepError as error:
            return _Entry(error=error)

    def _attach(self, name: str, given: str) -> Endpoint:
        """The endpoint of a server someone else started: its facts read from it (a vLLM
        server's flags checked against the sweep's), the process serving it named when it
        runs on this host."""
        spec = self.sweep.model(name)
        url, credentials = split_credentials(given)
        credentials = credentials or key_from_env(spec.api_key_env)
        facts = probe_server(url, spec.served_name, credentials=credentials, model=name)
        settings, sources = dict(facts.settings), read_back_sources(facts.settings)
        if facts.kind == "vllm" and self.sweep.backend_of(name) != "llamacpp":
            settings, sources = serving_record(spec, self.sweep.serving, facts, facts.observed, url)
            # `modelsweep k8s` gives the bench the server's MODEL_IMPL_TYPE (its Job's env)
            check_group(spec, os.environ.get("MODEL_IMPL_TYPE"), "its Job's env")
        return facts.endpoint(
            spec,
            url,
            Provenance(
                server_name=facts.server_name,
                server_version=facts.server_version,
                served_name=spec.served_name,
                server_settings=settings,
                model_source=str(spec.source),
                model_revision=spec.source.revision,
                how="attach",
                flag_sources=dict(sources),
                observed=facts.observed,
                server_process=serving_process(url),
            ),
            credentials,
        )

    def _check_model_files(self) -> None:
        """Fetch and check the embedded model files of the run, once, before any server starts."""
        if self._files_checked:
            return
        self._files_checked = True
        for name in self.models:
            spec = self.sweep.model(name)
            if (
                name in self.attach
                or spec.source.kind != "embedded"
                or self.sweep.backend_of(name) != "llamacpp"
            ):
                continue
            try:
                ensure_embedded_model(spec.source.id, self.progress)
            except ModelsweepError as error:
                self._entries[name] = _Entry(error=error)
                self.progress(f"{name} will not be served: {error}")

    def _claim(self, name: str) -> None:
        marker = self.run_dir / "started" / name
        marker.parent.mkdir(parents=True, exist_ok=True)
        try:
            with open(marker, "x") as handle:  # "x": created here, or FileExistsError
                json.dump({"worker": self.worker_id, "pid": os.getpid()}, handle)
        except FileExistsError:
            try:
                earlier = json.loads(marker.read_text())
            except (OSError, ValueError):
                earlier = {}
            raise ServerStartedTwiceError(
                f"the server of {name} was already started in this run by "
                f"{earlier.get('worker', '?')} (pid {earlier.get('pid', '?')}); now {self.worker_id} "
                "asked again: tests of one model must run on one worker (modelsweep schedules "
                "them so; do not override --dist, or pass --endpoint for shared servers)"
            ) from None

    def release(self, name: str) -> None:
        """Stop the server of ``name`` (its tests are done); it is not started again."""
        with self._lock:
            entry = self._entries.get(name)
            if entry is not None and entry.process is not None:
                entry.process.stop()
                if entry.error is None:
                    entry.error = EndpointError(
                        f"the server of {name} was stopped after its tests; tests of one model "
                        "must run together (modelsweep orders them so)"
                    )

    def close(self) -> None:
        """Stop every server this pool started."""
        with self._lock:
            for entry in self._entries.values():
                if entry.process is not None:
                    entry.process.stop()
