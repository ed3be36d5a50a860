"""``llmp plan SPEC --tokens 15T [--gpus N | --deadline 30d] [--price-per-gpu-hour X]
[--power tdp|utilisation [--idle-fraction F]] [--max-gpus N] [--json] [--plot OUT.png] [--set ...]``.

How long and how much a whole training run costs: the best layout for the GPU count (or the
fewest GPUs that meet the deadline), then wall-clock days, GPU-hours, energy and cost, each with
the band of the step-time prediction. Everything is computed by :func:`llmp.planning.plan`.
"""

from __future__ import annotations

import argparse
import json

from llmp import dsl
from llmp.dsl import add_set_argument
from llmp.planning import MAX_GPUS, plan
from llmp.planning.power import PowerModel

PLOT_COUNTS = (0.25, 0.5, 2.0, 4.0)
"""With --plot and a given count, also evaluate these multiples of it (whole nodes) for the curve."""


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", metavar="SPEC", help="a .llmp file")
    parser.add_argument("--tokens", required=True, metavar="T",
                        help="tokens to train: 15T, 300B, 1.5e12 (K, M, B or G, T, P suffixes)")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--gpus", type=int, metavar="N", help="plan on N GPUs (default: the spec's own count)")
    target.add_argument("--deadline", metavar="D",
                        help="find the fewest GPUs that finish within D: 36h, 30d or 2w")
    parser.add_argument("--price-per-gpu-hour", type=float, metavar="X", help="price of one GPU-hour (for the cost)")
    parser.add_argument("--power", choices=[m.value for m in PowerModel], default=PowerModel.TDP.value,
                        help="power per GPU: tdp (every GPU at its TDP, the published convention; default) or "
                             "utilisation (idle + (TDP - idle) x busy fraction; needs --idle-fraction)")
    parser.add_argument("--idle-fraction", type=float, metavar="F",
                        help="idle power as a fraction of TDP, for --power utilisation (measure it on your GPUs)")
    parser.add_argument("--max-gpus", type=int, default=MAX_GPUS, metavar="N",
                        help=f"largest GPU count a deadline search considers (default {MAX_GPUS})")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--plot", metavar="OUT.png",
                        help="write days and cost against the GPU count (needs matplotlib, the [plot] extra)")
    add_set_argument(parser)


def _curve(args: argparse.Namespace) -> list[int]:
    """For --plot on a GPU count: whole-node multiples of it (a deadline search plots its scan)."""
    if not args.plot or args.deadline is not None:
        return []
    spec = dsl.load(args.spec, args.set)
    per_node = int(spec.cluster.node.gpus_per_node)
    count = args.gpus if args.gpus is not None else int(spec.world_size)
    return sorted({max(per_node, int(count * f) // per_node * per_node) for f in PLOT_COUNTS} - {count})


def run(args: argparse.Namespace) -> int:
    if args.plot:
        from llmp.plotting import pyplot

        pyplot()  # fail before the search when matplotlib is missing
    result = plan(args.spec, tokens=args.tokens, gpus=args.gpus, deadline=args.deadline,
                  price_per_gpu_hour=args.price_per_gpu_hour, sets=args.set, power_model=args.power,
                  idle_fraction=args.idle_fraction, max_gpus=args.max_gpus, curve=_curve(args))
    if args.plot:
        from llmp.planning.plot import plot

        plot(result, args.plot)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(result.to_table())
        if args.plot:
            print(f"plot written to {args.plot}")
    return 0
