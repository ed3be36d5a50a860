"""``llmp validate CSV... [--json] [--plot OUT] [--residuals DIR] [--source NAME ...] [--specs DIR]
[--calibration STACK.json]``.

Scores llmp against measured runs in the published-measurement schema (``validation/*.csv``,
or rows ``llmp measure`` appended): per row the predicted and measured step time and the error
``predicted/measured − 1``, then MAPE, median and max |error| per source and per GPU, the worst
rows, and every skipped row with its reason; stderr counts the skipped rows per reason with their
line numbers whatever the output format, so no row is dropped unmentioned. Exit 0 when at least
one row was predicted, whatever the errors; 1 for bad input (missing file, wrong header, text in a
numeric column) or when no row could be predicted (the report still prints, and stderr says why).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from llmp import files
from llmp.commands.flags import add_quiet
from llmp.errors import InputError
from llmp.plotting import plot_path, pyplot
from llmp.progress import bar
from llmp.validate import plot, score, text


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("csv", nargs="+", metavar="CSV", help="CSV files in the published-measurement schema")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--plot", metavar="OUT", help="write predicted vs measured (log-log) to OUT (.png/.pdf/.svg)")
    parser.add_argument("--residuals", metavar="DIR", default="default",
                        help="residual model store to correct the roofline with; 'default' (as llmp predict) "
                             "uses the store shipped for each row's GPU, rows on GPUs without one stay "
                             "roofline-only; 'none' scores the bare roofline composition")
    parser.add_argument("--source", nargs="+", action="extend", default=[], metavar="NAME",
                        help="only rows whose source column is NAME (repeatable)")
    parser.add_argument("--specs", metavar="DIR", help="also write each mapped row's generated .llmp spec to DIR")
    parser.add_argument("--summary", action="store_true", help="aggregates only, no per-row table")
    parser.add_argument("--calibration", metavar="STACK.json",
                        help="apply a calibration written by llmp calibrate (rows of other GPUs or stacks are skipped)")
    add_quiet(parser)


def _write_specs(report, directory: str) -> None:
    out = Path(directory)
    if out.exists() and not out.is_dir():
        raise InputError(f"--specs {directory} is a file", label="bad --specs", hint="give a directory")
    out.mkdir(parents=True, exist_ok=True)
    for r in report.rows:
        (out / f"{r.key.replace(':', '_')}.llmp").write_text(r.mapped.text, encoding="utf-8")


def run(args: argparse.Namespace) -> int:
    if args.plot:
        plot_path(args.plot)
        pyplot()  # fail before scoring when matplotlib is missing
    if args.specs:
        files.output_dir(args.specs, "--specs")
    with bar("validating", quiet=args.quiet) as advance:
        report = score.validate(args.csv, residuals=args.residuals, sources=args.source, calibration=args.calibration,
                                progress=advance)
    if args.specs:
        _write_specs(report, args.specs)
    if args.plot:
        plot.plot(report, args.plot)
    if args.json:
        print(json.dumps(report.to_dict(), indent=1))
    else:
        print(text.render(report, per_row=not args.summary))
    if not report.rows:
        raise InputError(f"nothing predicted: all {len(report.skipped)} measurements were skipped "
                         f"({score.skip_summary(report.skipped)})", label="nothing to score",
                         hint="each skipped row's reason is in the report above; fix or remove those rows, or "
                              "choose rows llmp can model (--source)")
    if report.skipped:
        print(f"llmp validate: note: {len(report.rows)} measurements predicted, {len(report.skipped)} skipped: "
              f"{score.skip_summary(report.skipped)}", file=sys.stderr)
    return 0
