"""``llmp sample``: micro-benchmark kernels and collectives on this machine (or cluster) into DIR.

Needs torch and numpy only. Three ways to run:

* one process (``llmp sample --out DIR``): the kernel families here, then, with ``--families
  ...,collectives``, the collectives through torchrun with ``--nproc`` local ranks;
* under torchrun, on one node or many (``torchrun ... -m llmp sample --out DIR``; Slurm: one
  torchrun per node through ``srun``): every rank joins the process group, the collectives run first
  in every group shape the world holds (they need every rank in step), then each rank measures its
  share of the kernel cases (:mod:`llmp.measure.sampling`);
* ``--plan``: nothing is measured; the design's cases are priced on the catalog device's roofline
  (:mod:`llmp.measure.estimate`) and the GPU-minutes printed.

Rerunning the same command resumes: rows already in DIR are skipped, none are lost or duplicated;
Ctrl-C or SIGTERM (a Slurm time limit) stops it with every file valid.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from llmp import files
from llmp.commands.flags import positive_float, positive_int
from llmp.errors import InputError, LlmpError
from llmp.measure import devices, ranks
from llmp.measure.design import FAMILIES, RANGES
from llmp.measure.ranks import World

COLLECTIVES = "collectives"


def add_parser(parser: argparse.ArgumentParser) -> None:
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--out", type=Path, help="directory of sample files (created; resumed)")
    mode.add_argument("--plan", action="store_true",
                      help="print the GPU-minutes the design needs on --device-id (from its roofline); measure nothing")
    parser.add_argument("--json", action="store_true", help="with --plan: machine-readable output")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="device kind to time (default cpu)")
    parser.add_argument("--families", default=None,
                        help=f"comma-separated subset of {','.join(FAMILIES)},{COLLECTIVES} (default: all kernels; "
                             "under torchrun with 2 or more ranks, collectives too)")
    limit = parser.add_mutually_exclusive_group()
    limit.add_argument("--minutes", type=positive_float,
                       help="stop after this many minutes (rerun to continue); under torchrun the whole run, "
                            "collectives first")
    limit.add_argument("--budget", type=positive_int,
                       help="cases per kernel family (default 40; with --minutes: 400) and per collective kind and "
                            "tier (default 12)")
    limit.add_argument("--per-operator", type=positive_int, metavar="K",
                       help="K cases of every (operator, pass), the k of llmp fit --budget K (and K per collective "
                            "kind and tier)")
    parser.add_argument("--dtypes", help="comma-separated dtypes (cpu: fp32,bf16; cuda: bf16,fp16,fp32,tf32)")
    parser.add_argument("--seed", type=int, default=0, help="design seed (default 0)")
    parser.add_argument("--threads", type=positive_int, default=1,
                        help="CPU threads (default 1, as llmp measure); recorded")
    parser.add_argument("--device-id", help="catalog id of this device when it is not recognised automatically "
                                            "(with --plan: the device to price, default cpu)")
    parser.add_argument("--nproc", type=positive_int, default=None,
                        help="ranks per node for collectives (default: GPUs, or 2 on CPU; under torchrun: its "
                             "--nproc-per-node)")
    parser.add_argument("--nodes", type=positive_int, default=None,
                        help="with --plan: nodes the run spans (collectives across nodes; default 1)")
    parser.add_argument("--node-id", help="catalog node id the collectives run on (default cpu_host on CPU)")
    parser.add_argument("--scale", type=positive_float, default=1.0,
                        help="multiply the per-case work caps (e.g. 0.01 for a quick smoke run; default 1)")
    parser.add_argument("--repeat-seconds", type=positive_float, default=0.15,
                        help="timed repeats per case fill about this long (at least 5 repeats; default 0.15)")
    parser.add_argument("--quiet", action="store_true", help="no progress output")


def _split(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def families_of(args: argparse.Namespace, ranks_total: int) -> tuple[tuple[str, ...], bool]:
    """(kernel families, whether collectives run) from ``--families`` (its default: every kernel
    family, and collectives when the run has 2 or more ranks)."""
    if args.families is None:
        return FAMILIES, ranks_total >= 2
    families = _split(args.families)
    if not families:
        raise InputError("--families names no family", hint=f"choose from {', '.join(FAMILIES)}, {COLLECTIVES}")
    unknown = [f for f in families if f not in FAMILIES and f != COLLECTIVES]
    if unknown:
        raise InputError(f"unknown families {unknown}", hint=f"choose from {', '.join(FAMILIES)}, {COLLECTIVES}")
    return tuple(f for f in families if f != COLLECTIVES), COLLECTIVES in families


def collective_budget(args: argparse.Namespace) -> int:
    """Cases per (collective kind, tier): ``--per-operator``, ``--budget``, else 12."""
    return args.per_operator or args.budget or 12


def kernel_config(args: argparse.Namespace, families: tuple[str, ...], **changes: Any) -> Any:
    """The :class:`~llmp.measure.sampling.SampleConfig` of the flags (shared by a run and ``--plan``),
    with ``changes`` (a rank's world, deadline and progress) on top."""
    from llmp.measure import sampling
    config = sampling.SampleConfig(
        out=args.out or Path("."), device=args.device, families=families,
        dtypes=_split(args.dtypes) if args.dtypes else None,
        per_family=args.budget or (400 if args.minutes is not None else 40), per_stratum=args.per_operator,
        minutes=args.minutes, seed=args.seed, threads=args.threads, device_id=args.device_id,
        progress=not args.quiet, ranges=RANGES[args.device].scaled(args.scale), target_s=args.repeat_seconds)
    return dataclasses.replace(config, **changes)


def _writable(out: Path) -> None:
    """Create ``out`` and write a probe file there, so a read-only or forbidden place is named now,
    before a process group starts or a minute of measuring is spent."""
    files.output_dir(out, "--out (the sample directory)")
    try:
        out.mkdir(exist_ok=True)
        # a probe of this process's own: ranks probing one shared directory must not unlink each other's
        with tempfile.NamedTemporaryFile(dir=out, prefix=".llmp-write-probe-"):
            pass
    except OSError as err:
        raise InputError(f"cannot write the sample directory {out}: {err.strerror or err}",
                         hint="give --out a directory you can write (on a cluster: one every node sees)") from None


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM (Slurm's time limit, torchrun stopping its workers) ends the run as Ctrl-C does."""
    raise KeyboardInterrupt


def run(args: argparse.Namespace) -> int:
    if args.plan:
        return _plan(args)
    if args.json:
        raise InputError("--json goes with --plan (a sampling run writes sample files, not JSON)",
                         hint="drop --json, or add --plan")
    if args.nodes is not None:
        raise InputError("--nodes goes with --plan: a run spans the nodes torchrun started",
                         hint="drop --nodes; start torchrun --nnodes N (see README: Sampling a cluster of your own)")
    world = ranks.from_env()
    kernels, collectives = families_of(args, 2 if world is None else world.size)
    _writable(args.out)  # before torch loads and sampling starts
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        if world is not None:
            return _distributed(args, world, kernels, collectives)
        if kernels:
            _kernels(args, kernels)
        if collectives:
            return _launch_collectives(args)
        return 0
    except KeyboardInterrupt:
        print(f"interrupted: every row measured so far is in {args.out}; rerun the same command to continue",
              file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)


def _kernels(args: argparse.Namespace, kernels: tuple[str, ...]) -> None:
    from llmp.measure import sampling

    report = sampling.run(kernel_config(args, kernels))
    print(f"sampled {report.measured} kernels in {report.elapsed_s:.1f} s into {args.out} "
          f"({report.existing} already there, {report.remaining} left, {len(report.failed)} failed)")
    for key, reason in report.failed[:10]:
        print(f"  failed: {key}: {reason}", file=sys.stderr)
    if report.meta.get("device_id") is None:
        print(f"note: '{report.meta['device_name']}' is not in the device table; pass --device-id to llmp fit",
              file=sys.stderr)


def _launch_collectives(args: argparse.Namespace) -> int:
    """Run ``llmp sample --families collectives`` under torchrun on ``--nproc`` local ranks."""
    nproc = args.nproc or (None if args.device == "cuda" else 2)
    if args.device == "cuda":
        import torch

        gpus = torch.cuda.device_count()
        if gpus == 0:
            raise InputError("--device cuda: torch sees no CUDA device on this machine", hint="use --device cpu")
        if nproc is not None and nproc > gpus:
            raise InputError(f"--nproc {nproc} but torch sees {gpus} GPUs (one rank per GPU)",
                             hint=f"use --nproc {gpus} or fewer")
        nproc = nproc or gpus
    assert nproc is not None
    if nproc < 2:
        raise InputError(f"collectives need at least 2 ranks, got --nproc {nproc}", hint="use --nproc 2 or more")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
           "-m", "llmp", "sample", "--device", args.device, "--families", COLLECTIVES, "--out", str(args.out),
           "--seed", str(args.seed)]
    # --minutes and --budget exclude each other: a timed run passes its minutes, and the ranks take the
    # default count per (kind, tier) that collective_budget gives a run without --budget
    limit = ("--minutes", args.minutes) if args.minutes is not None else ("--budget", collective_budget(args))
    for flag, value in (("--node-id", args.node_id), ("--device-id", args.device_id), limit):
        if value is not None:
            cmd += [flag, str(value)]
    if args.quiet:
        cmd.append("--quiet")
    done = subprocess.run(cmd, check=False)
    if done.returncode != 0:
        raise InputError(f"the collectives sampler (torchrun, {nproc} ranks) exited with status {done.returncode}",
                         hint="its output above says why; rerun the same command to resume")
    return 0


def _distributed(args: argparse.Namespace, world: World, kernels: tuple[str, ...], collectives: bool) -> int:
    """One rank of a torchrun world: collectives in every group shape, then this rank's kernel cases."""
    import torch
    import torch.distributed as dist

    from llmp.measure import collectives as coll
    from llmp.measure import sampling

    # Every rank sees the same flags and environment: rank 0 says what is wrong, the others exit.
    problem = _world_problem(args, world, collectives)
    if problem is not None:
        if world.rank == 0:
            raise problem
        return 1
    start = time.monotonic()
    deadline = None if args.minutes is None else start + 60 * args.minutes
    ranks.init(world, args.device)
    try:
        error: LlmpError | None = None
        try:
            ranks.check_layout(world)
            dev = sampling.device(args.device)
        except LlmpError as err:
            error = err
        ranks.agree(error)
        coll_report = None
        if collectives:
            config = coll.CollectiveConfig(out=args.out, per_stratum=collective_budget(args), seed=args.seed,
                                           device_id=args.device_id, node_id=args.node_id or
                                           (devices.CPU_NODE_ID if args.device == "cpu" else None), deadline=deadline,
                                           progress=not args.quiet)
            if args.device == "cpu":
                torch.set_num_threads(args.threads)
            coll_report = coll.run(world, dev, config)
        report = None
        if kernels:
            report = sampling.run(kernel_config(args, kernels, world=world, deadline=deadline,
                                                progress=not args.quiet and world.rank == 0))
        _summary(args, world, start, report, coll_report)
    except ranks.Reported:  # rank 0 prints the error
        return 1
    except RuntimeError as err:  # torch.distributed's error when a peer is gone (gloo: "Connection reset")
        first = str(err).strip().splitlines()[0][:300] if str(err).strip() else type(err).__name__
        raise InputError(f"rank {world.rank} lost the other ranks ({first}): one of them stopped or failed",
                         hint=f"every row measured so far is in {args.out}; the output above says which rank "
                              "stopped first; rerun the same command to continue") from None
    dist.barrier()
    dist.destroy_process_group()
    return 0


def _world_problem(args: argparse.Namespace, world: World, collectives: bool) -> InputError | None:
    """What is wrong with the torchrun world for these flags (None: nothing)."""
    if args.nproc is not None and args.nproc != world.local_size:
        return InputError(f"--nproc {args.nproc} but torchrun started {world.local_size} ranks per node "
                          f"(WORLD_SIZE {world.size})",
                          hint="drop --nproc under torchrun (its --nproc-per-node counts)")
    if collectives and world.size < 2:
        return InputError("collectives need at least 2 ranks; torchrun started 1",
                          hint="torchrun --nproc-per-node 2 or more, or leave collectives out of --families")
    return None


def _summary(args: argparse.Namespace, world: World, start: float, report: Any, coll_report: Any) -> None:
    """Every rank's counts gathered, and rank 0's summary of the collectives' and the kernels' runs."""
    import torch.distributed as dist

    mine = (report.measured, report.existing, report.remaining, len(report.failed)) if report else (0, 0, 0, 0)
    totals: list[object] = [None] * world.size
    dist.all_gather_object(totals, mine)
    if world.rank == 0:
        measured, remaining, failed = (sum(t[i] for t in totals) for i in (0, 2, 3))  # type: ignore[index]
        if coll_report is not None:
            print(f"sampled {coll_report.measured} collective cases on {world.size} ranks "
                  f"({world.nodes} node{'s' if world.nodes > 1 else ''} x {world.local_size}) into {args.out} "
                  f"({coll_report.existing} already there, {coll_report.remaining} left)")
        if report is not None:
            print(f"sampled {measured} kernels on {world.size} ranks in {time.monotonic() - start:.1f} s into "
                  f"{args.out} ({report.existing} already there, {remaining} left, {failed} failed)")


def _plan(args: argparse.Namespace) -> int:
    """``--plan``: the design priced on the catalog device, nothing measured."""
    from llmp.measure import estimate

    if args.minutes is not None:
        raise InputError("--minutes bounds a run; --plan prices a design", hint="give --budget N or --per-operator K")
    # By default the plan prices the kernels, and the collectives when --node-id names their node.
    kernels, collectives = families_of(args, 2 if args.node_id is not None else 1)
    plan = estimate.estimate(kernel_config(args, kernels), device_id=args.device_id,
                             collectives_too=collectives, per_stratum=collective_budget(args), node_id=args.node_id,
                             nodes=args.nodes or 1, ranks_per_node=args.nproc)
    if args.json:
        print(json.dumps(plan.to_dict(), indent=1))
    else:
        print(plan.to_table())
    return 0
