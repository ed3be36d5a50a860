"""Which measured rows no device could have produced: plausibility from physics, never from one
machine's habits.

An importer drops a measured time only when the device's own datasheet numbers say it cannot be
true, so the same rule holds on a GPU nobody has profiled yet:

* **above peak** (:func:`faster_than_peak`): a span shorter than its kernels' work at the device's
  peak FLOP/s, or shorter than the bytes that cannot sit in L2 at peak memory bandwidth. The L2
  allowance keeps the small tensors a harness has just written (seed README §8.7: ``res_add``
  above HBM bandwidth) — cache-resident data is fast, not impossible.
* **backward faster than its forward allows** (:func:`backward_too_fast`): a backward that gets
  through its roofline work at more than :data:`BACKWARD_RATE` times the rate of its own forward.
  A backward re-reads what the forward read and does as much arithmetic or more, so it runs at
  most at the forward's rate plus what better tiling buys, never three times it.
* **collectives above the link** (:func:`faster_than_link`): a bus bandwidth above the line rate
  of the fastest link the collective could use.

Each pass is judged on its own: an impossible backward is dropped, its forward kept.
"""

from __future__ import annotations

from collections.abc import Sequence

from llmp.analytic import kernels
from llmp.analytic.collectives import bus_factor
from llmp.analytic.kernels import Collective, Kernel, Tier
from llmp.hardware.spec import Device, Node
from llmp.residuals import features

BACKWARD_RATE = 3.0
"""A backward may get through its roofline work at most this many times faster than its forward."""

PEAK_REASON = ("faster than the device's peak: the span is shorter than its FLOPs at peak FLOP/s or its "
               "bytes beyond L2 at peak memory bandwidth (physically impossible)")
BACKWARD_REASON = (f"backward faster than its forward allows: it gets through its roofline work at more than "
                   f"{BACKWARD_RATE:g}x the forward's rate (its forward is judged on its own and kept)")
LINK_REASON = "collective faster than its links: bus bandwidth above the line rate of the fastest link it can use"


def bound_seconds(items: Sequence[Kernel], device: Device) -> float:
    """The least time ``items`` can take on ``device``: each kernel's FLOPs at the datasheet peak
    of its dtype, or its bytes beyond the L2 cache at peak memory bandwidth, whichever is longer."""
    total = 0.0
    for k in items:
        c = kernels.cost(k)
        peak = device.peak_flops.get(k.dtype)
        compute = float(c.flops) / float(peak) if peak else 0.0
        streamed = max(0.0, float(c.bytes) - float(device.l2_cache)) / float(device.mem_bandwidth)
        total += max(compute, streamed)
    return total


def faster_than_peak(items: Sequence[Kernel], seconds: float, device: Device) -> bool:
    return seconds < bound_seconds(items, device)


def work_rate(items: Sequence[Kernel], seconds: float, device: Device) -> float:
    """Roofline seconds of work per measured second (llmp's roofline, launches included)."""
    return sum(features.roofline_seconds(k, device)[1] for k in items) / seconds


def backward_too_fast(fwd: Sequence[Kernel], fwd_s: float, bwd: Sequence[Kernel], bwd_s: float,
                      device: Device) -> bool:
    return work_rate(bwd, bwd_s, device) > BACKWARD_RATE * work_rate(fwd, fwd_s, device)


def link_ceiling(item: Collective, node: Node) -> float:
    """Bytes/s of bus bandwidth no collective on ``node`` can exceed: the intra-node line rate (a
    directly wired pair's own rate for two GPUs on a mesh); across nodes, the faster of the node's
    injection and that intra line rate (a ring through the NICs moves no rank's data faster)."""
    intra = node.intra.bandwidth
    if int(item.group) == 2 and node.intra.peer_bandwidth is not None:
        intra = node.intra.peer_bandwidth
    if item.tier is Tier.INTRA:
        return float(intra)
    return float(max(node.inter.bandwidth, node.intra.bandwidth))


def faster_than_link(item: Collective, seconds: float, node: Node) -> bool:
    busbw = float(bus_factor(item.kind, item.group)) * float(item.bytes) / seconds
    return busbw > link_ceiling(item, node)
