"""``llmp score DIR... [--residuals STORE|default|none] [--by FIELDS] [--rows OUT.csv] [--json]``.

For every measured sample (``llmp sample`` or ``llmp import-samples`` files) the store's
prediction and the roofline alone are compared with the measured time; MAPE, median, p90 of
|predicted / measured - 1| and its signed mean (bias) are reported per family, per operator
(family and variant), per pass and overall, with the rows counted; ``--by operator,pass`` groups
them as ``llmp fit`` adapts, and ``--rows`` writes every sample's prediction. ``--residuals``
defaults to the store ``llmp predict`` would use for the samples' device; a store that does not
serve that device is refused (exit 1).
Library: ``llmp.residuals.score``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from llmp.commands.flags import add_quiet
from llmp.progress import bar
from llmp.residuals import dataset, score


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("samples", nargs="+", type=Path, help="sample directories or files")
    parser.add_argument("--residuals", metavar="STORE", default="default",
                        help="residual store to score: a directory, 'default' (as llmp predict) or 'none' "
                             "(the roofline alone)")
    parser.add_argument("--device-id", help="catalog id of the sampled device (overrides the files' record)")
    parser.add_argument("--node-id", help="catalog node the collectives ran on (default cpu_host for cpu)")
    parser.add_argument("--families", help="comma-separated subset of families/collective kinds to score")
    parser.add_argument("--by", metavar="FIELDS",
                        help="also group by these comma-separated fields (operator,pass is the unit fit adapts): "
                             "family, operator, pass, dtype, device, layout")
    parser.add_argument("--rows", type=Path, metavar="OUT.csv",
                        help="write every scored sample's measured, predicted and roofline time to this CSV")
    parser.add_argument("--json", action="store_true", help="print the scores as JSON")
    add_quiet(parser)


def run(args: argparse.Namespace) -> int:
    families = [f.strip() for f in args.families.split(",")] if args.families else None
    by = score.parse_by(args.by) if args.by is not None else ()  # before reading any sample
    with bar("scoring", quiet=args.quiet) as advance:
        data = dataset.load(args.samples, device_id=args.device_id, node_id=args.node_id, families=families)
        result = score.score(data.observations, args.residuals, by=by, progress=advance)
    if args.rows is not None:
        score.write_rows(result, data.observations, args.rows)
    if args.json:
        print(json.dumps({**result.to_dict(), "files": list(data.files), "rows_skipped": data.skipped}, indent=1))
    else:
        print(result.to_table())
        for reason, n in data.skipped.items():
            print(f"skipped {n} rows: {reason}")
    return 0
