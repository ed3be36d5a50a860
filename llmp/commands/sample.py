"""``llmp sample``: micro-benchmark kernels (and collectives) on this machine into DIR.

Needs torch and numpy only. Kernel families run in this process; ``collectives`` is launched
through torchrun (``python -m torch.distributed.run``) with ``--nproc`` local ranks. Rerunning
the same command resumes: rows already in DIR are skipped, none are lost or duplicated.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from llmp import files
from llmp.commands.flags import positive_float, positive_int
from llmp.errors import InputError
from llmp.measure.design import FAMILIES, RANGES

COLLECTIVES = "collectives"


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="device kind to time (default cpu)")
    parser.add_argument("--out", type=Path, required=True, help="directory of sample files (created; resumed)")
    parser.add_argument("--families", default=",".join(FAMILIES),
                        help=f"comma-separated subset of {','.join(FAMILIES)},{COLLECTIVES} (default: all kernels)")
    limit = parser.add_mutually_exclusive_group()
    limit.add_argument("--minutes", type=positive_float, help="stop after this many minutes (rerun to continue)")
    limit.add_argument("--budget", type=positive_int, help="cases per family (default 40; with --minutes: 400)")
    parser.add_argument("--dtypes", help="comma-separated dtypes (cpu: fp32,bf16; cuda: bf16,fp16,fp32,tf32)")
    parser.add_argument("--seed", type=int, default=0, help="design seed (default 0)")
    parser.add_argument("--threads", type=positive_int, default=1,
                        help="CPU threads (default 1, as llmp measure); recorded")
    parser.add_argument("--device-id", help="catalog id of this device when it is not recognised automatically")
    parser.add_argument("--nproc", type=positive_int, default=None,
                        help="ranks for collectives (default: GPUs, or 2 on CPU)")
    parser.add_argument("--node-id", help="catalog node id the collectives run on (default cpu_host on CPU)")
    parser.add_argument("--scale", type=positive_float, default=1.0,
                        help="multiply the per-case work caps (e.g. 0.01 for a quick smoke run; default 1)")
    parser.add_argument("--repeat-seconds", type=positive_float, default=0.15,
                        help="timed repeats per case fill about this long (at least 5 repeats; default 0.15)")
    parser.add_argument("--quiet", action="store_true", help="no progress output")


def _split(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def _collectives(args: argparse.Namespace, budget: int | None) -> int:
    nproc = args.nproc or (None if args.device == "cuda" else 2)
    if nproc is None:
        import torch

        nproc = torch.cuda.device_count()
    if nproc < 2:
        raise InputError(f"collectives need at least 2 ranks, got --nproc {nproc}")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
           "-m", "llmp.measure.collectives", "--out", str(args.out), "--seed", str(args.seed),
           "--budget", str(budget or 12)]
    node = args.node_id or ("cpu_host" if args.device == "cpu" else None)
    if node:
        cmd += ["--node-id", node]
    if args.device_id:
        cmd += ["--device-id", args.device_id]
    if args.minutes is not None:
        cmd += ["--minutes", str(args.minutes)]
    env = dict(os.environ)
    if args.device == "cpu":
        env["LLMP_COLLECTIVES_CPU"] = "1"
    done = subprocess.run(cmd, env=env, check=False)
    if done.returncode != 0:
        raise InputError(f"the collectives sampler (torchrun, {nproc} ranks) exited with status {done.returncode}",
                         hint="its output above says why; rerun the same command to resume")
    return 0


def run(args: argparse.Namespace) -> int:
    files.output_dir(args.out, "--out (the sample directory)")  # before torch loads and sampling starts
    from llmp.measure import sampling

    families = _split(args.families)
    if not families:
        raise InputError("--families names no family", hint=f"choose from {', '.join(FAMILIES)}, {COLLECTIVES}")
    unknown = [f for f in families if f not in FAMILIES and f != COLLECTIVES]
    if unknown:
        raise InputError(f"unknown families {unknown}", hint=f"choose from {', '.join(FAMILIES)}, {COLLECTIVES}")
    kernels = tuple(f for f in families if f != COLLECTIVES)
    if kernels:
        ranges = RANGES[args.device].scaled(args.scale)
        per_family = args.budget or (400 if args.minutes is not None else 40)
        config = sampling.SampleConfig(out=args.out, device=args.device, families=kernels,
                                       dtypes=_split(args.dtypes) if args.dtypes else None, per_family=per_family,
                                       minutes=args.minutes, seed=args.seed, threads=args.threads,
                                       device_id=args.device_id, progress=not args.quiet, ranges=ranges,
                                       target_s=args.repeat_seconds)
        report = sampling.run(config)
        print(f"sampled {report.measured} kernels in {report.elapsed_s:.1f} s into {args.out} "
              f"({report.existing} already there, {report.remaining} left, {len(report.failed)} failed)")
        for key, reason in report.failed[:10]:
            print(f"  failed: {key}: {reason}", file=sys.stderr)
        if report.meta.get("device_id") is None:
            print(f"note: '{report.meta['device_name']}' is not in the device table; pass --device-id to llmp fit",
                  file=sys.stderr)
    if COLLECTIVES in families:
        return _collectives(args, args.budget)
    return 0
