"""Timing real training steps of the reference model: the torch-only core of ``llmp measure``.

A step is what the analytic model predicts: zero the gradient buffer, ``microbatches``
forward+backward passes of ``micro_batch`` sequences of random token ids (gradient
accumulation; with DDP only the last one all-reduces, bucketed and overlapped with backward),
then the optimizer update over the flat buffer. Steps are timed end to end (CUDA synchronised
at both ends on GPUs); the result is the median after ``warmup`` untimed steps. With ``dp > 1``
the ranks are local processes (gloo on CPU, NCCL on GPUs) and a step's time is the maximum
over ranks.

Runs on a bare node with only torch::

    python -m llmp.measure.step --config cfg.json [--csv OUT.csv] [--out result.json]

``cfg.json`` comes from ``llmp measure SPEC --export cfg.json`` (made where the DSL is installed).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from llmp.measure import reference, timing, torch_ops

CSV_COLUMNS = ("source", "source_ref", "model_name", "params_b", "layers", "hidden", "heads", "kv_heads", "ffn_hidden",
               "vocab", "seq_len", "moe_experts", "moe_topk", "gpu", "gpu_id", "num_gpus", "gpus_per_node",
               "interconnect_intra", "interconnect_inter", "tp", "pp", "dp", "cp", "ep", "vp", "micro_batch",
               "global_batch", "sequence_parallel", "recompute", "zero_stage_or_fsdp", "precision", "dtype",
               "metric_name", "metric_value", "metric_unit", "notes")
"""Published-measurement CSV schema (DESIGN.md), so ``llmp validate`` can score the row."""


@dataclass(frozen=True, kw_only=True, slots=True)
class MeasureConfig:
    """Everything a measurement needs, without the DSL: the model and how to time it."""

    model: reference.ModelConfig
    device: str = "cpu"
    steps: int = 5
    warmup: int = 2
    threads: int = 1
    """CPU threads per rank (the sampler's default is 1 too: predictions from its samples match)."""
    seed: int = 0
    row: dict[str, object] = field(default_factory=dict)
    """Published-CSV fields pre-filled from the spec (everything but the metric and notes)."""

    def to_json(self) -> str:
        return json.dumps({"model": self.model.to_dict(), "device": self.device, "steps": self.steps,
                           "warmup": self.warmup, "threads": self.threads, "seed": self.seed, "row": self.row},
                          indent=1)

    @classmethod
    def from_json(cls, text: str) -> MeasureConfig:
        data = json.loads(text)
        return cls(model=reference.ModelConfig(**data["model"]), device=data["device"], steps=data["steps"],
                   warmup=data["warmup"], threads=data.get("threads", 1), seed=data.get("seed", 0),
                   row=data.get("row", {}))


@dataclass(frozen=True, kw_only=True, slots=True)
class MeasureResult:
    median_s: float
    step_times_s: tuple[float, ...]
    params: int
    tokens_per_step: int
    env: dict[str, object]


@dataclass(frozen=True, kw_only=True, slots=True)
class Trainer:
    """The reference model ready to train: ``step(i)`` runs training step ``i``."""

    model: reference.Transformer
    optimizer: torch_ops.FlatOptimizer
    step: Callable[[int], None]


def trainer(cfg: MeasureConfig, dev: torch.device, rank: int = 0) -> Trainer:
    """Build the model, flat buffers, optimizer and data of one rank."""
    m = cfg.model
    torch.manual_seed(cfg.seed + rank)
    dtype = torch_ops.TORCH_DTYPES[m.precision]
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = m.precision == "tf32"
    model = reference.Transformer(m).to(dev)
    params, grads = reference.flatten_(model, dtype)
    opt = torch_ops.FlatOptimizer(params, grads, kind="sgd" if m.optimizer == "sgd" else "adam")
    net: torch.nn.Module = model
    no_sync: Callable[[], AbstractContextManager[Any]] | None = None  # DDP: accumulate without reducing
    if m.dp > 1:
        from torch.nn.parallel import DistributedDataParallel

        ddp = DistributedDataParallel(model, bucket_cap_mb=m.dp_bucket_bytes / 2**20,
                                      device_ids=[dev.index] if dev.type == "cuda" else None)
        net, no_sync = ddp, ddp.no_sync
    g = torch.Generator(device="cpu").manual_seed(cfg.seed * 1000 + rank)
    tokens = [torch.randint(0, m.vocab, (m.micro_batch, m.seq_len + 1), generator=g)
              for _ in range(min(4, m.microbatches + 1))]
    batches = [(t[:, :-1].contiguous().to(dev), t[:, 1:].contiguous().to(dev)) for t in tokens]

    def step(i: int) -> None:
        grads.zero_()
        for j in range(m.microbatches):
            ids, targets = batches[(i * m.microbatches + j) % len(batches)]
            last = j == m.microbatches - 1
            if no_sync is not None and not last:
                with no_sync():
                    (net(ids, targets) / m.microbatches).backward()
            else:
                (net(ids, targets) / m.microbatches).backward()
        opt.step()

    return Trainer(model=model, optimizer=opt, step=step)


def _run_rank(rank: int, cfg: MeasureConfig, world: int, port: int, out: str) -> None:
    """One rank: build, warm up, time; rank 0 writes the result JSON to ``out``."""
    dev = torch.device("cpu")
    if cfg.device == "cuda":
        dev = torch.device("cuda", rank)
        torch.cuda.set_device(dev)
    threads = cfg.threads
    if dev.type == "cpu":
        torch.set_num_threads(threads)
    if world > 1:
        import torch.distributed as dist

        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ["MASTER_PORT"] = str(port)
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo", rank=rank, world_size=world)
    run = trainer(cfg, dev, rank)
    step, params = run.step, reference.parameter_count(run.model)
    # One CPU thread in one process: the thread's CPU time (timing.cpu_clock); with DDP the
    # waits for other ranks are part of the step, so wall time.
    clock = timing.cpu_clock(threads) if dev.type == "cpu" and world == 1 else time.perf_counter
    times = []
    for i in range(cfg.warmup + cfg.steps):
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        if world > 1:
            torch.distributed.barrier()
        t0 = clock()
        step(i)
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        if i >= cfg.warmup:
            times.append(clock() - t0)
    if world > 1:
        import torch.distributed as dist

        t = torch.tensor(times, dtype=torch.float64, device=dev if dev.type == "cuda" else "cpu")
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        times = t.cpu().tolist()
        dist.destroy_process_group()
    if rank == 0:
        m = cfg.model
        env = timing.environment(dev, threads)
        name = timing.clock_name(dev, threads) if world == 1 else "wall time (time.perf_counter)"
        env["timing"] = (f"{name} around whole steps (device synchronised); median after warm-up"
                         + (f"; max over {world} ranks" if world > 1 else ""))
        result = {"median_s": statistics.median(times), "step_times_s": times, "params": params,
                  "tokens_per_step": m.micro_batch * m.microbatches * m.seq_len * m.dp, "env": env}
        Path(out).write_text(json.dumps(result))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(cfg: MeasureConfig) -> MeasureResult:
    """Run the measurement (spawning ``dp`` local processes when ``dp > 1``)."""
    world = cfg.model.dp
    if cfg.device == "cuda" and world > torch.cuda.device_count():
        raise RuntimeError(f"dp={world} needs {world} GPUs, torch sees {torch.cuda.device_count()}")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "result.json")
        if world == 1:
            _run_rank(0, cfg, 1, 0, out)
        else:
            import torch.multiprocessing as mp

            mp.spawn(_run_rank, args=(cfg, world, _free_port(), out), nprocs=world, join=True)
        data = json.loads(Path(out).read_text())
    return MeasureResult(median_s=data["median_s"], step_times_s=tuple(data["step_times_s"]), params=data["params"],
                         tokens_per_step=data["tokens_per_step"], env=data["env"])


