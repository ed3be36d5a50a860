"""Price every op of a graph: FLOPs, bytes and roofline or alpha-beta seconds per call.

Two evaluations of the same formulas (:mod:`llmp.analytic.kernels`, :mod:`~.collectives`):

* :func:`price` walks the ops with whatever the spec holds: plain numbers for one prediction
  (no compilation, so a cold ``llmp predict`` pays nothing but imports), or SymPy symbols for
  the closed forms of :mod:`llmp.analytic.symbolic`;
* :func:`price_arrays` evaluates a sweep: the spec holds numpy arrays, ops are grouped by kind
  and each kind is one call of its compiled cost function (:mod:`~.compiled`).

Roofline (Williams et al. 2009) as in ``roofline.roofline``: ``max(flops / peak, bytes / bw) +
launch``, GEMM and fused-attention grids quantized onto the SMs (``llmp.analytic.tiles``),
tensor-core kernels at their compute ceiling (``roofline.ceiling``: the best rate a
published micro-benchmark measured for the kind, where the catalog has it, else the dtype's
datasheet peak), the rest at the FP32 vector peak.
A collective's ``bytes`` is what one rank moves (buffer x NCCL bus factor); its FLOPs are 0; its
seconds are NCCL's cost model (:mod:`~.collectives`), or the machine's own measurement where a
shipped table covers the call (:mod:`~.measured`, numbers and sweeps; ``Prices.served`` says which).
"""

from __future__ import annotations

import operator
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np

from llmp.analytic import collectives, kernels, measured, roofline
from llmp.analytic.kernels import Collective, Kernel
from llmp.analytic.op import OpGraph
from llmp.errors import SpecError
from llmp.hardware.spec import Device, Dtype
from llmp.recent import Recent
from llmp.spec.algebra import to_float
from llmp.spec.spec import Spec


@dataclass(frozen=True, kw_only=True, slots=True)
class Hardware:
    """The device numbers a roofline needs, plus the links."""

    device: Device
    peak: dict[Dtype, Any]
    """Datasheet dense peaks (MFU's denominator)."""
    mem_bandwidth: Any
    launch_overhead: Any
    links: collectives.Links
    grid: roofline.Grid | None = None
    """The SMs and tile tables kernels are quantized onto (None: the plain roofline)."""

    @classmethod
    def of(cls, spec: Spec) -> Hardware:
        g = spec.cluster.gpu
        return cls(device=g, peak=dict(g.peak_flops), mem_bandwidth=g.mem_bandwidth,
                   launch_overhead=g.launch_overhead, links=collectives.Links.of(spec), grid=roofline.Grid.of(g))

    def peak_for(self, k: Kernel, tensor_core: bool) -> Any:
        """The compute ceiling a kernel runs at (:func:`roofline.ceiling`): the best measured rate
        for its kind where the catalog has one, else its dtype's peak; FP32 vector for the rest."""
        return self.ceiling_for(k, tensor_core)[0]

    def ceiling_for(self, k: Kernel, tensor_core: bool) -> tuple[Any, roofline.Ceiling]:
        """(rate, which ceiling) for ``k``; a dtype the device lacks is a :class:`SpecError`."""
        try:
            return roofline.ceiling(k, tensor_core, self.device)
        except KeyError:
            self.peak_of(k.dtype if tensor_core else Dtype.FP32, f"{k.family.value} kernels")
            raise

    def peak_of(self, dtype: Dtype, needed_by: str) -> Any:
        try:
            return self.peak[dtype]
        except KeyError:
            have = ", ".join(sorted(d.value for d in self.peak)) or "none"
            raise SpecError(f"the GPU has no {dtype.value} peak FLOP/s, needed by {needed_by} (it declares: {have})",
                            hint=f"add gpu.flops.{dtype.value} to the gpu block or change train.precision") from None


@dataclass(frozen=True, kw_only=True, slots=True)
class Prices:
    """Per-op cost of one call, aligned with ``graph.ops`` (arrays: one row per op)."""

    flops: Any
    bytes: Any
    time: Any
    served: tuple[measured.Served | None, ...] = ()
    """Per op (one prediction): what the machine's measured tables said of a collective (None for
    kernels and for collectives no table knows); empty for sweeps and expressions."""


def kernel_price(k: Kernel, hw: Hardware) -> tuple[Any, Any, Any]:
    """(flops, bytes, seconds) of one kernel call."""
    c = kernels.cost(k)
    seconds = roofline.roofline(k, c, peak=hw.peak_for(k, c.tensor_core), mem_bandwidth=hw.mem_bandwidth,
                                launch_overhead=hw.launch_overhead, grid=hw.grid)
    return to_float(c.flops), to_float(c.bytes), to_float(seconds)


def collective_price(c: Collective, hw: Hardware) -> tuple[Any, Any, Any, measured.Served | None]:
    """(0, bytes moved per rank, seconds, what the measured tables said) of one collective call:
    the machine's own measurement where a table covers it, else NCCL's cost model."""
    moved = c.bytes * collectives.bus_factor(c.kind, c.group)
    links = hw.links
    served = None
    if type(c.bytes) in _PLAIN and type(c.group) in _PLAIN and type(c.ranks_per_node) in _PLAIN:
        served = measured.serve(c, links)
        if served is not None and served.seconds is not None:
            return 0, moved, served.seconds, served
    return 0, moved, collectives.time(c, links), served


_PLAIN = frozenset({int, float, bool})
_value = operator.itemgetter(1)
_SEEN = 100_000
"""Prices kept per device (and for collectives, per set of links) before the memo starts over."""


