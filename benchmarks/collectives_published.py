"""llmp's collective model (NCCL's cost model on the catalog links) against collective measurements.

    python benchmarks/collectives_published.py [--record]
    python benchmarks/collectives_published.py --llmp ../main   # another checkout's model

Data (``collective_data.py``, read from ../shared/data, nothing copied), two splits never mixed:

* FIT: published nccl-tests figures (``microbench/collectives_published``: ml-engineering sweeps on
  8x A100, 8x H200, 8x B200; maintainer and user figures from NVIDIA/nccl(-tests) issues; MI300X
  RCCL). The catalog's link values come from these only: per link, the ``efficiency`` that meets
  the ring's bandwidth plateau (>= 64 MiB) and, for NVLink, the ``latency`` each step adds to
  NCCL's own (messages < 1 MiB).
* HELD OUT: the seed paper's Perlmutter NCCL samples and Vidur's DGX A100/H100 profiles, other
  machines than the fit's. Scored only (the seed machine's network rate is derived from the seed's
  own inter-node samples, `collective_tables.py`, so its inter-node rows test the model's shape,
  not its level; the table says so).

Scores, per machine (a catalog node, one source): the model with the catalog as shipped; the model
refitted without that machine (leave-one-machine-out, FIT split only: the honest score of the
calibration); and the machine's own tables as ``llmp predict`` serves them (in sample: what the
thinning and interpolation lose). Series that forced an algorithm (NCCL_NVLS_ENABLE=0, NCCL_ALGO)
are scored against that algorithm's own candidates; the rest against NCCL's pick.

With ``--llmp PATH`` the script scores that checkout's ``collectives.time`` on the same series
(the "before" of a change), nothing else.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import statistics
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _llmp_path(argv: list[str] | None) -> Path:
    """The checkout whose llmp is scored (``--llmp``, else this one), read before llmp is imported."""
    args = sys.argv[1:] if argv is None else argv
    for i, a in enumerate(args):
        if a == "--llmp" and i + 1 < len(args):
            return Path(args[i + 1]).resolve()
        if a.startswith("--llmp="):
            return Path(a.split("=", 1)[1]).resolve()
    return ROOT


sys.path.insert(0, str(_llmp_path(None)))
sys.path.insert(1, str(ROOT / "benchmarks"))

import collective_data as data
from recording import commit, machine, record

from llmp.analytic import collectives
from llmp.analytic.collectives import Links
from llmp.analytic.kernels import Collective, CollectiveKind, Tier
from llmp.dsl import catalog
from llmp.hardware.spec import Link, Node

FIT, HELD_OUT = "fit (published nccl-tests)", "held out (seed, Vidur)"
BUCKETS = ((0, 1 << 20, "< 1 MiB"), (1 << 20, 64 << 20, "1-64 MiB"), (64 << 20, math.inf, ">= 64 MiB"))
PLATEAU = 64 << 20
SMALL = 1 << 20
ETAS = np.round(np.arange(0.30, 1.0001, 0.01), 2)
LATENCIES = np.round(np.arange(0.0, 8.0001, 0.1), 1) * 1e-6
NEW = hasattr(collectives, "choice")
"""The checkout scored has NCCL's model (forced-algorithm scoring, tables); False for the alpha-beta one."""


def split_of(g: data.Group) -> str:
    return FIT if g.source in ("ml-engineering", "reference") else HELD_OUT


def machine_of(g: data.Group) -> str:
    return f"{g.node} ({g.source})"


# ---- the model on a series ---------------------------------------------------------------------

def node_of(g: data.Group) -> Node:
    try:
        return catalog.node(g.node)
    except Exception:  # another checkout without the seed's machine: its Perlmutter
        return catalog.node(data.SEED_HEALTHY)


def inter_of(g: data.Group, node: Node) -> Link:
    return catalog.link(g.inter) if g.inter else node.inter


def links_of(g: data.Group, overrides: dict[str, Link] | None = None) -> Links:
    """The series' links from the catalog, with ``overrides`` (link id → link) in place."""
    node = node_of(g)
    inter = inter_of(g, node)
    if overrides:
        node = replace(node, intra=overrides.get(node.intra.id, node.intra))
        inter = overrides.get(inter.id, inter)
    links = Links.between(node, inter)
    return links.without_tables() if NEW else links