def csv_row(cfg: MeasureConfig, result: MeasureResult) -> dict[str, object]:
    """The published-CSV row of a measurement (metric ``iteration_time_s``)."""
    env = result.env
    steps = ",".join(f"{t:.6g}" for t in result.step_times_s)
    notes = (f"llmp measure; torch {env['torch']}; threads {env['threads']}; device {env['device_name']}; "
             f"date {env['date']}; warmup {cfg.warmup}; steps [{steps}] s; {env['timing']}")
    row: dict[str, object] = {c: "" for c in CSV_COLUMNS}
    row.update({k: v for k, v in cfg.row.items() if k in row})
    row.update(metric_name="iteration_time_s", metric_value=f"{result.median_s:.6g}", metric_unit="s", notes=notes)
    if not row["source"]:
        row["source"] = "llmp measure"
    if not row["gpu"]:
        row["gpu"] = env["device_name"]
    return row


def append_csv(path: str | Path, row: dict[str, object]) -> None:
    """Append one row (writing the header first when the file is new or empty)."""
    path = Path(path)
    new = not path.exists() or path.stat().st_size == 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS, lineterminator="\n")
        if new:
            writer.writeheader()
        writer.writerow(row)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m llmp.measure.step", description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, required=True, help="JSON from `llmp measure SPEC --export`")
    parser.add_argument("--csv", type=Path, help="append the published-CSV row here")
    parser.add_argument("--out", type=Path, help="write the full result JSON here")
    args = parser.parse_args(argv)
    cfg = MeasureConfig.from_json(args.config.read_text())
    result = measure(cfg)
    print(f"{cfg.model.name}: median step {result.median_s:.6g} s over {len(result.step_times_s)} steps "
          f"({result.params / 1e6:.3f} M params, {result.tokens_per_step} tokens/step)")
    if args.csv:
        append_csv(args.csv, csv_row(cfg, result))
    if args.out:
        args.out.write_text(json.dumps({**asdict(result), "config": json.loads(cfg.to_json())}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
