"""Which kernels of published runs the shipped residual stores measured (issue 21, item 2).

    python benchmarks/shape_coverage.py [CSV ...] [--record]

For every run of the given published-measurement files (default: the vTrain A100 grid and the
Megatron-LM CI tests, the small-work runs of issue 21), the spec ``llmp validate`` maps it to is
decomposed and corrected by the store ``llmp predict`` would use, and each kernel's share of the
step's kernel time is split into *in domain* (a store measured a shape within about a factor of two
of it, of its kind: ``llmp.residuals.domain``) and *out of domain* (flagged, band widened) or
*uncovered* (no store of its family). Reported per source and GPU, by family, with the shapes out
of domain that weigh most.

Only the runs' *shapes* are read (hidden, heads, tp, micro-batch, ...); their measured step times
are test data and are not used here.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from recording import commit, machine, record

from llmp.analytic.kernels import Kernel
from llmp.compose.predictor import priced
from llmp.validate.mapping import Mapped, map_measurement
from llmp.validate.score import read_measurements

DEFAULT = (ROOT / "validation" / "vtrain_ground_truth_dev.csv",
           ROOT / "validation" / "megatron_lm_functional_tests.csv")


def coverage(paths: list[Path]) -> tuple[dict, dict]:
    """(source, gpu) -> family -> [in-domain, out-of-domain, uncovered] share of a run's kernel time per
    step, summed over runs; and (source, gpu) -> out-of-domain op description -> summed share."""
    share: dict = defaultdict(lambda: defaultdict(lambda: [0.0, 0.0, 0.0]))
    worst: dict = defaultdict(lambda: defaultdict(float))
    measurements, _ = read_measurements([str(p) for p in paths])
    for m in measurements:
        mapped = map_measurement(m)
        if not isinstance(mapped, Mapped):
            continue
        p = priced(mapped.spec)
        key = (m.rows[0].text("source"), mapped.spec.cluster.gpu.id)
        ood = p.correction.out_of_domain
        kernels_ = [i for i, op in enumerate(p.graph.ops) if isinstance(op.work, Kernel)]
        times = {i: float(p.graph.ops[i].count) * float(p.prices.time[i]) * float(p.correction.factor[i])
                 for i in kernels_}
        total = sum(times.values()) or 1.0
        for i in kernels_:  # each run weighs the same: shares of its own kernel time
            op = p.graph.ops[i]
            where = 2 if not p.correction.covered[i] else (1 if ood is not None and ood[i] else 0)
            share[key][op.family][where] += times[i] / total
            if where == 1:
                dims = ", ".join(f"{n}={int(v)}" for n, v in op.work.dims if n not in ("causal", "flash", "rms"))
                worst[key][f"{op.family} {op.work.pass_} ({dims})"] += times[i] / total
    return share, worst


def table(share: dict) -> list[str]:
    lines = ["| source | GPU | family | kernel time in domain | out of domain | no store |",
             "|---|---|---|---|---|---|"]
    for (source, gpu), fams in sorted(share.items()):
        total = [sum(v[j] for v in fams.values()) for j in range(3)]
        for fam, (a, b, c) in [*sorted(fams.items()), ("**all**", tuple(total))]:
            s = a + b + c
            if s > 0:
                lines.append(f"| {source} | {gpu} | {fam} | {a / s:.0%} | {b / s:.0%} | {c / s:.0%} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", nargs="*", type=Path, default=list(DEFAULT))
    parser.add_argument("--record", action="store_true", help="append the section to benchmarks/RESULTS.md")
    args = parser.parse_args()
    t0 = time.monotonic()
    share, worst = coverage(args.csv)
    lines = table(share)
    heavy = []
    for key, ops in sorted(worst.items()):
        top = sorted(ops.items(), key=lambda kv: -kv[1])[:3]
        heavy.append(f"- {key[0]} on {key[1]}: " + "; ".join(name for name, _ in top))
    print("\n".join([*lines, "", "heaviest kernels out of domain:", *heavy]))
    if args.record:
        record("\n".join([
            f"## Shapes of published small-work runs against the stores' measured shapes (issue 21) — "
            f"{time.strftime('%Y-%m-%d')}", "",
            f"- command: `python benchmarks/shape_coverage.py {' '.join(str(p.relative_to(ROOT)) for p in args.csv)}`",
            f"- machine: {machine()}", f"- llmp commit: {commit()}", f"- took {time.monotonic() - t0:.0f} s",
            "- read: the runs' shapes only (their step times are test data, not read); stores: the shipped defaults; "
            "shares are of the kernel time per step each run's spec prices, every run weighted equally", "", *lines, "",
            "Heaviest kernels out of domain per source and GPU:", "", *heavy, ""]))


if __name__ == "__main__":
    main()
