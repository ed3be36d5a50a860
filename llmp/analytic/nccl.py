"""NCCL's own cost model: the time of every (algorithm, protocol) NCCL considers, as NCCL predicts it.

NCCL does not run one algorithm: for each call it predicts ``latency + bytes / bandwidth`` for every
(algorithm, protocol) pair it has enabled and runs the fastest (NVIDIA/nccl@1fc949c5:
src/tuning/tuning.cc (ncclTuningSelectBestTuning), src/tuning/tuning_general.cc (ncclTuningGetTime)).
This module writes that model once, on floats, numpy arrays (sweeps) and SymPy expressions
(sensitivity): every formula uses arithmetic and the :mod:`~llmp.spec.algebra` helpers only.

What NCCL's model knows, and where ours takes it from:

* the constants (base and per-transport latencies per algorithm and protocol, the protocols'
  bandwidth caps, the tree correction by message size, NVLS efficiency) are NCCL's defaults,
  cited table by table below;
* the *graphs* NCCL's topology search builds (channels and their per-channel bandwidth) are
  derived from the cluster's links: a graph's total bandwidth is the link's achievable rate
  (line rate x its measured ``efficiency``, :class:`~llmp.analytic.collectives.Links`), and its
  channel count that total over NCCL's per-channel speed (:func:`channel_speed`). NCCL's count is
  a whole number; ours is that ratio, so the caps per channel scale smoothly;
* NCCL's per-network latency (``graph->latencyInter``, what the network plugin reports) is 0: the
  InfiniBand/RoCE plugin sets none (NVIDIA/nccl@48bb7fec:src/transport/net_ib.cc
  (ncclIbGetProperties), "props->latency = 0; // Not set"). What real calls take beyond this model
  (a per-step synchronisation cost the published small-message times show) is the links'
  ``latency``, added by :func:`~llmp.analytic.collectives.time` to whichever candidate NCCL picks,
  so that NCCL's choice stays its own.

Conventions: ``size`` is NCCL's ``nBytes`` (the all-reduce buffer; the whole gathered or
scattered buffer for all-gather and reduce-scatter: NVIDIA/nccl@76145438:src/include/info.h
(ncclInfoSetDerived, "count is per rank")), which is also the nccl-tests ``size`` and
:attr:`~llmp.analytic.kernels.Collective.bytes`. ``n`` ranks sit ``r`` per scale-up domain in
``n / r`` domains; NCCL treats a multi-node NVLink domain as one node (MNNVL:
NVIDIA/nccl@b6475625:src/graph/tuning.cc (ncclTopoTuneModel, "treat as a single NVLink connected
node")), so "nodes" below are domains.

What is left out, on purpose: the CPU-vendor row of the multi-node LL cap (Intel or Arm is
assumed; AMD hosts get NCCL's lower row), the plain-TREE-pattern penalty (NCCL builds balanced
trees by default), the NVLS-tree correction on x86 Blackwell hosts, user tuner plugins and
``NCCL_ALGO``/``NCCL_PROTO`` overrides, and symmetric-memory kernels (they need registered buffers,
which the frameworks priced here do not use by default).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from llmp.analytic.kernels import CollectiveKind
from llmp.hardware.spec import Transport
from llmp.spec.algebra import vmax, vmin, vstep

US = 1e-6
"""NCCL's latencies are in microseconds."""
GBS = 1e9
"""NCCL's bandwidths are in GB/s (1e9 bytes per second)."""

COST_MODEL = "NVIDIA/nccl@1fc949c5:src/tuning/cost_model.cc (ncclTunerConstantsDefaults)"


class Algorithm(StrEnum):
    """NCCL's collective algorithms (``NCCL_ALGO_*``)."""

    TREE = "tree"
    RING = "ring"
    COLLNET_DIRECT = "collnet_direct"
    COLLNET_CHAIN = "collnet_chain"
    NVLS = "nvls"
    NVLS_TREE = "nvls_tree"
    PAT = "pat"


