"""llmp's alpha-beta collective model against published collective micro-benchmarks.

    python benchmarks/collectives_published.py [--no-record]

Data (read from ../shared/data, never copied; facts with their sources):
  * microbench/collectives_published/ml_engineering_nccl_measurements.csv — nccl-tests and
    all_reduce_bench sweeps: 8x A100 (NVLink3), 8x H200 (NVLink4), 1 and 4 nodes of 8x B200;
  * microbench/collectives_published/nccl_reference_points.csv — maintainer/user plateaus
    (H100 ring ~370 GB/s, NDR 46-48 GB/s per NIC, 2-3 node A100 boxes with 4x HDR);
  * seed-estimate-train-time/perlmutter-a100/nccl — per-call NCCL times on Perlmutter A100;
  * vidur/network/{a100_dgx,h100_dgx} — all_reduce / send_recv vs size on DGX A100 and H100.

For every point the model's time (``llmp.analytic.collectives.time`` with the catalog node's
links) is compared with the measurement. Then, per node type and tier, it derives the link
parameters that would make the model agree — an effective bandwidth fraction ``eta`` and a
per-step latency ``alpha`` — by a grid search over the model itself, from these micro-benchmarks
ONLY (never from end-to-end rows). The derived values are printed and recorded in
benchmarks/RESULTS.md for the catalog owner to decide on; this script edits no catalog file.
NVLS (NVLink SHARP) points are reported but not used: the model has no NVLS algorithm.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import math
import re
import statistics
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from llmp.analytic.collectives import Links, bus_factor, time
from llmp.analytic.kernels import Collective, CollectiveKind, Tier
from llmp.validate.hardware import catalog_node

DATA = ROOT.parent / "shared" / "data"
MICRO = DATA / "microbench" / "collectives_published"
SEED = DATA / "seed-estimate-train-time" / "perlmutter-a100" / "nccl"
VIDUR = DATA / "vidur" / "network"
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
GIB = 1 << 30

KINDS = {"all_reduce": CollectiveKind.ALL_REDUCE, "all_gather": CollectiveKind.ALL_GATHER,
         "reduce_scatter": CollectiveKind.REDUCE_SCATTER, "send_recv": CollectiveKind.SEND_RECV}

ML_ENG_SYSTEMS = {
    "8x A100 SXM (single node, NVLink3/NVSwitch)": "dgx_a100",
    "8x H200 SXM (single node, NVLink4/NVSwitch)": "hgx_h200",
    "8x H200 SXM (single node)": "hgx_h200",
    "1x p6-b200.48xlarge (8x B200/node, NVLink5; 8x 50GBps EFA v4 per node)": "dgx_b200",
    "4x p6-b200.48xlarge (8x B200/node, NVLink5; 8x 50GBps EFA v4 per node)": "dgx_b200",
    "8x B200 p6-b200.48xlarge (single node)": "dgx_b200",
}
"""ml-engineering systems → the catalog node with the same GPU, NVLink and per-node NIC bandwidth
(p6-b200: 8 x 50 GB/s EFA = 400 GB/s per node, as dgx_b200's 8 x NDR)."""

ALGOS: dict[str, tuple[float | None, str]] = {
    "NCCL default (ring/tree; no NVLS on A100)": (None, ""),
    "NCCL default (NVLS at >=2MiB per text)": (2 << 20, ""),
    "NCCL default (AWS ofi tuner)": (None, "algorithm not stated (NCCL may pick NVLS/NVLSTree on B200)"),
    "NCCL picks Ring": (None, ""),
    "Ring (NCCL_NVLS_ENABLE=0)": (None, ""),
    "Ring (`NCCL_NVLS_ENABLE=0`)": (None, ""),
    "Ring": (None, ""),
    "NCCL picks NVLS": (0, ""),
    "NVLS (`NCCL_NVLS_ENABLE=1`)": (0, ""),
}
"""ml-engineering ``algo`` cells → (size from which NCCL ran NVLS, or None; reason to exclude)."""

# Reference points (nccl_reference_points.csv): (system, collective, algo) → (node, inter link
# override or None, ranks, nodes, size used for "large"/ranges, busbw GB/s read from the row).
REFERENCE = {
    ("8x H100 SXM (DGX/HGX, NVLink4)", "non-allreduce collectives / all_reduce with NCCL_ALGO=RING"):
        ("dgx_h100", None, 8, 1, 4 * GIB, CollectiveKind.ALL_REDUCE),
    ("8x H100 SXM single node", "all_reduce"): ("dgx_h100", None, 8, 1, 4 * GIB, CollectiveKind.ALL_REDUCE),
    ("H100 nodes, NDR 400Gb/s IB (ConnectX-7)", "per-NIC network bandwidth via NCCL"):
        ("dgx_h100", None, 16, 2, 4 * GIB, CollectiveKind.ALL_REDUCE),
    ("3 nodes x 8x A100 SXM4 40GB, 4x HDR 200Gb/s IB per node", "all_reduce"):
        ("dgx_a100_40gb", "hdr_ib_x4", 24, 3, 128 << 20, CollectiveKind.ALL_REDUCE),
    ("2 nodes x HGX A100 80GB, 4x ConnectX-6 200Gb/s IB per node", "all_reduce"):
        ("dgx_a100", "hdr_ib_x4", 16, 2, 4 * GIB, CollectiveKind.ALL_REDUCE),
    ("4 nodes x 8x H200 (AWS p5en.48xlarge, EFA)", "all_reduce"):
        ("hgx_h200", None, 32, 4, 4 * GIB, CollectiveKind.ALL_REDUCE),
}
"""Rows of nccl_reference_points.csv this script can place (others are NVLS, MI300X or H20)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Group:
    """Measurements of one collective on one system and group shape, vs message size."""

    dataset: str
    node: str
    inter: str | None
    """Inter-node link override (catalog id), when the measured nodes had other NICs."""
    kind: CollectiveKind
    n: int
    nodes: int
    sizes: np.ndarray
    """nccl-tests size in bytes (all-reduce input, all-gather output, message)."""
    measured: np.ndarray
    """Seconds per call."""
    excluded: str = ""
    """Why the series does not inform the catalog links (NVLS, unknown network, topology, bad data);
    excluded series are still compared, but not used to derive link parameters."""

    @property
    def tier(self) -> Tier:
        return Tier.INTRA if self.nodes == 1 else Tier.INTER


def links_of(node_id: str, inter: str | None = None) -> Links:
    node = catalog_node(node_id)
    link = catalog_node_link(inter) if inter else node.inter
    return Links(gpus_per_node=node.gpus_per_node, intra_bandwidth=node.intra.bandwidth,
                 intra_latency=node.intra.latency, inter_bandwidth=link.bandwidth, inter_latency=link.latency)


def catalog_node_link(link_id: str):
    """A catalog link by id, resolved by the language (as a cluster-level inter override)."""
    from llmp import dsl

    text = (f'use "dgx_a100"\nuse "{link_id}"\nmodel p {{ arch = gpt layers = 1 hidden = 64 heads = 1 vocab = 64 '
            f'seq_len = 8 }}\ncluster p {{ node = dgx_a100 inter = {link_id} }}\ntrain {{ global_batch = 8 }}\n')
    return dsl.loads(text).cluster.inter


def predicted(g: Group, links: Links) -> np.ndarray:
    r = g.n // g.nodes
    return np.asarray(time(Collective(kind=g.kind, bytes=g.sizes, group=g.n, ranks_per_node=r, tier=g.tier),
                           links), dtype=float)


# ---- loaders ---------------------------------------------------------------------------------

def ml_engineering() -> Iterator[Group]:
    rows = list(csv.DictReader((MICRO / "ml_engineering_nccl_measurements.csv").open(newline="")))
    keys: dict[tuple[str, str, str, str, str], list[dict[str, str]]] = {}
    for row in rows:
        keys.setdefault((row["system"], row["gpus"], row["nodes"], row["collective"], row["algo"]), []).append(row)
    for (system, gpus, nodes, coll, algo), rs in keys.items():
        n, kind = int(gpus), KINDS[coll]
        sizes = np.array([float(r["size_bytes"]) for r in rs])
        busbw = np.array([float(r["busbw_GBps"]) * 1e9 for r in rs])
        seconds = sizes * float(bus_factor(kind, n)) / busbw
        nvls_from, why = ALGOS[algo]
        start = math.inf if nvls_from is None else nvls_from
        for mask, excluded in ((sizes < start, why), (sizes >= start, "NVLS (the model has no NVLS algorithm)")):
            if mask.any():
                yield Group(dataset=f"ml-engineering {system} [{algo}]", node=ML_ENG_SYSTEMS[system], inter=None,
                            kind=kind, n=n, nodes=int(nodes), sizes=sizes[mask], measured=seconds[mask],
                            excluded=excluded)


def reference_points() -> Iterator[Group]:
    for row in csv.DictReader((MICRO / "nccl_reference_points.csv").open(newline="")):
        key = next((k for k in REFERENCE if k[0] == row["system"] and k[1] == row["collective"]), None)
        if key is None or "NVLS" in row["algo"]:
            continue
        node, inter, n, nodes, size, kind = REFERENCE[key]
        busbw = float(re.search(r"[\d.]+", row["busbw_GBps"]).group()) * 1e9
        if "per NIC" in row["busbw_GBps"]:
            busbw *= 8  # "46-48 per NIC" on 8-NIC nodes: the node aggregate a whole-node ring reaches
        seconds = size * float(bus_factor(kind, n)) / busbw
        yield Group(dataset=f"reference: {row['source']}", node=node, inter=inter, kind=kind, n=n, nodes=nodes,
                    sizes=np.array([float(size)]), measured=np.array([seconds]))


def seed() -> Iterator[Group]:
    pattern = re.compile(r"NVIDIAA100-SXM4-80GB_(allreduce|allreduce_large|allgather_large|p2p)_fp16_(\d)_(\d)\.csv")
    for path in sorted(SEED.glob("*.csv")):
        m = pattern.fullmatch(path.name)
        if not m:
            continue  # combined files duplicate the per-topology ones; the summary is not data
        coll, nodes, per_node = m.group(1), int(m.group(2)), int(m.group(3))
        with path.open(newline="") as f:
            data = np.array([[float(x) for x in r] for r in list(csv.reader(f))[1:]])
        shape, us = data[:, 0], data[:, 3]
        n = nodes * per_node if coll != "p2p" else 2
        kind = {"allreduce": CollectiveKind.ALL_REDUCE, "allreduce_large": CollectiveKind.ALL_REDUCE,
                "allgather_large": CollectiveKind.ALL_GATHER, "p2p": CollectiveKind.SEND_RECV}[coll]
        sizes = 2 * shape * (n if kind is CollectiveKind.ALL_GATHER else 1)
        excluded = ""
        if nodes > 1:
            excluded = ("seed README §8: inter-node NCCL at ~1.2 GB/s per GPU, far below one Slingshot NIC "
                        "(25 GB/s): not the link's capability")
        elif per_node == 2 or coll == "p2p":
            excluded = ("topology: Perlmutter joins its 4 GPUs pairwise (4 NVLink3 links, 100 GB/s per pair), "
                        "no NVSwitch, so a 2-rank group gets 1/3 of the per-GPU bandwidth the model assumes")
        elif coll == "allgather_large":
            excluded = "seed README §8: bimodal, ~82% of rows in a slow mode"
        yield Group(dataset=f"seed Perlmutter {path.stem.split('_', 1)[1]}", node="perlmutter_gpu_80gb", inter=None,
                    kind=kind, n=n, nodes=nodes, sizes=sizes, measured=us * 1e-6, excluded=excluded)


def vidur() -> Iterator[Group]:
    for system, node in (("a100_dgx", "dgx_a100"), ("h100_dgx", "dgx_h100")):
        for coll in ("all_reduce", "send_recv"):
            rows = list(csv.DictReader((VIDUR / system / f"{coll}.csv").open(newline="")))
            shapes: dict[tuple[int, int], list[tuple[float, float]]] = {}
            for r in rows:
                key = (int(r["num_workers"]), int(r["devices_per_node"]))
                shapes.setdefault(key, []).append((float(r["size"]), float(r[f"time_stats.{coll}.median"]) * 1e-3))
            for (workers, per_node), pts in shapes.items():
                pts.sort()
                n = 2 if coll == "send_recv" else workers
                nodes = max(1, workers // per_node)
                excluded = ""
                if system == "a100_dgx" and nodes > 1:
                    excluded = ("vidur does not describe this A100 cluster's network; its cross-node send_recv "
                                "peaks near 8 GB/s, a third of one HDR NIC, so it is not a DGX A100 with 8x HDR")
                yield Group(dataset=f"vidur {system} {coll} {workers}x({per_node}/node)", node=node, inter=None,
                            kind=KINDS[coll], n=n, nodes=nodes, sizes=np.array([p[0] for p in pts]),
                            measured=np.array([p[1] for p in pts]), excluded=excluded)


# ---- comparison --------------------------------------------------------------------------------

BUCKETS = ((0, 1 << 20, "< 1 MiB"), (1 << 20, 64 << 20, "1-64 MiB"), (64 << 20, GIB, "64 MiB-1 GiB"),
           (GIB, math.inf, ">= 1 GiB"))


def log_errors(g: Group, links: Links) -> np.ndarray:
    return np.log(predicted(g, links) / g.measured)


def comparison(groups: list[Group]) -> list[list[str]]:
    """One row per series: median signed error per message-size bucket (points in brackets)."""
    rows = []
    for g in groups:
        err = np.exp(log_errors(g, links_of(g.node, g.inter))) - 1
        cells = []
        for lo, hi, _ in BUCKETS:
            mask = (g.sizes >= lo) & (g.sizes < hi)
            cells.append(f"{100 * float(np.median(err[mask])):+.0f}% ({int(mask.sum())})" if mask.any() else "")
        rows.append([g.dataset, g.node + (f" + {g.inter}" if g.inter else ""), g.kind.value,
                     f"{g.n} / {g.nodes}", *cells, g.excluded])
    return rows


# ---- calibration -------------------------------------------------------------------------------

ETAS = np.round(np.arange(0.30, 1.0001, 0.01), 2)
ALPHAS = np.geomspace(0.5e-6, 60e-6, 81)


def scaled(links: Links, tier: Tier, eta: float, alpha: float | None) -> Links:
    """``links`` with the ``tier`` link's bandwidth times ``eta`` and (if given) latency ``alpha``."""
    if tier is Tier.INTRA:
        return replace(links, intra_bandwidth=links.intra_bandwidth * eta,
                       intra_latency=links.intra_latency if alpha is None else alpha)
    return replace(links, inter_bandwidth=links.inter_bandwidth * eta,
                   inter_latency=links.inter_latency if alpha is None else alpha)


def objective(groups: list[Group], bases: list[Links]) -> float:
    """Mean over series of the median |log(predicted / measured)| (each series weighs the same)."""
    return statistics.fmean(float(np.median(np.abs(log_errors(g, b)))) for g, b in zip(groups, bases))


@dataclass(frozen=True, kw_only=True, slots=True)
class Fit:
    eta: float | None
    """None when no series reaches the bandwidth plateau (>= 64 MiB): not determined."""
    alpha: float | None
    """None when no series has small messages (< 1 MiB): not determined, catalog latency kept."""
    before: float
    after: float


def calibrate(groups: list[Group], bases: list[Links], tier: Tier) -> Fit:
    """Grid search of the ``tier`` link's bandwidth fraction and latency over the model itself."""
    sizes = np.concatenate([g.sizes for g in groups])
    etas = ETAS if (sizes >= 64 << 20).any() else np.array([1.0])
    alphas: list[float | None] = list(ALPHAS) if (sizes < 1 << 20).any() else [None]
    best = (math.inf, 1.0, None)
    for eta in etas:
        for alpha in alphas:
            score = objective(groups, [scaled(b, tier, float(eta), alpha) for b in bases])
            if score < best[0]:
                best = (score, float(eta), alpha)
    return Fit(eta=best[1] if len(etas) > 1 else None, alpha=best[2], before=objective(groups, bases),
               after=best[0])


def proposals(groups: list[Group]) -> list[list[str]]:
    """Derived link parameters per node type and tier, intra first (inter fits use the fitted intra)."""
    usable = [g for g in groups if not g.excluded]
    rows = []
    intra_fit: dict[str, Fit] = {}
    for tier in (Tier.INTRA, Tier.INTER):
        for node in sorted({g.node for g in usable if g.tier is tier}):
            series = [g for g in usable if g.node == node and g.tier is tier]
            bases = [links_of(g.node, g.inter) for g in series]
            if tier is Tier.INTER and node in intra_fit:
                f = intra_fit[node]
                bases = [scaled(b, Tier.INTRA, f.eta or 1.0, f.alpha) for b in bases]
            fit = calibrate(series, bases, tier)
            if tier is Tier.INTRA:
                intra_fit[node] = fit
            cat = catalog_node(node)
            link = cat.intra if tier is Tier.INTRA else cat.inter
            measured_on = sorted({g.inter or link.id for g in series})
            rows.append([node, tier.value, f"{link.id}: {link.bandwidth / 1e9:.0f} GB/s, {link.latency * 1e6:.1f} us",
                         f"{len(series)} ({', '.join(measured_on)})",
                         "not determined" if fit.eta is None else f"{fit.eta:.2f}",
                         "–" if fit.eta is None else f"{link.bandwidth * fit.eta / 1e9:.0f} GB/s",
                         "not determined" if fit.alpha is None else f"{fit.alpha * 1e6:.1f} us",
                         f"{100 * (math.exp(fit.before) - 1):.0f}%", f"{100 * (math.exp(fit.after) - 1):.0f}%"])
    return rows


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|",
            *("| " + " | ".join(r) + " |" for r in rows)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-record", action="store_true", help="print only; do not append to RESULTS.md")
    args = parser.parse_args(argv)
    groups = [*ml_engineering(), *reference_points(), *seed(), *vidur()]
    points = sum(len(g.sizes) for g in groups)
    prop_rows = proposals(groups)
    lines = [f"## Collective model vs published micro-benchmarks (issue 4) — {dt.date.today().isoformat()}", "",
             "- command: `python benchmarks/collectives_published.py`",
             (f"- data: {points} points in {len(groups)} series from ../shared/data (ml-engineering nccl-tests, "
             "nccl reference points, seed Perlmutter NCCL, vidur DGX A100/H100); micro-benchmarks only, no "
             "end-to-end rows"),
             "- error = model time / measured time − 1 per call (median over the points of a size bucket)", "",
             "### Model error by series and message size", "",
             *table(["series", "node", "collective", "ranks / nodes", *(f"median error {name} (points)"
                                                                    for _, _, name in BUCKETS),
                     "excluded from the link proposal because"], comparison(groups)), "",
             "### Link parameters derived from these micro-benchmarks (proposal; catalog files not edited)", "",
             ("eta = effective fraction of the catalog bandwidth, alpha = per-step latency, found by a grid "
             "search of the model itself over eta in [0.30, 1.00] and alpha in [0.5, 60] us, minimising the "
             "mean over series of the median |log error| (inter-node fits start from the fitted intra link). "
             "eta needs messages >= 64 MiB and alpha messages < 1 MiB; otherwise 'not determined' (the catalog "
             "value stays). Error columns: that objective as a typical |error| before and after (in-sample on "
             "these micro-benchmarks). Series marked excluded above are not used."), "",
             *table(["node", "tier", "catalog link", "series (measured on)", "eta",
                     "effective bandwidth", "alpha", "typical |error| before", "after"], prop_rows), ""]
    text = "\n".join(lines)
    print(text)
    if not args.no_record:
        new = not RESULTS.exists()
        with RESULTS.open("a", encoding="utf-8") as f:
            f.write(("# Benchmark results\n\n" if new else "\n") + text)
        print(f"appended to {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
