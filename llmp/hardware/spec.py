"""Typed hardware specs: a GPU (or CPU) device, a link, a node and a cluster.

All numbers are SI: FLOP/s, bytes, bytes/s, seconds, Hz, watts. A field may hold a SymPy
expression when the spec left it free (``mem_bandwidth = symbol``) for sensitivity analysis.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:  # SymPy is imported only where a spec leaves a symbol free (llmp.sym)
    import sympy as sp

Real: TypeAlias = "float | sp.Expr"
Count: TypeAlias = "int | sp.Expr"


class Dtype(StrEnum):
    """Numeric formats with a peak rate on a device."""

    FP64 = "fp64"
    FP32 = "fp32"
    TF32 = "tf32"
    BF16 = "bf16"
    FP16 = "fp16"
    FP8 = "fp8"
    """FP8 (E4M3/E5M2) with one scale per tensor or per block held by software (Hopper, Ada,
    CDNA3 tensor cores; Blackwell runs them too)."""
    MXFP8 = "mxfp8"
    """OCP microscaling FP8: E4M3 elements, one E8M0 scale per 32, applied by the tensor core
    (Blackwell ``tcgen05`` block-scaled MMA, CDNA4). A GPU without this peak has no such MMA."""
    NVFP4 = "nvfp4"
    """NVIDIA FP4: E2M1 elements, one E4M3 scale per 16 and an FP32 scale per tensor, applied by
    the tensor core (Blackwell)."""

    @property
    def bits(self) -> int:
        """Storage width of one element in bits (TF32 is stored as FP32)."""
        return {"fp64": 64, "fp32": 32, "tf32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "mxfp8": 8,
                "nvfp4": 4}[self.value]

    @property
    def bytes(self) -> int | float:
        """Storage size of one element (TF32 is stored as FP32; an FP4 element is half a byte, a
        float so that the numeric path never needs SymPy)."""
        return self.bits // 8 if self.bits >= 8 else self.bits / 8

    @property
    def block_scaled(self) -> bool:
        """The tensor core applies per-block scales itself (microscaling formats)."""
        return self in (Dtype.MXFP8, Dtype.NVFP4)

    @property
    def low_precision(self) -> bool:
        """An 8- or 4-bit GEMM format: the operands are quantised from BF16 by a recipe."""
        return self.bits <= 8


class Microarch(StrEnum):
    """The instruction-set target a device's kernels are compiled for (``nvcc -arch``, ``hipcc
    --offload-arch``): it decides which tile shapes its GEMM and attention libraries launch, and so
    how a kernel's grid of tiles fills the SMs (``llmp.analytic.tiles``)."""

    SM70 = "sm70"
    """Volta (V100)."""
    SM80 = "sm80"
    """Ampere GA100 (A100)."""
    SM86 = "sm86"
    """Ampere GA10x (A40, A10, RTX 30): less shared memory per SM, other FlashAttention tiles."""
    SM90 = "sm90"
    """Hopper (H100, H200, H800, GH200)."""
    SM100 = "sm100"
    """Blackwell data-centre parts (B200, GB200; B300 and GB300, sm103, launch the same tiles)."""
    GFX942 = "gfx942"
    """AMD CDNA3 (MI300X, MI325X)."""
    GFX950 = "gfx950"
    """AMD CDNA4 (MI350X, MI355X)."""


