"""The ``modelsweep`` command: provision the embedded default, list runs, print results, screen.

It shares its option builders with the plugin (``--sweep``, ``--store``) and
reads the same store and results files; nothing here imports pytest.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from .errors import ModelsweepError


def _add_sweep(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sweep", default=None, metavar="PATH",
                        help="sweep file (TOML) or built-in sweep: embedded (default), tpu-v5e")


def _add_store(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", default=".modelsweep/store.sqlite", metavar="PATH",
                        help="the SQLite store (default: .modelsweep/store.sqlite)")


def cmd_provision(args: argparse.Namespace) -> int:
    """Build llama-server and fetch the embedded models now, instead of at the first test."""
    from .serving.provision import ensure_embedded_model, ensure_llama_server
    from .sweep import load_sweep

    sweep = load_sweep(args.sweep)
    print(f"llama-server: {ensure_llama_server(_say)}")
    for name, spec in sweep.models.items():
        if spec.source.kind == "embedded":
            model = ensure_embedded_model(spec.source.id, _say)
            print(f"{name}: {model.path} (sha256 {model.sha256[:12]}…, from {model.package})")
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    """List the models of a sweep with how each is served and prompted."""
    from .sweep import load_sweep

    sweep = load_sweep(args.sweep)
    print(f"sweep {sweep.name} ({sweep.path}): reference {sweep.reference}")
    for name, spec in sweep.models.items():
        role = "reference" if name == sweep.reference else "candidate"
        print(f"  {name:<16} {role:<9} {sweep.backend_of(name):<11} {spec.prompting:<10} "
              f"tools={spec.tool_call_parser or '-':<14} bfcl={spec.bfcl_mode:<6} {spec.source}")
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    """List the runs in the store."""
    from .store import Store

    path = Path(args.store)
    if not path.is_file():
        raise ModelsweepError(f"{path}: no store there; run pytest benches first or pass --store")
    for run in Store(path).runs():
        print(f"{run['run_id']}  {run['started_at']}  {run['sweep_name']:<10} "
              f"{run['measurements']} measurements")
    return 0


def cmd_results(args: argparse.Namespace) -> int:
    """Print the measurement table of a results file (or an interrupted run's journal)."""
    from .report.terminal import measurement_table
    from .results import load_results

    data = load_results(Path(args.path))
    if args.json:
        json.dump(data, sys.stdout, indent=1)
        print()
        return 0
    run = data.get("run", {})
    print(f"run {run.get('run_id', '?')}, sweep {run.get('sweep_name', '?')}, "
          f"commit {str((run.get('project') or {}).get('commit'))[:12]}")
    for line in measurement_table(data["measurements"]):
        print(line)
    return 0


def _say(message: str) -> None:
    print(f"modelsweep: {message}", file=sys.stderr, flush=True)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="modelsweep", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("provision", help=cmd_provision.__doc__)
    _add_sweep(p)
    p.set_defaults(func=cmd_provision)
    p = sub.add_parser("models", help=cmd_models.__doc__)
    _add_sweep(p)
    p.set_defaults(func=cmd_models)
    p = sub.add_parser("runs", help=cmd_runs.__doc__)
    _add_store(p)
    p.set_defaults(func=cmd_runs)
    p = sub.add_parser("results", help=cmd_results.__doc__)
    p.add_argument("path", help="a results file written by --results")
    p.add_argument("--json", action="store_true", help="print the whole document as JSON")
    p.set_defaults(func=cmd_results)
    sub.add_parser("screen", help="screen the sweep's candidates (licence, memory); "
                                  "see modelsweep screen --help", add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["screen"]:
        from .screening import screen_main

        return screen_main(args_list[1:])
    parser = build_parser()
    args = parser.parse_args(args_list)
    try:
        return int(args.func(args))
    except ModelsweepError as error:
        print(f"modelsweep: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
