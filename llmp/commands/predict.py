"""``llmp predict SPEC [--set ...] [--residuals DIR | --no-residuals] [--json] [--trace OUT.json]``.

Residual models: ``--residuals DIR`` applies a store written by ``llmp fit``; without it, the
shipped default store of the spec's catalog device is applied when one ships
(``llmp/hardware/defaults/<id>/``); ``--no-residuals`` gives the bare analytic composition.
The provenance always says which.

Prints the step time, throughput, MFU, where the time goes, memory per GPU (with the OOM flag),
the band and the provenance; ``--json`` prints :meth:`Prediction.to_dict` (keys per the CLI
contract: step_time_s, tokens_per_s, mfu, memory_per_gpu_bytes, breakdown, band, provenance);
``--trace`` writes the predicted step as a Chrome-trace / Perfetto JSON.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys

from llmp.compose import predict
from llmp.compose.correction import Residuals
from llmp.compose.trace import write_trace
from llmp.dsl import add_set_argument, load_args
from llmp.errors import InputError, LlmpError
from llmp.hardware import catalog


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", metavar="SPEC", help="a .llmp file")
    add_set_argument(parser)
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--residuals", metavar="DIR",
                       help="residual model store written by `llmp fit` (default: the shipped one for the "
                            "spec's device, when present)")
    which.add_argument("--no-residuals", action="store_true",
                       help="roofline composition only, even where shipped residual models exist")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--trace", metavar="OUT.json", help="write the step timeline as Chrome-trace JSON")


def load_residuals(directory: str) -> Residuals:
    """The residual store at ``directory`` (imported lazily: xgboost only when asked for)."""
    try:
        store = importlib.import_module("llmp.residuals.store")
    except ModuleNotFoundError as err:
        raise LlmpError(f"residual models cannot be loaded: {err}",
                        hint="install llmp with its dependencies (xgboost), or predict without --residuals") from None
    return store.load(directory)


def shipped_residuals(device_id: str) -> Residuals | None:
    """The shipped default store for a catalog device, or None; xgboost is imported only when
    a store ships for it."""
    if not (catalog.defaults_dir(device_id) / "manifest.json").is_file():
        return None
    return importlib.import_module("llmp.residuals.store").default_for(device_id)


def run(args: argparse.Namespace) -> int:
    spec = load_args(args)
    if args.residuals:
        residuals = load_residuals(args.residuals)
    else:
        residuals = None if args.no_residuals else shipped_residuals(spec.cluster.gpu.id)
    pred = predict(spec, residuals)
    if args.trace:
        try:
            write_trace(pred, args.trace)
        except OSError as err:
            raise InputError(f"cannot write the trace to {args.trace}: {err.strerror}") from None
    if args.json:
        print(json.dumps(pred.to_dict(), indent=2))
    else:
        print(pred.to_table())
        if args.trace:
            print(f"\ntrace written to {args.trace} (open in ui.perfetto.dev or chrome://tracing)", file=sys.stderr)
    return 0
