"""How a MoE layer's tokens travel: rows on the wire per token, by dispatcher and gate.

A fact of the layout and the routing (experts, top-k, ep, the gate), fixed for a spec's
structure (:class:`~llmp.analytic.shape.Structure` holds it), so every path that prices the
all-to-all (numbers, sweeps, closed forms) uses the same value.
"""

from __future__ import annotations

import math

from llmp.spec.model import Router
from llmp.spec.spec import Dispatcher, Spec


def dispatch_copies(spec: Spec) -> float:
    """Rows of a token on the wire when it is dispatched to its experts, and back.

    The all-to-all dispatcher sends one row per (token, expert) pair, ``top_k`` (Megatron
    ``MoEAlltoAllTokenDispatcher``: ``permute`` then ``all_to_all``). DeepEP sends a token once to
    each expert-parallel rank that holds one of its experts (deepseek-ai/DeepEP README, "dispatch";
    Megatron-Core ``MoEFlexTokenDispatcher``), so a token costs the number of distinct ranks among
    its ``top_k`` experts (``L = experts / ep`` on each rank):

    * a learned router, taken as choosing ``top_k`` distinct experts uniformly:
      ``ep (1 - C(E - L, k) / C(E, k))`` ranks on average;
    * the balanced gate deals token ``t`` the consecutive experts ``t k, ..., t k + k - 1`` (mod E)
      (NVIDIA-NeMo/Automodel@01883b4:nemo_automodel/components/moe/layers.py, ``FakeBalancedGate``):
      the ranks those span, averaged over the starting experts ``t k mod E``.
    """
    e = spec.model.moe
    assert e is not None
    experts, k, ranks = int(e.experts), int(e.top_k), int(spec.parallel.ep)
    if spec.parallel.dispatcher is not Dispatcher.DEEPEP:
        return float(k)
    local = experts // ranks
    if e.router is Router.BALANCED:
        starts = range(0, experts, math.gcd(k, experts))
        return sum(min(ranks, -(-(s % local + k) // local)) for s in starts) / len(starts)
    return ranks * (1 - math.comb(experts - local, k) / math.comb(experts, k))
