"""The host thread of each rank: how long it takes to issue each op, and where it waits.

A GPU runs only what its host thread has issued (the CUDA stream is a queue the CPU fills), so
every op costs host time as well as device time:

* **dispatch**: Python, the stack's wrappers (modules, custom autograd functions, TorchScript
  fusions, checkpointing bookkeeping) and PyTorch's dispatcher, per kernel. Measured on this
  machine by timing torch replicas of each stack's layer code path on CPU tensors
  (:mod:`llmp.measure.host`, ``python benchmarks/host_costs.py``), and kept in
  ``host_costs.json`` as seconds per kernel launch of each pass (the replica's time over the
  launches llmp's graph counts for the same layer): the forward and its backward, and under full
  recompute the checkpointed forward and the backward that recomputes it.
  A node whose catalog entry names its host CPU's core (``host_cpu``) dispatches at that core's
  speed: the measured costs scale by the cores' single-thread speeds (:data:`SPEED`).
* **launch**: the CUDA driver and runtime per kernel launch, the device's ``launch_overhead``
  (each catalog GPU cites its figure).

Quantization kernels of the low-precision GEMMs are launched from C++ inside the module call that
dispatches the GEMM (TransformerEngine's ``tex`` extension, torchao's fused casts): they cost the
host their launches only.

A stack that captures its layers in CUDA graphs (``train.cuda_graphs``) replays each captured
region with one launch: its ops cost the host nothing per kernel.

Where the host waits for the device is the stack's (:attr:`~llmp.stacks.profile.Profile.pipeline_host_sync`):
Megatron synchronises the device after every pipeline send/receive, so each pipeline task then
starts with an empty queue; stacks that do not let the host run ahead across tasks.

The CPU device (``gpu = cpu``) is its own host: its ``launch_overhead`` already is the dispatch
cost of an eager op, and nothing more is added.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType
from typing import Any

from llmp.hardware.spec import HostCpu, Node
from llmp.spec.spec import Recompute, Spec
from llmp.stacks.catalog import PROFILES

PASSES = ("fwd", "bwd", "full_fwd", "full_bwd")


@dataclass(frozen=True, kw_only=True, slots=True)
class Measured:
    """``host_costs.json``: dispatch seconds per kernel launch, per replica style and pass."""

    per_launch: dict[str, dict[str, float]]
    machine: dict[str, str]
    """What the replicas ran on (CPU, Python, torch)."""
    date: str
    command: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Spread:
    """How much slower (or faster) than the measuring CPU the run's host may be, as a two-piece
    normal in log space: widths below (a faster host) and above (a slower one)."""

    below: float
    above: float
    source: str


_Z90 = 1.6449  # the standard normal quantile at 95%: a 90% interval's half-width in sigmas
HOST_SPEED = Spread(
    below=math.log(1.2) / _Z90, above=math.log(1.5) / _Z90,
    source=('the x86 host CPUs of GPU servers span several generations, from the AMD EPYC 7742 (Zen 2) of the DGX'
            ' A100 to Zen 5 parts (Grace hosts, 2.6x slower per call than Golden Cove, are named by the catalog '
            "nodes built on them: llmp.stacks.host.SPEED); AMD's launch figures put Zen 3's instructions per "
            "clock 19% above Zen 2's (Ryzen 5000 launch, Oct 2020) and Zen 4's 13% above Zen 3's (Ryzen 7000 "
            'launch, Aug 2022), so at like clocks a 2019 host issues kernels about 1.5x slower than the Zen 4 the'
            ' dispatch costs were measured on (host_costs.json names it) and the newest about 1.2x faster: a 90% '
            'range [1/1.2, 1.5]'))
"""The run's host against the measuring machine: the band's host term and a calibration's prior."""


_GOLDEN_COVE = 1.19 * 1.13 / 1.02
_GRACE_PER_CALL = math.sqrt(33.17 * 37.08) / 13.48

SPEED = MappingProxyType({HostCpu.ZEN2: 1.0, HostCpu.ZEN3: 1.19, HostCpu.ZEN4: 1.19 * 1.13,
                          HostCpu.SAPPHIRE_RAPIDS: _GOLDEN_COVE, HostCpu.GRACE: _GOLDEN_COVE / _GRACE_PER_CALL})
