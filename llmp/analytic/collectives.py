"""Alpha-beta cost of a collective: latency per step plus bytes over the bottleneck bandwidth.

For ``n`` ranks and a buffer of ``S`` bytes (``Collective.bytes``, nccl-tests convention), the
bandwidth terms are NCCL's bus-bandwidth factors (NCCL tests ``doc/PERFORMANCE.md``): a ring
all-reduce moves ``2 (n-1)/n * S`` per rank, all-gather and reduce-scatter ``(n-1)/n * S``;
latency is one ``alpha`` per ring step (Thakur, Rabenseifner & Gropp 2005, "Optimization of
collective communication operations in MPICH"). Inside one node NCCL runs rings (its "tree"
is a chain through the node's GPUs there, no fewer latency steps than the ring).

A group that spans nodes (``n`` ranks, ``r`` in each of ``N = n / r`` nodes) runs NCCL's ring
through all its ranks: the ``N`` hops that leave a node are the bottleneck, each node's ``r``
ring channels leave on its ``r`` NIC rails, and of a ring's steps only the node-crossing ones
pay the network latency (NVIDIA/nccl src/graph/tuning.cc ``ncclTopoTuneModel``: ring latency
``(nsteps - nInterSteps) * intraLat + nInterSteps * interLat`` with ``nInterSteps = 2 (N - 1)``
for all-reduce, ``N - 1`` for all-gather and reduce-scatter). All-reduce may also run as NCCL's
tree: a chain inside each node and a pipelined double binary tree across the nodes,
``2 ((r - 1) alpha_intra + log2(N) alpha_inter)`` latency (the same file) and ``2 S`` over the
bottleneck; or hierarchically (reduce-scatter inside the node, all-reduce across nodes on
``S / r`` per rank, all-gather inside the node: NCCL's NVLS-tree and CollNet paths). NCCL's tuner
picks the fastest algorithm for the size, so the cost is the minimum over the algorithms that
apply. "Node" here means an NVLink domain (:mod:`~llmp.analytic.layout`): on a GB200 NVL72
rack the 72 GPUs of 18 trays share one NVLink fabric, and only groups beyond it use the NICs.

Links. Inside a node, each GPU has ``node.intra.bandwidth`` per direction. Across nodes,
``cluster.inter.bandwidth`` is the whole node's injection bandwidth (all NICs). Every GPU of a
node runs the same collective on its own group at the same time (SPMD), so each GPU's share of
the NICs is ``inter / gpus_per_node`` (one NIC rail per GPU on DGX/HGX). A group with ``r``
ranks per node crosses the node boundary on ``r`` rails at once (one ring channel per rail), so
its ring runs at ``min(intra, r * inter / gpus_per_node)``: for a whole-node group that is the
node's full injection bandwidth, which is what multi-node nccl-tests report as bus bandwidth.
(The team note says ``inter / r`` per rank; that is the same when the group fills the node and
too optimistic when other groups share the node's NICs, e.g. 8 data-parallel groups with tp = 8.)

Achievable bandwidth. A ring does not run at line rate: nccl-tests measure 0.74-0.92 of it at
large messages (protocol headers, flow control, synchronisation; NVIDIA's nccl-tests issue #212:
"~20% protocol overhead" on NVLink4). Each link carries that measured fraction as its
``efficiency``, and :class:`Links` holds line rate x efficiency, so every algorithm below sees
the achievable rate.

Topology inside a node. Behind a switch (NVSwitch) every pair of GPUs can use a GPU's whole
bandwidth. Without one (Perlmutter's 4 A100s wired pairwise with 4 NVLinks each, MI300X's 7
Infinity Fabric links), a GPU reaches each peer only over that pair's links
(``peer_bandwidth``), so a group of ``r`` GPUs in the node gets at most ``(r - 1)`` pairs' worth:
``min(bandwidth, (r - 1) peer_bandwidth)`` (:meth:`Links.group_bandwidth`). A 2-GPU group on
Perlmutter thus runs at 100 GB/s, not 300.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from llmp.analytic.algebra import vlog2, vmax, vmin
from llmp.analytic.kernels import Collective, CollectiveKind, Tier
from llmp.dsl.spec import Spec
from llmp.hardware.spec import Link, Node


@dataclass(frozen=True, kw_only=True, slots=True)
class Links:
    """The link parameters a collective's cost depends on; bandwidths are achievable rates
    (line rate x the link's ``efficiency``), as :meth:`between` builds them."""

    gpus_per_node: Any
    intra_bandwidth: Any
    """Per GPU, per direction (NVLink/NVSwitch, or PCIe)."""
    intra_latency: Any
    inter_bandwidth: Any
    """Per node, per direction (all NICs together)."""
    inter_latency: Any
    intra_peer_bandwidth: Any = None
    """Per pair of GPUs wired directly (no switch), per direction; None: every pair gets
    ``intra_bandwidth``."""
    host_bandwidth: Any = 0
    """One GPU's link to host memory, per direction (offloading; tier ``host``)."""
    host_memory_bandwidth: Any = 0
    """One GPU's share of host memory bandwidth (an offloaded optimizer; tier ``host_memory``)."""
    host_latency: Any = 0
    """Fixed cost of one host copy or host update call."""

    @classmethod
    def of(cls, spec: Spec) -> Links:
        """The links of ``spec``'s cluster, and its GPU's link to host memory (a copy's fixed cost is
        a launch: ``cudaMemcpyAsync``)."""
        g = spec.cluster.gpu
        return dataclasses.replace(cls.between(spec.cluster.node, spec.cluster.inter), host_bandwidth=g.host_bandwidth,
                                   host_memory_bandwidth=g.host_memory_bandwidth, host_latency=g.launch_overhead)

    @classmethod
    def between(cls, node: Node, inter: Link) -> Links:
        """The links of ``node`` with ``inter`` as the network, at their achievable rates."""
        intra = node.intra
        peer = None if intra.peer_bandwidth is None else intra.peer_bandwidth * intra.efficiency
        return cls(gpus_per_node=node.gpus_per_node, intra_bandwidth=intra.bandwidth * intra.efficiency,
                   intra_latency=intra.latency, inter_bandwidth=inter.bandwidth * inter.efficiency,
                   inter_latency=inter.latency, intra_peer_bandwidth=peer)

    @property
    def rail_bandwidth(self) -> Any:
        """One GPU's share of its node's network injection bandwidth."""
        return self.inter_bandwidth / self.gpus_per_node

    def group_bandwidth(self, r: Any) -> Any:
        """What one GPU can send per direction to the other ``r - 1`` GPUs of its group in the
        node: the whole intra rate behind a switch, at most ``r - 1`` pairs' worth in a mesh."""
        if self.intra_peer_bandwidth is None:
            return self.intra_bandwidth
        return vmin(self.intra_bandwidth, vmax(r - 1, 1) * self.intra_peer_bandwidth)


def _ring(steps: Any, volume: Any, alpha: Any, bandwidth: Any) -> Any:
    return steps * alpha + volume / bandwidth


def _intra(kind: CollectiveKind, n: Any, size: Any, links: Links) -> Any:
    a, bw = links.intra_latency, links.group_bandwidth(n)
    if kind is CollectiveKind.ALL_REDUCE:
        return _ring(2 * (n - 1), 2 * (n - 1) / n * size, a, bw)
    if kind is CollectiveKind.SEND_RECV:
        return _ring(1, size, a, bw)
    # all-gather, reduce-scatter, all-to-all (NVSwitch: full bisection inside the node)
    return _ring(n - 1, (n - 1) / n * size, a, bw)


def _inter(kind: CollectiveKind, n: Any, size: Any, r: Any, links: Links) -> Any:
    a_in, bw_in = links.intra_latency, links.group_bandwidth(r)
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
        ring = 2 * (n - nodes) * a_in + _ring(2 * (nodes - 1), 2 * (n - 1) / n * size, a, ring_bw)
        tree = 2 * (r - 1) * a_in + _ring(2 * vlog2(nodes), 2 * size, a, ring_bw)
        hier = 2 * local + _ring(2 * (nodes - 1), 2 * (nodes - 1) / nodes * size / r, a, rail)
        return vmin(ring, tree, hier)
    # all-gather / reduce-scatter: flat ring, or the inter-node phase on S / r plus one local phase
    ring = (n - nodes) * a_in + _ring(nodes - 1, (n - 1) / n * size, a, ring_bw)
    hier = local + _ring(nodes - 1, (nodes - 1) / nodes * size / r, a, rail)
    return vmin(ring, hier)


def time(c: Collective, links: Links) -> Any:
    """Seconds for one call of ``c`` (numbers, arrays or SymPy expressions); a host tier's call is
    its bytes over the host link (or host memory) plus a fixed cost."""
    if c.tier is Tier.HOST:
        return links.host_latency + c.bytes / links.host_bandwidth
    if c.tier is Tier.HOST_MEMORY:
        return links.host_latency + c.bytes / links.host_memory_bandwidth
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
