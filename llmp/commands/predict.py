"""``llmp predict SPEC [--set ...] [--residuals DIR] [--json] [--trace OUT.json]``.

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


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", metavar="SPEC", help="a .llmp file")
    add_set_argument(parser)
    parser.add_argument("--residuals", metavar="DIR", help="residual model store written by `llmp fit`")
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


def run(args: argparse.Namespace) -> int:
    spec = load_args(args)
    residuals = load_residuals(args.residuals) if args.residuals else None
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