class _Memo:
    """The prices of the kernels and collectives already priced, on one device.

    The graphs of a search's thousands of layouts hold a few hundred distinct kernels and
    collectives (a layout changes how many of them run, and where, more than their shapes), and
    each one's price is a pure function of its dims and the hardware: a kernel's of the device
    (:meth:`Hardware.of` reads nothing else of it), a collective's of the links. Kept only for
    plain numbers, keyed with their types (``4096`` and ``4096.0`` need not round alike)."""

    def __init__(self) -> None:
        self.kernels: dict[Any, tuple[Any, Any, Any]] = {}
        self.collectives: dict[Any, tuple[Any, Any, Any, measured.Served | None]] = {}

    def kernel(self, k: Kernel, hw: Hardware) -> tuple[Any, Any, Any]:
        types = tuple(map(type, map(_value, k.dims)))
        if not _PLAIN.issuperset(types):
            return kernel_price(k, hw)
        key = (k.family, k.dims, k.dtype, k.pass_, k.variant, types)  # a tuple compares faster than a Kernel
        found = self.kernels.get(key)
        if found is None:
            if len(self.kernels) > _SEEN:
                self.kernels.clear()
            found = self.kernels[key] = kernel_price(k, hw)
        return found

    def collective(self, c: Collective, hw: Hardware) -> tuple[Any, Any, Any, measured.Served | None]:
        types = (type(c.bytes), type(c.group), type(c.ranks_per_node))
        if not _PLAIN.issuperset(types):
            return collective_price(c, hw)
        key = (c.kind, c.bytes, c.group, c.ranks_per_node, c.tier, types, hw.links)
        try:
            found = self.collectives.get(key)
        except TypeError:  # links that hold arrays
            return collective_price(c, hw)
        if found is None:
            if len(self.collectives) > _SEEN:
                self.collectives.clear()
            found = self.collectives[key] = collective_price(c, hw)
        return found


_MEMOS = Recent(8)
"""A :class:`_Memo` per device object, for a few devices at a time (a what-if on the GPU makes a new one)."""


def price(graph: OpGraph, spec: Spec) -> Prices:
    """Price ops one by one (numbers or SymPy expressions); lists aligned with ``graph.ops``."""
    hw = Hardware.of(spec)
    memo: _Memo = _MEMOS.of(hw.device, _Memo)
    rows = [(*memo.kernel(op.work, hw), None) if isinstance(op.work, Kernel) else memo.collective(op.work, hw)
            for op in graph.ops]
    flops, nbytes, seconds, served = (list(col) for col in zip(*rows)) if rows else ([], [], [], [])
    return Prices(flops=flops, bytes=nbytes, time=seconds, served=tuple(served))


def price_arrays(graph: OpGraph, spec: Spec, n: int) -> Prices:
    """Price a sweep of ``n`` configurations: arrays of shape (ops, n), one call per op kind."""
    # Compiling the kinds' costs needs SymPy, which one prediction never imports.
    from llmp.analytic.compiled import LINK_ARGS, collective_evaluator, kernel_evaluator, kernel_key, numeric_dims

    hw = Hardware.of(spec)
    shape = (len(graph.ops), n)
    flops, nbytes, seconds = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    kernel_kinds: dict[Any, list[tuple[int, Kernel]]] = defaultdict(list)
    comm_kinds: dict[Any, list[tuple[int, Collective]]] = defaultdict(list)
    for i, op in enumerate(graph.ops):
        w = op.work
        if isinstance(w, Kernel):
            kernel_kinds[kernel_key(w)].append((i, w))
        else:
            comm_kinds[(w.kind, w.tier)].append((i, w))
    links = hw.links
    for key, members in kernel_kinds.items():
        idx = [i for i, _ in members]
        first = members[0][1]
        fn, tensor_core = kernel_evaluator(key, hw.device.microarch)
        dims = [np.stack([np.broadcast_to(np.asarray(d, dtype=np.float64), (n,)) for d in numeric_dims(k)])
                for _, k in members]
        columns = np.stack(dims, axis=1) if dims else np.zeros((0, len(idx), n))
        args = {s: columns[j] for j, s in enumerate(fn.args[:-4])}
        args.update(zip(fn.args[-4:], (hw.peak_for(first, tensor_core), hw.mem_bandwidth, hw.launch_overhead,
                                       hw.device.sms)))
        f, b, t = fn(args)
        flops[idx], nbytes[idx], seconds[idx] = f, b, t
    for key, comm in comm_kinds.items():
        idx = [i for i, _ in comm]
        fn = collective_evaluator(*key, links.kind)
        work = [c for _, c in comm]
        cols = [np.stack([np.broadcast_to(np.asarray(getattr(w, a), dtype=np.float64), (n,)) for w in work])
                for a in ("bytes", "group", "ranks_per_node")]
        # Without a mesh the peer bandwidth is None and the compiled cost does not use it.
        link_values = [0.0 if getattr(links, a) is None else getattr(links, a) for a in LINK_ARGS]
        values = dict(zip(fn.args, [*cols, *link_values]))
        (t,) = fn(values)
        seconds[idx] = [measured.serve_arrays(w, row, links) for w, row in zip(work, t)]
        nbytes[idx] = cols[0] * np.asarray([np.broadcast_to(
            np.asarray(collectives.bus_factor(w.kind, w.group), dtype=np.float64), (n,)) for w in work])
    return Prices(flops=flops, bytes=nbytes, time=seconds)
