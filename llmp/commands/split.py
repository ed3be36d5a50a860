"""``llmp split SAMPLES... --by shape --test 0.5 --seed S -o DIR``: held-out halves by shape.

Writes ``DIR/train`` and ``DIR/test`` (sample directories in the format they were read in) and
``DIR/split.json``; every row of a shape lands on one side. Library: ``llmp.residuals.split``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from llmp.commands.flags import open_unit_interval
from llmp.residuals import split
from llmp.residuals.split import BY


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("samples", nargs="+", type=Path, help="sample directories or files")
    parser.add_argument("-o", "--out", type=Path, required=True, help="directory to write train/ and test/ into")
    parser.add_argument("--by", choices=BY, default="shape", help="what is held out whole (default shape)")
    parser.add_argument("--test", type=open_unit_interval, default=0.5, help="share of the shapes held out")
    parser.add_argument("--seed", type=int, default=0, help="seed of the hash that picks the held-out shapes")
    parser.add_argument("--json", action="store_true", help="print the split's record as JSON")


def run(args: argparse.Namespace) -> int:
    report = split.split(args.samples, args.out, by=args.by, test=args.test, seed=args.seed)
    if args.json:
        print(json.dumps(report.to_dict(), indent=1))
    else:
        for side in split.SIDES:
            print(f"{side}: {report.rows[side]} rows of {report.shapes[side]} shapes -> {report.out / side}")
    return 0
