"""``llmp import-samples --format seed|vidur|kernels PATH... [--gpu ID] [--node ID] -o DIR``: GPU
measurements in a known format -> an llmp sample directory that ``llmp fit`` reads like one
``llmp sample`` wrote. ``--gpu`` takes a catalog id, an alias (``gh200``) or a driver product name
(``llmp.hardware.names``); the seed's files name their GPU in their prefix, so there it is optional.

PATH are files or directories (walked recursively). The directory is replaced atomically, and a
rerun on the same inputs writes the same bytes. ``DIR/import.json`` records, per input file, the
rows read, written and skipped (with reasons) and the duplicates merged.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from llmp.residuals import importers
from llmp.residuals.importers import FORMATS
from llmp.units import format_bytes


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="source files or directories")
    parser.add_argument("--format", required=True, choices=FORMATS, dest="fmt",
                        help="seed: estimate-train-time <GPU>_<op>_fp16.csv and <GPU>_<coll>_fp16_<N>_<M>.csv; "
                             "vidur: compute/<gpu>/<org>/<model>/mlp.csv and "
                             "network/<node>/{all_reduce,send_recv}.csv; kernels: the shared data's kernels.csv")
    parser.add_argument("--gpu", "--device", dest="device", metavar="ID",
                        help="the GPU the rows were measured on: catalog id or alias (seed: default from the "
                             "file prefix)")
    parser.add_argument("--gpu-id", metavar="GPU", help="kernels: the data's gpu_id, when it differs from --gpu")
    parser.add_argument("--node", "--node-id", dest="node_id", metavar="NODE",
                        help="catalog node the collective rows ran on (default per source)")
    parser.add_argument("-o", "--out", type=Path, required=True, help="sample directory to write (replaced)")
    parser.add_argument("--json", action="store_true", help="print import.json instead of a summary")


def run(args: argparse.Namespace) -> int:
    report = importers.run(args.fmt, args.paths, args.out, device=args.device, gpu_id=args.gpu_id,
                           node_id=args.node_id)
    if args.json:
        print(json.dumps(report.manifest, indent=1, sort_keys=True))
    else:
        print(render(report))
    return 0


def render(report) -> str:
    """A human summary: rows written per family/pass, skipped per reason, notes, size."""
    m = report.manifest
    written = m["rows_written"]
    lines = [f"imported {sum(written.values())} rows for {m['device_id']} ({m['format']}) into {report.out} "
             f"({format_bytes(report.bytes)}; {m['duplicates_merged']} duplicates merged)"]
    width = max(map(len, written), default=0)
    for name, n in written.items():
        lines.append(f"  {name:<{width}} {n:>7}")
    if m["skipped"]:
        lines.append("skipped (measured values):")
        for reason, n in sorted(m["skipped"].items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append(f"  {n:>7}  {reason}")
    if m["ignored_files"]:
        lines.append(f"ignored {len(m['ignored_files'])} files that are not {m['format']} files: "
                     + ", ".join(m["ignored_files"][:6]) + (" ..." if len(m["ignored_files"]) > 6 else ""))
    for note in m["notes"]:
        lines.append(f"note: {note}")
    return "\n".join(lines)
