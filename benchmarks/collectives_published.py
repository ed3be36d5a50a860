"""llmp's alpha-beta collective model against collective micro-benchmarks; fit and check the links.

    python benchmarks/collectives_published.py [--no-record]

Two splits of data, never mixed (all read from ../shared/data, nothing copied):

* FIT — published facts, the only data a catalog link value may come from
  (``microbench/collectives_published/``: ml-engineering nccl-tests and all_reduce_bench sweeps
  on 8x A100, 8x H200, 8x B200; maintainer and user plateaus from NVIDIA/nccl(-tests) issues;
  the MI300X RCCL points). Per catalog link, a grid search of the model itself finds the
  ``efficiency`` (achievable fraction of line rate) that makes it meet the bandwidth plateau.
* HELD OUT — scored only: the seed paper's Perlmutter NCCL profiles and Vidur's DGX A100/H100
  profiles (``seed-estimate-train-time/``, ``vidur/network/``; these may not be fitted on or
  shipped). They check whether the published facts transfer to other machines' measurements.

"Before" is the catalog at line rate behind a switch (every ``efficiency`` 1, no
``peer_bandwidth``), i.e. the model before this calibration; "after" is the catalog as shipped.
NVLS (NVLink SHARP) points are reported but never fitted: the model has no NVLS algorithm.
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

from recording import record

from llmp.analytic.collectives import Links, bus_factor, time
from llmp.analytic.kernels import Collective, CollectiveKind, Tier
from llmp.dsl import catalog
from llmp.hardware.spec import Link

DATA = ROOT.parent / "shared" / "data"
MICRO = DATA / "microbench" / "collectives_published"
SEED = DATA / "seed-estimate-train-time" / "perlmutter-a100" / "nccl"
VIDUR = DATA / "vidur" / "network"
GIB = 1 << 30
FIT, HELD_OUT = "fit (published)", "held out (seed/vidur)"

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
"""ml-engineering systems → the catalog node with the same GPU and NVLink."""

EFA = "AWS EFA network, not the catalog's InfiniBand NICs"
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
"""ml-engineering ``algo`` cells → (size from which NCCL ran NVLS, or None; reason not to fit)."""

# Reference points (nccl_reference_points.csv): (system, collective) → (node, inter link override
# or None, ranks, nodes, size for "large"/ranges, kind, reason not to fit).
REFERENCE = {
    ("8x H100 SXM (DGX/HGX, NVLink4)", "non-allreduce collectives / all_reduce with NCCL_ALGO=RING"):
        ("dgx_h100", None, 8, 1, 4 * GIB, CollectiveKind.ALL_REDUCE, ""),
    ("8x H100 SXM single node", "all_reduce"): ("dgx_h100", None, 8, 1, 4 * GIB, CollectiveKind.ALL_REDUCE, ""),
    ("H100 nodes, NDR 400Gb/s IB (ConnectX-7)", "per-NIC network bandwidth via NCCL"):
        ("dgx_h100", None, 16, 2, 4 * GIB, CollectiveKind.ALL_REDUCE, ""),
    ("3 nodes x 8x A100 SXM4 40GB, 4x HDR 200Gb/s IB per node", "all_reduce"):
        ("dgx_a100_40gb", "hdr_ib_x4", 24, 3, 128 << 20, CollectiveKind.ALL_REDUCE, ""),
    ("2 nodes x HGX A100 80GB, 4x ConnectX-6 200Gb/s IB per node", "all_reduce"):
        ("dgx_a100", "hdr_ib_x4", 16, 2, 4 * GIB, CollectiveKind.ALL_REDUCE, ""),
    ("4 nodes x 8x H200 (AWS p5en.48xlarge, EFA)", "all_reduce"):
        ("hgx_h200", None, 32, 4, 4 * GIB, CollectiveKind.ALL_REDUCE, EFA),
    ("8x AMD MI300X single node (Infinity Fabric, 7 links)", "all_reduce"):
        ("mi300x_platform", None, 8, 1, 4 * GIB, CollectiveKind.ALL_REDUCE, ""),
}
"""Rows of nccl_reference_points.csv this script can place (the others are NVLS or H20 systems)."""
SMALL_GROUP = re.compile(r"(\d+) GPUs: ([\d.]+) GB/s busbw")
"""A second point in a reference row's notes (MI300X: "2 GPUs: 47.671 GB/s busbw")."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Group:
    """Measurements of one collective on one system and group shape, vs message size."""

    dataset: str
    split: str
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
    """Why the series is not a measurement of the catalog link (NVLS, another network, bad data):
    never fitted; in the held-out split, scored separately."""

    @property
    def tier(self) -> Tier:
        return Tier.INTRA if self.nodes == 1 else Tier.INTER

    def link(self) -> Link:
        """The catalog link this series measures (the intra link, or the inter link for groups across nodes)."""
        node = catalog.node(self.node)
        return node.intra if self.tier is Tier.INTRA else self.inter_link()

    def inter_link(self) -> Link:
        return catalog.link(self.inter) if self.inter else catalog.node(self.node).inter


