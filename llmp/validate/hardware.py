"""Pick the catalog node a published row ran on, and the link overrides its columns call for.

Rows name their GPU by catalog id (``gpu_id``) but not the server, so the node is looked up among
the catalog's nodes built from that GPU: the row's ``gpus_per_node`` and interconnect narrow the
choice, then :data:`DEFAULT_NODE` (the vendor reference server) decides. Catalog nodes are
resolved through the .llmp language itself (:func:`catalog_node`), so what is compared here is
exactly what a spec would get. Interconnect cells are free text; the ones met in published
tables are keyed in :data:`INTER_LINKS` with their source. Nothing is matched by substring.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from llmp import dsl
from llmp.errors import LlmpError
from llmp.hardware.catalog import catalog_ids
from llmp.hardware.spec import Node
from llmp.validate.rows import Row
from llmp.validate.skips import SkipReason, Unmodellable

DEFAULT_NODE: dict[str, str] = {
    "a100_sxm4_80gb": "dgx_a100",
    "a100_sxm4_40gb": "dgx_a100_40gb",
    "h100_sxm5_80gb": "dgx_h100",
    "h200_sxm_141gb": "hgx_h200",
    "v100_sxm3_32gb": "dgx2_v100",
    "b200": "dgx_b200",
    "gb200": "gb200_nvl72",
    "mi300x": "mi300x_platform",
    "cpu": "cpu_host",
}
"""The server a GPU most often comes in (NVIDIA's reference DGX/HGX), when a row does not say."""

INTER_LINKS: dict[str, tuple[str, str]] = {
    "1600 Gbps node-node RoCE (per section title)": (
        "roce_1600g", "llm-foundry benchmark README section titles: 1600 Gbps node-node RoCE"),
    "Omni-Path Architecture (4 OPA links per node)": (
        "link { bandwidth = 4 * 100 Gb/s  latency = 5 us }",
        ("BLOOM README: 4 Omni-Path links per node; OPA 100 runs 100 Gb/s per port; latency as the "
        "catalog's other NICs (NCCL NET constant)")),
}
"""``interconnect_inter`` cells met in published rows → a catalog link id or an inline link."""

_PROBE = """use "{node}"
model probe {{ arch = gpt  layers = 1  hidden = 64  heads = 1  vocab = 64  seq_len = 8 }}
cluster probe {{ node = {node} }}
train {{ global_batch = node.gpus_per_node }}
"""


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
    assumptions: tuple[str, ...] = ()


@functools.cache
def catalog_node(node_id: str) -> Node:
    """The catalog node ``node_id``, resolved by the .llmp resolver (cached; ~30 ms cold)."""
    return dsl.loads(_PROBE.format(node=node_id), filename=f"<catalog node {node_id}>").cluster.node


@functools.cache
def nodes_with_gpu(gpu_id: str) -> tuple[Node, ...]:
    """Catalog nodes built from ``gpu_id``, in catalog id order."""
    found = []
    for node_id in catalog_ids()["node"]:
        try:
            node = catalog_node(node_id)
        except LlmpError:
            continue  # a catalog file that does not resolve is the catalog's bug, not this row's
        if node.gpu.id == gpu_id:
            found.append(node)
    return tuple(found)


def _choose(row: Row, gpu_id: str, inter_link: str | None, notes: list[str]) -> Node:
    candidates = nodes_with_gpu(gpu_id)
    if not candidates:
        known = ", ".join(sorted({n for n in DEFAULT_NODE} | set(catalog_ids()["gpu"])))
        raise Unmodellable(SkipReason.UNKNOWN_GPU, f"no catalog node has gpu_id {gpu_id!r} (catalog GPUs: {known})")
    gpn = row.integer("gpus_per_node")
    if gpn is not None:
        sized = tuple(n for n in candidates if n.gpus_per_node == gpn)
        if not sized:
            raise Unmodellable(SkipReason.UNKNOWN_GPU, f"no catalog node has {gpn} x {gpu_id} (nodes with this GPU: "
                               + ", ".join(f"{n.id} ({n.gpus_per_node})" for n in candidates) + ")")
        candidates = sized
    if inter_link is not None:
        linked = tuple(n for n in candidates if n.inter.id == inter_link)
        if linked:
            notes.append(f"node: {linked[0].id} (the catalog node of {gpu_id} with inter = {inter_link})")
            return linked[0]
    default = DEFAULT_NODE.get(gpu_id)
    chosen = next((n for n in candidates if n.id == default), candidates[0])
    why = "reference server" if chosen.id == default else "first catalog node with this GPU"
    notes.append(f"node: {chosen.id} ({chosen.gpus_per_node} x {gpu_id}, {why}; the row names no server)")
    return chosen


def plan_cluster(row: Row) -> ClusterPlan:
    """The cluster for ``row``: catalog node, node count and link overrides; raises :class:`Unmodellable`."""
    gpu_id = row.text("gpu_id")
    if not gpu_id:
        raise Unmodellable(SkipReason.UNKNOWN_GPU, "gpu_id blank")
    num_gpus = row.integer("num_gpus")
    if num_gpus is None:
        raise Unmodellable(SkipReason.MISSING_LAYOUT, "num_gpus blank")
    notes: list[str] = []
    inter_cell = row.text("interconnect_inter")
    inter: str | None = None
    if inter_cell:
        if inter_cell in INTER_LINKS:
            inter, why = INTER_LINKS[inter_cell]
            notes.append(f"inter-node link: {inter} ({why})")
        else:
            notes.append(f"interconnect_inter {inter_cell!r} not in the known table: catalog link kept")
    if row.text("interconnect_intra"):
        notes.append(f"interconnect_intra {row.text('interconnect_intra')!r} noted; the catalog node's intra link is used")
    inter_id = inter if inter is not None and not inter.startswith("link") else None
    node = _choose(row, gpu_id, inter_id, notes)
    if inter is not None and inter == node.inter.id:
        inter = None  # the node already has it
    gpn = int(node.gpus_per_node)
    if num_gpus < gpn:
        notes.append(f"run used {num_gpus} of a node's {gpn} GPUs: node.gpus_per_node = {num_gpus}")
        return ClusterPlan(node=node, nodes=1, gpus_per_node=num_gpus, inter=inter, assumptions=tuple(notes))
    nodes = math.ceil(num_gpus / gpn)
    if nodes * gpn != num_gpus:
        raise Unmodellable(SkipReason.MISSING_LAYOUT,
                           f"num_gpus {num_gpus} is not a whole number of {node.id} nodes ({gpn} GPUs each)")
    return ClusterPlan(node=node, nodes=nodes, gpus_per_node=gpn, inter=inter, assumptions=tuple(notes))