class HostCpu(StrEnum):
    """The core of the CPU whose thread issues a node's kernels (``llmp.stacks.host`` prices its
    dispatch against the core the host costs were measured on)."""

    ZEN2 = "zen2"
    """AMD EPYC 7002 (Rome): the DGX A100's EPYC 7742, Azure NDv4's EPYC 7V12."""
    ZEN3 = "zen3"
    """AMD EPYC 7003 (Milan): Perlmutter's EPYC 7763."""
    ZEN4 = "zen4"
    """AMD EPYC 9004 (Genoa)."""
    SAPPHIRE_RAPIDS = "sapphire_rapids"
    """Intel Xeon 4th generation (Golden Cove cores): the DGX H100's Xeon Platinum 8480C."""
    GRACE = "grace"
    """NVIDIA Grace (Arm Neoverse V2 cores): the CPU of every GH200 and GB200 superchip."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Attainable:
    """Rates one kind of kernel reaches at best on a device, as a published micro-benchmark
    measured them (an "empirical roofline" ceiling, cf. the Empirical Roofline Toolkit).

    A ceiling, not a typical rate: the benchmark's best shape. Smaller or oddly shaped kernels
    run below it, so a roofline on these rates is still optimistic for them.
    """

    rates: dict[Dtype, Real]
    """FLOP/s per dtype; a dtype left out has no measurement (the datasheet peak applies)."""
    source: str
    """Where the rates come from, quoted in the prediction's provenance ("" if not given)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Derivation:
    """Where a derived device's values come from (``gpu h100_96 from h100_sxm5_80gb { ... }``),
    so ``llmp check`` can show which values were inherited and which were written."""

    chain: tuple[str, ...]
    """The device's bases, nearest first: ``("h100_sxm5_80gb",)``, or longer when a base is
    itself derived."""
    origin: dict[str, str]
    """Field or sub-block name (``memory``, ``flops``) -> the id of the block in the chain that
    wrote it, or ``"--set"`` for a command-line override. A name not listed has its default."""

    @property
    def base(self) -> str:
        """The device this one was derived from."""
        return self.chain[0]


@dataclass(frozen=True, kw_only=True, slots=True)
class Device:
    """One accelerator (or a CPU socket used as one), as on its datasheet."""

    id: str
    """Catalog id, e.g. ``h100_sxm5_80gb``; the ``gpu_id`` of published rows."""
    name: str
    """Human name, e.g. ``NVIDIA H100 SXM5 80GB``."""
    vendor: str
    peak_flops: dict[Dtype, Real]
    """Dense peak FLOP/s per dtype (tensor cores where they exist). Missing dtype = unsupported."""
    memory: Real
    """Device memory capacity in bytes."""
    mem_bandwidth: Real
    """Peak device-memory bandwidth in bytes/s."""
    sms: Count
    """Streaming multiprocessors (NVIDIA), compute units (AMD) or cores (CPU)."""
    clock: Real
    """Clock in Hz that reproduces the peak FLOP/s."""
    l2_cache: Real
    """Last-level cache in bytes (L2 on GPUs, L3 on CPUs)."""
    tdp: Real
    """Board power in watts."""
    launch_overhead: Real
    """Fixed cost per kernel launch in seconds (host + device side)."""
    scaleup_bandwidth: Real = 0.0
    """Scale-up (NVLink/xGMI) bandwidth per device, per direction, bytes/s; 0 if none."""
    host_bandwidth: Real = 0.0
    """The device's link to its host's memory (PCIe, or NVLink-C2C on a superchip), bytes/s per
    direction: what offloaded tensors cross. 0: not given (offloading cannot be priced)."""
    host_memory_bandwidth: Real = 0.0
    """The host memory bandwidth one device's share of its host gets, bytes/s: what an optimizer
    offloaded to the host streams through. 0: not given."""
    microarch: Microarch | None = None
    """Which tiles its kernels launch (:class:`Microarch`). None (a CPU, or a device whose target is
    not given): kernels are priced as if they filled every SM, the plain roofline."""
    achievable: Attainable | None = None
    """Best measured dense-GEMM rates (``achievable { }``): the GEMM compute ceiling. None: no
    micro-benchmark facts, GEMMs run against ``peak_flops``."""
    flash_attention: Attainable | None = None
    """Best measured fused-attention rates (``flash_attention { }``) in the FlashAttention FLOP
    convention: the compute ceiling of flash attention kernels. None: no facts."""
    derivation: Derivation | None = None
    """How a derived device got its values; None for a device written out in full."""


