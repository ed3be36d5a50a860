"""Speed of llmp's predictor (issues 3 and 14) against its peers, measured in the same run.

    python benchmarks/speed.py [--sweep 100000] [--repeat 200]

* warm predict: ``llmp.compose.predict`` on a loaded spec, reading its step time, median of
  ``--repeat`` calls after one warm-up call, for three example specs (one GPU node, interleaved
  pipeline, 1F1B over 12 stages with 384 microbatches); then the same reading the band too, whose
  draws run the timeline again on first read (the peers have no band);
* cold CLI: wall time of ``python -m llmp.cli predict examples/<spec>.llmp`` in a fresh process,
  median of 5 runs (imports included), with the default residual store and with
  ``--no-residuals``, for llama3_8b_dgx_h100 and gpt3_175b_dgx_a100 (the one layout Calculon can
  express: it has no grouped-query attention);
* sweep: ``llmp.compose.evaluate`` over ``--sweep`` configurations of Llama 3 70B on 64 H100s:
  every (tp, pp, micro_batch, recompute) layout with dp = 64 / (tp pp) and random device and
  link speeds per configuration; one call, first call (compilation included) and second call,
  in a child process whose peak resident memory (``ru_maxrss``) is the sweep's.

The peers, Calculon (calculon-ai/calculon) and llm-analysis (PyPI ``llm-analysis``), are never
llmp dependencies: ``benchmarks/peers/setup.sh`` installs them, pinned, into
``benchmarks/.peers-venv``, and each runs in a subprocess of that venv's python through its driver
(``benchmarks/peers/*_driver.py``), which builds the same layout as the example spec (passed to it
as JSON, read from the loaded spec) with the peer's own API and times its warm call the same way;
its cold start is a fresh driver process making one prediction. Ratios are llmp / peer (above 1:
llmp is slower). Where a peer cannot express part of a layout the row says what it changed or why
it could not run. Without the venv the peer cells say how to install it.

Prints one markdown table (paste into benchmarks/RESULTS.md).
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from llmp.compose import evaluate, predict
from llmp.compose.band import DRAWS
from llmp.dsl import load
from llmp.spec.spec import Spec

WARM_SPECS = ("llama3_8b_dgx_h100", "llama3_70b_dgx_h100", "gpt3_175b_dgx_a100")
COLD_SPECS = ("llama3_8b_dgx_h100", "gpt3_175b_dgx_a100")
PEERS_DIR = ROOT / "benchmarks" / "peers"
PEERS_PYTHON = ROOT / "benchmarks" / ".peers-venv" / "bin" / "python"
PEERS = {"Calculon": PEERS_DIR / "calculon_driver.py", "llm-analysis": PEERS_DIR / "llm_analysis_driver.py"}
NOT_INSTALLED = "peer not installed: run benchmarks/peers/setup.sh"
# What setup.sh needs for Calculon where its git repository is unreachable.
INSTALL_HINT = {"Calculon": " (not on PyPI: setup.sh installs it from git, or from CALCULON_SRC=<checkout>)"}


def warm(name: str, repeat: int, band: bool) -> tuple[float, int]:
    """Median seconds of ``predict(spec)`` reading its step time (and its band with ``band``: the
    band's draws run on first read), and the spec's pipeline tasks."""
    spec = load(ROOT / "examples" / f"{name}.llmp")
    pred = predict(spec)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        pred = predict(spec)
        _ = (pred.step_time_s, pred.band) if band else pred.step_time_s
        times.append(time.perf_counter() - t)
    tasks = 2 * pred.derived["microbatches"] * len(pred.step.works)
    return statistics.median(times), tasks


def cold(name: str, *flags: str, repeat: int = 5) -> float:
    cmd = [sys.executable, "-m", "llmp.cli", "predict", str(ROOT / "examples" / f"{name}.llmp"), *flags]
    return median_wall(cmd, repeat)


def median_wall(cmd: list[str], repeat: int) -> float:
    """Median wall time of ``repeat`` fresh processes running ``cmd`` (imports included)."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def layout(spec: Spec) -> dict:
    """What a peer driver needs to build the same training run, read from the loaded spec."""
    m, t, p = spec.model, spec.train, spec.parallel
    return {
        "name": m.name, "layers": m.layers, "hidden": m.hidden, "heads": m.heads, "kv_heads": m.kv_heads,
        "head_dim": m.head_dim, "ffn_hidden": m.ffn_hidden, "vocab": m.vocab, "seq_len": m.seq_len,
        "gated_mlp": m.activation.gated, "moe": m.moe is not None,
        "gpu": spec.cluster.gpu.id, "gpus": spec.cluster.world_size, "gpus_per_node": spec.cluster.node.gpus_per_node,
        "tp": p.tp, "pp": p.pp, "cp": p.cp, "dp": p.dp, "vp": p.vp, "schedule": str(p.schedule),
        "sequence_parallel": p.sequence_parallel, "zero": str(p.zero), "dp_overlap": p.dp_overlap,
        "micro_batch": t.micro_batch, "global_batch": t.global_batch, "precision": str(t.precision),
        "recompute": str(t.recompute), "flash_attention": t.attention.fused,
    }


def peer_run(peer: str, cfg: dict, repeat: int) -> dict:
    """The driver's JSON answer for ``cfg``; ``{"error": ...}`` if the peer is missing or failed."""
    driver = PEERS[peer]
    if not PEERS_PYTHON.exists():
        return {"error": NOT_INSTALLED}
    proc = subprocess.run([str(PEERS_PYTHON), str(driver), json.dumps(cfg), "--repeat", str(repeat)],
                          capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        missing = NOT_INSTALLED + INSTALL_HINT.get(peer, "")
        return {"error": missing if "ModuleNotFoundError" in last else f"driver failed: {last}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def peer_cold(peer: str, cfg: dict, repeat: int = 5) -> dict:
    """Cold start of a peer: a fresh driver process making one prediction, median of ``repeat``."""
    once = peer_run(peer, cfg, 0)
    if "error" in once or "unsupported" in once:
        return once
    cmd = [str(PEERS_PYTHON), str(PEERS[peer]), json.dumps(cfg), "--repeat", "0"]
    return {**once, "wall_s": median_wall(cmd, repeat)}


def peer_cell(ours: float, answer: dict, key: str, unit: str) -> str:
    """One peer's table cell: its time, llmp / peer, and what it could not express."""
    if "error" in answer:
        return answer["error"]
    if "unsupported" in answer:
        return f"cannot express: {answer['unsupported']}"
    theirs = answer[key]
    scale = 1e3 if unit == "ms" else 1.0
    cell = (f"{theirs * scale:.2f} {unit} (llmp/peer {ours / theirs:.2f}; {answer['peer']}, "
            f"predicts {answer['step_s']:.2f} s/step)")
    return cell + "".join(f"; {d}" for d in answer["deviations"])


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


def sweep(n: int) -> dict:
    """Both ``evaluate`` calls over ``n`` configs, and this process's peak resident memory (MiB)."""
    spec = load(ROOT / "examples" / "llama3_70b_dgx_h100.llmp")
    grid = sweep_grid(n)
    t = time.perf_counter()
    out = evaluate(spec, grid)
    first = time.perf_counter() - t
    t = time.perf_counter()
    evaluate(spec, grid)
    second = time.perf_counter() - t
    groups = np.unique(np.column_stack(
        [grid["parallel.tp"], grid["parallel.pp"], grid["train.micro_batch"],
         np.unique(grid["train.recompute"], return_inverse=True)[1]]), axis=0).shape[0]
    # ru_maxrss is in KiB on Linux.
    return {"first": first, "second": second, "feasible": int(out["feasible"].sum()), "groups": groups,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def sweep_in_child(n: int) -> dict:
    """The sweep in a fresh process, so that its peak RSS is the sweep's alone (imports included)."""
    proc = subprocess.run([sys.executable, __file__, "--sweep-child", str(n)],
                          check=True, capture_output=True, text=True, cwd=ROOT)
    return json.loads(proc.stdout)


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True,
                              cwd=ROOT).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


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
    ap.add_argument("--sweep-child", type=int, help=argparse.SUPPRESS)  # internal: run only the sweep
    args = ap.parse_args()
    if args.sweep_child:
        print(json.dumps(sweep(args.sweep_child)))
        return
    print(f"date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; machine: {cpu_model()}, "
          f"{len(os.sched_getaffinity(0))} CPUs, load average {os.getloadavg()[0]:.1f}, "
          f"Python {platform.python_version()}, numpy {np.__version__}; "
          f"llmp commit {commit()}; command: `{shlex.join(['python', 'benchmarks/speed.py', *sys.argv[1:]])}`")
    print()
    print(f"| measurement | spec | llmp | {' | '.join(f'{p} (llmp/peer)' for p in PEERS)} | target |")
    print(f"|---|---|---|{'---|' * len(PEERS)}---|")
    for name in WARM_SPECS:
        t, tasks = warm(name, args.repeat, band=False)
        cfg = layout(load(ROOT / "examples" / f"{name}.llmp"))
        cells = [peer_cell(t, peer_run(peer, cfg, args.repeat), "warm_s", "ms") for peer in PEERS]
        print(f"| warm predict, step time (median of {args.repeat}) | {name} ({tasks} pipeline tasks) "
              f"| {t * 1e3:.2f} ms | {' | '.join(cells)} | ≤ 1 ms (issue 14) |")
    for name in WARM_SPECS:
        t, tasks = warm(name, args.repeat, band=True)
        none = " | ".join("no band" for _ in PEERS)
        print(f"| warm predict with its {DRAWS}-draw band (median of {args.repeat}) | {name} | {t * 1e3:.2f} ms "
              f"| {none} | none |")
    for name in COLD_SPECS:
        ours = cold(name)
        cfg = layout(load(ROOT / "examples" / f"{name}.llmp"))
        cells = [peer_cell(ours, peer_cold(peer, cfg), "wall_s", "s") for peer in PEERS]
        print(f"| cold start, fresh process (median of 5) | {name} | {ours:.2f} s (`llmp predict`) "
              f"| {' | '.join(cells)} | ≤ 0.8 s (issue 14) |")
    for name in COLD_SPECS:
        ours = cold(name, "--no-residuals")
        same = " | ".join("as above (no residual store either way)" for _ in PEERS)
        print(f"| cold start without a residual store (median of 5) | {name} | {ours:.2f} s "
              f"(`llmp predict --no-residuals`) | {same} | ≤ 0.5 s (issue 14) |")
    sw = sweep_in_child(args.sweep)
    none = " | ".join("no vectorised sweep" for _ in PEERS)
    print(f"| sweep `evaluate`, first call | llama3_70b_dgx_h100, {args.sweep} configs ({sw['feasible']} feasible, "
          f"{sw['groups']} layouts) | {sw['first']:.2f} s | {none} | ≤ 10 s (issue 3) |")
    print(f"| sweep `evaluate`, second call | same | {sw['second']:.2f} s | {none} | ≤ 10 s (issue 3) |")
    print(f"| sweep peak RSS (child process, both calls, imports included) | same | {sw['peak_rss_mib']:.0f} MiB "
          f"| {none} | ≤ 1 GiB (issue 14) |")


if __name__ == "__main__":
    main()