def collective(g: data.Group) -> Collective:
    return Collective(kind=g.kind, bytes=g.sizes, group=g.n, ranks_per_node=g.per_node,
                      tier=Tier.INTRA if g.nodes == 1 else Tier.INTER)


def predicted(g: data.Group, links: Links) -> np.ndarray:
    """Model seconds per point: NCCL's pick, or the forced algorithm's best protocol."""
    c = collective(g)
    if not NEW or g.algorithm is None or g.kind not in (CollectiveKind.ALL_REDUCE, CollectiveKind.ALL_GATHER,
                                                        CollectiveKind.REDUCE_SCATTER):
        return np.asarray(collectives.time(c, links), dtype=float)
    from llmp.analytic import nccl

    found = nccl.candidates(collectives.call(c), links.fabric(c.ranks_per_node))
    return np.min(np.stack([np.broadcast_to(np.asarray(t, dtype=float), g.sizes.shape)
                            for (a, _), t in found.items() if a.value == g.algorithm]), axis=0)


def served(g: data.Group) -> np.ndarray | None:
    """Seconds as ``llmp predict`` serves them on the series' machine (tables, model elsewhere)."""
    if not NEW or g.excluded or g.algorithm is not None:  # tables hold NCCL's own picks
        return None
    from llmp.analytic import measured

    node = node_of(g)
    links = Links.between(node, catalog.link("slingshot11_x4_seed") if g.node == data.SEED_NODE else inter_of(g, node))
    model = np.asarray(collectives.time(collective(g), links), dtype=float)
    return measured.serve_arrays(collective(g), model, links)


def log_err(pred: np.ndarray, g: data.Group) -> np.ndarray:
    return np.log(pred / g.measured)


def typical(errs: list[np.ndarray]) -> float:
    """Mean over series of the median |log error| (each series weighs the same)."""
    return statistics.fmean(float(np.median(np.abs(e))) for e in errs) if errs else float("nan")


def factor(x: float) -> str:
    return "" if math.isnan(x) else f"{math.exp(x):.2f}x"


# ---- fitting the links (FIT split only) ----------------------------------------------------------

@dataclass(frozen=True, kw_only=True, slots=True)
class Fit:
    link: Link
    series: int
    points: int
    eta: float
    latency: float | None
    """Seconds per step the link adds (NVLink links with small-message data), None: not fitted."""
    nvls: float | None
    """NVLS efficiency (links whose switch runs NVLS, from NCCL's NVLS picks), None: not fitted."""
    before: float
    after: float


def fitted_link(g: data.Group) -> Link:
    """The catalog link a series measures: the NIC across nodes, else the intra link."""
    node = node_of(g)
    return node.intra if g.nodes == 1 else inter_of(g, node)


def fittable(g: data.Group) -> bool:
    """Fit on series that measure a catalog link as NCCL ran it there, except NCCL's own choice on an
    NVLS switch (that is NVLS, whose rate is NCCL's efficiency constant, not the ring's)."""
    if g.excluded or split_of(g) != FIT:
        return False
    return g.algorithm == "ring" or (g.algorithm is None and not (g.nodes == 1 and node_of(g).intra.nvls))


