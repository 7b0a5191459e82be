"""The ``modelsweep`` command: provision, pin, list models and runs, print results, screen, copy stores.

It shares its options and defaults with the plugin (:mod:`.core.options`) and reads the same
store and results files; nothing here imports pytest.
"""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from .core.errors import ModelsweepError
from .core.metrics import GATED_KINDS, Kind, benchmarks_of, metric_for
from .core.options import DEFAULTS, shared, store_location_type
from .core.outputs import (
    check_output_file,
    check_output_files,
    check_output_folder,
    write_failure,
    write_file,
)
from .core.secrets import redacted
from .core.store_location import StoreLocation

if TYPE_CHECKING:
    from .core.measurements import Measurement, ScreeningResult
    from .core.sweep import ModelSpec, Sweep

SCREEN = "modelsweep screen"
INTERRUPTED = 130  # The exit status of a command stopped by Ctrl-C, as a shell's.


def cmd_provision(args: argparse.Namespace) -> int:
    """Make the llama.cpp server ready and fetch the embedded models now, instead of at the
    first test."""
    from .core.sweep import load_sweep
    from .serving.provision import ensure_embedded_model, ensure_llama_server

    sweep = load_sweep(args.sweep)
    server = ensure_llama_server(_say, build=args.build)
    print(f"llama.cpp server: {server.origin}: {shlex.join(server.command)}")
    for name, spec in sweep.models.items():
        if spec.source.kind == "embedded":
            model = ensure_embedded_model(spec.source.id, _say)
            print(f"{name}: {model.path} (sha256 {model.sha256[:12]}…, from {model.package})")
    return 0


def cmd_pin(args: argparse.Namespace) -> int:
    """Pin the sweep's image: ask Docker on this machine for the digest of its tag (docker
    pull, docker image inspect) and write the sweep with the image named by that digest."""
    import tomllib

    from .core.sweep import load_sweep, parse_sweep
    from .serving.docker import pin_image, pinned_sweep_text

    check_output_file(args.output, "-o")
    sweep = load_sweep(args.sweep)
    image = sweep.serving.image
    if sweep.serving.backend != "vllm-docker" or not image:
        raise ModelsweepError(
            f"pin: sweep {sweep.name} serves no image (backend "
            f"{sweep.serving.backend}); pin a sweep with backend vllm-docker"
        )
    pinned = pin_image(image, pull=not args.no_pull)
    text = pinned_sweep_text(
        Path(sweep.path).read_text(encoding="utf-8"), pinned, source=sweep.path
    )
    parse_sweep(tomllib.loads(text), args.output)  # refuse to write a sweep that would not load
    write_file(args.output, "-o", text)
    print(f"{image} -> {pinned}")
    print(f"pinned sweep: {args.output} (run with --sweep {args.output})")
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    """List the models of a sweep with how each is served and prompted."""
    from .core.sweep import load_sweep

    sweep = load_sweep(args.sweep)
    print(f"sweep {sweep.name} ({sweep.path}): reference {sweep.reference}")
    for name, spec in sweep.models.items():
        print(
            f"  {name:<16} {'reference' if name == sweep.reference else 'candidate':<9} "
            f"{sweep.backend_of(name):<11} {spec.prompting:<10} "
            f"tools={spec.tool_call_parser or '-':<14} bfcl={spec.bfcl_mode:<6} {spec.source}"
        )
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    """List the runs in the store."""
    from .store.database import Store

    # anything there is checked by Store: a folder, a foreign file, a server that is down
    for run in Store(args.store, create=False, read_only=True).runs(args.sweep_run):
        print(
            f"{run['run_id']}  {run['started_at']}  {run['sweep_name']:<10} "
            f"{run['measurements']} measurements"
            + (f"  sweep run {run['sweep_run']}" if run["sweep_run"] else "")
            + ("  interrupted (killed, or still running)" if run["status"] == "interrupted" else "")
        )
    return 0


