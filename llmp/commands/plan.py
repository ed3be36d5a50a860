"""``llmp plan SPEC --tokens 15T [--gpus N | --deadline 30d] [--price-per-gpu-hour X]
[--power tdp|utilisation [--idle-fraction F]] [--max-gpus N] [--mttf D[@N]] [--checkpoint auto|sync|async]
[--storage-bandwidth B] [--checkpoint-interval D] [--restart D] [--node-overhead F] [--pue P]
[--grid-intensity G] [--json] [--plot OUT.png] [--set ...]``.

How long and how much a whole training run costs: the best layout for the GPU count (or the
fewest GPUs that meet the deadline), then wall-clock days, GPU-hours, energy and cost, each with
the band of the step-time prediction; then the run as it really goes (failures from an MTTF
model, checkpoints, restarts, Daly's checkpoint interval: the effective training time ratio and
the wall clock with failures) and its energy at the facility and CO2. Everything is computed by
:func:`llmp.planning.plan`.
"""

from __future__ import annotations

import argparse
import json

from llmp import dsl
from llmp.commands.flags import add_quiet
from llmp.dsl import add_set_argument
from llmp.planning import MAX_GPUS, curve_counts, plan
from llmp.planning.checkpoint import Mode
from llmp.planning.facility import GRID_G_PER_KWH, NODE_OVERHEAD, PUE
from llmp.planning.plot import plot
from llmp.planning.power import PowerModel
from llmp.plotting import plot_path, pyplot
from llmp.progress import bar


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
    run = parser.add_argument_group("the run as it goes (failures, checkpoints, energy at the facility)")
    run.add_argument("--mttf", metavar="D[@N]",
                     help="the job's mean time to failure D measured on N GPUs (e.g. 3h@16384; scaled as 1/GPUs); "
                          "default: Kokolis et al. 2025's fits, 6.5 failures per 1000 node-days, band to 2.34")
    run.add_argument("--checkpoint", choices=[m.value for m in Mode], default=Mode.AUTO.value,
                     help="auto: as the spec's stack saves by default (NeMo async, the others sync); or sync, async")
    run.add_argument("--storage-bandwidth", default="2TB/s", metavar="B",
                     help="aggregate checkpoint write/read rate (default 2TB/s, Llama 3's Tectonic, sustained)")
    run.add_argument("--checkpoint-interval", metavar="D",
                     help="work between checkpoints, e.g. 30min or 2h (default: Daly 2006's optimum)")
    run.add_argument("--restart", default="0s", metavar="D",
                     help="relaunch time per failure before the checkpoint is read back, e.g. 10min (default 0s: "
                          "no published figure; give your scheduler's)")
    run.add_argument("--node-overhead", type=float, metavar="F",
                     help=f"non-GPU node power as a fraction of GPU TDP (default {NODE_OVERHEAD:.2f}, DGX H100 "
                          "rated 10.2 kW for 8 x 700 W)")
    run.add_argument("--pue", type=float, metavar="P", help=f"facility power usage effectiveness (default {PUE:g}, "
                                                              "Strubell et al. 2019)")
    run.add_argument("--grid-intensity", type=float, metavar="G",
                     help=f"g CO2e per kWh (default {GRID_G_PER_KWH:.1f}, the U.S. average in Strubell et al. 2019)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    add_quiet(parser)
    parser.add_argument("--plot", metavar="OUT.png",
                        help="write days and cost against the GPU count (needs matplotlib, the [plot] extra)")
    add_set_argument(parser)


def _curve(args: argparse.Namespace) -> list[int]:
    """For --plot on a GPU count: whole-node multiples of it (a deadline search plots its scan)."""
    if not args.plot or args.deadline is not None:
        return []
    return curve_counts(dsl.load(args.spec, args.set), args.gpus)


def run(args: argparse.Namespace) -> int:
    if args.plot:
        plot_path(args.plot)
        pyplot()  # fail before the search when matplotlib is missing
    with bar("planning", quiet=args.quiet) as advance:
        result = plan(args.spec, tokens=args.tokens, gpus=args.gpus, deadline=args.deadline,
                      price_per_gpu_hour=args.price_per_gpu_hour, sets=args.set, power_model=args.power,
                      idle_fraction=args.idle_fraction, max_gpus=args.max_gpus, curve=_curve(args), mttf=args.mttf,
                      checkpoint=args.checkpoint, storage_bandwidth=args.storage_bandwidth,
                      checkpoint_interval=args.checkpoint_interval, restart=args.restart,
                      node_overhead=args.node_overhead, pue=args.pue, grid_intensity=args.grid_intensity,
                      progress=advance)
    if args.plot:
        plot(result, args.plot)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(result.to_table())
        if args.plot:
            print(f"plot written to {args.plot}")
    return 0
