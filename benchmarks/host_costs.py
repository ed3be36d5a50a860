"""Measure the host thread's dispatch cost per kernel launch, per stack style, and write it to
``llmp/stacks/host_costs.json`` (the file llmp ships and reads to price the host).

    python benchmarks/host_costs.py [--calls 200] [--repeats 9] [--ship] [--record]

For each style of :mod:`llmp.measure.host` (a torch replica of one stack's layer code path, on
CPU tensors of a few elements), time its passes (forward, backward, and under full recompute the
checkpointed forward and the backward that recomputes it) with this thread's CPU clock, and divide
each by the kernel launches llmp's own graph counts for the same layer and pass: the result is the dispatch
seconds one launch costs the host in that pass (Python, the stack's wrappers, the dispatcher;
the CUDA launch itself is the GPU's ``launch_overhead``, added by ``llmp.stacks.host``).
Without flags it prints the figures and the change against the shipped file and writes nothing;
``--ship`` writes the file, ``--record`` appends the figures to benchmarks/RESULTS.md (tracked files
change only when asked). Not a test: run it by hand on a quiet machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from recording import commit, machine, record

from llmp.analytic import kernels
from llmp.analytic.graph import decompose
from llmp.analytic.kernels import Kernel
from llmp.analytic.op import Part, Scope
from llmp.dsl import loads
from llmp.measure import host
from llmp.spec.spec import Spec
from llmp.stacks.host import PASSES

OUT = ROOT / "llmp" / "stacks" / "host_costs.json"

STACKS = {"megatron": "megatron_lm", "torch": "composer"}
"""The stack whose llmp graph of the replica's layer counts the launches of each style."""
SETTINGS = {"megatron": "", "torch": "attention = sdpa  fused_bias_act = false  fused_bias_dropout_add = false"}
"""Train fields that make the graph launch what the replica calls (the torch replica adds the
bias in the GEMM and runs GELU and the residual add as kernels of their own)."""


def _spec(style: str, s: host.Shape, recompute: str) -> Spec:
    text = f"""
use "dgx_a100"
model replica {{ arch = gpt  layers = 1  hidden = {s.hidden}  heads = {s.heads}  vocab = 64  seq_len = {s.seq}
                 bias = true  tied_embeddings = true }}
cluster one {{ node = dgx_a100  nodes = 1 }}
train {{ stack = {STACKS[style]}  precision = bf16  global_batch = 8  micro_batch = {s.batch}  recompute = {recompute}
        {SETTINGS[style]}  parallel {{ tp = 1  pp = 1  dp = 8  zero = none }} }}
"""
    return loads(text, filename=f"<{style} replica>")


def launches(style: str, s: host.Shape) -> dict[str, int]:
    """Kernel launches of the replica's layer in each pass, as llmp's graph counts them."""
    graph = decompose(_spec(style, s, "none"))

    def count(part: Part) -> int:
        return int(sum(kernels.cost(op.work).launches * op.count for i in graph.indices(Scope.LAYER, part)
                       for op in [graph.ops[i]] if isinstance(op.work, Kernel) and not op.recompute))

    forward, backward = count(Part.FORWARD), count(Part.BACKWARD)
    return {"fwd": forward, "bwd": backward, "full_fwd": forward, "full_bwd": forward + backward}


def measure(calls: int, repeats: int) -> dict[str, object]:
    s = host.Shape()
    styles = {}
    for style in host.STYLES:
        t = host.time_style(style, s, calls=calls, repeats=repeats)
        n = launches(style, s)
        seconds = {"fwd": t.fwd, "bwd": t.bwd, "full_fwd": t.full_fwd, "full_bwd": t.full_bwd}
        styles[style] = {"layer_s": seconds, "launches": n,
                         "per_launch_s": {p: seconds[p] / n[p] for p in PASSES}}
    return {"command": "python benchmarks/host_costs.py", "date": dt.date.today().isoformat(),
            "machine": host.machine(), "shape": {"hidden": s.hidden, "heads": s.heads, "seq": s.seq,
                                                  "batch": s.batch},
            "calls": calls, "repeats": repeats, "styles": styles}


def _table(data: dict[str, object]) -> list[str]:
    lines = ["| style | pass | host s per layer | launches | µs per launch |", "|---|---|---|---|---|"]
    for style, v in data["styles"].items():  # type: ignore[attr-defined]
        for p in PASSES:
            lines.append(f"| {style} | {p} | {1e6 * v['layer_s'][p]:.0f} µs | {v['launches'][p]} | "
                         f"{1e6 * v['per_launch_s'][p]:.1f} |")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=200, help="layer calls per timed repeat (default 200)")
    ap.add_argument("--repeats", type=int, default=9, help="timed repeats; the median is kept (default 9)")
    ap.add_argument("--ship", action="store_true", help=f"write the figures to {OUT.relative_to(ROOT)}")
    ap.add_argument("--record", action="store_true", help="append the section to benchmarks/RESULTS.md")
    args = ap.parse_args()
    data = measure(args.calls, args.repeats)
    print("\n".join(_table(data)))
    shipped = json.loads(OUT.read_text())
    for style, v in data["styles"].items():  # type: ignore[attr-defined]
        for p in PASSES:
            old = shipped["styles"][style]["per_launch_s"][p]
            print(f"{style} {p}: {1e6 * v['per_launch_s'][p]:.1f} µs per launch (shipped {1e6 * old:.1f})")
    if args.ship:
        OUT.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    if args.record:
            record("\n".join([f"## Host dispatch per kernel launch, per stack style — {data['date']}", "",
                          "- command: `python benchmarks/host_costs.py --ship --record`",
                          f"- machine: {machine()}; torch {data['machine']['torch']}",  # type: ignore[index]
                          f"- llmp commit: {commit()}",
                          "- what: torch replicas of each stack's layer code path (llmp/measure/host.py) on CPU "
                          "tensors of a few elements, thread CPU time, median of the repeats, over the launches "
                          "llmp's graph counts for the same layer; written to llmp/stacks/host_costs.json", "",
                          *_table(data), ""]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