class Protocol(StrEnum):
    """NCCL's protocols (``NCCL_PROTO_*``): LL (8-byte flag+data lines, lowest latency), LL128
    (128-byte lines with 8 bytes of flags), Simple (bulk copies behind fences)."""

    LL = "LL"
    LL128 = "LL128"
    SIMPLE = "Simple"


class Arch(StrEnum):
    """The compute-capability rows of NCCL's tables (``NCCL_*_COMPCAP_IDX``)."""

    VOLTA = "volta"
    AMPERE = "ampere"
    HOPPER = "hopper"
    BLACKWELL = "blackwell"


_A, _P = Algorithm, Protocol
LL, LL128, SIMPLE = Protocol.LL, Protocol.LL128, Protocol.SIMPLE

BASE_LATENCY: dict[Algorithm, tuple[float, float, float]] = {
    _A.TREE: (6.8, 14.0, 8.4), _A.RING: (6.6, 14.0, 8.4), _A.COLLNET_DIRECT: (0, 0, 0),
    _A.COLLNET_CHAIN: (0, 0, 0), _A.NVLS: (0, 0, 0), _A.NVLS_TREE: (0, 0, 0), _A.PAT: (8.0, 8.0, 8.0)}
"""``baseLatencies`` (us), per algorithm, (LL, LL128, Simple): :data:`COST_MODEL`."""

HW_LATENCY: dict[Transport, dict[Algorithm, tuple[float, float, float]]] = {
    Transport.NVLINK: {_A.TREE: (0.6, 1.25, 4.0), _A.RING: (0.6, 1.9, 3.4), _A.COLLNET_DIRECT: (0, 0, 3.7),
                       _A.COLLNET_CHAIN: (0, 0, 2.8), _A.NVLS: (0, 0, 25), _A.NVLS_TREE: (0, 0, 25),
                       _A.PAT: (0, 0, 4.0)},
    Transport.PCI: {_A.TREE: (1.0, 1.9, 4.0), _A.RING: (1.0, 2.5, 5.7), _A.COLLNET_DIRECT: (0, 0, 3.7),
                    _A.COLLNET_CHAIN: (0, 0, 2.8), _A.NVLS: (0, 0, 0), _A.NVLS_TREE: (0, 0, 0), _A.PAT: (0, 0, 4.0)},
    Transport.NET: {_A.TREE: (5.0, 8.5, 14), _A.RING: (2.7, 4.0, 14.0), _A.COLLNET_DIRECT: (0, 0, 31),
                    _A.COLLNET_CHAIN: (0, 0, 30), _A.NVLS: (0, 0, 18), _A.NVLS_TREE: (0, 0, 20.9),
                    _A.PAT: (0, 0, 14)},
}
"""``hwLatencies`` (us) per transport (NVLINK, PCI, NET), algorithm, (LL, LL128, Simple): :data:`COST_MODEL`."""