def cmd_results(args: argparse.Namespace) -> int:
    """Print the measurement table of a results file (or an interrupted run's journal)."""
    from .core.jsontext import finite, strict_json
    from .core.measurements import measurements_of
    from .report.terminal import measurement_table
    from .store.results import load_results

    data = load_results(Path(args.path))
    measurements = measurements_of(data["measurements"])
    run = data.get("run", {})
    if args.json:
        print(
            strict_json(
                {**data, "measurements": [finite(m.to_dict()) for m in measurements]}, indent=1
            )
        )
    else:
        print(
            f"run {run.get('run_id', '?')}, sweep {run.get('sweep_name', '?')}, "
            f"commit {str((run.get('project') or {}).get('commit'))[:12]}",
            *measurement_table(measurements),
            sep="\n",
        )
    return 0


def _run_measurements(
    store: StoreLocation, ref: str, *, history: bool = False
) -> tuple[dict[str, Any], list[Measurement]]:
    """A stored run (by id or baseline name) or a results file → (run, measurements); with
    ``history``, a baseline name gives every run of its history as one (as ``--baseline``
    does: run A of ``compare``, its run dict empty)."""
    from .core.measurements import measurements_of
    from .judging.gate import baseline_history
    from .store.database import Store
    from .store.results import load_results

    path = Path(ref)
    if path.suffix == ".json" or path.is_file():
        data = load_results(path)
        return data.get("run", {}), measurements_of(data["measurements"])
    if store.path is not None and not store.path.exists():
        raise ModelsweepError(f"{store}: no store there; pass --store or a results file")
    opened = Store(store, create=False, read_only=True)
    if history and (runs := opened.baseline_measurements(ref)):
        return {}, baseline_history(measurements_of(run) for run in runs)
    run_id = opened.baselines().get(ref, ref)
    return opened.run(run_id), measurements_of(opened.measurements(run_id))


def cmd_compare(args: argparse.Namespace) -> int:
    """Compare run B with run A (ids, baseline names or results files), as the CI gate does."""
    from .judging.gate import compare_with_baseline, ungated_reason
    from .report.terminal import gate_table

    _, before = _run_measurements(args.store, args.run_a, history=True)
    _, after = _run_measurements(args.store, args.run_b)
    rows = compare_with_baseline(
        after, before, args.fail_on_regression, noisy_fails=args.fail_on_noisy
    )
    failed = sum(row.failed for row in rows)
    print(
        *gate_table(rows),
        f"{failed} regressed, not comparable or inconclusive of {len(rows)}",
        sep="\n",
    )
    ungated = ungated_reason(rows, after)
    if ungated is not None:
        print(
            f"{args.run_b} against {args.run_a}: {ungated}"
            + ("" if args.allow_ungated else "; pass --allow-ungated to accept that")
        )
        return 0 if args.allow_ungated and not failed else 1
    return 1 if failed else 0


