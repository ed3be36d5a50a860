"""Speed of llmp's predictor (issue 3): warm prediction, cold CLI start, a 10^5-config sweep.

    python benchmarks/speed.py [--sweep 100000] [--repeat 200]

* warm predict: ``llmp.compose.predict`` on a loaded spec, median of ``--repeat`` calls after
  one warm-up call, for three example specs (one GPU node, interleaved pipeline, 1F1B over 12
  stages with 384 microbatches);
* cold CLI: wall time of ``python -m llmp.cli predict examples/llama3_8b_dgx_h100.llmp`` in a
  fresh process, median of 5 runs (imports included);
* sweep: ``llmp.compose.evaluate`` over ``--sweep`` configurations of Llama 3 70B on 64 H100s:
  every (tp, pp, micro_batch, recompute) layout with dp = 64 / (tp pp) and random device and
  link speeds per configuration; one call, first call (compilation included) and second call.

Prints a markdown table (paste into benchmarks/RESULTS.md).
"""

from __future__ import annotations

import argparse
import itertools
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from llmp.compose import evaluate, predict
from llmp.dsl import load

WARM_SPECS = ("llama3_8b_dgx_h100", "llama3_70b_dgx_h100", "gpt3_175b_dgx_a100")


def warm(name: str, repeat: int) -> tuple[float, int]:
    spec = load(ROOT / "examples" / f"{name}.llmp")
    pred = predict(spec)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        predict(spec)
        times.append(time.perf_counter() - t)
    tasks = 2 * pred.derived["microbatches"] * len(pred.step.works)
    return statistics.median(times), tasks


def cold(repeat: int = 5) -> float:
    cmd = [sys.executable, "-m", "llmp.cli", "predict", str(ROOT / "examples" / "llama3_8b_dgx_h100.llmp")]
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def sweep_grid(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    layouts = [(tp, pp, mb, rc) for tp, pp, mb, rc in itertools.product(
        (1, 2, 4, 8), (1, 2, 4, 8), (1, 2), ("none", "selective", "full"))]
    rng = np.random.default_rng(seed)
    pick = np.arange(n) % len(layouts)
    tp, pp, mb, rc = (np.array([layouts[i][k] for i in pick]) for k in range(4))
    return {
        "parallel.tp": tp, "parallel.pp": pp, "parallel.cp": np.ones(n, int), "parallel.dp": 64 // (tp * pp),
        "parallel.vp": np.ones(n, int), "parallel.schedule": np.full(n, "1f1b"),
        "parallel.sequence_parallel": tp > 1, "train.micro_batch": mb, "train.recompute": rc,
        "gpu.mem_bandwidth": rng.uniform(2e12, 5e12, n), "gpu.flops.bf16": rng.uniform(300e12, 2000e12, n),
        "node.intra.bandwidth": rng.uniform(200e9, 900e9, n), "cluster.inter.bandwidth": rng.uniform(100e9, 800e9, n),
    }


def sweep(n: int) -> tuple[float, float, int, int]:
    spec = load(ROOT / "examples" / "llama3_70b_dgx_h100.llmp")
    grid = sweep_grid(n)
    t = time.perf_counter()
    out = evaluate(spec, grid)
    first = time.perf_counter() - t
    t = time.perf_counter()
    evaluate(spec, grid)
    second = time.perf_counter() - t
    return first, second, int(out["feasible"].sum()), int(np.unique(np.column_stack(
        [grid["parallel.tp"], grid["parallel.pp"], grid["train.micro_batch"],
         np.unique(grid["train.recompute"], return_inverse=True)[1]]), axis=0).shape[0])


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        return next(line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name"))
    except (OSError, subprocess.CalledProcessError, StopIteration):
        return platform.processor() or "unknown CPU"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweep", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=200)
    args = ap.parse_args()
    print(f"machine: {cpu_model()}, {len(__import__('os').sched_getaffinity(0))} CPUs, "
          f"Python {platform.python_version()}, numpy {np.__version__}\n")
    print("| measurement | spec | result | target |\n|---|---|---|---|")
    for name in WARM_SPECS:
        t, tasks = warm(name, args.repeat)
        print(f"| warm predict (median of {args.repeat}) | {name} ({tasks} pipeline tasks) | {t * 1e3:.2f} ms "
              "| ≤ 5 ms (≤ 1 ms design) |")
    print(f"| cold `llmp predict` (median of 5) | llama3_8b_dgx_h100 | {cold():.2f} s | ≤ 1.5 s |")
    first, second, feasible, groups = sweep(args.sweep)
    print(f"| sweep `evaluate`, first call | llama3_70b_dgx_h100, {args.sweep} configs ({feasible} feasible, "
          f"{groups} layouts) | {first:.2f} s | ≤ 10 s |")
    print(f"| sweep `evaluate`, second call | same | {second:.2f} s | ≤ 10 s |")


if __name__ == "__main__":
    main()