"""How fast each host core runs the dispatch thread, relative to Zen 2. Dispatch is one thread of
Python and C++, so it runs at the core's single-thread speed:

* x86 cores by instructions per clock, clocks being left to the band's :data:`HOST_SPEED` spread
  (EPYC 7742 3.4 GHz boost, 7763 3.5, Genoa 3.7-4.4, Xeon 8480C 3.8): Zen 3 19% above Zen 2 (AMD,
  Ryzen 5000 launch, Oct 2020; the same +19% for EPYC 7003 at its Mar 2021 launch), Zen 4 13% above
  Zen 3 (AMD, Ryzen 7000 launch, Aug 2022), and Golden Cove (Sapphire Rapids) 2% below Zen 4
  (SPEC CPU2017 rate-1 at a fixed 3.6 GHz, as reported by WCCFTech in 2022: Raptor Cove and Zen 4
  within 1% of each other, Raptor Cove 2% above Golden Cove).
* Grace by a direct measurement of the same call on both hosts: one ``torch.nn.Linear`` forward
  (BF16, hidden 2048, 8192 tokens) costs the CPU 13.48 us on a DGX H100's Xeon 8480C, 33.17 us on a
  GH200 and 37.08 us on a GB200 (NVIDIA/TransformerEngine issue #2053, Aug 2025): Grace issues
  torch's calls 2.6x slower (the geometric mean of the two) than Golden Cove."""


def speed(node: Node) -> float:
    """How much longer the node's host takes per dispatch than the CPU the costs were measured on:
    the ratio of their cores' :data:`SPEED`; 1 where either core is not one llmp compares."""
    here = measured().machine.get("core", "")
    if node.host_cpu is None or here not in SPEED:
        return 1.0
    return SPEED[HostCpu(here)] / SPEED[node.host_cpu]


@functools.cache
def measured() -> Measured:
    """The shipped measurement (read once)."""
    text = resources.files("llmp.stacks").joinpath("host_costs.json").read_text(encoding="utf-8")
    data = json.loads(text)
    per_launch = {style: {p: float(v["per_launch_s"][p]) for p in PASSES} for style, v in data["styles"].items()}
    return Measured(per_launch=per_launch, machine=dict(data["machine"]), date=data["date"],
                    command=data["command"])


@dataclass(frozen=True, kw_only=True, slots=True)
class HostRules:
    """What the composition needs of a spec's host thread: seconds per kernel launch of each kind
    of op (dispatch plus the launch itself), and whether pipeline tasks start on an empty queue."""

    forward: float
    """Dispatch per launch of a forward op: recording autograd, or the checkpointed forward of a
    fully recomputed layer."""
    recompute: float
    """Dispatch per launch of a recomputed forward op (recording autograd, in the backward task)."""
    backward: float
    """Dispatch per launch of a backward op run by the autograd engine."""
    step: float
    """Dispatch per launch of once-per-step work (optimizer, clipping, unscaling): eager calls
    without autograd."""
    launch: Any
    """The CUDA driver and runtime per kernel launch (the device's ``launch_overhead``: a number,
    or a symbol where sensitivity leaves it free)."""
    pipeline_sync: bool
    """The host waits for the device at each pipeline send/receive (pp > 1 only)."""
    batch_sync: bool
    """Loading a microbatch waits for the device: the forwards that read it start on an empty queue."""
    graphs: bool
    """Layers are replayed from CUDA graphs: their ops cost no host time per kernel."""
    style: str
    """The replica style whose measurement applies (:mod:`llmp.measure.host`)."""

    @classmethod
    def of(cls, spec: Spec) -> HostRules | None:
        """The host rules of ``spec``; None when the device is the host itself (``gpu = cpu``)."""
        gpu = spec.cluster.gpu
        chain = (gpu.id, *(gpu.derivation.chain if gpu.derivation is not None else ()))
        if "cpu" in chain:
            return None
        p = PROFILES[spec.train.stack]
        style = str(p.host_style.value)
        costs = measured().per_launch[style]
        if spec.train.recompute is Recompute.FULL:
            forward, recompute, backward = costs["full_fwd"], costs["full_bwd"], costs["full_bwd"]
        else:
            forward, recompute, backward = costs["fwd"], costs["fwd"], costs["bwd"]
        slower = speed(spec.cluster.node)
        return cls(forward=forward * slower, recompute=recompute * slower, backward=backward * slower,
                   step=costs["fwd"] * slower,
                   launch=gpu.launch_overhead,
                   pipeline_sync=bool(p.pipeline_host_sync.value) and int(spec.parallel.pp) > 1,
                   batch_sync=bool(p.batch_host_sync.value),
                   graphs=bool(spec.train.cuda_graphs), style=style)
