"""Rebuild the collective tables llmp serves for the machines that were measured (one command).

    python benchmarks/collective_tables.py [--ship]

Reads the public collective measurements (``collective_data.py``: the seed paper's Perlmutter NCCL
samples, Vidur's DGX A100/H100 profiles, ml-engineering's nccl-tests sweeps) and writes
``llmp/hardware/collectives/tables.csv`` and ``manifest.json`` (``llmp.analytic.measured`` reads
them). Per series (one collective, one group shape, one machine, as NCCL chose to run it):

* the raw rows are thinned to at most :data:`BINS` points, the median log time in each log-spaced
  size bin, then made non-decreasing in size (pool-adjacent-violators on log time), so serving
  interpolates a curve that never falls as the message grows;
* ``q``, the 90% quantile of |log(raw / table)| over the raw rows, is the band a served time gets
  (noise, warm-up and the seed's bimodal all-gather show up here, not in the point);
* the catalog nodes it serves and the achievable link rates it was measured on are recorded, so a
  spec whose links differ falls back to the model.

Left out: series that forced an algorithm (NCCL_NVLS_ENABLE=0), cross-node series whose network
nobody describes (Vidur's, ml-engineering's AWS EFA), and series of fewer than :data:`MIN_SIZES`
sizes (single-size reference points). Everything is deterministic, so a rerun writes the same
bytes; ``--check`` only compares. It also prints the seed machine's derived link rate (the catalog's
``slingshot11_x4_seed``), the median bus bandwidth per node-crossing GPU over the seed's inter-node
series.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import collective_data as data

from llmp.analytic.collectives import Links, bus_factor
from llmp.analytic.kernels import CollectiveKind
from llmp.analytic.measured import LEVEL, MANIFEST, TABLES
from llmp.dsl import catalog

OUT = ROOT / "llmp" / "hardware" / "collectives"
BINS = 48
MIN_SIZES = 4
SEED_LINK = "slingshot11_x4_seed"

SERVES: dict[tuple[str, str], tuple[str, ...]] = {
    ("seed", "perlmutter_gpu_80gb"): ("perlmutter_gpu_80gb", "perlmutter_seed"),
    ("seed", "perlmutter_seed"): ("perlmutter_seed",),
    ("vidur", "dgx_a100"): ("dgx_a100",),
    ("vidur", "dgx_h100"): ("dgx_h100",),
    ("ml-engineering", "dgx_a100"): ("dgx_a100",),
    ("ml-engineering", "hgx_h200"): ("hgx_h200",),
    ("ml-engineering", "dgx_b200"): ("dgx_b200",),
}
"""(source, machine measured) → the catalog nodes its series serve. The seed's intra-node samples are
Perlmutter's NVLink, healthy (README §8.1), so they serve both Perlmutter machines; its inter-node
samples only the seed's own machine. An AWS p6-b200 is an HGX B200 board: the NVLink of a DGX B200."""