def cmd_merge(args: argparse.Namespace) -> int:
    """Join runs made on different chips or days into one results file (same image digest only)."""
    from dataclasses import replace
    from datetime import UTC, datetime

    from .core.jsontext import finite, strict_json
    from .judging.gate import setting_of, shown_setting_of, unsound_reason
    from .judging.pairing import check_alike, measured_in_runs
    from .store.results import results_document

    check_output_file(args.output, "-o")
    runs: list[dict[str, Any]] = []
    measurements: list[dict[str, Any]] = []
    digests: dict[str, str] = {}
    given: dict[str, str] = {}
    measured: dict[tuple[str, str], tuple[str, str]] = {}
    for ref in args.runs:
        run, ms = _run_measurements(args.store, ref)
        run_id = str(run.get("run_id") or ref)
        if run_id in given:
            raise ModelsweepError(
                f"refusing to merge run {run_id} twice (given as {given[run_id]} and {ref}); "
                "give each run once"
            )
        given[run_id] = ref
        runs.append(run)
        unsound = [reason for m in ms if (reason := unsound_reason(m, f"in run {ref}"))]
        if unsound:
            raise ModelsweepError(
                f"refusing to merge run {ref}: {len(unsound)} of its measurements support no "
                f"conclusion (first: {unsound[0]})"
            )
        for m in ms:
            # each model's accuracy benchmark from one run (whatever its settings), each other
            # measurement once per setting: a comparison never finds two runs that disagree
            # (what one run holds, e.g. a ratio of each design, it holds as it was recorded)
            setting = shown_setting_of(m) or "no setting"
            metric = metric_for(m.benchmark, m.unit)
            identity = (
                (m.model, m.benchmark)
                if metric is not None and metric.kind is Kind.ACCURACY
                else (m.model, f"{m.benchmark} {setting_of(m)}")
            )
            if identity in measured and measured[identity][0] != run_id:
                earlier, earlier_setting = measured[identity]
                conflict = (
                    (
                        f"under different settings: {earlier_setting} in run {earlier}, "
                        f"{setting} in run {run_id}"
                    )
                    if earlier_setting != setting
                    else f"in run {earlier} and in run {run_id}"
                )
                raise ModelsweepError(
                    f"refusing to merge: {m.model} {m.benchmark} was measured {conflict}; a "
                    "merged file holds each model's benchmark once: leave one of the runs out"
                )
            measured[identity] = (run_id, setting)
            if m.provenance:
                digests.setdefault(
                    str(m.provenance.get("image_digest")), str(run.get("run_id", ref))
                )
            measurements.append(replace(m, run_id=run.get("run_id", ref)).to_dict())
    check_alike(measured_in_runs(measurements))
    if len(digests) > 1:
        raise ModelsweepError(
            "refusing to merge runs served by different images: "
            + "; ".join(f"{digest} (run {run})" for digest, run in digests.items())
            + "; merge only runs made with one pinned image"
        )
    write_file(
        args.output,
        "-o",
        strict_json(
            redacted(
                results_document(
                    {
                        "run_id": "merged-" + datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ"),
                        "merged_from": runs,
                        "sweep_name": "+".join(sorted({str(r.get("sweep_name")) for r in runs})),
                    },
                    [finite(m) for m in measurements],
                    {"merged": len(runs)},
                )
            ),
            indent=1,
        )
        + "\n",
    )
    print(f"merged {len(runs)} runs, {len(measurements)} measurements into {args.output}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """Write the HTML and/or Markdown report of a stored run (or of every run of a sweep run)
    without re-running it; with --llm-d, llm-d's Benchmark Report v0.2.1 of its settings."""
    from .core.measurements import measurements_of
    from .report.html import html_document
    from .report.markdown import markdown_report

    if (args.run is None) == (args.sweep_run is None):
        raise ModelsweepError(
            "report: give a run (id, baseline name or results file) or "
            "--sweep-run NAME, one of the two"
        )
    check_output_files({"--html": args.html, "--md": args.md, "--llm-d": args.llm_d})
    if args.sweep_run is not None:
        from .store.database import Store

        run, stored = Store(args.store, create=False, read_only=True).sweep_run_report(
            args.sweep_run
        )
        measurements = measurements_of(stored)
    else:
        run, measurements = _run_measurements(args.store, args.run)
    # (written by a version that did not redact everything, a store may hold a secret)
    run = redacted(run)
    measurements = measurements_of([redacted(m.to_dict()) for m in measurements])
    markdown = markdown_report(measurements, run)
    _write_pages(
        {
            "--html": (
                args.html,
                f"HTML report: {Path(args.html or '.')}",  # (as pathlib shows it)
                lambda: html_document(measurements, run),
            ),
            "--md": (args.md, f"Markdown report: {args.md}", lambda: markdown),
        }
    )
    if args.llm_d:
        from .report.llmd import write_llmd_report

        count = write_llmd_report(args.llm_d, "--llm-d", measurements, run)
        print(f"llm-d Benchmark Report v0.2.1: {args.llm_d} ({count} report(s))")
    if not args.html and not args.md and not args.llm_d:
        print(markdown)
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    """Each model's gated figures across a sweep's runs in the store, with the gate's decision
    on each run and the changes beyond run-to-run noise (docs/ci.md#history)."""
    from .report.history import (
        History,
        history_document,
        history_json,
        history_markdown,
        no_history_line,
        read_history,
        sweep_runs,
    )
    from .store.database import Store

    check_output_files({"--html": args.html, "--md": args.md})
    sweep = args.sweep
    if sweep.endswith(".toml"):
        from .core.sweep import load_sweep

        sweep = load_sweep(sweep).name
    store = Store(args.store, create=False, read_only=True)
    runs = sweep_runs(store, sweep)
    line = no_history_line(store, runs, sweep)
    if line is not None:  # --json: the history of no series, its note that line
        sys.stdout.write(
            history_json(History(str(store.path), sweep, (str(runs[0]["run_id"]),), notes=(line,)))
            if args.json
            else line + "\n"
        )
        return 0
    history = read_history(
        store,
        sweep,
        benchmark=args.benchmark,
        settings=dict(args.setting),
        thresholds=args.fail_on_regression,
    )
    markdown = history_markdown(history)
    _write_pages(
        {
            "--html": (
                args.html,
                f"HTML history: {args.html}",
                lambda: history_document(history),
            ),
            "--md": (args.md, f"Markdown history: {args.md}", lambda: markdown),
        }
    )
    if args.json:
        sys.stdout.write(history_json(history))
    elif not args.html and not args.md:
        print(markdown)
    return 0


def _write_pages(pages: dict[str, tuple[str | None, str, Callable[[], str]]]) -> None:
    """Write each page asked for: option → (its path or None, the line said once it is
    written, its text)."""
    for option, (path, line, text) in pages.items():
        if path:
            write_file(path, option, text())
            print(line)


def _setting_type(text: str) -> tuple[str, str]:
    """``--setting``'s ``type=``: ``KEY=VALUE``."""
    key, equals, value = text.partition("=")
    if not equals or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE (e.g. concurrency=4), got {text!r}")
    return key.strip(), value.strip()


def cmd_store_copy(args: argparse.Namespace) -> int:
    """Copy a store's runs, items and baselines into another (SQLite to PostgreSQL and back)."""
    from .store.copy import copy_store
    from .store.database import Store

    counts = copy_store(
        Store(args.source, create=False), Store(args.target), existing=args.existing
    )
    what = [
        f"{counts[table]} {noun}{'' if counts[table] == 1 else 's'}"
        for table, noun in (
            ("runs", "run"),
            ("measurements", "measurement"),
            ("items", "item"),
            ("test_outcomes", "test outcome"),
            ("baselines", "baseline"),
        )
    ]
    print(f"copied {what[0]} ({', '.join(what[1:])}) from {args.source} into {args.target}")
    return 0


def cmd_k8s(args: argparse.Namespace) -> int:
    """Write a sweep run's Kubernetes Jobs for GKE TPU nodes: an Indexed Job that measures (one
    model and one chip per index) and a Job that judges (docs/kubernetes.md)."""
    from .core.sweep import load_sweep
    from .serving.kubernetes import JobSettings, apply_commands, write_manifests

    missing = [
        flag
        for flag, value in (("--sweep-run", args.sweep_run), ("--store", args.store))
        if value is None
    ]
    if missing:
        raise ModelsweepError(
            f"k8s: give {' and '.join(missing)} (the Jobs' pods join one "
            "sweep run in one PostgreSQL store)"
        )
    check_output_folder(args.output, "-o")
    sweep = load_sweep(args.sweep)
    settings = JobSettings(
        sweep_arg=args.sweep,
        sweep_run=args.sweep_run,
        store=args.store,
        bench_image=args.bench_image,
        models=tuple(dict.fromkeys(args.model)),
        store_secret=args.store_secret,
        hf_secret=args.hf_secret,
        namespace=args.namespace,
        pytest_args=tuple(args.pytest_arg),
    )
    try:
        paths = write_manifests(sweep, settings, Path(args.output))
    except OSError as error:
        raise write_failure("-o", args.output, error) from None
    print(
        *(f"{kind}: {path}" for kind, path in paths.items()),
        "run them (docs/kubernetes.md):",
        *(f"  {line}" for line in apply_commands(sweep, settings, paths)),
        sep="\n",
    )
    return 0


def cmd_screen(args: argparse.Namespace) -> int:
    """Screen the sweep's Hugging Face models (and any --repo) against the licence and memory
    rule of its [screening] table."""  # exit 0: all accepted, 1: any rejected, 2: usage
    from .core.sweep import load_sweep
    from .serving.screening import OfflineHub, budget_gib, screen_candidate, screening_table

    try:
        sweep = load_sweep(args.sweep)
        specs = _screened_specs(sweep, args.model, args.repo)
        hub = OfflineHub.from_file(args.offline_fixtures) if args.offline_fixtures else None
        results: list[ScreeningResult] = [
            screen_candidate(
                spec, sweep.screening, api=hub, fetch_config=hub.fetch_config if hub else None
            )
            for spec in specs
            if spec.source.kind == "hf"
        ]
    except ModelsweepError as error:
        print(f"{SCREEN}: {error}", file=sys.stderr)
        return 2
    settings = sweep.screening
    accepted = sum(r.accepted for r in results)
    skipped = [f"{s.name} ({s.source})" for s in specs if s.source.kind != "hf"]
    print(
        f"sweep {sweep.name}: licence in {', '.join(settings.licenses)}; "
        f"{settings.hbm_gib:g} GiB HBM x {settings.gpu_memory_utilization:g} = "
        f"{budget_gib(settings):.3f} GiB, of which >= {settings.kv_headroom_gib:g} GiB must "
        "stay for the KV cache; from "
        + (f"offline fixtures {args.offline_fixtures}" if hub else "the Hugging Face Hub"),
        *(screening_table(results) if results else ()),
        f"{accepted} accepted, {len(results) - accepted} rejected"
        + (
            f", {len(skipped)} not screened (not Hugging Face repos: {', '.join(skipped)})"
            if skipped
            else ""
        ),
        sep="\n",
    )
    return 0 if accepted == len(results) else 1


def _screened_specs(sweep: Sweep, models: Sequence[str], repos: Sequence[str]) -> list[ModelSpec]:
    """``--model``s of the sweep and ``--repo``s (a spec each); neither: every model."""
    from .core.sweep import ModelSpec, parse_source

    chosen = [sweep.model(name) for name in dict.fromkeys(models)]
    for text in dict.fromkeys(repos):
        source = parse_source(text if text.startswith("hf:") else f"hf:{text}", f"--repo {text}")
        name = source.id.split("/", 1)[1]
        chosen.append(
            ModelSpec(
                name=name,
                source=source,
                served_name=name,
                license="",
                prompting="chat",
                tool_call_parser=None,
                bfcl_mode="tools",
            )
        )
    return chosen or list(sweep.models.values())


def gated_benchmarks_text() -> str:
    """Which benchmarks ``compare`` judges, by kind, from the metric table."""
    yours = " and every other benchmark recorded in the unit accuracy (your own)"
    return (
        "compares "
        + "; ".join(
            f"{kind.value}: {', '.join(benchmarks_of(kind))}{yours if kind is Kind.ACCURACY else ''}"
            for kind in GATED_KINDS
            if benchmarks_of(kind)
        )
        + " (other measurements are not gated)"
    )


def _say(message: str) -> None:
    print(f"modelsweep: {message}", file=sys.stderr, flush=True)


class _Parser(argparse.ArgumentParser):
    """argparse's parser, except that ``modelsweep screen`` says a usage error in one line."""

    def error(self, message: str) -> NoReturn:
        if self.prog == SCREEN:
            self.exit(2, f"{SCREEN}: error: {message} (see {SCREEN} --help)\n")
        super().error(message)


Command = tuple[Callable[[argparse.Namespace], int], dict[str, Any], dict[str, dict[str, Any]]]
"""A sub-command: its function, its parser's keywords beyond its help (the function's
docstring), and its arguments: names (space-separated) → ``add_argument``'s keywords."""


def _add_commands(sub: Any, commands: dict[str, Command]) -> None:
    """Each sub-command ``name`` of ``commands``, run by its function."""
    for name, (func, keywords, arguments) in commands.items():
        p = sub.add_parser(name, **{"help": func.__doc__, **keywords})
        p.set_defaults(func=func, usage=p)
        for names, argument in arguments.items():
            p.add_argument(*names.split(), **argument)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="modelsweep", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    store = shared("--store", default=DEFAULTS.store)
    output = {"default": None, "metavar": "PATH"}
    _add_commands(
        sub,
        {
            "provision": (
                cmd_provision,
                {},
                {
                    "--sweep": shared("--sweep"),
                    "--build": {
                        "action": "store_true",
                        "help": "build llama-server from llama.cpp's source for this CPU (cmake "
                        "and a C++ compiler; minutes) instead of using the prebuilt xllamacpp "
                        "wheel's server; a cached build is used from then on",
                    },
                },
            ),
            "pin": (
                cmd_pin,
                {"description": cmd_pin.__doc__},
                {
                    "--sweep": shared("--sweep"),
                    "-o --output": {
                        "required": True,
                        "metavar": "FILE",
                        "help": "the pinned sweep file to write (TOML)",
                    },
                    "--no-pull": {
                        "action": "store_true",
                        "help": "do not docker pull: pin the image as this machine holds it",
                    },
                },
            ),
            "models": (cmd_models, {}, {"--sweep": shared("--sweep")}),
            "runs": (
                cmd_runs,
                {},
                {
                    "--store": store,
                    "--sweep-run": shared(
                        "--sweep-run", help="list only the runs of sweep run NAME"
                    ),
                },
            ),
            "results": (
                cmd_results,
                {},
                {
                    "path": {"help": "a results file written by --results"},
                    "--json": {"action": "store_true", "help": "print the whole document as JSON"},
                },
            ),
            "compare": (
                cmd_compare,
                {"epilog": gated_benchmarks_text()},
                {
                    "run_a": {"help": "the earlier run: id, baseline name or results file"},
                    "run_b": {"help": "the later run: id, baseline name or results file"},
                    "--fail-on-regression": shared("--fail-on-regression"),
                    "--fail-on-noisy": shared("--fail-on-noisy"),
                    "--allow-ungated": shared("--allow-ungated"),
                    "--store": store,
                },
            ),
            "merge": (
                cmd_merge,
                {},
                {
                    "runs": {"nargs": "+", "help": "run ids, baseline names or results files"},
                    "-o --output": {"required": True, "help": "the merged results file (JSON)"},
                    "--store": store,
                },
            ),
            "report": (
                cmd_report,
                {},
                {
                    "run": {"nargs": "?", "help": "run id, baseline name or results file"},
                    "--sweep-run": shared(
                        "--sweep-run",
                        help="report every run of sweep run NAME as one (instead of RUN)",
                    ),
                    "--html": {**output, "help": "write an HTML report here"},
                    "--md": {**output, "help": "write a Markdown report here"},
                    "--llm-d": {
                        **output,
                        "help": "write llm-d's Benchmark Report v0.2.1 (JSON) here",
                    },
                    "--store": store,
                },
            ),
            "history": (
                cmd_history,
                {"description": cmd_history.__doc__},
                {
                    "--sweep": {
                        "default": DEFAULTS.sweep,
                        "metavar": "NAME",
                        "help": "the sweep whose runs to read, as the store names it, or its "
                        f"file (default: {DEFAULTS.sweep})",
                    },
                    "--benchmark": {"default": None, "metavar": "B", "help": "only benchmark B"},
                    "--setting": {
                        "action": "append",
                        "default": [],
                        "type": _setting_type,
                        "metavar": "KEY=VALUE",
                        "help": "only measurements with this parameter or serving "
                        "flag, e.g. concurrency=4 (repeatable)",
                    },
                    "--html": {**output, "help": "write an HTML page here"},
                    "--md": {**output, "help": "write the Markdown here"},
                    "--json": {"action": "store_true", "help": "print the history as JSON"},
                    "--fail-on-regression": shared("--fail-on-regression"),
                    "--store": store,
                },
            ),
        },
    )
    stores = sub.add_parser("store", help="work on stores: store copy SRC DST")
    forms = "a SQLite file, sqlite:///PATH or postgresql://USER@HOST:PORT/DATABASE"
    _add_commands(
        stores.add_subparsers(dest="store_command", required=True),
        {
            "copy": (
                cmd_store_copy,
                {"description": cmd_store_copy.__doc__},
                {
                    "source": {
                        "type": store_location_type,
                        "metavar": "SRC",
                        "help": f"the store to copy from: {forms}",
                    },
                    "target": {
                        "type": store_location_type,
                        "metavar": "DST",
                        "help": f"the store to copy into (made when new): {forms}",
                    },
                    "--existing": {
                        "choices": ("refuse", "skip", "replace"),
                        "default": "refuse",
                        "help": "a run DST already holds: refuse the copy (default), skip it "
                        "(keep DST's), or replace it with SRC's",
                    },
                },
            )
        },
    )
    repeatable_model = {"action": "append", "default": [], "metavar": "NAME"}
    _add_commands(
        sub,
        {
            "k8s": (
                cmd_k8s,
                {"description": cmd_k8s.__doc__},
                {
                    "--sweep": shared("--sweep"),
                    "--sweep-run": shared(
                        "--sweep-run", help="the sweep run every pod joins (required)"
                    ),
                    "--store": shared("--store"),
                    "--bench-image": {
                        "required": True,
                        "metavar": "IMAGE",
                        "help": "the image the bench and judge containers run: "
                        "pytest-modelsweep[postgres,html] and your benches/ in its working folder",
                    },
                    "--model": {
                        **repeatable_model,
                        "help": "a model to measure (repeatable; default: every model of the "
                        "sweep)",
                    },
                    "-o --output": {
                        "default": ".",
                        "metavar": "DIR",
                        "help": "where to write the two manifests (default: .)",
                    },
                    "--namespace": {
                        "default": None,
                        "help": "the Jobs' namespace (default: kubectl's)",
                    },
                    "--store-secret": {
                        "default": "modelsweep-store",
                        "metavar": "NAME",
                        "help": "the Secret whose key 'password' holds the store's password "
                        "(default: modelsweep-store)",
                    },
                    "--hf-secret": {
                        "default": "hf-token",
                        "metavar": "NAME",
                        "help": "the Secret whose key 'token' is HF_TOKEN for gated models; "
                        "optional (default: hf-token)",
                    },
                    "--pytest-arg": {
                        "action": "append",
                        "default": [],
                        "metavar": "ARG",
                        "help": "an argument added to every pod's pytest command, e.g. "
                        "--limit=100 (repeatable)",
                    },
                },
            ),
            "screen": (
                cmd_screen,
                {
                    "help": f"screen the sweep's candidates (licence, memory); see {SCREEN} --help",
                    "description": cmd_screen.__doc__,
                },
                {
                    "--sweep": {
                        "default": None,
                        "metavar": "NAME|PATH",
                        "help": "sweep file (TOML) or built-in sweep: embedded (default), tpu-v5e",
                    },
                    "--model": {
                        **repeatable_model,
                        "help": "screen only this model of the sweep (repeatable)",
                    },
                    "--repo": {
                        "action": "append",
                        "default": [],
                        "metavar": "ORG/REPO[@REV]",
                        "help": "also screen this Hub repo, which need not be in the sweep "
                        "(repeatable; alone, only the repos are screened)",
                    },
                    "--offline-fixtures": {
                        "default": None,
                        "metavar": "PATH",
                        "help": "answer from recorded Hub answers (JSON) instead of the network",
                    },
                },
            ),
        },
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # said by screen's own parser, which says it in one line
        (args.usage if args.command == "screen" else parser).error(
            f"unrecognized arguments: {' '.join(unknown)}"
        )
    interrupted = False

    def on_interrupt(signum: int, frame: object) -> None:
        nonlocal interrupted
        interrupted = True
        raise KeyboardInterrupt

    # a library that turns the interrupt into its own error (a database driver's "connection
    # failed") still ends the command as interrupted
    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        return int(args.func(args))
    except ModelsweepError as error:
        if not interrupted:
            print(f"modelsweep: error: {error}", file=sys.stderr)
            return 2
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGINT, previous)
    print(f"modelsweep {args.command}: interrupted (Ctrl-C)", file=sys.stderr)
    return INTERRUPTED


if __name__ == "__main__":
    raise SystemExit(main())
