"""Seconds of one collective call as NCCL runs it, on the links of a cluster.

NCCL picks an algorithm and a protocol per call from its own cost model; :mod:`~llmp.analytic.nccl`
writes that model, and this module feeds it the cluster: which links a group crosses, what
bandwidth each member gets on them, and what NCCL's tuner calls "nodes" (scale-up domains).

Sizes. ``Collective.bytes`` is the nccl-tests ``size`` (NCCL's ``nBytes``): the all-reduce buffer,
the gathered (scattered) buffer of an all-gather (reduce-scatter), the all-to-all send buffer,
the point-to-point message. :func:`bus_factor` gives the bytes each rank moves per byte of it
(nccl-tests ``doc/PERFORMANCE.md``).

Links. Inside a scale-up domain each GPU has ``node.intra.bandwidth`` per direction. Across
domains, ``cluster.inter.bandwidth`` is a node's whole injection bandwidth (all NICs), and every
GPU of a node runs its own group's collective at the same time (SPMD), so each GPU's share is
``inter / gpus_per_node`` (one NIC rail per GPU on DGX/HGX and on an NVL72 tray): a group with
``r`` members per domain leaves it on ``r`` rails. A scale-up domain larger than a node (a GB200
NVL72 rack of 18 four-GPU trays) keeps its NICs per tray. Behind a switch every pair of GPUs can
use a GPU's whole bandwidth; in a mesh (Perlmutter's 4 A100s wired pairwise, MI300X) a group of
``r`` gets at most ``r - 1`` pairs' worth (:meth:`Links.group_bandwidth`).

Achievable bandwidth. NCCL's graphs run at what its topology search finds per channel, not at line
rate; each link carries the fraction nccl-tests measure as its ``efficiency``, and :class:`Links`
holds line rate x efficiency, which is the graph bandwidth NCCL's model sees.

Latency beyond NCCL's model. Published small-message times sit above NCCL's own latencies (8x A100:
44 us for a 32 KiB all-reduce, NCCL's model 16 us), by an amount that grows with the ring's steps.
Each link's ``latency`` is that excess per step (fitted on the published nccl-tests sweeps,
``benchmarks/collectives_published.py``): a call pays it once per ring step on each link
(2 (n - 1) for all-reduce, n - 1 for all-gather and reduce-scatter, the node-crossing ones on the
NIC), whatever algorithm NCCL picks, so NCCL's choice is made on its own model alone.

Point-to-point and all-to-all are not in NCCL's tuning model (they are grouped sends and
receives): a send/receive is one Simple ring step of latency and its bytes over the link it
crosses; an all-to-all one launch and a message latency per peer, its bytes over the bottleneck
link. A ``host`` link (gloo between CPU processes) runs a plain alpha-beta
ring: ``latency`` per step, the bus bytes over ``bandwidth``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from llmp.analytic import nccl
from llmp.analytic.kernels import Collective, CollectiveKind, Tier
from llmp.analytic.nccl import Arch
from llmp.hardware.spec import Device, Link, Node, Transport
from llmp.spec.algebra import vmax, vmin, vstep
from llmp.spec.spec import Spec

ARCH: dict[str, Arch] = {
    "v100_sxm3_32gb": Arch.VOLTA,
    "a100_sxm4_40gb": Arch.AMPERE, "a100_sxm4_80gb": Arch.AMPERE, "a40": Arch.AMPERE,
    "h100_sxm5_80gb": Arch.HOPPER, "h200_sxm_141gb": Arch.HOPPER, "gh200_96gb": Arch.HOPPER,
    "gh200_144gb": Arch.HOPPER,
    "b200": Arch.BLACKWELL, "b300": Arch.BLACKWELL, "gb200": Arch.BLACKWELL, "gb300": Arch.BLACKWELL,
    "mi300x": Arch.AMPERE, "mi355x": Arch.AMPERE, "cpu": Arch.AMPERE,
}
"""The row of NCCL's tables each catalog GPU reads (its compute capability: 7.0 Volta, 8.x Ampere,
9.0 Hopper, 10.x Blackwell). AMD GPUs run RCCL, NCCL's fork, with its own constants; they read the
Ampere row here (no NVLS, no Hopper LL128 caps), an approximation their fitted link efficiencies
absorb at large sizes. A derived GPU (``gpu x from h100_sxm5_80gb``) reads its base's row; a GPU
written from scratch, the Ampere row."""


def arch_of(device: Device) -> Arch:
    """The NCCL table row of ``device`` (:data:`ARCH`, through the GPU it was derived from)."""
    chain = (device.id, *(device.derivation.chain if device.derivation else ()))
    return next((ARCH[g] for g in chain if g in ARCH), Arch.AMPERE)


@dataclass(frozen=True, kw_only=True, slots=True)
class Links:
    """The link parameters a collective's cost depends on; bandwidths are achievable rates
    (line rate x the link's ``efficiency``), as :meth:`between` builds them."""

    gpus_per_node: Any
    intra_bandwidth: Any
    """Per GPU, per direction (NVLink/NVSwitch, or PCIe)."""
    intra_latency: Any
    """Seconds the intra link adds per step (a ``host`` link: the whole step)."""
    inter_bandwidth: Any
    """Per node, per direction (all NICs together)."""
    inter_latency: Any
    """Seconds the NIC adds per step (NCCL's ``latencyInter``; a ``host`` link: the whole step)."""
    intra_peer_bandwidth: Any = None
    """Per pair of GPUs wired directly (no switch), per direction; None: every pair gets
    ``intra_bandwidth``."""
    host_bandwidth: Any = 0
    """One GPU's link to host memory, per direction (offloading; tier ``host``)."""
    host_memory_bandwidth: Any = 0
    """One GPU's share of host memory bandwidth (an offloaded optimizer; tier ``host_memory``)."""
    host_latency: Any = 0
    """Fixed cost of one host copy or host update call."""
    arch: Arch = Arch.AMPERE
    """Which row of NCCL's tables the GPU reads."""
    intra_transport: Transport = Transport.NVLINK
    inter_transport: Transport = Transport.NET
    nvls: bool = False
    """The domain's switch does NVLink SHARP (NCCL's NVLS algorithms)."""
    nvls_efficiency: Any = 0.0
    """NCCL's ``nvlsEfficiency`` on this switch: the link's measured value, else NCCL's constant."""
    collnet: bool = False
    """The network reduces in its switches (NCCL's CollNet)."""
    machine: str | None = None
    """The catalog node these links belong to (whose own collective measurements may serve it,
    :mod:`~llmp.analytic.measured`); None for links not read from a node."""
    network: str | None = None
    """The id of the inter-node link in effect."""

    @classmethod
    def of(cls, spec: Spec) -> Links:
        """The links of ``spec``'s cluster, and its GPU's link to host memory (a copy's fixed cost is
        a launch: ``cudaMemcpyAsync``)."""
        g = spec.cluster.gpu
        return replace(cls.between(spec.cluster.node, spec.cluster.inter), host_bandwidth=g.host_bandwidth,
                                   host_memory_bandwidth=g.host_memory_bandwidth, host_latency=g.launch_overhead)

    @classmethod
    def between(cls, node: Node, inter: Link) -> Links:
        """The links of ``node`` with ``inter`` as the network, at their achievable rates."""
        intra = node.intra
        peer = None if intra.peer_bandwidth is None else intra.peer_bandwidth * intra.efficiency
        return cls(gpus_per_node=node.gpus_per_node, intra_bandwidth=intra.bandwidth * intra.efficiency,
                   intra_latency=intra.latency, inter_bandwidth=inter.bandwidth * inter.efficiency,
                   inter_latency=inter.latency, intra_peer_bandwidth=peer, arch=arch_of(node.gpu),
                   intra_transport=intra.transport or Transport.NVLINK,
                   inter_transport=inter.transport or Transport.NET, nvls=intra.nvls,
                   nvls_efficiency=(nccl.NVLS_EFFICIENCY[arch_of(node.gpu)] if intra.nvls_efficiency is None
                                    else intra.nvls_efficiency),
                   collnet=inter.in_network_reduction, machine=node.id, network=inter.id)

    @property
    def kind(self) -> tuple[Any, ...]:
        """What fixes the shape of the cost formulas (not their numbers): the table row,
        transports, switch features and whether the node is a mesh."""
        return (self.arch, self.intra_transport, self.inter_transport, self.nvls, self.collnet,
                self.intra_peer_bandwidth is not None)

    @property
    def rail_bandwidth(self) -> Any:
        """One GPU's share of its node's network injection bandwidth."""
        return self.inter_bandwidth / self.gpus_per_node

    def group_bandwidth(self, r: Any) -> Any:
        """What one GPU can send per direction to the other ``r - 1`` GPUs of its group in the
        domain: the whole intra rate behind a switch, at most ``r - 1`` pairs' worth in a mesh."""
        if self.intra_peer_bandwidth is None:
            return self.intra_bandwidth
        return vmin(self.intra_bandwidth, vmax(r - 1, 1) * self.intra_peer_bandwidth)

    def fabric(self, r: Any) -> nccl.Fabric:
        """What NCCL's tuner knows of these links for a group with ``r`` members per domain."""
        return nccl.Fabric(arch=self.arch, intra=self.intra_transport, intra_bandwidth=self.group_bandwidth(r),
                           rail_bandwidth=self.rail_bandwidth, nvls_efficiency=self.nvls_efficiency,
                           nvls=self.nvls and self.intra_peer_bandwidth is None,
                           collnet=self.collnet)

    def without_tables(self) -> Links:
        """The same links, known to no measured table (the model alone)."""
        return replace(self, machine=None, network=None)


def _p2p_step(links: Links, crossing: bool) -> Any:
    """One Simple ring step of latency on the link a point-to-point transfer crosses."""
    base = nccl.BASE_LATENCY[nccl.Algorithm.RING][2] * nccl.US
    if crossing:
        return base + nccl.HW_LATENCY[Transport.NET][nccl.Algorithm.RING][2] * nccl.US + 2 * links.inter_latency
    return base + nccl.HW_LATENCY[links.intra_transport][nccl.Algorithm.RING][2] * nccl.US + links.intra_latency


def _send_recv(size: Any, crossing: bool, links: Links) -> Any:
    bandwidth = links.rail_bandwidth if crossing else links.group_bandwidth(2)
    return _p2p_step(links, crossing) + size / bandwidth


def _all_to_all(n: Any, r: Any, size: Any, crossing: bool, links: Links) -> Any:
    """Grouped sends and receives to every peer: one NCCL launch (its Simple base latency), then the
    n - 1 transfers posted together, each paying the transport's per-message latency (NCCL's
    lowest, the LL ring step) and the link's own; (n - 1) / n of the buffer leaves each rank, the
    part for other domains ((n - r) / n) over its NIC rail, the rest over the intra link. No
    all-to-all is measured in the data; nothing here is fitted."""
    ring, ll = nccl.Algorithm.RING, 0
    base = nccl.BASE_LATENCY[ring][2] * nccl.US
    intra_bw = links.group_bandwidth(r if crossing else n)
    if not crossing:
        per_peer = nccl.HW_LATENCY[links.intra_transport][ring][ll] * nccl.US + links.intra_latency
        return base + (n - 1) * per_peer + (n - 1) / n * size / intra_bw
    per_peer = nccl.HW_LATENCY[Transport.NET][ring][ll] * nccl.US + links.inter_latency
    return base + (n - 1) * per_peer + vmax((n - r) / n * size / links.rail_bandwidth, (r - 1) / n * size / intra_bw)


def _host(c: Collective, links: Links) -> Any:
    """gloo's rings: ``latency`` per step and the bus bytes over the bottleneck bandwidth."""
    n, size, crossing = c.group, c.bytes, c.tier is Tier.INTER
    a = links.inter_latency if crossing else links.intra_latency
    bw = vmin(links.group_bandwidth(c.ranks_per_node), c.ranks_per_node * links.rail_bandwidth) if crossing \
        else links.group_bandwidth(n)
    if c.kind is CollectiveKind.SEND_RECV:
        return a + size / (links.rail_bandwidth if crossing else bw)
    steps = 2 * (n - 1) if c.kind is CollectiveKind.ALL_REDUCE else n - 1
    return steps * a + bus_factor(c.kind, n) * size / bw


def call(c: Collective) -> nccl.Call:
    """``c`` as NCCL's tuner sees it."""
    return nccl.Call(kind=c.kind, size=c.bytes, ranks=c.group, per_domain=c.ranks_per_node,
                     crossing=c.tier is Tier.INTER)


def time(c: Collective, links: Links) -> Any:
    """Seconds for one call of ``c`` as NCCL's cost model predicts it (numbers, arrays or SymPy
    expressions); 0 for a group of one. A host tier's call (offloading) is its bytes over the host
    link (or host memory) plus a fixed cost."""
    if c.tier is Tier.HOST:
        return links.host_latency + c.bytes / links.host_bandwidth
    if c.tier is Tier.HOST_MEMORY:
        return links.host_latency + c.bytes / links.host_memory_bandwidth
    crossing = c.tier is Tier.INTER
    if links.intra_transport is Transport.HOST or (crossing and links.inter_transport is Transport.HOST):
        t = _host(c, links)
    elif c.kind is CollectiveKind.SEND_RECV:
        t = _send_recv(c.bytes, crossing, links)
    elif c.kind is CollectiveKind.ALL_TO_ALL:
        t = _all_to_all(c.group, c.ranks_per_node, c.bytes, crossing, links)
    else:
        nc = call(c)
        t = nccl.best(nc, links.fabric(c.ranks_per_node)) + excess(nc, links)
    return t * vstep(c.group, (1.5,), (0, 1))


def excess(c: nccl.Call, links: Links) -> Any:
    """Seconds a call takes beyond NCCL's model: each link's ``latency`` per ring step on it."""
    return (c.steps - c.inter_steps) * links.intra_latency + c.inter_steps * links.inter_latency


def choice(c: Collective, links: Links) -> tuple[str, str, float]:
    """(algorithm, protocol, seconds) NCCL picks for a numeric ``c``: for reports and tests. Point-
    to-point, all-to-all and host links have no NCCL algorithm ("p2p", "Simple"; "gloo", "ring")."""
    crossing = c.tier is Tier.INTER
    if c.tier in (Tier.HOST, Tier.HOST_MEMORY):
        return "copy", "host", float(time(c, links))
    if links.intra_transport is Transport.HOST or (crossing and links.inter_transport is Transport.HOST):
        return "gloo", "ring", float(time(c, links))
    if c.kind in (CollectiveKind.SEND_RECV, CollectiveKind.ALL_TO_ALL):
        return "p2p", "Simple", float(time(c, links))
    nc = call(c)
    a, p, t = nccl.choice(nc, links.fabric(c.ranks_per_node))
    return a.value, p.value, t + float(excess(nc, links))


def bus_factor(kind: CollectiveKind, n: Any) -> Any:
    """NCCL's bus-bandwidth factor: bytes each rank moves per byte of buffer."""
    if kind is CollectiveKind.ALL_REDUCE:
        return 2 * (n - 1) / n
    if kind is CollectiveKind.SEND_RECV:
        return 1
    return (n - 1) / n
