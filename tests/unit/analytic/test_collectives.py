"""Collectives as NCCL runs them (NCCL's cost model on the cluster's links) and the placement that
picks their links."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import sympy as sp
from analytic_helpers import COLLECTIVE_KINDS as KINDS
from analytic_helpers import collective as _c
from analytic_helpers import nccl_links as links
from strategies_analytic import make_spec

from llmp.analytic import layout, nccl
from llmp.analytic.collectives import Links, call, choice, time
from llmp.analytic.compiled import LINK_ARGS, collective_evaluator
from llmp.analytic.kernels import CollectiveKind, Tier
from llmp.analytic.nccl import Algorithm, Arch, Protocol
from llmp.analytic.structure import structure_of
from llmp.hardware.spec import Transport

GIB = 2**30
H100ISH = Links(gpus_per_node=8, intra_bandwidth=360e9, intra_latency=0.0, inter_bandwidth=400e9, inter_latency=0.0,
                arch=Arch.HOPPER)
"""An 8-GPU NVSwitch node without NVLS, NCCL's latencies only (links add none), 50 GB/s NIC rails."""


def test_a_worked_case_of_ncclS_formulas():
    """8 ranks in one NVSwitch node, 360 GB/s achievable per GPU, Hopper row, 1 GiB all-reduce.

    By hand from NVIDIA/nccl src/tuning (cost_model.cc constants; ring.cc, tree.cc formulas):
    * ring/Simple: bus 360 GB/s, algBw = 360 * 8 / 14; latency = baseLat 8.4 + 14 steps x hwLat
      NVLINK ring Simple 3.4 = 56 us; time = 56 us + 2^30 B * 14 / 8 / 360e9 = 5275.6 us;
    * ring/LL128: channel speed 44 GB/s (the fastest of NCCL's search array the link carries),
      duplicated to 22; bus = 360 * min(0.92, 36.7 / 22) = 331.2 GB/s; latency 14 + 14 x 1.9 =
      40.6 us; time = 40.6 + 2^30 * 1.75 / 331.2e9 s = 5714.1 us;
    * ring/LL: bus = min(llMaxBw 141, 360 / 2) = 141 GB/s; latency 6.6 + 14 x 0.6 = 15 us; 13.34 ms;
    * tree/Simple: bus = 360 * min(0.92, 38.7 / 22) = 331.2, algBw half of it, correction 1 at
      2^24 (index >= 23); latency 8.4 + 2 x 7 x 4.0 = 64.4 us; time 6548.3 us.
    NCCL picks ring/Simple: 5275.6 us.
    """
    c = _c(CollectiveKind.ALL_REDUCE, GIB, 8)
    found = nccl.candidates(call(c), H100ISH.fabric(8))
    assert found[(Algorithm.RING, Protocol.SIMPLE)] == pytest.approx(56e-6 + GIB * 14 / 8 / 360e9, rel=1e-12)
    assert found[(Algorithm.RING, Protocol.LL128)] == pytest.approx(40.6e-6 + GIB * 1.75 / 331.2e9, rel=1e-12)
    assert found[(Algorithm.RING, Protocol.LL)] == pytest.approx(15e-6 + GIB * 1.75 / 141e9, rel=1e-12)
    assert found[(Algorithm.TREE, Protocol.SIMPLE)] == pytest.approx(64.4e-6 + GIB / 165.6e9, rel=1e-12)
    assert choice(c, H100ISH)[:2] == ("ring", "Simple")
    assert time(c, H100ISH) == pytest.approx(5275.6e-6, rel=1e-4)


def test_a_worked_small_case_takes_the_ll_ring():
    """8 KiB on the same node: ring/LL = 6.6 + 14 x 0.6 = 15 us + 8192 * 1.75 / 141e9 = 15.10 us;
    tree/LL = 6.8 + 2 x 7 x 0.6 = 15.2 us + 8192 / (331.2e9 / 3.8 / 2 x 0.7 correction at index 7)
    = 15.47 us; NCCL picks ring/LL."""
    c = _c(CollectiveKind.ALL_REDUCE, 8192, 8)
    found = nccl.candidates(call(c), H100ISH.fabric(8))
    assert found[(Algorithm.TREE, Protocol.LL)] == pytest.approx(15.2e-6 + 8192 / (331.2e9 / 3.8 / 2 * 0.7), rel=1e-12)
    assert choice(c, H100ISH) == ("ring", "LL", pytest.approx(15e-6 + 8192 * 1.75 / 141e9, rel=1e-12))


def test_a_group_of_one_costs_nothing():
    for kind in KINDS:
        assert time(_c(kind, GIB, 1), H100ISH) == 0