class Transport(StrEnum):
    """How a link carries a collective: NCCL's hardware classes (``NCCL_HW_NVLINK``, ``_PCI``,
    ``_NET`` in NVIDIA/nccl src/tuning/cost_model.cc, whose latency tables are indexed by them),
    or host processes exchanging buffers through gloo, which NCCL's tuning model does not describe."""

    NVLINK = "nvlink"
    """A GPU-to-GPU fabric: NVLink/NVSwitch, or AMD Infinity Fabric (RCCL's fork keeps the class)."""
    PCI = "pci"
    """GPUs talking over PCIe (no scale-up fabric)."""
    NET = "net"
    """A NIC: InfiniBand, RoCE, Slingshot, EFA."""
    HOST = "host"
    """CPU processes through gloo (a plain alpha-beta ring: latency per step, bytes over bandwidth)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Link:
    """A network tier: bandwidth per endpoint per direction and its per-step latency."""

    id: str
    bandwidth: Real
    """Bytes/s per endpoint (per GPU for intra-node, per node for inter-node), per direction."""
    latency: Real
    """Seconds this link adds to every step of a collective, on top of NCCL's own hardware latency
    for its transport (what NCCL's network plugin reports as a NIC's latency, ``graph->latencyInter``);
    for a ``host`` link, the whole per-step latency (the alpha of the alpha-beta ring)."""
    efficiency: Real = 1.0
    """Fraction of ``bandwidth`` collectives reach on large messages (0 < efficiency <= 1):
    protocol and synchronisation overhead measured by nccl-tests; 1 = line rate."""
    peer_bandwidth: Real | None = None
    """Bytes/s per direction between one pair of endpoints wired directly to each other (a mesh,
    no switch): a group of r endpoints gets at most (r - 1) x this. None: a switch gives every
    pair the full ``bandwidth``."""
    transport: Transport | None = None
    """What NCCL's cost model treats the link as; None: by its role (a node's ``intra`` is
    NVLink, an ``inter`` link a NIC)."""
    nvls: bool = False
    """The switch reduces and multicasts in hardware (NVLink SHARP, NVSwitch 3 and later), so
    NCCL can run its NVLS and NVLS-tree algorithms over it."""
    nvls_efficiency: Real | None = None
    """Fraction of the achievable ring bandwidth NVLS runs at before NCCL doubles it for all-reduce
    (NCCL's ``nvlsEfficiency``), as nccl-tests measure it; None: NCCL's own constant (Hopper 0.85,
    Blackwell 0.74)."""
    in_network_reduction: bool = False
    """The network reduces in its switches (InfiniBand SHARP through NCCL's CollNet plugin, with
    ``NCCL_COLLNET_ENABLE=1``), so NCCL can run CollNet Direct/Chain and multi-node NVLS over it."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Node:
    """A server: identical devices joined by an intra-node link, with an inter-node NIC link."""

    id: str
    gpu: Device
    gpus_per_node: Count
    intra: Link
    """Device-to-device link inside the node (bandwidth per device per direction)."""
    inter: Link
    """The node's injection into the network (bandwidth per node per direction, all NICs)."""
    nvlink_domain: Count | None = None
    """GPUs joined by the ``intra`` link's switch fabric (the scale-up domain), a whole number of
    nodes: 72 for a GB200 NVL72 rack of 18 four-GPU trays. Groups inside one domain run on
    ``intra`` (NCCL treats such a multi-node NVLink domain as one node, its MNNVL mode); beyond
    it, on the NICs, which stay per node (per tray). None: the node itself."""
    host_cpu: HostCpu | None = None
    """The host CPU's core, where the catalog knows it: the host thread issues kernels at that
    core's speed. None: at the speed of the CPU the dispatch costs were measured on."""

    @property
    def domain(self) -> Count:
        """GPUs per scale-up domain (``nvlink_domain``, else ``gpus_per_node``)."""
        return self.gpus_per_node if self.nvlink_domain is None else self.nvlink_domain


@dataclass(frozen=True, kw_only=True, slots=True)
class Cluster:
    """``nodes`` identical nodes on one network."""

    id: str
    node: Node
    nodes: Count
    inter: Link
    """Inter-node link in effect (the node's own unless the cluster overrides it)."""

    @property
    def world_size(self) -> Count:
        """Devices in the cluster."""
        return self.node.gpus_per_node * self.nodes

    @property
    def gpu(self) -> Device:
        return self.node.gpu
