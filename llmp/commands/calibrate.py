"""``llmp calibrate MEASURED.csv [...] -o STACK.json [--residuals DIR | --no-residuals] [--source NAME ...] [--json]``.

Fits a calibration of one stack on one cluster from its measured steps (rows in the
published-measurement schema, e.g. what ``llmp measure --csv`` appends): the tensor-core and
memory-bound kernels' efficiency, the intra- and inter-node communication efficiency and a fixed
per-step overhead, shrunk toward the uncalibrated model (``llmp.calibrate``). Prints the factors,
and each row's measured, zero-shot and calibrated step time; writes STACK.json for
``llmp predict/search/validate --calibration STACK.json``. Rows of several GPUs or stacks,
contradictory rows and rows llmp cannot model are refused (exit 1) with the rows named.
"""

from __future__ import annotations

import argparse
import json
import math

from llmp import files
from llmp.commands.flags import add_quiet
from llmp.progress import bar
from llmp.units import format_time


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("csv", nargs="+", metavar="MEASURED.csv",
                        help="measured steps of one stack on one cluster (published-measurement schema)")
    parser.add_argument("-o", "--output", required=True, metavar="STACK.json", help="where to write the calibration")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--residuals", metavar="DIR", default="default",
                       help="residual store the predictions it corrects are made with (default: as llmp predict)")
    which.add_argument("--no-residuals", action="store_true",
                       help="calibrate the bare roofline composition only")
    parser.add_argument("--source", nargs="+", action="extend", default=[], metavar="NAME",
                        help="only rows whose source column is NAME (repeatable)")
    parser.add_argument("--json", action="store_true", help="print the calibration as JSON")
    add_quiet(parser)


def _table(cal) -> str:
    basis = cal.bases[0]
    post = basis.posterior
    lines = [f"calibrated {cal.stack} on {cal.gpu} from {post.rows} measured step{'s' if post.rows != 1 else ''} "
             f"(predictions made with: {basis.residuals})", "",
             "factor (measured / predicted time of the group's ops)"]
    for i, (group, factor) in enumerate(post.factors.items()):
        sd = math.sqrt(max(post.covariance[i][i], 0.0))
        lines.append(f"  {group:<10} x{factor:6.3f}   (x{math.exp(-1.2816 * sd):.2f} .. x{math.exp(1.2816 * sd):.2f} "
                     f"about it, 80%)")
    overhead = (f"{format_time(post.overhead_s)} per step" if post.overhead_s > 0 else
                "none (runs of these lengths do not show one)")
    lines += [f"  {'overhead':<10} {overhead}   (log Bayes factor for an overhead {post.overhead_log_bayes:+.2f})",
              f"run-to-run spread (log sd) {post.noise:.3f}", "",
              f"{'row':<36}{'measured':>12}{'zero-shot':>12}{'calibrated':>12}"]
    for r in basis.rows:
        lines.append(f"{r.key:<36}{format_time(r.measured_s):>12}{format_time(r.predicted_s):>12}"
                     f"{format_time(r.calibrated_s):>12}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from llmp.calibrate import calibrate

    files.output_file(args.output, "the calibration")
    with bar("calibrating", quiet=args.quiet) as advance:
        cal = calibrate(args.csv, residuals="none" if args.no_residuals else args.residuals, sources=args.source,
                        progress=advance)
    path = cal.save(args.output)
    if args.json:
        print(json.dumps(cal.to_dict(), indent=1))
    else:
        print(_table(cal))
        print(f"\nwrote {path}; apply it with: llmp predict SPEC --calibration {path}")
    return 0
