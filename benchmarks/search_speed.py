"""How fast ``llmp search --gpus N`` answers, and whether its top 10 is the exhaustive one.

    python benchmarks/search_speed.py [--record] [--skip-exhaustive]

Layout searches (issue 14 item 5; targets: ``--gpus 512`` in at most 2 s and ``--gpus 4096`` in
at most 10 s) of Llama 3 8B, Llama 3 70B and GPT-3 175B at 512 and 4096 GPUs, each timed as the
whole command (``python -m llmp.cli search SPEC --gpus N --json``, a fresh process: imports,
loading, the grid, the branch and bound, ranking). The answer is then checked against an
exhaustive evaluation of the same grid in this process: every layout checked and composed
exactly as ``llmp.predict(spec, residuals=None)`` composes it, ranked by step time; the
command's top 10 must be the same layouts in the same order with the same step times, and each
of them must equal ``llmp.predict`` of its ``--set`` overrides.

A second table times the vectorised path (10^5 configurations that share one structure, issue 7),
which the branch and bound leaves alone.

Prints a markdown section (date, machine, command); ``--record`` appends it to
benchmarks/RESULTS.md. The machine may be shared: wall times then include waiting for a core.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from recording import commit, machine, record

import llmp
from llmp.search import engine, rank, search
from llmp.search.rank import Objective

EXAMPLES = ("llama3_8b_dgx_h100", "llama3_70b_dgx_h100", "gpt3_175b_dgx_a100")
COUNTS = (512, 4096)
TARGET_S = {512: 2.0, 4096: 10.0}
TOP = 10


def timed_cli(example: str, gpus: int) -> tuple[dict[str, Any], float, float]:
    """The command's JSON answer, its wall time and its CPU time (user + system; on a shared
    machine the wall time also counts waiting for a core), in a fresh interpreter as a user runs it."""
    argv = [sys.executable, "-m", "llmp.cli", "search", f"examples/{example}.llmp", "--gpus", str(gpus), "--json"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(done.stdout), wall, cpu


def exhaustive_top(example: str, gpus: int) -> tuple[list[dict[str, Any]], list[float], int, float]:
    """Every layout checked and composed; the best ``TOP`` configs, their step times, how many
    layouts ran, and the seconds it took."""
    t0 = time.perf_counter()
    spec, resolve = engine.load(ROOT / "examples" / f"{example}.llmp")
    built = engine.build(spec, [gpus], False, resolve)
    grid = built.grid
    rows = np.flatnonzero(grid.reasons() == "")
    values, _, _ = engine.evaluate_rows(built.spec, grid, rows, engine.memory_limit(built.spec, grid, None))
    good = np.flatnonzero(values["feasible"])
    step = values["step_time_s"]
    best = good[rank.order(step[good], step[good], Objective.STEP_TIME)][:TOP]
    configs = [{p: _plain(grid.columns[p][i]) for p in grid.columns} for i in best]
    return configs, [float(step[i]) for i in best], len(good), time.perf_counter() - t0


def _plain(v: object) -> object:
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, float, np.integer, np.floating)):
        f = float(v)
        return int(f) if f.is_integer() else f
    return str(v)


def predicted(example: str, overrides: list[str]) -> float:
    spec = llmp.load(ROOT / "examples" / f"{example}.llmp", overrides)
    return float(llmp.predict(spec, residuals=None).step_time_s)


def layout_rows(check: bool) -> list[str]:
    rows = []
    for example in EXAMPLES:
        for gpus in COUNTS:
            answer, wall, cpu = timed_cli(example, gpus)
            results = answer["results"]
            verdict, exhaustive_s, ran = "not checked", "", ""
            if check:
                configs, times, n_ran, secs = exhaustive_top(example, gpus)
                same_order = [r["config"] for r in results] == configs
                same_times = [r["step_time_s"] for r in results] == times
                direct = all(predicted(example, r["set"]) == r["step_time_s"] for r in results)
                verdict = "identical" if same_order and same_times and direct else (
                    f"DIFFERENT (order {same_order}, times {same_times}, predict {direct})")
                exhaustive_s, ran = f"{secs:.1f}", str(n_ran)
            target = TARGET_S[gpus]
            within = f"{'yes' if wall <= target else 'no'} (≤ {target:g} s)"
            rows.append(f"| {example} | {gpus} | {answer['space']['size']} | {answer['feasible']} | "
                        f"{answer['pruned']} | {wall:.2f} | {cpu:.2f} | {within} | {ran} | {exhaustive_s} "
                        f"| {verdict} |")
            print(rows[-1], flush=True)
            print(f"  (load average {os.getloadavg()[0]:.1f})", flush=True)
    return rows


def vectorised_row() -> str:
    """10^5 configurations of one structure (hardware and widths varied): the vectorised path."""
    def values(lo: float, hi: float, n: int, unit: str, step: float = 0.0) -> str:
        xs = [lo + (hi - lo) * i / (n - 1) for i in range(n)]
        xs = [round(x / step) * step for x in xs] if step else xs
        return ",".join(f"{x:.6g}{unit}" for x in xs)

    vary = ["gpu.mem_bandwidth=" + values(1.0, 5.5, 10, "TB/s"), "model.hidden=" + values(2048, 6656, 10, "", 512),
            "node.intra.bandwidth=" + values(100, 900, 10, "GB/s"),
            "model.ffn_hidden=" + values(8192, 16384, 10, "", 256),
            "model.vocab=" + values(32000, 256000, 10, "", 128)]
    t0 = time.perf_counter()
    spec, resolve = engine.load(ROOT / "examples" / "llama3_8b_dgx_h100.llmp", vary=vary)
    result = search(spec, resolve=resolve, top=5)
    secs = time.perf_counter() - t0
    return (f"| llama3_8b_dgx_h100, 5 hardware/width axes x 10 values | {result.size} | {result.feasible} | "
            f"{result.groups} | {secs:.2f} |")


def section(layouts: list[str], vectorised: str, command: str) -> str:
    lines = [f"## Layout search speed (issue 14 item 5) — {dt.date.today().isoformat()}", "",
             f"- command: `{command}`", f"- machine: {machine()}", f"- llmp commit: {commit()}",
             "- targets: `llmp search SPEC --gpus 512` ≤ 2 s, `--gpus 4096` ≤ 10 s, top 10 identical to an "
             "exhaustive `predict` of every layout", "",
             "| spec | --gpus | layouts | feasible (checked) | pruned | `llmp search` wall (s) | CPU (s) | "
             "wall within target | exhaustive: layouts that run | exhaustive (s) | top 10 vs exhaustive predict |",
             "|---|---|---|---|---|---|---|---|---|---|---|", *layouts, "",
             "| vectorised space (one structure) | configurations | feasible | structural groups | search() (s) |",
             "|---|---|---|---|---|", vectorised, "",
             ("Wall times are of the whole command in a fresh interpreter (importing NumPy and llmp "
              "included; the search path imports no SymPy). 'pruned': layouts a lower bound on their step "
              "time rules out of the top 10 and the Pareto front, never checked or composed (`--exhaustive` "
              "checks them). The exhaustive column composes every layout that passes the rules and fits in "
              "memory, one at a time, as `llmp.predict(spec, residuals=None)` does."), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", action="store_true", help="append the section to benchmarks/RESULTS.md")
    parser.add_argument("--skip-exhaustive", action="store_true", help="time only; do not check the top 10")
    args = parser.parse_args(argv)
    layouts = layout_rows(not args.skip_exhaustive)
    text = section(layouts, vectorised_row(), "python benchmarks/search_speed.py")
    print(text)
    if args.record:
        record(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