def at_line_rate(link: Link) -> Link:
    """``link`` as the model saw it before calibration: line rate, every pair through a switch."""
    return replace(link, efficiency=1.0, peer_bandwidth=None)


def links_of(g: Group, *, calibrated: bool) -> Links:
    node = catalog.node(g.node)
    inter = g.inter_link()
    if not calibrated:
        node, inter = replace(node, intra=at_line_rate(node.intra)), at_line_rate(inter)
    return Links.between(node, inter)


def predicted(g: Group, links: Links) -> np.ndarray:
    r = g.n // g.nodes
    return np.asarray(time(Collective(kind=g.kind, bytes=g.sizes, group=g.n, ranks_per_node=r, tier=g.tier),
                           links), dtype=float)


# ---- loaders ---------------------------------------------------------------------------------

def _seconds(size: float, kind: CollectiveKind, n: int, busbw: float) -> float:
    return size * float(bus_factor(kind, n)) / busbw


def ml_engineering() -> Iterator[Group]:
    rows = list(csv.DictReader((MICRO / "ml_engineering_nccl_measurements.csv").open(newline="")))
    keys: dict[tuple[str, str, str, str, str], list[dict[str, str]]] = {}
    for row in rows:
        keys.setdefault((row["system"], row["gpus"], row["nodes"], row["collective"], row["algo"]), []).append(row)
    for (system, gpus, nodes, coll, algo), rs in keys.items():
        n, kind = int(gpus), KINDS[coll]
        sizes = np.array([float(r["size_bytes"]) for r in rs])
        seconds = np.array([_seconds(float(r["size_bytes"]), kind, n, float(r["busbw_GBps"]) * 1e9) for r in rs])
        nvls_from, why = ALGOS[algo]
        if int(nodes) > 1 and not why:
            why = EFA
        start = math.inf if nvls_from is None else nvls_from
        for mask, excluded in ((sizes < start, why), (sizes >= start, "NVLS (the model has no NVLS algorithm)")):
            if mask.any():
                yield Group(dataset=f"ml-engineering {system} [{algo}]", split=FIT, node=ML_ENG_SYSTEMS[system],
                            inter=None, kind=kind, n=n, nodes=int(nodes), sizes=sizes[mask], measured=seconds[mask],
                            excluded=excluded)


def reference_points() -> Iterator[Group]:
    for row in csv.DictReader((MICRO / "nccl_reference_points.csv").open(newline="")):
        key = (row["system"], row["collective"])
        if key not in REFERENCE or "NVLS" in row["algo"]:
            continue
        node, inter, n, nodes, size, kind, excluded = REFERENCE[key]
        busbw = float(re.search(r"[\d.]+", row["busbw_GBps"]).group()) * 1e9
        if "per NIC" in row["busbw_GBps"]:
            busbw *= 8  # "46-48 per NIC" on 8-NIC nodes: the node aggregate a whole-node ring reaches
        points = [(n, busbw)]
        small = SMALL_GROUP.search(row["notes"])
        if small:
            points.append((int(small.group(1)), float(small.group(2)) * 1e9))
        for ranks, bw in points:
            yield Group(dataset=f"reference: {row['source']}", split=FIT, node=node, inter=inter, kind=kind,
                        n=ranks, nodes=nodes, sizes=np.array([float(size)]),
                        measured=np.array([_seconds(size, kind, ranks, bw)]), excluded=excluded)


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
        elif coll == "allgather_large" and per_node == 4:
            excluded = "seed README §8: bimodal, ~82% of rows in a slow mode"
        yield Group(dataset=f"seed Perlmutter {path.stem.split('_', 1)[1]}", split=HELD_OUT,
                    node="perlmutter_gpu_80gb", inter=None, kind=kind, n=n, nodes=nodes, sizes=sizes,
                    measured=us * 1e-6, excluded=excluded)


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
                yield Group(dataset=f"vidur {system} {coll} {workers}x({per_node}/node)", split=HELD_OUT,
                            node=node, inter=None, kind=KINDS[coll], n=n, nodes=nodes,
                            sizes=np.array([p[0] for p in pts]), measured=np.array([p[1] for p in pts]),
                            excluded=excluded)


