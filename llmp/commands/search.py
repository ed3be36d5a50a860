"""``llmp search SPEC [--vary PATH=V1,V2,...] [--gpus N[,N...]] [--layouts] [--objective O]
[--max-memory auto|SIZE] [--gpu-hour-price P] [--top K] [--exhaustive] [--pareto] [--json]
[--calibration STACK.json] [--set ...]``.

Sweeps the spec's declared sweep lists and every ``--vary`` axis (their product), and with
``--gpus`` (or ``--layouts``: the spec's own GPU count) every layout (dp, tp, pp, vp, micro-batch,
recompute, sequence parallelism, ZeRO) for that many GPUs. Configurations that cannot run or do
not fit in memory are dropped and counted per reason; the rest are evaluated, ranked by the
objective, and (``--pareto``) reduced to the front of step time against GPUs or cost. A layout
search skips the layouts a lower bound on their step time rules out (``--exhaustive`` does not).
"""

from __future__ import annotations

import argparse
import json

from llmp.commands.flags import add_quiet, add_residuals, residuals_of
from llmp.dsl import add_set_argument
from llmp.errors import InputError
from llmp.progress import bar
from llmp.search import Objective, load, search
from llmp.units import SIZE, parse_quantity


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", metavar="SPEC", help="a .llmp file")
    parser.add_argument("--vary", action="append", default=[], metavar="PATH=V1,V2,...",
                        help="vary a field over values in .llmp syntax, e.g. --vary parallel.tp=1,2,4,8 "
                             "--vary gpu.mem_bandwidth=2TB/s,3.35TB/s (repeatable)")
    parser.add_argument("--gpus", action="append", default=[], metavar="N[,N...]",
                        help="try every layout on N GPUs (the cluster is resized to N); several counts allowed")
    parser.add_argument("--layouts", action="store_true", help="try every layout on the spec's own GPU count")
    parser.add_argument("--objective", choices=[o.value for o in Objective], default=Objective.STEP_TIME.value,
                        help="rank by step time, throughput or cost (default: step_time)")
    parser.add_argument("--max-memory", default="auto", metavar="auto|SIZE",
                        help="memory per GPU a configuration may use, e.g. 70GiB (auto: the GPU's capacity)")
    parser.add_argument("--gpu-hour-price", type=float, default=1.0, metavar="P",
                        help="price of one GPU-hour for the cost objective (default 1.0: cost in GPU-hours "
                             "per 10^9 tokens)")
    parser.add_argument("--top", type=int, default=10, metavar="K", help="configurations to show (default 10)")
    parser.add_argument("--exhaustive", action="store_true",
                        help="check and compose every layout (default: skip those a lower bound on the step time "
                             "rules out of the top K and the Pareto front; same answer, reasons counted for all)")
    parser.add_argument("--pareto", action="store_true", help="also show the Pareto front")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--calibration", metavar="STACK.json",
                        help="apply a calibration written by llmp calibrate (same GPU and stack)")
    add_residuals(parser, store_help="residual store the shown configurations are predicted and ordered with, as "
                                     "llmp predict does (default: the store shipped for the spec's device)",
                  bare_help="order by the roofline composition alone (what every configuration is priced by)")
    add_quiet(parser)
    add_set_argument(parser)


def _gpus(texts: list[str]) -> list[int]:
    counts = []
    for text in texts:
        for item in text.split(","):
            try:
                counts.append(int(item.strip()))
            except ValueError:
                raise InputError(f"--gpus needs whole numbers, got {item.strip()!r}",
                                 hint="e.g. --gpus 64 or --gpus 8,16,32") from None
    return list(dict.fromkeys(counts))


def _memory(text: str) -> float | None:
    if text.strip().lower() == "auto":
        return None
    q = parse_quantity(text)
    if q.dim != SIZE or q.value <= 0:
        raise InputError(f"--max-memory needs a size, got {text!r}", hint="e.g. --max-memory 70GiB, or auto")
    return float(q.value)


def run(args: argparse.Namespace) -> int:
    if args.top < 1:
        raise InputError(f"--top needs a positive count, got {args.top}")
    with bar("searching", quiet=args.quiet) as advance:
        spec, resolve = load(args.spec, args.set, args.vary)
        result = search(spec, gpus=_gpus(args.gpus), layouts=args.layouts, objective=args.objective,
                        max_memory=_memory(args.max_memory), gpu_hour_price=args.gpu_hour_price, top=args.top,
                        exhaustive=args.exhaustive, progress=advance, calibration=args.calibration,
                        resolve=resolve, residuals=residuals_of(args, bare=None))
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(result.to_table(pareto=args.pareto))
    return 0
