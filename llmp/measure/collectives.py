"""Collective micro-benchmarks through ``torch.distributed``, one process per rank.

Started by torchrun (``llmp sample --families collectives`` launches it)::

    python -m torch.distributed.run --standalone --nproc-per-node P -m llmp.measure.collectives --out DIR

gloo on CPU, NCCL on GPUs. For every group size g in 2..P (sub-groups of the first g ranks,
i.e. ranks packed in one node: ``ranks_per_node = g``, tier ``intra``) and each kind
(all_reduce, all_gather, reduce_scatter, all_to_all, send_recv) it times message sizes drawn
log-uniformly (Halton) and snapped to 4 KiB. ``bytes`` follows ``kernels.Collective``: the
all-reduce buffer, the all-gather output, the reduce-scatter input, the all-to-all send buffer,
the point-to-point message. Each call is timed on every rank; a call's time is the maximum over
ranks (the collective ends when its slowest member does); the row is the median over repeats.
Rank 0 writes ``DIR/collectives.csv`` with the same resume rules as the kernel sampler.

Torch and numpy only.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from llmp.measure import devices, timing
from llmp.measure.design import halton
from llmp.residuals import samplefile

KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv")
COLUMNS = ("key", "kind", "bytes", "group", "ranks_per_node", "tier", "dtype", "backend", "time_s", "p10_s",
           "p90_s", "repeats", "error")
SIZE_RANGE = {"cpu": (2**12, 2**24), "cuda": (2**16, 2**30)}


@dataclass(frozen=True, kw_only=True, slots=True)
class CollectiveCase:
    kind: str
    bytes: int
    group: int
    dtype: str

    @property
    def key(self) -> str:
        return f"{self.kind}/{self.dtype}/g={self.group}/rpn={self.group}/intra/bytes={self.bytes}"


def plan(world: int, kind: str, per_kind: int, seed: int) -> list[CollectiveCase]:
    """``per_kind`` cases per collective kind, spread over group sizes and message sizes."""
    lo, hi = SIZE_RANGE[kind]
    dtype = "fp32" if kind == "cpu" else "bf16"
    groups = sorted({g for g in (2, 4, 8, world) if 2 <= g <= world})
    out: list[CollectiveCase] = []
    for j, name in enumerate(KINDS):
        u = halton(per_kind, 2, seed * 100 + j)
        seen: set[str] = set()
        for a, b in u:
            size = round(float(np.exp(np.log(lo) + a * (np.log(hi) - np.log(lo)))) / 4096) * 4096
            group = 2 if name == "send_recv" else groups[min(int(b * len(groups)), len(groups) - 1)]
            size = max(4096 * group, size // (4096 * group) * 4096 * group)  # divisible into g chunks
            case = CollectiveCase(kind=name, bytes=size, group=group, dtype=dtype)
            if case.key not in seen:
                seen.add(case.key)
                out.append(case)
    return out


def _op(case: CollectiveCase, group: dist.ProcessGroup, rank: int, dev: torch.device):
    """A zero-argument callable issuing the collective on this rank (buffers allocated once)."""
    dt = {"fp32": torch.float32, "bf16": torch.bfloat16}[case.dtype]
    elems = case.bytes // torch.tensor([], dtype=dt).element_size()
    g = case.group
    if case.kind == "all_reduce":
        x = torch.randn(elems, dtype=dt, device=dev)
        return lambda: dist.all_reduce(x, group=group)
    if case.kind == "all_gather":
        x, out = torch.randn(elems // g, dtype=dt, device=dev), torch.empty(elems, dtype=dt, device=dev)
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        return lambda: gather(out, x, group=group)
    if case.kind == "reduce_scatter":
        x, out = torch.randn(elems, dtype=dt, device=dev), torch.empty(elems // g, dtype=dt, device=dev)
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        return lambda: scatter(out, x, group=group)
    if case.kind == "all_to_all":
        x, out = torch.randn(elems, dtype=dt, device=dev), torch.empty(elems, dtype=dt, device=dev)
        return lambda: dist.all_to_all_single(out, x, group=group)
    x = torch.randn(elems, dtype=dt, device=dev)
    if rank == 0:
        return lambda: dist.send(x, dst=1)
    return lambda: dist.recv(x, src=0)


def _time_case(case: CollectiveCase, groups: dict[int, dist.ProcessGroup], rank: int, dev: torch.device,
               repeats: int) -> tuple[float, float, float]:
    """Per-call time, max over ranks, median/p10/p90 over repeats (members only; others send zeros)."""
    member = rank < case.group
    times = torch.zeros(repeats, dtype=torch.float64)
    if member:
        fn = _op(case, groups[case.group], rank, dev)
        for _ in range(2):
            fn()
        for i in range(repeats):
            dist.barrier(group=groups[case.group])
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            t0 = time.perf_counter()
            fn()
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            times[i] = time.perf_counter() - t0
    reduce_on = times.to(dev) if dev.type == "cuda" else times
    dist.all_reduce(reduce_on, op=dist.ReduceOp.MAX)
    per_call = sorted(reduce_on.cpu().tolist())
    return statistics.median(per_call), per_call[int(0.1 * (repeats - 1))], per_call[round(0.9 * (repeats - 1))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m llmp.measure.collectives")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--budget", type=int, default=12, help="cases per collective kind")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--device-id", default=None)
    parser.add_argument("--node-id", default=None, help="catalog node the ranks run on (links for the fit)")
    parser.add_argument("--minutes", type=float, default=None)
    args = parser.parse_args(argv)
    cuda = torch.cuda.is_available() and os.environ.get("LLMP_COLLECTIVES_CPU") != "1"
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if world < 2:
        print("collectives need at least 2 ranks (--nproc >= 2)", file=sys.stderr)
        return 1
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(dev)
    else:
        torch.set_num_threads(1)  # one core per rank: the ranks share the machine
    cases = plan(world, dev.type, args.budget, args.seed)
    groups = {g: dist.new_group(list(range(g))) for g in sorted({c.group for c in cases})}
    appender = None
    todo_keys: list[list[str] | None] = [None]  # rank 0 fills it, the broadcast hands it to every rank
    if rank == 0:
        env = timing.environment(dev, torch.get_num_threads())
        meta = {**env, "device_id": args.device_id or devices.catalog_id(dev.type, str(env["device_name"])),
                "node_id": args.node_id, "seed": args.seed,
                "design": "halton-collectives-v1", "world": world, "backend": dist.get_backend(),
                "timing": "perf_counter around each call after a group barrier (device synchronised); "
                          "max over ranks per call; median over repeats"}
        appender = samplefile.Appender(args.out / "collectives.csv", COLUMNS, meta)
        todo_keys = [[c.key for c in cases if c.key not in appender.keys]]
    dist.broadcast_object_list(todo_keys, src=0)
    received = todo_keys[0]
    assert received is not None, "broadcast_object_list fills every rank's list"
    todo = [c for c in cases if c.key in set(received)]
    deadline = None if args.minutes is None else time.monotonic() + 60 * args.minutes
    for n, case in enumerate(todo):
        stop = torch.tensor([int(deadline is not None and time.monotonic() > deadline)], device=dev)
        dist.broadcast(stop, src=0)  # rank 0's clock decides, so every rank stops at the same case
        if int(stop.item()):
            break
        med, p10, p90 = _time_case(case, groups, rank, dev, args.repeats)
        if appender is not None:
            appender.append({"key": case.key, "kind": case.kind, "bytes": case.bytes, "group": case.group,
                             "ranks_per_node": case.group, "tier": "intra", "dtype": case.dtype,
                             "backend": dist.get_backend(), "time_s": f"{med:.6e}", "p10_s": f"{p10:.6e}",
                             "p90_s": f"{p90:.6e}", "repeats": args.repeats, "error": ""})
            print(f"collectives {n + 1}/{len(todo)} {case.kind} g={case.group} {case.bytes} B: {med * 1e3:.3f} ms",
                  file=sys.stderr, flush=True)
    if appender is not None:
        appender.close()
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