# ---- scoring ---------------------------------------------------------------------------------

BUCKETS = ((0, 1 << 20, "< 1 MiB"), (1 << 20, 64 << 20, "1-64 MiB"), (64 << 20, math.inf, ">= 64 MiB"))


def log_errors(g: Group, links: Links) -> np.ndarray:
    return np.log(predicted(g, links) / g.measured)


def typical(groups: list[Group], bases: list[Links]) -> float:
    """Mean over series of the median |log(predicted / measured)| (each series weighs the same)."""
    return statistics.fmean(float(np.median(np.abs(log_errors(g, b)))) for g, b in zip(groups, bases))


def pct(log_err: float) -> str:
    return f"{100 * (math.exp(log_err) - 1):+.0f}%"


def factor(abs_log_err: float) -> str:
    """A typical |log error| as the factor the model is off by (1.25x: 25% too fast or too slow)."""
    return f"{math.exp(abs_log_err):.2f}x"


def comparison(groups: list[Group]) -> list[list[str]]:
    """One row per series: median signed error per size bucket, before → after."""
    rows = []
    for g in groups:
        before = log_errors(g, links_of(g, calibrated=False))
        after = log_errors(g, links_of(g, calibrated=True))
        cells = []
        for lo, hi, _ in BUCKETS:
            mask = (g.sizes >= lo) & (g.sizes < hi)
            cells.append(f"{pct(float(np.median(before[mask])))} → {pct(float(np.median(after[mask])))} "
                         f"({int(mask.sum())})" if mask.any() else "")
        rows.append([g.dataset, g.split, g.node + (f" + {g.inter}" if g.inter else ""), g.kind.value,
                     f"{g.n} / {g.nodes}", *cells, g.excluded])
    return rows


def summary(groups: list[Group]) -> list[list[str]]:
    rows = []
    for split in (FIT, HELD_OUT):
        for label, keep in (("link measurements", lambda g: not g.excluded), ("all series", lambda g: True)):
            chosen = [g for g in groups if g.split == split and keep(g)]
            if not chosen:
                continue
            b = typical(chosen, [links_of(g, calibrated=False) for g in chosen])
            a = typical(chosen, [links_of(g, calibrated=True) for g in chosen])
            points = sum(len(g.sizes) for g in chosen)
            rows.append([split, label, str(len(chosen)), str(points), factor(b), factor(a)])
    return rows


# ---- fitting (FIT split only) ------------------------------------------------------------------

