"""Alpha-beta cost of a collective: latency per step plus bytes over the bottleneck bandwidth.

For ``n`` ranks and a buffer of ``S`` bytes (``Collective.bytes``, nccl-tests convention), the
bandwidth terms are NCCL's bus-bandwidth factors (NCCL tests ``doc/PERFORMANCE.md``): a ring
all-reduce moves ``2 (n-1)/n * S`` per rank, all-gather and reduce-scatter ``(n-1)/n * S``;
latency is one ``alpha`` per ring step (Thakur, Rabenseifner & Gropp 2005, "Optimization of
collective communication operations in MPICH"). Inside one node NCCL runs rings (its "tree"
is a chain through the node's GPUs there, no fewer latency steps than the ring). A group that
spans nodes may also run all-reduce as NCCL's tree: a chain inside each node and a pipelined
double binary tree across the ``N`` nodes, ``2 ((r - 1) alpha_intra + log2(N) alpha_inter)``
latency and ``2 S`` over the bottleneck; or hierarchically (reduce-scatter inside the node,
all-reduce across nodes on ``S / r`` per rank, all-gather inside the node). NCCL's tuner picks
the fastest algorithm for the size, so the cost is the minimum over the algorithms that apply.

Links. Inside a node, each GPU has ``node.intra.bandwidth`` per direction. Across nodes,
``cluster.inter.bandwidth`` is the whole node's injection bandwidth (all NICs). Every GPU of a
node runs the same collective on its own group at the same time (SPMD), so each GPU's share of
the NICs is ``inter / gpus_per_node`` (one NIC rail per GPU on DGX/HGX). A group with ``r``
ranks per node crosses the node boundary on ``r`` rails at once (one ring channel per rail), so
its ring runs at ``min(intra, r * inter / gpus_per_node)``: for a whole-node group that is the
node's full injection bandwidth, which is what multi-node nccl-tests report as bus bandwidth.
(The team note says ``inter / r`` per rank; that is the same when the group fills the node and
too optimistic when other groups share the node's NICs, e.g. 8 data-parallel groups with tp = 8.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llmp.analytic.algebra import vlog2, vmax, vmin
from llmp.analytic.kernels import Collective, CollectiveKind, Tier
from llmp.dsl.spec import Spec


@dataclass(frozen=True, kw_only=True, slots=True)
class Links:
    """The link parameters a collective's cost depends on."""

    gpus_per_node: Any
    intra_bandwidth: Any
    """Per GPU, per direction (NVLink/NVSwitch, or PCIe)."""
    intra_latency: Any
    inter_bandwidth: Any
    """Per node, per direction (all NICs together)."""
    inter_latency: Any

    @classmethod
    def of(cls, spec: Spec) -> Links:
        c = spec.cluster
        return cls(gpus_per_node=c.node.gpus_per_node, intra_bandwidth=c.node.intra.bandwidth,
                   intra_latency=c.node.intra.latency, inter_bandwidth=c.inter.bandwidth,
                   inter_latency=c.inter.latency)

    @property
    def rail_bandwidth(self) -> Any:
        """One GPU's share of its node's network injection bandwidth."""
        return self.inter_bandwidth / self.gpus_per_node


def _ring(steps: Any, volume: Any, alpha: Any, bandwidth: Any) -> Any:
    return steps * alpha + volume / bandwidth


def _intra(kind: CollectiveKind, n: Any, size: Any, links: Links) -> Any:
    a, bw = links.intra_latency, links.intra_bandwidth
    if kind is CollectiveKind.ALL_REDUCE:
        return _ring(2 * (n - 1), 2 * (n - 1) / n * size, a, bw)
    if kind is CollectiveKind.SEND_RECV:
        return _ring(1, size, a, bw)
    # all-gather, reduce-scatter, all-to-all (NVSwitch: full bisection inside the node)
    return _ring(n - 1, (n - 1) / n * size, a, bw)


def _inter(kind: CollectiveKind, n: Any, size: Any, r: Any, links: Links) -> Any:
    a_in, bw_in = links.intra_latency, links.intra_bandwidth
    a, rail = links.inter_latency, links.rail_bandwidth
    nodes = n / r
    ring_bw = vmin(bw_in, r * rail)
    if kind is CollectiveKind.SEND_RECV:
        return _ring(1, size, a, rail)
    if kind is CollectiveKind.ALL_TO_ALL:
        # Of the (n-1)/n * S each rank sends, (n-r)/n * S leaves the node over its rail.
        return (n - 1) * a + vmax((n - r) / n * size / rail, (r - 1) / n * size / bw_in)
    local = _ring(r - 1, (r - 1) / r * size, a_in, bw_in)  # one intra-node RS or AG phase
    if kind is CollectiveKind.ALL_REDUCE:
        ring = _ring(2 * (n - 1), 2 * (n - 1) / n * size, a, ring_bw)
        tree = 2 * (r - 1) * a_in + _ring(2 * vlog2(nodes), 2 * size, a, ring_bw)
        hier = 2 * local + _ring(2 * (nodes - 1), 2 * (nodes - 1) / nodes * size / r, a, rail)
        return vmin(ring, tree, hier)
    # all-gather / reduce-scatter: flat ring, or the inter-node phase on S / r plus one local phase
    ring = _ring(n - 1, (n - 1) / n * size, a, ring_bw)
    hier = local + _ring(nodes - 1, (nodes - 1) / nodes * size / r, a, rail)
    return vmin(ring, hier)


def time(c: Collective, links: Links) -> Any:
    """Seconds for one call of ``c`` (numbers, arrays or SymPy expressions)."""
    if c.tier is Tier.INTRA:
        return _intra(c.kind, c.group, c.bytes, links)
    return _inter(c.kind, c.group, c.bytes, c.ranks_per_node, links)


def bus_factor(kind: CollectiveKind, n: Any) -> Any:
    """NCCL's bus-bandwidth factor: bytes each rank moves per byte of buffer."""
    if kind is CollectiveKind.ALL_REDUCE:
        return 2 * (n - 1) / n
    if kind is CollectiveKind.SEND_RECV:
        return 1
    return (n - 1) / n
