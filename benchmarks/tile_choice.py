"""Which GEMM tiles explain the public measurements best (the choice in ``llmp/analytic/tiles.py``).

    python benchmarks/tile_choice.py --data ../shared/data [--out out/public] [--record]

For every GEMM measured by a public source (imported as ``benchmarks/fit_public.py`` does; training
data), the roofline is priced with several tile tables: none (the plain roofline), the shipped one
(a 128 x 128 main tile split K in 1, 2, 4 or 8, and a 64 x 64 tile), the same without split-K, and
larger main tiles the libraries also have (256 x 128, 128 x 256). A better base leaves less for
the residual model to learn: the table gives, per source, the median of measured / roofline and
the mean |ratio / median - 1| (the spread a per-source constant cannot remove), and the share of
rows measured more than 10% faster than the quantized roofline (a quantization that is too
pessimistic).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import fit_public
from recording import commit, data_folder, machine, record

from llmp.analytic import kernels, roofline, tiles
from llmp.analytic.kernels import Family, Kernel
from llmp.residuals import dataset, features

PER_SOURCE = 5000
"""Rows per source (a seeded sample of the larger ones)."""


def tables() -> dict[str, dict | None]:
    """Name -> tile table per architecture (None: the plain roofline)."""
    shipped = tiles.GEMM
    return {
        "plain roofline": None,
        "shipped (128x128, split 1-8, 64x64)": shipped,
        "no split-K": {a: replace(t, splits=(1,)) for a, t in shipped.items()},
        "256x128 main tile": {a: replace(t, main=(256, 128)) for a, t in shipped.items()},
        "128x256 main tile": {a: replace(t, main=(128, 256)) for a, t in shipped.items()},
    }


def seconds(k: Kernel, device, table: dict | None) -> float:
    c = kernels.cost(k)
    peak = features.peak_for(k, c, device)
    bw, launch = float(device.mem_bandwidth), float(device.launch_overhead)
    if table is None or device.microarch is None:
        return float(roofline.roofline(k, c, peak=peak, mem_bandwidth=bw, launch_overhead=launch))
    m, n, kk, b = (k.dim(d) for d in ("m", "n", "k", "batch"))
    return tiles.gemm_seconds(m, n, kk, b, c.bytes, peak=peak, mem_bandwidth=bw, sms=device.sms,
                              tiles=table[device.microarch]) + c.launches * launch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "public")
    parser.add_argument("--record", action="store_true", help="append the section to benchmarks/RESULTS.md")
    args = parser.parse_args()
    t0 = time.monotonic()
    manifests = fit_public.import_all(data_folder(args.data), args.out / "samples")
    names = list(tables())
    lines = ["| source | rows | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    rng = np.random.default_rng(0)
    for job in fit_public.JOBS:
        if job.name not in manifests:
            continue
        obs = [o for o in dataset.load([args.out / "samples" / job.name]).observations
               if isinstance(o.item, Kernel) and o.item.family is Family.GEMM]
        if not obs:
            continue
        if len(obs) > PER_SOURCE:
            obs = [obs[i] for i in sorted(rng.choice(len(obs), PER_SOURCE, replace=False))]
        cells = []
        for table in tables().values():
            y = np.asarray([math.log(o.seconds / seconds(o.item, o.device, table)) for o in obs])
            med = float(np.median(y))
            cells.append(f"{math.exp(med):.2f} / {np.mean(np.abs(np.exp(y - med) - 1)):.3f} / "
                         f"{np.mean(y < math.log(0.9)):.0%}")
        lines.append(f"| {job.name} | {len(obs)} | " + " | ".join(cells) + " |")
    print("\n".join(lines))
    if args.record:
        record("\n".join([
            f"## GEMM tile tables against the public measurements (issue 21) — {time.strftime('%Y-%m-%d')}", "",
            f"- command: `python benchmarks/tile_choice.py --data {args.data}`", f"- machine: {machine()}",
            f"- llmp commit: {commit()}", f"- took {time.monotonic() - t0:.0f} s",
            f"- data: every GEMM of the public operator measurements (training data; at most {PER_SOURCE} per source, "
            "seeded); cells: median measured / roofline, mean |ratio / median - 1|, share measured > 10% faster "
            "than the quantized roofline", "", *lines, ""]))


if __name__ == "__main__":
    main()
