"""``llmp calibrate MEASURED.csv [...] -o STACK.json [--residuals DIR | --no-residuals] [--source NAME ...] [--json]``,
and ``llmp calibrate --suggest N --spec SPEC [--gpus G ...] [--set ...]``.

Fits a calibration of one stack on one cluster from its measured steps (rows in the
published-measurement schema, e.g. what ``llmp measure --csv`` appends): the tensor-core and
memory-bound kernels' efficiency, the intra- and inter-node communication efficiency and a fixed
per-step overhead, shrunk toward the uncalibrated model (``llmp.calibrate``). Prints the factors,
and each row's measured, zero-shot and calibrated step time; writes STACK.json for
``llmp predict/search/validate --calibration STACK.json``. Rows of several GPUs or stacks,
contradictory rows and rows llmp cannot model are refused (exit 1) with the rows named.

``--suggest N`` measures nothing and fits nothing: it lists the N layouts of SPEC worth running
first, those whose steps lean on different factors (``llmp.calibrate.suggest``).
"""

from __future__ import annotations

import argparse
import json
import math

from llmp import files
from llmp.calibrate import calibrate
from llmp.calibrate.suggest import suggest
from llmp.commands.flags import add_quiet, add_residuals, residuals_of
from llmp.dsl import add_set_argument
from llmp.errors import InputError
from llmp.progress import bar
from llmp.units import format_time


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("csv", nargs="*", metavar="MEASURED.csv",
                        help="measured steps of one stack on one cluster (published-measurement schema)")
    parser.add_argument("-o", "--output", metavar="STACK.json", help="where to write the calibration")
    plan = parser.add_argument_group("choosing the runs to measure")
    plan.add_argument("--suggest", type=int, metavar="N",
                      help="list the N layouts of --spec worth measuring first (most informative about the factors)")
    plan.add_argument("--spec", metavar="SPEC.llmp", help="with --suggest: the spec whose layouts are candidates")
    plan.add_argument("--gpus", type=int, nargs="+", default=[], metavar="G",
                      help="with --suggest: layouts on G GPUs (default: the spec's own count)")
    add_set_argument(parser)
    add_residuals(parser, store_help="residual store the predictions it corrects are made with (default: as llmp "
                                     "predict)",
                  bare_help="calibrate the bare roofline composition only")
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
              f"how far the runs moved the prior: shared shift x{post.scale_shift:.3g} of its zero-shot variance, "
              f"each group's own x{post.scale_contrast:.3g} (0: held at the uncalibrated model)",
              f"run-to-run spread (log sd, one new run) {post.noise:.3f}", "",
              f"{'row':<36}{'measured':>12}{'zero-shot':>12}{'calibrated':>12}"]
    for r in basis.rows:
        lines.append(f"{r.key:<36}{format_time(r.measured_s):>12}{format_time(r.predicted_s):>12}"
                     f"{format_time(r.calibrated_s):>12}")
    return "\n".join(lines)


def _suggestion(s) -> str:
    lines = [f"{len(s.picks)} of {s.candidates} feasible layouts of {s.spec} worth measuring, in this order:", ""]
    for i, p in enumerate(s.picks, 1):
        leans = ", ".join(f"{k} {v:.2f}" for k, v in p.shares.items() if abs(v) >= 0.01)
        lines += [f"{i}. llmp predict {s.spec} " + " ".join(f"--set {o}" for o in p.overrides),
                  f"   predicted {format_time(p.step_time_s)}; its step leans on: {leans}; adds {p.gain:.2f} nats"]
    lines += ["", "what the runs would leave unknown (80% factor range, before -> after measuring them):"]
    for k in s.prior_sd:
        lines.append(f"  {k:<10} x{math.exp(1.2816 * s.prior_sd[k]):.2f} -> x{math.exp(1.2816 * s.expected_sd[k]):.2f}"
                     if k != "overhead" else
                     f"  {k:<10} {s.prior_sd[k]:.2f} -> {s.expected_sd[k]:.2f} of the shortest step")
    lines.append("\nmeasure them (llmp measure, or your own logs), then: llmp calibrate MEASURED.csv -o STACK.json")
    return "\n".join(lines)


def _suggest(args: argparse.Namespace) -> int:
    if args.spec is None:
        raise InputError("--suggest needs the spec whose layouts to choose from", hint="add --spec SPEC.llmp")
    if args.csv or args.output:
        raise InputError("--suggest proposes runs to measure; it reads no measurements and writes no calibration",
                         hint="drop the CSV files and -o, or drop --suggest to calibrate")
    with bar("pricing candidate runs", quiet=args.quiet) as advance:
        result = suggest(args.spec, args.suggest, gpus=args.gpus, sets=args.set,
                         residuals=residuals_of(args), progress=advance)
    print(json.dumps(result.to_dict(), indent=1) if args.json else _suggestion(result))
    return 0


def run(args: argparse.Namespace) -> int:
    if args.suggest is not None:
        return _suggest(args)
    if not args.csv or args.output is None:
        raise InputError("calibrate needs measured steps and where to write the calibration",
                         hint="llmp calibrate MEASURED.csv -o STACK.json (or --suggest N --spec SPEC to plan the runs)")
    files.output_file(args.output, "the calibration")
    with bar("calibrating", quiet=args.quiet) as advance:
        cal = calibrate(args.csv, residuals=residuals_of(args), sources=args.source,
                        progress=advance)
    path = cal.save(args.output)
    if args.json:
        print(json.dumps(cal.to_dict(), indent=1))
    else:
        print(_table(cal))
        print(f"\nwrote {path}; apply it with: llmp predict SPEC --calibration {path}")
    return 0