def fit_links(groups: list[data.Group]) -> tuple[dict[str, Link], list[Fit]]:
    """Per link: efficiency on the plateau, then (NVLink) latency on small messages; NICs after the
    NVLink links they sit behind. Returns the overrides and a report."""
    usable = [g for g in groups if fittable(g)]
    overrides: dict[str, Link] = {}
    report: list[Fit] = []
    for tier_nodes in (1, 2):  # intra links first, then NICs on the fitted intra links
        by_link: dict[str, list[data.Group]] = {}
        for g in usable:
            if (g.nodes == 1) == (tier_nodes == 1):
                by_link.setdefault(fitted_link(g).id, []).append(g)
        if tier_nodes == 1:  # links known only from NCCL's picks (latency only)
            for g in groups:
                if g.nodes == 1 and not g.excluded and split_of(g) == FIT and g.algorithm is None:
                    by_link.setdefault(fitted_link(g).id, [])
        for link_id in sorted(by_link):
            series = by_link[link_id]
            catalog_link = catalog.link(link_id)
            base = replace(catalog_link, efficiency=1.0) if series else catalog_link
            plateau = [(g, g.sizes >= PLATEAU) for g in series]
            plateau = [(g, m) for g, m in plateau if m.any()]

            def score(link: Link, which: list[tuple[data.Group, np.ndarray]], link_id: str = link_id) -> float:
                errs = []
                for g, m in which:
                    e = log_err(predicted(g, links_of(g, {**overrides, link_id: link})), g)
                    errs.append(e[m])
                return typical(errs)

            eta = float(base.efficiency)
            before = score(base, plateau) if plateau else float("nan")
            if plateau:
                eta = float(ETAS[int(np.argmin([score(replace(base, efficiency=float(x)), plateau) for x in ETAS]))])
            link = replace(base, efficiency=eta)
            latency = None
            # Small messages of NCCL's own picks on this link (NVLS switches too: NCCL runs LL rings there)
            small = [(g, g.sizes < SMALL) for g in groups if tier_nodes == 1 and g.nodes == 1 and not g.excluded
                     and split_of(g) == FIT and g.algorithm is None and fitted_link(g).id == link_id]
            small = [(g, m) for g, m in small if m.any()]
            if NEW and small:
                latency = float(LATENCIES[int(np.argmin([score(replace(link, latency=float(x)), small)
                                                         for x in LATENCIES]))])
                link = replace(link, latency=latency)
            nvls = None
            picks = [(g, g.sizes >= PLATEAU) for g in groups if g.nodes == 1 and not g.excluded and split_of(g) == FIT
                     and g.algorithm in (None, "nvls") and fitted_link(g).id == link_id]
            picks = [(g, m) for g, m in picks if m.any()]
            if NEW and link.nvls and picks:
                scores = [score(replace(link, nvls_efficiency=float(x)), picks) for x in ETAS]
                nvls = float(ETAS[int(np.argmin(scores))])
                link = replace(link, nvls_efficiency=nvls)
                small += picks
            overrides[link_id] = link
            everything = [(g, np.ones(len(g.sizes), dtype=bool)) for g in series] + small
            points = sum(int(m.sum()) for _, m in everything)
            report.append(Fit(link=catalog_link, series=len(everything), points=points, eta=eta, latency=latency,
                              nvls=nvls, before=before, after=score(link, everything)))
    return overrides, report


# ---- report ----------------------------------------------------------------------------------

def table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|",
            *("| " + " | ".join(r) + " |" for r in rows)]