ETAS = np.round(np.arange(0.30, 1.0001, 0.01), 2)
PLATEAU = 64 << 20
"""Messages from this size on are bandwidth-bound: the fit of ``efficiency`` uses only them."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Fit:
    link: Link
    series: int
    points: int
    eta: float
    """Efficiency: the fraction of line rate that makes the model meet the plateau measurements."""
    before: float
    after: float
    """Typical |log error| on the plateau points at line rate and at ``eta``."""


def _at(links: Links, tier: Tier, eta: float) -> Links:
    """Line-rate ``links`` with the ``tier`` link at ``eta`` of its rate (pairs too)."""
    if tier is Tier.INTRA:
        peer = None if links.intra_peer_bandwidth is None else links.intra_peer_bandwidth * eta
        return replace(links, intra_bandwidth=links.intra_bandwidth * eta, intra_peer_bandwidth=peer)
    return replace(links, inter_bandwidth=links.inter_bandwidth * eta)


def _plateau(g: Group) -> Group:
    keep = g.sizes >= PLATEAU
    return replace(g, sizes=g.sizes[keep], measured=g.measured[keep])


def fits(groups: list[Group]) -> list[Fit]:
    """Per catalog link measured in the FIT split (intra links first, then NICs on the fitted
    intra links): the efficiency in [0.30, 1.00] minimising the mean over series of the median
    |log error| on the plateau (messages >= 64 MiB).

    Latencies are not fitted: the catalog's come from the smallest-message points of the same
    published sweeps, and the mid-size misses are NCCL protocol changes (LL, LL128, Simple), not
    a per-step latency (a single alpha fitted over all sizes gets 11 us on NVLink3 and then
    predicts 32 KiB all-reduces 3x too slow). The bases keep the catalog's topology
    (``peer_bandwidth``) but put the fitted link at line rate, so the result does not depend on
    the efficiency the catalog holds now."""
    usable = [_plateau(g) for g in groups if g.split == FIT and not g.excluded]
    usable = [g for g in usable if len(g.sizes)]
    out: list[Fit] = []
    for tier in (Tier.INTRA, Tier.INTER):
        by_link: dict[str, list[Group]] = {}
        for g in usable:
            if g.tier is tier:
                by_link.setdefault(g.link().id, []).append(g)
        for series in (by_link[k] for k in sorted(by_link)):
            bases = []
            for g in series:
                node = catalog.node(g.node)
                if tier is Tier.INTRA:
                    node = replace(node, intra=replace(node.intra, efficiency=1.0))
                bases.append(Links.between(node, replace(g.inter_link(), efficiency=1.0)))
            scores = [typical(series, [_at(b, tier, float(eta)) for b in bases]) for eta in ETAS]
            best = int(np.argmin(scores))
            out.append(Fit(link=series[0].link(), series=len(series), points=sum(len(g.sizes) for g in series),
                           eta=float(ETAS[best]), before=typical(series, bases), after=scores[best]))
    return out


def fit_rows(found: list[Fit]) -> list[list[str]]:
    return [[f.link.id, f"{f.link.bandwidth / 1e9:g} GB/s", f"{f.series} ({f.points})", f"{f.eta:.2f}",
             factor(f.before), factor(f.after), f"{float(f.link.efficiency):.2f}"] for f in found]


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|",
            *("| " + " | ".join(r) + " |" for r in rows)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-record", action="store_true", help="print only; do not append to RESULTS.md")
    args = parser.parse_args(argv)
    groups = [*ml_engineering(), *reference_points(), *seed(), *vidur()]
    points = {s: sum(len(g.sizes) for g in groups if g.split == s) for s in (FIT, HELD_OUT)}
    lines = [f"## Collective model after calibration from published nccl-tests facts — {dt.date.today().isoformat()}",
             "", "- command: `python benchmarks/collectives_published.py`",
             (f"- fit split: {points[FIT]} points in {sum(g.split == FIT for g in groups)} series from "
              "../shared/data/microbench/collectives_published (ml-engineering nccl-tests, NVIDIA/nccl(-tests) "
              "maintainer and user reference points, MI300X RCCL); the catalog link values come from these only"),
             (f"- held-out split: {points[HELD_OUT]} points in {sum(g.split == HELD_OUT for g in groups)} series "
              "(seed Perlmutter NCCL, vidur DGX A100/H100), scored only"),
             ("- before = catalog links at line rate behind a switch (efficiency 1, no peer_bandwidth); after = the "
              "catalog as shipped; error = model time / measured time − 1"), "",
             "### Link values derived from the fit split", "",
             ("Per catalog link, the efficiency (grid 0.30-1.00) that minimises the mean over series of the "
              "median |log error| on plateau messages (>= 64 MiB); NIC fits run on the fitted intra links. "
              "'off by' = exp(that mean), the typical factor between model and measurement on those points."), "",
             *table(["link", "line rate", "series (points)", "efficiency fitted", "off by at line rate",
                     "off by at the fit", "efficiency in catalog"], fit_rows(fits(groups))), "",
             "### Typical error before → after", "",
             ("Typical factor between model and measurement: exp(mean over series of the median |log error|), all "
              "message sizes; 'link measurements' leaves out the series marked excluded below (NVLS, another "
              "network, data the seed README calls unreliable)."), "",
             *table(["split", "series", "count", "points", "before", "after"], summary(groups)), "",
             "### Error by series and message size (median, before → after, points)", "",
             *table(["series", "split", "node", "collective", "ranks / nodes",
                     *(f"{name}" for _, _, name in BUCKETS), "excluded because"], comparison(groups)), ""]
    text = "\n".join(lines)
    print(text)
    if not args.no_record:
        record(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
