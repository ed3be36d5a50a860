"""``llmp predict SPEC [--set ...] [--residuals DIR | --no-residuals] [--level P] [--calibration STACK.json]
[--json] [--trace OUT.json]``.

Residual models: ``--residuals DIR`` applies a store written by ``llmp fit`` (refused when it was
not fitted for the spec's device); without it, the default of ``llmp.predict`` applies: the store
shipped for the spec's device (``llmp/hardware/defaults/<id>/``) if it serves the spec's
numbers, else the shipped cross-GPU store, else none. ``--no-residuals`` gives the bare
analytic composition. The provenance says which store, why, what it covered and which ops lay
outside the shapes it was fitted on.

Prints the step time, throughput, MFU, where the time goes, memory per GPU (with the OOM flag),
the band (``band [a, b] (80%)``: ``--level`` sets how often it should hold the real step; where
its width comes from follows the provenance) and the provenance; ``--calibration`` applies a
calibration written by ``llmp calibrate`` (its factors, overhead and posterior band);
``--json`` prints :meth:`Prediction.to_dict` (keys per the CLI contract: step_time_s,
tokens_per_s, mfu, memory_per_gpu_bytes, breakdown, band, provenance; plus band_level and
band_detail);
``--trace`` writes the predicted step as a Chrome-trace / Perfetto JSON.
"""

from __future__ import annotations

import argparse
import json
import sys

from llmp import files
from llmp.commands.flags import add_residuals, residuals_of
from llmp.compose import predict
from llmp.compose.trace import write_trace
from llmp.dsl import add_set_argument, load_args
from llmp.errors import InputError


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", metavar="SPEC", help="a .llmp file")
    add_set_argument(parser)
    add_residuals(parser, store_help="residual model store written by `llmp fit` (default: the store shipped for "
                                     "the spec's device, else the shipped cross-GPU store)",
                  bare_help="roofline composition only, even where shipped residual models exist")
    parser.add_argument("--level", type=float, default=0.8, metavar="P",
                        help="how often the band should hold the real step (default 0.8)")
    parser.add_argument("--calibration", metavar="STACK.json",
                        help="apply a calibration written by llmp calibrate (same GPU, stack and residual store)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--trace", metavar="OUT.json", help="write the step timeline as Chrome-trace JSON")


def run(args: argparse.Namespace) -> int:
    if args.trace:
        files.output_file(args.trace, "--trace")
    spec = load_args(args)
    pred = predict(spec, residuals_of(args), level=args.level,
                   calibration=args.calibration)
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
