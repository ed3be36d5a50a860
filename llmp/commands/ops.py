"""``llmp ops SPEC [--set ...] [--json]``: the operators of one step with their analytic costs.

One row per operator: where it runs (scope: per layer, first/last chunk, pipeline boundary,
per rank), its phase, calls per scope unit, FLOPs and bytes per call, arithmetic intensity,
roofline (kernels) or alpha-beta (collectives) time per call, and what bounds it.
"""

from __future__ import annotations

import argparse
import json

from llmp.compose import ops
from llmp.compose.prediction import OpRow
from llmp.dsl import add_set_argument, load_args
from llmp.units import format_bytes, format_count, format_time


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", metavar="SPEC", help="a .llmp file")
    add_set_argument(parser)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _scope(r: OpRow) -> str:
    return r.scope if r.rank_kind is None else f"{r.scope}:{r.rank_kind}"


def render(rows: tuple[OpRow, ...]) -> str:
    # the op and scope columns as wide as their longest entry ('rank:middle'), so none runs into the next
    nw = max([42, *(len(r.name) for r in rows)]) + 2
    sw = max([5, *(len(_scope(r)) for r in rows)]) + 2
    head = (f"{'op':<{nw}}{'scope':<{sw}}{'phase':<8}{'count':>8}{'FLOPs':>10}{'bytes':>11}"
            f"{'FLOP/B':>8}{'time':>11}  bound")
    lines = [head, "-" * len(head)]
    for r in rows:
        ai = r.intensity
        lines.append(f"{r.name:<{nw}}{_scope(r):<{sw}}{r.phase:<8}{format_count(r.count):>8}"
                     f"{format_count(r.flops) if r.flops else '-':>10}{format_bytes(r.bytes, binary=False):>11}"
                     f"{f'{ai:.0f}' if ai is not None else '-':>8}{format_time(r.roofline_s):>11}  {r.bound}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    rows = ops(load_args(args))
    if args.json:
        print(json.dumps([dict(r.to_dict(), intensity=r.intensity) for r in rows], indent=2))
    else:
        print(render(rows))
    return 0