def isotonic(y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The non-decreasing sequence closest to ``y`` in weighted least squares (pool adjacent violators)."""
    blocks: list[list[float]] = []  # [mean, weight, count]
    for v, wt in zip(y, w):
        blocks.append([float(v), float(wt), 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            b = blocks.pop()
            a = blocks[-1]
            total = a[1] + b[1]
            a[0], a[1], a[2] = (a[0] * a[1] + b[0] * b[1]) / total, total, a[2] + b[2]
    return np.concatenate([np.full(int(c), m) for m, _, c in blocks])


def thin(sizes: np.ndarray, seconds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sizes, seconds) of the table: median per log-size bin, then non-decreasing in log time."""
    ls, lt = np.log(sizes), np.log(seconds)
    order = np.argsort(ls, kind="stable")
    ls, lt = ls[order], lt[order]
    edges = np.linspace(ls[0], ls[-1], BINS + 1)
    which = np.clip(np.searchsorted(edges, ls, side="right") - 1, 0, BINS - 1)
    xs, ys, ws = [], [], []
    for b in np.unique(which):
        m = which == b
        xs.append(float(np.median(ls[m])))
        ys.append(float(np.median(lt[m])))
        ws.append(float(m.sum()))
    y = isotonic(np.asarray(ys), np.asarray(ws))
    return np.exp(np.asarray(xs)), np.exp(y)


def spread(sizes: np.ndarray, seconds: np.ndarray, table_sizes: np.ndarray, table_seconds: np.ndarray) -> float:
    """The 90% quantile of |log(raw / table)| over the raw rows."""
    at = np.interp(np.log(sizes), np.log(table_sizes), np.log(table_seconds))
    return float(np.quantile(np.abs(np.log(seconds) - at), LEVEL))


def seed_rail() -> float:
    """Bytes/s per node-crossing GPU the seed's inter-node all-reduce/all-gather series reach (median of
    each series' median bus bandwidth, divided by the GPUs each node sends on)."""
    per_series = []
    for g in data.seed():
        if g.nodes == 1 or g.kind is CollectiveKind.SEND_RECV:
            continue
        bus = g.sizes * float(bus_factor(g.kind, g.n)) / g.measured
        per_series.append(float(np.median(bus)) / g.per_node)
    return statistics.median(per_series)


def build() -> tuple[str, dict]:
    """The text of ``tables.csv`` and the manifest."""
    merged: dict[tuple[str, str, CollectiveKind, int, int], list[data.Group]] = defaultdict(list)
    skipped = []
    for g in data.every():
        why = ("forced " + g.algorithm if g.algorithm else g.excluded or
               ("" if len(np.unique(g.sizes)) >= MIN_SIZES else f"{len(np.unique(g.sizes))} size(s) only"))
        if g.source == "reference" or (g.source, g.node) not in SERVES:
            why = why or "a single published figure, not a sweep"
        if why:
            skipped.append({"series": g.dataset, "why": why})
            continue
        merged[(g.source, g.node, g.kind, g.per_node, g.nodes)].append(g)
    rows = io.StringIO()
    writer = csv.writer(rows, lineterminator="\n")
    writer.writerow(["series", "size_bytes", "seconds"])
    series: dict[str, dict] = {}
    for (source, node, kind, per, nodes), groups in sorted(merged.items(), key=lambda kv: str(kv[0])):
        sizes = np.concatenate([g.sizes for g in groups])
        seconds = np.concatenate([g.measured for g in groups])
        ts, tt = thin(sizes, seconds)
        key = f"{source}:{node}:{kind.value}:{per}x{nodes}"
        machine = catalog.node(node)
        network = catalog.link(SEED_LINK) if node == data.SEED_NODE else machine.inter
        links = Links.between(machine, network)
        series[key] = {
            "collective": kind.value, "ranks_per_node": per, "nodes": nodes,
            "network": network.id if nodes > 1 else None, "machines": list(SERVES[(source, node)]),
            "intra_bandwidth": float(links.intra_bandwidth),
            "inter_bandwidth": float(links.inter_bandwidth) if nodes > 1 else None,
            "source": "; ".join(sorted({g.ref for g in groups})), "licence": data.LICENCES[source],
            "raw_rows": len(sizes), "points": len(ts), "size_bytes": [float(ts[0]), float(ts[-1])],
            "q": round(spread(sizes, seconds, ts, tt), 6), "level": LEVEL,
            "from": sorted(g.dataset for g in groups),
        }
        for s, t in zip(ts, tt):
            writer.writerow([key, f"{s:.6g}", f"{t:.6g}"])
    manifest = {
        "produced_by": "python benchmarks/collective_tables.py",
        "format_version": 1,
        "what": ("collective time against message size per machine and group shape, thinned from public "
                 "measurements (median per log-size bin, non-decreasing); served by llmp.analytic.measured"),
        "sources": {k: {"licence": v} for k, v in data.LICENCES.items() if k != "reference"},
        "series": series,
        "left_out": skipped,
    }
    return rows.getvalue(), manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ship", action="store_true", help="write the tables llmp ships (default: compare with them)")
    args = parser.parse_args(argv)
    text, manifest = build()
    manifest_text = json.dumps(manifest, indent=1, sort_keys=True) + "\n"
    rail = seed_rail()
    catalog_rail = float(catalog.link(SEED_LINK).bandwidth) / 4
    print(f"{len(manifest['series'])} series, {text.count(chr(10)) - 1} points; {len(manifest['left_out'])} left out")
    print(f"seed machine: {rail / 1e9:.3f} GB/s per node-crossing GPU (catalog {SEED_LINK}: "
          f"{catalog_rail / 1e9:.3f} GB/s per GPU)")
    if abs(round(rail / 1e9, 2) - catalog_rail / 1e9) > 1e-9:
        print(f"  the catalog's {SEED_LINK} should read 4 * {rail / 1e9:.2f} GB/s", file=sys.stderr)
    if not args.ship:
        same = (OUT / TABLES).read_text() == text and (OUT / MANIFEST).read_text() == manifest_text
        print("shipped tables are up to date" if same else "shipped tables differ: rerun with --ship to write them")
        return 0 if same else 1
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / TABLES).write_text(text)
    (OUT / MANIFEST).write_text(manifest_text)
    print(f"wrote {OUT.relative_to(ROOT)}/{{{TABLES}, {MANIFEST}}}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
