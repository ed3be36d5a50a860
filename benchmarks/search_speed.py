"""How fast ``llmp search`` evaluates configurations (target: 10^5 in at most 10 s on 2 cores).

    python benchmarks/search_speed.py [--no-record]

Two spaces, each searched twice (cold: first call in the process, compiling the per-op-kind
cost functions; warm: again):

* ``vectorised``: 10^5 configurations of Llama 3 8B on one DGX H100 that differ in hardware and
  model widths (HBM bandwidth, NVLink bandwidth, model width, MLP width, vocabulary: 10 values
  each). They share the step's structure, so each structural group is one numpy evaluation.
* ``layouts``: every layout of Llama 3 70B on 64 H100s (``--gpus 64``): tp, pp, vp, micro-batch,
  recompute, sequence parallelism and ZeRO. Nearly every configuration has its own structure, so
  this measures the per-group cost of building and composing the operator graph.

Appends a "Search speed (issue 7)" section to benchmarks/RESULTS.md (date, machine, command).
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from recording import commit, machine, record

from llmp.search import SearchResult, search

TARGET = (1e5, 10.0)
"""10^5 configurations in at most 10 seconds (DESIGN.md targets)."""


def _values(lo: float, hi: float, n: int, unit: str, step: float = 0.0) -> str:
    xs = [lo + (hi - lo) * i / (n - 1) for i in range(n)]
    if step:
        xs = [round(x / step) * step for x in xs]
    return ",".join(f"{x:.6g}{unit}" for x in xs)


SPACES: dict[str, dict[str, object]] = {
    "vectorised": {"source": ROOT / "examples" / "llama3_8b_dgx_h100.llmp", "vary": [
        "gpu.mem_bandwidth=" + _values(1.0, 5.5, 10, "TB/s"),
        "model.hidden=" + _values(2048, 6656, 10, "", step=512),
        "node.intra.bandwidth=" + _values(100, 900, 10, "GB/s"),
        "model.ffn_hidden=" + _values(8192, 16384, 10, "", step=256),
        "model.vocab=" + _values(32000, 256000, 10, "", step=128)]},
    "layouts": {"source": ROOT / "examples" / "llama3_70b_dgx_h100.llmp", "gpus": [64]},
}


def _flags(space: dict[str, object]) -> str:
    """The space as short ``llmp search`` flags (``--vary`` lists abridged to their ends and length)."""
    parts = [str(Path(str(space["source"])).relative_to(ROOT))]
    for text in space.get("vary", []):  # type: ignore[union-attr]
        path, _, values = str(text).partition("=")
        items = values.split(",")
        parts.append(f"--vary {path}={items[0]},...,{items[-1]} ({len(items)} values)")
    parts += [f"--gpus {g}" for g in space.get("gpus", [])]  # type: ignore[union-attr]
    return " ".join(parts)


def run(name: str) -> tuple[SearchResult, float, float]:
    """Search the space twice; (result, cold seconds, warm seconds)."""
    space = SPACES[name]
    kwargs = {k: v for k, v in space.items() if k != "source"}
    t0 = time.perf_counter()
    search(space["source"], top=5, **kwargs)  # type: ignore[arg-type]
    cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    result = search(space["source"], top=5, **kwargs)  # type: ignore[arg-type]
    return result, cold, time.perf_counter() - t0


def section(rows: Sequence[tuple[str, SearchResult, float, float]], command: str) -> str:
    lines = [f"## Search speed (issue 7) — {dt.date.today().isoformat()}", "",
             f"- command: `{command}`", f"- machine: {machine()}", f"- llmp commit: {commit()}",
             f"- target: {TARGET[0]:.0e} configurations in ≤ {TARGET[1]:g} s on 2 cores (DESIGN.md)", "",
             ("| space | llmp search flags | configurations | feasible | structural groups evaluated | cold (s) "
             "| warm (s) | configurations/s (warm) | 10^5 configurations would take (warm) |"),
             "|---|---|---|---|---|---|---|---|---|"]
    for name, r, cold, warm in rows:
        per_s = r.size / warm
        lines.append(f"| {name} | `{_flags(SPACES[name])}` | {r.size} | {r.feasible} | {r.groups} | {cold:.2f} | "
                     f"{warm:.2f} | {per_s:,.0f} | {1e5 / per_s:.1f} s |")
    lines += ["", ("Timings are wall-clock for the whole `search()` call: grid, derived fields, feasibility checks, "
                   "vectorised evaluation, ranking and Pareto front. A structural group (same degrees, batch "
                   "sizes, layer count, options) is one call of `llmp.compose.evaluate`'s per-group path; its cost, "
                   "not the number of configurations, sets the time of layout searches."), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-record", action="store_true", help="print only; do not append to RESULTS.md")
    args = parser.parse_args(argv)
    rows = [(name, *run(name)) for name in SPACES]
    text = section(rows, "python benchmarks/search_speed.py")
    print(text)
    if not args.no_record:
        record(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
