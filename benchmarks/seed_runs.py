"""The seed paper's ten runs (examples/seed/), as they ran, predicted with and without residual stores.

    python benchmarks/seed_runs.py [--record]

The seed paper (arXiv 2509.22832, DebarghaG/estimate-train-time) validated on GPT-NeoX-20B in three
layouts, a Llama-13B shape and Llemma-7B, on Perlmutter (4 A100-80GB per node) and TACC Vista (one
GH200 per node). Their measured step times are not in the data available to this project, so this
records llmp's predictions only (step time, band, MFU, memory, which residual store served the
device) for whoever holds the measurements to score. Perlmutter's A100 is served by the store fitted
on the seed's own Perlmutter operator samples (and Vidur's); Vista's GH200 by the cross-GPU store:
no GH200 sample was used.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from recording import commit, machine, record

from llmp import dsl
from llmp.compose import predict

GIB = 2**30


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", action="store_true", help="append the section to benchmarks/RESULTS.md")
    args = parser.parse_args()
    lines = ["| run | GPUs | layout pp/tp/dp | roofline only | llmp (default stores) | band | MFU | memory / GPU | "
             "residual store |",
             "|---|---|---|---|---|---|---|---|---|"]
    for path in sorted((ROOT / "examples" / "seed").glob("*.llmp")):
        spec = dsl.load(path)
        bare = predict(spec, residuals=None)
        pred = predict(spec)
        p = spec.parallel
        store = pred.provenance.residual_store
        lo, hi = pred.band
        lines.append(f"| {path.stem} | {spec.world_size} | {p.pp}/{p.tp}/{p.dp} | {bare.step_time_s:.2f} s | "
                     f"{pred.step_time_s:.2f} s | [{lo:.2f}, {hi:.2f}] s | {100 * pred.mfu:.1f}% | "
                     f"{pred.memory.total / GIB:.1f} GiB{' (OOM)' if pred.memory.oom else ''} | "
                     f"{store.scope if store else 'none'} |")
        print(lines[-1], flush=True)
    if args.record:
        record("\n".join([
            f"## The seed paper's ten runs, predicted (issue 11) — {time.strftime('%Y-%m-%d')}", "",
            "- command: `python benchmarks/seed_runs.py`", f"- machine: {machine()}", f"- llmp commit: {commit()}",
            "- the runs' measured step times are not in the data available to this project: predictions only",
            "", *lines, ""]))


if __name__ == "__main__":
    main()