_ROWS = (Arch.VOLTA, Arch.AMPERE, Arch.HOPPER, Arch.BLACKWELL)
LL_MAX_BW: dict[Arch, tuple[float, float, float]] = dict(zip(_ROWS, (
    (39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (141.0, 45.0, 35.0), (282.0, 90.0, 70.0))))
"""``llMaxBws`` (GB/s, the whole LL bandwidth) for 1 / 2 / 3+ nodes: :data:`COST_MODEL`. One node
reads the GPU's row; several read a CPU-vendor row (``ncclTuningGetConstantsIndexes``: row 0 for
Intel and Arm hosts, 1 for AMD), so multi-node calls use the first row here."""
PER_CH_RING_LL128: dict[Arch, tuple[float, float, float]] = dict(zip(_ROWS, (
    (20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 36.7), (40.0, 40.0, 40.0))))
"""``perChMaxRingLL128Bws`` (GB/s per channel), 1 / 2 / 3+ nodes: :data:`COST_MODEL`."""
PER_CH_TREE_LL128: dict[Arch, tuple[float, float, float]] = dict(zip(_ROWS, (
    (20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 29.0), (55.6, 31.67, 20.0))))
"""``perChMaxTreeLL128Bws`` (GB/s per channel): :data:`COST_MODEL`."""
PER_CH_TREE: dict[Arch, tuple[float, float, float]] = dict(zip(_ROWS, (
    (26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0), (70.0, 42.8, 24.0))))
"""``perChMaxTreeBws`` (GB/s per channel): :data:`COST_MODEL`."""
PER_CH_NVLS_TREE: dict[Arch, tuple[float, float, float]] = dict(zip(_ROWS, (
    (26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (0.0, 57.7, 45.5), (0.0, 96.0, 80.0))))
"""``perChMaxNVLSTreeBws`` (GB/s per channel; 0 = no cap): :data:`COST_MODEL`."""

TREE_CORRECTION: dict[Protocol, tuple[float, ...]] = {
    LL: (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0),
    LL128: (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0),
    SIMPLE: (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9),
}
"""``treeCorrectionFactor``: tree bandwidth x this at ``log2i(nBytes >> 6)`` = 0..22 (64 B to
256 MiB; the tree model applies entries below 23): :data:`COST_MODEL`, NVIDIA/nccl@1fc949c5:
src/tuning/tree.cc (ncclTuningTreeModelSim)."""

NVLS_EFFICIENCY: dict[Arch, float] = {Arch.VOLTA: 0.0, Arch.AMPERE: 0.0, Arch.HOPPER: 0.85, Arch.BLACKWELL: 0.74}
"""``nvlsEfficiency``: NVIDIA/nccl@1fc949c5:src/tuning/nvls.cc. Also whether an arch runs NVLS at all
(0: no); a link's measured ``nvls_efficiency`` replaces the value."""
NVLS_CHANNELS = 16
"""``NCCL_NVLS_NCHANNELS`` default: NVIDIA/nccl@5d3ab08b:src/transport/nvls.cc (ncclNvlsSetup)."""
NVLS_MIN_RANKS = 5
"""Fewest GPUs of a domain NCCL runs NVLS on. The tuner decides by time, but its NVLS graph is
thinner than the ring's on few GPUs, which the per-channel model here does not see; the FIT
measurements show where NCCL switches: it picks Ring at 4 GPUs and NVLS from 5 on 8x H200 and
from 6 on 8x B200 (stas00/ml-engineering@744d01e network/README.md, NVLS ramp;
NVIDIA/nccl issue #1455: "2-4 GPUs stay ~370", ring)."""

COLLNET_DIRECT_MAX_LOCAL = 8
"""CollNet Direct serves at most 8 GPUs per node (``NCCL_MAX_DIRECT_ARITY + 1``):
NVIDIA/nccl@88980683:src/tuning/collnet.cc (ncclTuningCollnetModelSim)."""
COLLNET_ARITY_LATENCY = 0.4
"""us per local rank, "arity serialization latency": NVIDIA/nccl@88980683:src/tuning/collnet.cc."""
NET_OVERHEAD = 1.0
"""us per ring step on a multi-node ring, x3 for Simple ("Inter-node rings still have to launch
nsteps * net overhead"; 1 us on Intel and Arm hosts, 2 on AMD): NVIDIA/nccl@1fc949c5:
src/tuning/ring.cc (getNetOverhead)."""
RING_PLATEAU = {Arch.VOLTA: 1.9, Arch.AMPERE: 1.4, Arch.HOPPER: 1.4, Arch.BLACKWELL: 1.4}
"""Multi-node ring/Simple all-reduce latency x this ("Plateau effect of ring", whenever each rank
sends at least 64 B per channel, i.e. every size where Simple can win): NVIDIA/nccl@1fc949c5:
src/tuning/ring.cc (ncclTuningRingModelSim)."""
PAT_LINEAR_LATENCY = 2.8
"""us per rank of PAT's latency ("still a linear part"): NVIDIA/nccl@1fc949c5:src/tuning/pat.cc."""

SPEED_INTRA = (3.0, 4.0, 5.0, 6.0, 7.0, 9.0, 10.0, 12.0, 15.0, 18.0, 22.0, 30.0, 44.0)
SPEED_INTER = (0.12, 0.24, 1.2, 2.4, 3.0, 4.0, 5.0, 6.0, 7.0, 9.0, 10.0, 12.0, 15.0, 18.0, 22.0, 24.0, 30.0, 48.0)
"""GB/s per channel NCCL's topology search tries, highest first, inside a node and across nodes
(``speedArrayIntra``, ``speedArrayInter``, ascending here): NVIDIA/nccl@2dfd8375:
src/graph/search.cc (ncclTopoCompute). A search that lands at 25 GB/s or more doubles its
channels at half the speed each (same file, "dupChannels")."""
DUPLICATE_AT = 25.0


def channel_speed(bandwidth: Any, *, inter: bool) -> Any:
    """Bytes/s of one NCCL channel on a graph of ``bandwidth`` bytes/s per GPU: the fastest speed
    of NCCL's search array the link can carry, halved when channels are duplicated (>= 25 GB/s)."""
    array = SPEED_INTER if inter else SPEED_INTRA
    speeds = tuple(s / 2 if s >= DUPLICATE_AT else s for s in array)
    # Speed i applies from array[i] GB/s on; below the slowest, the slowest.
    return vstep(bandwidth / GBS, array[1:], speeds) * GBS


def _scale(table: tuple[float, float, float], nodes: Any, crossing: bool) -> Any:
    """A 1 / 2 / 3+ node entry (``ncclTuningGetConstantsIndexes``: index2 = min(nNodes, 3) - 1)."""
    if not crossing:
        return table[0]
    return vstep(nodes, (2.5,), (table[1], table[2]))


def log2i(x: Any) -> Any:
    """NCCL's ``log2i``: floor(log2(x)) for x >= 1 (0 below), as a step function."""
    return vstep(x, tuple(float(2 ** k) for k in range(1, 40)), tuple(range(40)))


def tree_correction(protocol: Protocol, size: Any) -> Any:
    """``treeCorrectionFactor[protocol][log2i(size >> 6)]`` for indices 0..22, 1 elsewhere."""
    table = TREE_CORRECTION[protocol]
    breaks = tuple(64.0 * 2 ** k for k in range(24))  # index k from 64 * 2**k bytes on
    return vstep(size, breaks, (1.0, *table[:23], 1.0))


@dataclass(frozen=True, kw_only=True, slots=True)
class Fabric:
    """What NCCL's tuner knows of the hardware a communicator spans (SI units; numbers, arrays
    or expressions). Built by :meth:`~llmp.analytic.collectives.Links.fabric`."""

    arch: Arch
    intra: Transport
    """NVLINK or PCI (the hardware row of the intra-domain latencies)."""
    intra_bandwidth: Any
    """Achievable bytes/s per GPU per direction to the other members of its domain."""
    rail_bandwidth: Any
    """Achievable bytes/s per GPU of NIC (its share of its node's NICs)."""
    nvls_efficiency: Any
    """NCCL's ``nvlsEfficiency`` for this switch (its constant, or the link's measured value)."""
    nvls: bool
    """The domain's switch does NVLink SHARP."""
    collnet: bool
    """The network reduces in its switches (CollNet); also enables multi-node NVLS."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Call:
    """One collective as NCCL's tuner sees it (numbers, arrays or expressions)."""

    kind: CollectiveKind
    size: Any
    """NCCL's ``nBytes``."""
    ranks: Any
    """``nRanks``."""
    per_domain: Any
    """Members per scale-up domain (NCCL's ranks per node, ``ppn``)."""
    crossing: bool
    """The group spans domains (``nNodes > 1``)."""

    @property
    def nodes(self) -> Any:
        return self.ranks / self.per_domain if self.crossing else 1

    @property
    def steps(self) -> Any:
        """``ncclTuningGetNsteps``: 2 (n - 1) for all-reduce, n - 1 for all-gather/reduce-scatter."""
        return 2 * (self.ranks - 1) if self.kind is CollectiveKind.ALL_REDUCE else self.ranks - 1

    @property
    def inter_steps(self) -> Any:
        """Ring steps that cross a node boundary: 2 (N - 1) for all-reduce, N - 1 otherwise
        (NVIDIA/nccl@1fc949c5:src/tuning/ring.cc (ncclTuningRingModelInit))."""
        if not self.crossing:
            return 0
        return 2 * (self.nodes - 1) if self.kind is CollectiveKind.ALL_REDUCE else self.nodes - 1


def _index(p: Protocol) -> int:
    return (LL, LL128, SIMPLE).index(p)


def _latencies(f: Fabric, a: Algorithm, p: Protocol) -> tuple[float, float]:
    """(intra, inter) per-step latency in seconds: NCCL's hardware latency of each transport (the
    network adds nothing of its own, ``latencyInter`` = 0)."""
    i = _index(p)
    return HW_LATENCY[f.intra][a][i] * US, HW_LATENCY[Transport.NET][a][i] * US


def _time(latency: Any, size: Any, bandwidth: Any) -> Any:
    return latency + size / bandwidth


def ring(c: Call, f: Fabric, p: Protocol) -> Any:
    """Ring, any protocol (all-reduce, all-gather, reduce-scatter): NVIDIA/nccl@1fc949c5:
    src/tuning/ring.cc (ncclTuningRingModelInit, ncclTuningRingModelSim)."""
    total = f.intra_bandwidth if not c.crossing else vmin(f.intra_bandwidth, c.per_domain * f.rail_bandwidth)
    speed = channel_speed(f.intra_bandwidth if not c.crossing else f.rail_bandwidth, inter=c.crossing)
    if p is LL:
        row = f.arch if not c.crossing else Arch.VOLTA
        bus = vmin(_scale(LL_MAX_BW[row], c.nodes, c.crossing) * GBS, total * 0.5)
    elif p is LL128:
        bus = total * vmin(0.92, _scale(PER_CH_RING_LL128[f.arch], c.nodes, c.crossing) * GBS / speed)
    else:
        bus = total
    intra, inter = _latencies(f, Algorithm.RING, p)
    if c.crossing:
        intra = vmax(intra, NET_OVERHEAD * US * (3 if p is SIMPLE else 1))
    latency = BASE_LATENCY[Algorithm.RING][_index(p)] * US + (c.steps - c.inter_steps) * intra + c.inter_steps * inter
    if c.crossing and p is SIMPLE and c.kind is CollectiveKind.ALL_REDUCE:
        latency = latency * RING_PLATEAU[f.arch]
    # algBw = busBw * nRanks / nSteps, written so that a group of one costs nothing
    return _time(latency, c.size * c.steps / c.ranks, bus)


def tree(c: Call, f: Fabric, p: Protocol) -> Any:
    """Tree (all-reduce only): a chain inside each node, NCCL's double binary tree across nodes:
    NVIDIA/nccl@1fc949c5:src/tuning/tree.cc (ncclTuningTreeModelInit, ncclTuningTreeModelSim)."""
    total = f.intra_bandwidth if not c.crossing else vmin(f.intra_bandwidth, c.per_domain * f.rail_bandwidth)
    speed = channel_speed(f.intra_bandwidth if not c.crossing else f.rail_bandwidth, inter=c.crossing)
    bus = total * vmin(0.92, _scale(PER_CH_TREE[f.arch], c.nodes, c.crossing) * GBS / speed)
    if p is LL:
        row = f.arch if not c.crossing else Arch.VOLTA
        bus = vmin(bus / 3.8, _scale(LL_MAX_BW[row], c.nodes, c.crossing) * GBS)
    elif p is LL128:
        bus = vmin(bus * (120 / 128 if c.crossing else 7 / 9),
                   total / speed * _scale(PER_CH_TREE_LL128[f.arch], c.nodes, c.crossing) * GBS)
    intra, inter = _latencies(f, Algorithm.TREE, p)
    latency = BASE_LATENCY[Algorithm.TREE][_index(p)] * US + 2 * (
        (c.ranks / c.nodes - 1) * intra + log2i(c.nodes) * (inter if c.crossing else intra))
    return _time(latency, c.size, bus * 0.5 * tree_correction(p, c.size))


def nvls(c: Call, f: Fabric) -> Any:
    """NVLS (NVLink SHARP: the switch reduces and multicasts), Simple only: all-reduce, and
    all-gather/reduce-scatter inside one domain; across domains only with CollNet:
    NVIDIA/nccl@1fc949c5:src/tuning/nvls.cc (ncclTuningNvlsModelInit, ncclTuningNvlsModelSim)."""
    ppn = c.per_domain
    bw = f.intra_bandwidth * f.nvls_efficiency * (NVLS_CHANNELS - 1) / NVLS_CHANNELS
    bw = bw * 2 if c.kind is CollectiveKind.ALL_REDUCE else bw * (ppn - 1) / ppn
    intra, inter = _latencies(f, Algorithm.NVLS, SIMPLE)
    latency = intra
    if c.crossing:
        bw = vmin(bw, ppn * f.rail_bandwidth)
        latency = latency + inter
    return _time(latency, c.size * c.steps / c.ranks, bw)


def nvls_tree(c: Call, f: Fabric) -> Any:
    """NVLS inside each domain and a tree across them (all-reduce over several domains), Simple:
    NVIDIA/nccl@1fc949c5:src/tuning/nvls.cc."""
    bw = f.intra_bandwidth * f.nvls_efficiency * (NVLS_CHANNELS - 1) / NVLS_CHANNELS * 2
    inter_bw = c.per_domain * f.rail_bandwidth * vstep(c.nodes, (2.5,), (2, 1))  # doubled up to 2 nodes
    cap = _scale(PER_CH_NVLS_TREE[f.arch], c.nodes, True) * GBS * NVLS_CHANNELS
    bw = vmin(bw, inter_bw, cap)
    intra, inter = _latencies(f, Algorithm.NVLS_TREE, SIMPLE)
    latency = intra + 2 * log2i(c.nodes) * inter
    return _time(latency, c.size * c.steps / c.ranks, bw)


def collnet(c: Call, f: Fabric, a: Algorithm) -> Any:
    """CollNet Direct or Chain (all-reduce through the network's in-switch reduction), Simple:
    NVIDIA/nccl@88980683:src/tuning/collnet.cc (ncclTuningCollnetModelInit). One NIC per GPU is
    assumed, so Direct's GPU/NIC ratio is 1."""
    bus = vmin(f.intra_bandwidth, c.per_domain * f.rail_bandwidth)
    if a is Algorithm.COLLNET_DIRECT and f.arch in (Arch.HOPPER, Arch.BLACKWELL):
        bus = bus * 0.85
    intra, inter = _latencies(f, a, SIMPLE)
    local = c.ranks / c.nodes - 1
    if a is Algorithm.COLLNET_DIRECT:
        latency = 2 * (vmin(1, local) * intra + local * COLLNET_ARITY_LATENCY * US) + inter
    else:
        latency = 2 * local * intra + inter
    return _time(latency, c.size, bus * 0.5)


def pat(c: Call, f: Fabric) -> Any:
    """PAT (all-gather/reduce-scatter with one GPU per node), Simple: NVIDIA/nccl@1fc949c5:
    src/tuning/pat.cc (ncclTuningPatModelInit)."""
    bus = vmin(f.intra_bandwidth, f.rail_bandwidth) * 0.75
    inter = HW_LATENCY[Transport.NET][Algorithm.PAT][2] * US
    latency = (BASE_LATENCY[Algorithm.PAT][2] * US + log2i(c.nodes) * inter / 3.5
               + c.ranks * PAT_LINEAR_LATENCY * US)
    return _time(latency, c.size, bus)


INFINITE = float("inf")


def _only_if(x: Any, at_least: float) -> Any:
    """0 where ``x >= at_least``, infinity below: a candidate NCCL does not run there costs +inf."""
    return vstep(x, (at_least,), (INFINITE, 0.0))


def _only_below(x: Any, limit: float) -> Any:
    """0 where ``x < limit``, infinity from it on."""
    return vstep(x, (limit,), (0.0, INFINITE))


def candidates(c: Call, f: Fabric) -> dict[tuple[Algorithm, Protocol], Any]:
    """Seconds of every (algorithm, protocol) NCCL would consider for ``c`` on ``f``.

    Enablement (NVIDIA/nccl@1fc949c5:src/tuning/cost_model.cc (modelMap) and the models' init):
    ring for all-reduce, all-gather and reduce-scatter, every protocol (LL128 only where the GPUs
    of a node talk over NVLink: ``isLL128Enabled``, ``intraType <= PATH_NVB``); tree for
    all-reduce; NVLS on NVLS switches (all-gather and reduce-scatter inside one domain; across
    domains, all-reduce only with CollNet); NVLS-tree for
    all-reduce across domains; CollNet where the network reduces (Direct behind a switch, at most
    8 GPUs per node; Chain); PAT for all-gather/reduce-scatter at one GPU per node. Candidates that
    apply only to some sizes of a sweep carry +inf where they do not.
    """
    out: dict[tuple[Algorithm, Protocol], Any] = {}
    kind = c.kind
    protocols = (LL, LL128, SIMPLE) if f.intra is Transport.NVLINK else (LL, SIMPLE)
    for p in protocols:
        out[(Algorithm.RING, p)] = ring(c, f, p)
    if kind is CollectiveKind.ALL_REDUCE:
        for p in protocols:
            out[(Algorithm.TREE, p)] = tree(c, f, p)
    hopper_on = f.nvls and NVLS_EFFICIENCY[f.arch] > 0
    if hopper_on and (kind is CollectiveKind.ALL_REDUCE or not c.crossing) and (f.collnet or not c.crossing):
        out[(Algorithm.NVLS, SIMPLE)] = nvls(c, f) + _only_if(c.per_domain, NVLS_MIN_RANKS)
    if hopper_on and kind is CollectiveKind.ALL_REDUCE and c.crossing:
        out[(Algorithm.NVLS_TREE, SIMPLE)] = nvls_tree(c, f) + _only_if(c.per_domain, NVLS_MIN_RANKS)
    if f.collnet and c.crossing and kind is CollectiveKind.ALL_REDUCE:
        out[(Algorithm.COLLNET_CHAIN, SIMPLE)] = collnet(c, f, Algorithm.COLLNET_CHAIN)
        if f.intra is Transport.NVLINK:
            out[(Algorithm.COLLNET_DIRECT, SIMPLE)] = (collnet(c, f, Algorithm.COLLNET_DIRECT)
                                                       + _only_below(c.per_domain, COLLNET_DIRECT_MAX_LOCAL + 1))
    if c.crossing and kind in (CollectiveKind.ALL_GATHER, CollectiveKind.REDUCE_SCATTER):
        out[(Algorithm.PAT, SIMPLE)] = pat(c, f) + _only_below(c.per_domain, 1.5)
    return out


def best(c: Call, f: Fabric) -> Any:
    """Seconds of the (algorithm, protocol) NCCL picks: the fastest candidate
    (NVIDIA/nccl@1fc949c5:src/tuning/tuning.cc (ncclTuningSelectBestTuning))."""
    return vmin(*candidates(c, f).values())


def choice(c: Call, f: Fabric) -> tuple[Algorithm, Protocol, float]:
    """The (algorithm, protocol) NCCL picks for a numeric call, and its seconds."""
    times = {k: float(v) for k, v in candidates(c, f).items()}
    (a, p), t = min(times.items(), key=lambda kv: kv[1])
    return a, p, t
