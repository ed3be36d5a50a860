"""Pick the catalog node a published row ran on, and the link override its interconnect calls for.

Rows name their GPU by catalog id (``gpu_id``, resolved through the catalog's aliases) but not
the server, so the node is looked up among the catalog's nodes built from that GPU: the row's
``gpus_per_node`` must match, an NVLink domain the ``interconnect_intra`` cell states ("NVL72",
"NVL36x2", "8-GPU NVLink domain") must match the node's scale-up domain, the
``interconnect_inter`` cell (read for its meaning: the network technology, a bandwidth and whether
it is per GPU, per node or per NIC) narrows the choice, then :data:`DEFAULT_NODE` (the vendor
reference server) decides. A GB200/GB300 row that says 4 GPUs per node thus gets the NVL72
compute tray, whose 72-GPU NVLink domain spans 18 trays, unless its cells say otherwise; a job of
128 GPUs or more runs in 16 trays (64 GPUs) of each rack, as NVIDIA's Slurm block scheduling
recommends (:func:`job_domain`). A
network the chosen node does not have becomes a cluster-level link override: a catalog link of
that technology and bandwidth, or an inline link with the stated bandwidth. A GPU or a node size
the catalog does not have is a skip naming what the catalog has. Catalog nodes and links come
from :mod:`llmp.dsl.catalog`, so what is compared here is exactly what a spec would get.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from llmp.dsl import catalog
from llmp.hardware.catalog import canonical, catalog_ids
from llmp.hardware.spec import Node
from llmp.validate import network_cell
from llmp.validate.cells import CellError
from llmp.validate.rows import Row
from llmp.validate.skips import SkipReason, Unmodellable

DEFAULT_NODE: dict[str, str] = {
    "a100_sxm4_80gb": "dgx_a100",
    "a100_sxm4_40gb": "dgx_a100_40gb",
    "h100_sxm5_80gb": "dgx_h100",
    "h100_sxm_96gb_hbm2e_500w": "grand_teton_h100_96gb",
    "h200_sxm_141gb": "hgx_h200",
    "h800_sxm5_80gb": "hgx_h800",
    "v100_sxm3_32gb": "dgx2_v100",
    "b200": "dgx_b200",
    "b300": "dgx_b300",
    "gb200": "gb200_nvl72_tray",
    "gb300": "gb300_nvl72_tray",
    "gh200_96gb": "alps_gh200",
    "mi300x": "mi300x_platform",
    "mi325x": "mi325x_platform",
    "mi355x": "mi355x_platform",
    "cpu": "cpu_host",
}
"""The server a GPU most often comes in (the vendor's reference DGX/HGX/platform), when a row does not say.
GB200 and GB300 come in NVL72 racks: the 4-GPU compute tray is the node (what schedulers and
recipes count), the rack its 72-GPU NVLink domain."""

NOT_FOR_ROWS: dict[str, str] = {
    "perlmutter_seed": "the seed paper's Perlmutter with the ~1.2 GB/s-per-GPU network its NCCL samples saw; "
                       "a published run ran on a healthy Perlmutter (perlmutter_gpu_80gb)",
}
"""Catalog nodes that describe one measured setup, never chosen for a published row."""


def stated_domain(cell: str) -> int | None:
    """The NVLink domain size an ``interconnect_intra`` cell states, if any: ``NVL72``, ``NVL36x2``
    (two 36-GPU racks joined into one 72-GPU domain), ``72-GPU NVLink domain``."""
    text = cell.lower()
    m = re.search(r"\bnvl\s*(\d+)(?:\s*x\s*(\d+))?\b", text)
    if m:
        return int(m.group(1)) * int(m.group(2) or 1)
    m = re.search(r"(\d+)[- ]gpus?\s+(?:nvlink\s+)?domain", text)
    return int(m.group(1)) if m else None


@dataclass(frozen=True, kw_only=True, slots=True)
class Tech:
    """A scale-out network technology a cell may name."""

    name: str
    links: tuple[str, ...]
    """Catalog links of this technology (ids of ``links.llmp``)."""


TECHS: tuple[Tech, ...] = (
    Tech(name="RoCE", links=("roce_1600g", "roce_400g_x8")),
    Tech(name="InfiniBand XDR", links=("xdr_ib", "xdr_ib_x4", "xdr_ib_x8", "xdr_ib_x72")),
    Tech(name="InfiniBand NDR", links=("ndr_ib", "ndr_ib_x4", "ndr_ib_x8", "ndr_ib_x72")),
    Tech(name="InfiniBand HDR", links=("hdr_ib", "hdr_ib_x4", "hdr_ib_x8")),
    Tech(name="InfiniBand EDR", links=("edr_ib", "edr_ib_x8")),
    Tech(name="InfiniBand",
         links=("xdr_ib", "xdr_ib_x4", "xdr_ib_x8", "xdr_ib_x72", "ndr_ib", "ndr_ib_x4", "ndr_ib_x8", "ndr_ib_x72",
                "hdr_ib", "hdr_ib_x4", "hdr_ib_x8", "edr_ib", "edr_ib_x8")),
    Tech(name="Omni-Path", links=()),
    Tech(name="Slingshot", links=("slingshot11", "slingshot11_x4")),
)
"""Technologies met in published interconnect cells, by the name the cell reader gives them, with
the catalog links each may be (Omni-Path: none in the catalog; HDR/NDR/XDR: InfiniBand 200/400/800
Gb/s per port)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Network:
    """What an ``interconnect_inter`` cell says."""

    tech: Tech | None = None
    node_gbps: float | None = None
    """Bandwidth per node per direction, Gb/s, when the cell states it unambiguously."""
    because: str = ""


def read_network(cell: str, gpus_per_node: int) -> Network:
    """The technology and per-node bandwidth an ``interconnect_inter`` cell states, as
    :func:`llmp.validate.network_cell.network` reads it (a cell it refuses keeps the node's own network;
    the mapping skips such a row before it gets here)."""
    try:
        read = network_cell.network(cell, gpus_per_node)
    except CellError as err:
        return Network(because=str(err))
    name = f"{read.fabric} {read.generation.upper()[:3]}" if read.fabric and read.generation else str(read.fabric)
    tech = next((t for t in TECHS if t.name == name), None) or next((t for t in TECHS if t.name == read.fabric), None)
    return Network(tech=tech, node_gbps=read.node_gbps, because=read.because)


@dataclass(frozen=True, kw_only=True, slots=True)
class ClusterPlan:
    """The cluster block to write for a row."""

    node: Node
    """The catalog node (resolved)."""
    nodes: int
    gpus_per_node: int
    """GPUs per node in use: the node's own count, or fewer when the run used part of one node."""
    inter: str | None = None
    """Cluster-level inter-node link override (a link id or an inline ``link { ... }``)."""
    nvlink_domain: int | None = None
    """The scale-up domain as the job got it, when smaller than the hardware's (None: the node's)."""
    assumptions: tuple[str, ...] = ()


SEGMENT_NODES = 16
"""Nodes (trays) of one NVL72 rack a large job gets: NVIDIA recommends Slurm block scheduling with
``--segment=16`` for jobs of 128 GPUs and more, 16 of a rack's 18 compute trays (the other two left
to faults and small jobs) ("Unlock Exascale Performance on NVIDIA GB200 NVL72 with Slurm
Topology-Aware Job Scheduling", developer.nvidia.com technical blog, segment sizing)."""
SEGMENT_FROM_GPUS = 128
"""Job size from which that recommendation applies (smaller jobs fit one rack's block)."""


def job_domain(node: Node, num_gpus: int, notes: list[str]) -> int | None:
    """The NVLink domain a row's job ran in when it is smaller than the node's: a job of 128 GPUs
    or more on multi-node NVLink domains runs in segments of :data:`SEGMENT_NODES` nodes per rack
    (64 GPUs of an NVL72), when its GPUs divide into them."""
    gpn, domain = int(node.gpus_per_node), int(node.domain)
    segment = SEGMENT_NODES * gpn
    if domain <= gpn or num_gpus <= domain or segment >= domain:
        return None
    if num_gpus >= SEGMENT_FROM_GPUS and num_gpus % segment == 0:
        notes.append(f"nvlink_domain = {segment}: {num_gpus} GPUs run as {num_gpus // segment} segments of "
                     f"{SEGMENT_NODES} {node.id} nodes, one per {domain}-GPU rack (Slurm block scheduling, "
                     f"--segment={SEGMENT_NODES}, NVIDIA's recommendation for jobs of {SEGMENT_FROM_GPUS}+ GPUs)")
        return segment
    notes.append(f"{num_gpus} GPUs on {domain}-GPU NVLink domains: laid out contiguously, groups may straddle "
                 "a rack boundary")
    return None


def _fits(node: Node, num_gpus: int) -> bool:
    gpn = int(node.gpus_per_node)
    return num_gpus <= gpn or num_gpus % gpn == 0


def _matches(node: Node, net: Network) -> bool:
    if net.tech is not None and net.tech.links and node.inter.id not in net.tech.links:
        return False
    if net.tech is not None and not net.tech.links and net.node_gbps is None:
        return False
    return net.node_gbps is None or math.isclose(float(node.inter.bandwidth) * 8 / 1e9, net.node_gbps, rel_tol=0.02)


def _choose(row: Row, gpu_id: str, num_gpus: int, net: Network, notes: list[str]) -> Node:
    candidates = tuple(n for n in catalog.nodes_with(gpu_id) if n.id not in NOT_FOR_ROWS)
    if not candidates:
        raise Unmodellable(SkipReason.UNKNOWN_GPU, f"no catalog node has gpu_id {gpu_id!r} (catalog GPUs: "
                           f"{', '.join(g for g in catalog_ids()['gpu'])})")
    gpn = row.integer("gpus_per_node")
    if gpn is not None:
        sized = tuple(n for n in candidates if n.gpus_per_node == gpn)
        if not sized:
            raise Unmodellable(SkipReason.UNKNOWN_GPU, f"no catalog node has {gpn} x {gpu_id} (nodes with this GPU: "
                               + ", ".join(f"{n.id} ({n.gpus_per_node})" for n in candidates) + ")")
        candidates = sized
        domain = stated_domain(row.text("interconnect_intra"))
        if domain is not None:
            spanning = tuple(n for n in candidates if int(n.domain) == domain)
            if not spanning:
                raise Unmodellable(SkipReason.UNKNOWN_GPU, f"interconnect_intra says a {domain}-GPU NVLink domain; no "
                                   f"catalog node with {gpn} x {gpu_id} has one (" + ", ".join(
                                       f"{n.id}: {n.domain}" for n in candidates) + ")")
            candidates = spanning
    else:
        whole = tuple(n for n in candidates if _fits(n, num_gpus))
        if not whole:
            raise Unmodellable(SkipReason.UNKNOWN_GPU, f"num_gpus {num_gpus} is not a whole number of any catalog node "
                               "with this GPU (" + ", ".join(f"{n.id} ({n.gpus_per_node})" for n in candidates) + ")")
        candidates = whole
    default = DEFAULT_NODE.get(gpu_id)
    ordered = sorted(candidates, key=lambda n: n.id != default)
    if net.tech is not None or net.node_gbps is not None:
        linked = [n for n in ordered if _matches(n, net)]
        if linked:
            notes.append(f"node: {linked[0].id} (its inter-node link {linked[0].inter.id} is the row's network)")
            return linked[0]
    chosen = ordered[0]
    why = "reference server" if chosen.id == default else "first catalog node with this GPU"
    notes.append(f"node: {chosen.id} ({chosen.gpus_per_node} x {gpu_id}, {why}; the row names no server)")
    return chosen


def _inter_override(node: Node, net: Network, cell: str, notes: list[str]) -> str | None:
    """The cluster's ``inter`` when the row's network is not the node's own (None: keep the node's)."""
    if not cell or _matches(node, net):
        return None
    if net.node_gbps is None:
        notes.append(f"interconnect_inter {cell!r}: {net.because}; the catalog node's {node.inter.id} is kept")
        return None
    if net.tech is not None:
        same = [i for i in net.tech.links if math.isclose(float(catalog.link(i).bandwidth) * 8 / 1e9, net.node_gbps,
                                                          rel_tol=0.02)]
        if same:
            notes.append(f"inter-node link: {same[0]} (interconnect_inter {cell!r}: {net.because})")
            return same[0]
    notes.append(f"inter-node link: {net.node_gbps:g} Gb/s per node (interconnect_inter {cell!r}: {net.because}); "
                 f"latency and efficiency of the node's own {node.inter.id}")
    return (f"link {{ bandwidth = {net.node_gbps:g} Gb/s  latency = {float(node.inter.latency):.6g} s  "
            f"efficiency = {float(node.inter.efficiency):.6g} }}")


def plan_cluster(row: Row) -> ClusterPlan:
    """The cluster for ``row``: catalog node, node count and link override; raises :class:`Unmodellable`."""
    cell_id = row.text("gpu_id")
    if not cell_id:
        raise Unmodellable(SkipReason.UNKNOWN_GPU, "gpu_id blank")
    gpu_id = canonical(cell_id)
    num_gpus = row.integer("num_gpus")
    if num_gpus is None:
        raise Unmodellable(SkipReason.MISSING_LAYOUT, "num_gpus blank")
    notes: list[str] = []
    if gpu_id != cell_id:
        notes.append(f"gpu_id {cell_id!r} is the catalog's {gpu_id!r}")
    cell = row.text("interconnect_inter")
    net = read_network(cell, row.integer("gpus_per_node") or 8) if cell else Network()
    if row.text("interconnect_intra"):
        notes.append(f"interconnect_intra {row.text('interconnect_intra')!r} noted; "
                     "the catalog node's intra link is used")
    node = _choose(row, gpu_id, num_gpus, net, notes)
    inter = _inter_override(node, net, cell, notes)
    gpn = int(node.gpus_per_node)
    if num_gpus < gpn:
        notes.append(f"run used {num_gpus} of a node's {gpn} GPUs: node.gpus_per_node = {num_gpus}")
        return ClusterPlan(node=node, nodes=1, gpus_per_node=num_gpus, inter=inter, assumptions=tuple(notes))
    if num_gpus % gpn:
        raise Unmodellable(SkipReason.MISSING_LAYOUT,
                           f"num_gpus {num_gpus} is not a whole number of {node.id} nodes ({gpn} GPUs each)")
    domain = job_domain(node, num_gpus, notes)
    return ClusterPlan(node=node, nodes=num_gpus // gpn, gpus_per_node=gpn, inter=inter, nvlink_domain=domain,
                       assumptions=tuple(notes))