def bucket_cells(e: np.ndarray, g: data.Group) -> list[str]:
    out = []
    for lo, hi, _ in BUCKETS:
        m = (g.sizes >= lo) & (g.sizes < hi)
        out.append(f"{data.pct(float(np.median(e[m])))} ({int(m.sum())})" if m.any() else "")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", action="store_true", help="append the section to benchmarks/RESULTS.md")
    parser.add_argument("--llmp", default=None, help="score the collective model of the llmp checkout at PATH")
    args = parser.parse_args(argv)
    groups = data.every()
    model_errs = {id(g): log_err(predicted(g, links_of(g)), g) for g in groups}
    by_machine: dict[tuple[str, str], list[data.Group]] = {}
    for g in groups:
        if not g.excluded:
            by_machine.setdefault((split_of(g), machine_of(g)), []).append(g)

    lomo: dict[int, np.ndarray] = {}
    fits: list[Fit] = []
    if args.llmp is None:
        _, fits = fit_links(groups)
        for (split, m), members in by_machine.items():
            if split != FIT:
                continue
            overrides, _ = fit_links([g for g in groups if machine_of(g) != m])
            for g in members:
                lomo[id(g)] = log_err(predicted(g, links_of(g, overrides)), g)
    tables = {id(g): s for g in groups if (s := served(g)) is not None}

    summary = []
    for (split, m), members in sorted(by_machine.items()):
        e_model = [model_errs[id(g)] for g in members]
        e_lomo = [lomo[id(g)] for g in members if id(g) in lomo]
        e_served = [log_err(tables[id(g)], g) for g in members if id(g) in tables]
        signed = float(np.median(np.concatenate(e_model)))
        summary.append([split, m, str(len(members)), str(sum(len(g.sizes) for g in members)), factor(typical(e_model)),
                        data.pct(signed), factor(typical(e_lomo)), factor(typical(e_served))])
    totals = []
    for split in (FIT, HELD_OUT):
        members = [g for (s, _), gs in by_machine.items() if s == split for g in gs]
        totals.append([split, "all machines", str(len(members)), str(sum(len(g.sizes) for g in members)),
                       factor(typical([model_errs[id(g)] for g in members])),
                       data.pct(float(np.median(np.concatenate([model_errs[id(g)] for g in members])))),
                       factor(typical([lomo[id(g)] for g in members if id(g) in lomo])),
                       factor(typical([log_err(tables[id(g)], g) for g in members if id(g) in tables]))])
    series_rows = [[g.dataset, split_of(g), g.node + (f" + {g.inter}" if g.inter else ""), g.kind.value,
                    f"{g.n} / {g.nodes}", g.algorithm or "NCCL's pick", *bucket_cells(model_errs[id(g)], g),
                    g.excluded] for g in groups]
    who = f"llmp at {args.llmp}" if args.llmp else f"llmp {commit()}"
    lines = [f"## Collective model against collective measurements ({who}) — {dt.date.today().isoformat()}", "",
             f"- command: `python benchmarks/collectives_published.py{' --llmp ' + args.llmp if args.llmp else ''}`",
             f"- machine: {machine()}",
             f"- model: {'NCCL cost model (llmp/analytic/nccl.py)' if NEW else 'alpha-beta ring/tree/hierarchical'}",
             (f"- {FIT}: {sum(len(g.sizes) for g in groups if split_of(g) == FIT)} points in "
              f"{sum(split_of(g) == FIT for g in groups)} series; {HELD_OUT}: "
              f"{sum(len(g.sizes) for g in groups if split_of(g) == HELD_OUT)} points in "
              f"{sum(split_of(g) == HELD_OUT for g in groups)} series (scored only)"),
             ("- error = predicted / measured − 1; 'off by' = exp(mean over series of the median |log error|); "
              "leave-one-machine-out refits the links without the machine scored (FIT split); tables = the "
              "machine's own shipped tables as `llmp predict` serves them (in sample)"), ""]
    if fits:
        lines += ["### Link values derived from the fit split", "",
                  *table(["link", "line rate", "series (points)", "efficiency fitted", "latency fitted",
                          "NVLS efficiency fitted", "off by at line rate (plateau)", "off by at the fit (all sizes)",
                          "catalog (efficiency, latency, NVLS efficiency)"],
                         [[f.link.id, f"{f.link.bandwidth / 1e9:g} GB/s", f"{f.series} ({f.points})", f"{f.eta:.2f}",
                           "" if f.latency is None else f"{f.latency * 1e6:.1f} us",
                           "" if f.nvls is None else f"{f.nvls:.2f}", factor(f.before), factor(f.after),
                           f"{float(f.link.efficiency):.2f}, {float(f.link.latency) * 1e6:.1f} us, "
                           f"{f.link.nvls_efficiency if f.link.nvls_efficiency is not None else '-'}"]
                          for f in fits]), ""]
    lines += ["### Typical error per machine", "",
              *table(["split", "machine", "series", "points", "model off by", "model median error",
                      "leave-one-machine-out off by", "tables off by"], summary + totals), "",
              "### Model error by series and message size (median, points)", "",
              *table(["series", "split", "node", "collective", "ranks / nodes", "algorithm",
                      *(name for _, _, name in BUCKETS), "excluded because"], series_rows), ""]
    text = "\n".join(lines)
    print(text)
    if args.record:
        record(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