def test_nvls_runs_from_five_gpus_of_an_nvls_switch_and_pays_off_on_large_messages():
    switch = links(nvls=True)
    assert choice(_c(CollectiveKind.ALL_REDUCE, GIB, 8), switch)[0] == "nvls"
    assert choice(_c(CollectiveKind.ALL_REDUCE, GIB, 4), switch)[0] == "ring"
    assert choice(_c(CollectiveKind.ALL_REDUCE, 8192, 8), switch)[0] == "ring"  # LL's latency wins small
    assert choice(_c(CollectiveKind.ALL_REDUCE, GIB, 8), links(nvls=True, arch=Arch.AMPERE))[0] == "ring"
    assert choice(_c(CollectiveKind.ALL_REDUCE, GIB, 8), links(nvls=True, mesh=True))[0] != "nvls"


def test_collnet_and_nvls_tree_need_the_hardware_that_runs_them():
    big = _c(CollectiveKind.ALL_REDUCE, GIB, 64, 8, Tier.INTER)
    plain = {a for a, _ in nccl.candidates(call(big), links().fabric(8))}
    assert plain == {Algorithm.RING, Algorithm.TREE}
    sharp = {a for a, _ in nccl.candidates(call(big), links(nvls=True, collnet=True).fabric(8))}
    assert {Algorithm.NVLS, Algorithm.NVLS_TREE, Algorithm.COLLNET_CHAIN, Algorithm.COLLNET_DIRECT} <= sharp


def test_one_gpu_per_node_gathers_may_take_pat():
    gather = _c(CollectiveKind.ALL_GATHER, 2**16, 64, 1, Tier.INTER)
    found = nccl.candidates(call(gather), links().fabric(1))
    assert (Algorithm.PAT, Protocol.SIMPLE) in found and float(found[(Algorithm.PAT, Protocol.SIMPLE)]) < np.inf
    two = _c(CollectiveKind.ALL_GATHER, 2**16, 64, 2, Tier.INTER)
    assert float(nccl.candidates(call(two), links().fabric(2))[(Algorithm.PAT, Protocol.SIMPLE)]) == np.inf


def test_the_links_latency_is_paid_per_ring_step_whatever_nccl_picks():
    base, slow = links(), links(latency=2e-6)
    for kind, steps in ((CollectiveKind.ALL_REDUCE, 14), (CollectiveKind.ALL_GATHER, 7)):
        for size in (1e3, 1e9):
            c = _c(kind, size, 8)
            assert choice(c, slow)[:2] == choice(c, base)[:2]
            assert time(c, slow) - time(c, base) == pytest.approx(steps * 2e-6, rel=1e-9)


def test_host_links_run_a_plain_alpha_beta_ring():
    gloo = dataclasses.replace(links(latency=100e-6, intra=1e9), intra_transport=Transport.HOST)
    t = time(_c(CollectiveKind.ALL_REDUCE, 1e6, 2), gloo)
    assert t == pytest.approx(2 * 100e-6 + 1e6 / 1e9, rel=1e-12)


@pytest.mark.parametrize("kind,tier,r", [(CollectiveKind.ALL_REDUCE, Tier.INTRA, 8), (CollectiveKind.ALL_REDUCE,
                         Tier.INTER, 8), (CollectiveKind.ALL_GATHER, Tier.INTER, 1),
                         (CollectiveKind.REDUCE_SCATTER, Tier.INTRA, 4)])
@pytest.mark.parametrize("kind_of_links", [links(), links(nvls=True), links(mesh=True), links(nvls=True, collnet=True)])
def test_compiled_sweeps_and_expressions_agree_with_numbers(kind, tier, r, kind_of_links):
    sizes = np.array([1e3, 3e5, 2e7, 5e9])
    n = 4 * r if tier is Tier.INTER else r
    fn = collective_evaluator(kind, tier, kind_of_links.kind)
    values = dict(zip(fn.args, [sizes, np.full(4, float(n)), np.full(4, float(r)),
                                *[0.0 if getattr(kind_of_links, a) is None else getattr(kind_of_links, a)
                                  for a in LINK_ARGS]]))
    (swept,) = fn(values)
    scalar = [time(_c(kind, s, n, r, tier), kind_of_links) for s in sizes]
    assert swept == pytest.approx(scalar, rel=1e-9)
    x = sp.Symbol("bytes", positive=True)
    expr = time(_c(kind, x, n, r, tier), kind_of_links)
    assert [float(expr.subs(x, s)) for s in sizes] == pytest.approx(scalar, rel=1e-9)


@pytest.mark.parametrize("tp,pp,expect", [
    (8, 2, {"tp": (Tier.INTRA, 8), "pp": (Tier.INTER, 1), "dp": (Tier.INTER, 1)}),
    (2, 4, {"tp": (Tier.INTRA, 2), "pp": (Tier.INTRA, 4), "dp": (Tier.INTER, 1)}),
    (1, 1, {"dp": (Tier.INTER, 8)}),
])
def test_placement_puts_tp_innermost_then_pp_then_dp(tp, pp, expect):
    spec = make_spec(nodes=4, tp=tp, pp=pp, global_batch=64)
    st_ = structure_of(spec)
    for name, (tier, per_node) in expect.items():
        g = layout.group(spec, name, st_)
        assert (g.tier, g.ranks_per_node) == (tier, per_node), name
