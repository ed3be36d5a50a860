"""Alpha-beta collective costs and the placement that picks their links."""

from __future__ import annotations

import pytest
from analytic.strategies_analytic import make_spec
from hypothesis import given
from hypothesis import strategies as st

from llmp.analytic import layout
from llmp.analytic.collectives import Links, time
from llmp.analytic.kernels import Collective, CollectiveKind, Tier
from llmp.analytic.structure import structure_of

LINKS = Links(gpus_per_node=8, intra_bandwidth=450e9, intra_latency=2e-6, inter_bandwidth=400e9, inter_latency=5e-6)
GIB = 2**30


def _c(kind, size, n, r=None, tier=Tier.INTRA):
    return Collective(kind=kind, bytes=size, group=n, ranks_per_node=n if r is None else r, tier=tier)


def test_large_intra_node_all_reduce_runs_at_nccl_bus_bandwidth():
    n, size = 8, 4 * GIB
    t = time(_c(CollectiveKind.ALL_REDUCE, size, n), LINKS)
    assert t == pytest.approx(2 * (n - 1) * 2e-6 + 2 * (n - 1) / n * size / 450e9, rel=1e-12)


def test_ring_all_reduce_is_reduce_scatter_plus_all_gather():
    for n in (2, 4, 8):
        size = 256 * 2**20
        ar = time(_c(CollectiveKind.ALL_REDUCE, size, n), LINKS)
        rs = time(_c(CollectiveKind.REDUCE_SCATTER, size, n), LINKS)
        ag = time(_c(CollectiveKind.ALL_GATHER, size, n), LINKS)
        assert ar == pytest.approx(rs + ag, rel=1e-12)


def test_small_all_reduce_across_many_nodes_takes_the_tree():
    # 64 nodes x 8 GPUs: ring latency 2 * 511 steps; tree 2 * (7 intra + log2(64) inter) steps.
    n, r = 512, 8
    t = time(_c(CollectiveKind.ALL_REDUCE, 8, n, r=r, tier=Tier.INTER), LINKS)
    assert t == pytest.approx(2 * 7 * 2e-6 + 2 * 6 * 5e-6 + 2 * 8 / 400e9)


def test_inside_a_node_all_reduce_is_a_ring_at_any_size():
    n = 8
    t = time(_c(CollectiveKind.ALL_REDUCE, 8, n), LINKS)
    assert t == pytest.approx(2 * 7 * 2e-6 + 2 * 7 / 8 * 8 / 450e9)


def test_whole_node_groups_across_nodes_get_the_node_injection_bandwidth():
    # 4 nodes x 8 GPUs in one data-parallel group: ring over the NICs at 400 GB/s per node.
    n, size = 32, 4 * GIB
    t = time(_c(CollectiveKind.ALL_REDUCE, size, n, r=8, tier=Tier.INTER), LINKS)
    assert t == pytest.approx(2 * (n - 1) / n * size / 400e9, rel=0.02)


def test_one_rank_per_node_shares_the_node_with_seven_other_groups():
    # tp = 8 fills the node, so each of the 8 data-parallel groups owns one NIC rail (50 GB/s).
    n, size = 4, 4 * GIB
    t = time(_c(CollectiveKind.ALL_REDUCE, size, n, r=1, tier=Tier.INTER), LINKS)
    assert t == pytest.approx(2 * (n - 1) / n * size / 50e9, rel=0.01)


@given(st.sampled_from(list(CollectiveKind)), st.sampled_from([2, 4, 8, 16, 64]), st.sampled_from([1, 2, 8]),
       st.floats(1e3, 1e10), st.floats(1.0, 4.0))
def test_more_bytes_cost_more_and_faster_links_cost_less(kind, n, r, size, factor):
    r = min(r, n)
    tier = Tier.INTRA if r == n and n <= 8 else Tier.INTER
    c = _c(kind, size, n, r=r, tier=tier)
    t = time(c, LINKS)
    assert time(_c(kind, size * factor, n, r=r, tier=tier), LINKS) >= t
    fast = Links(gpus_per_node=8, intra_bandwidth=450e9 * factor, intra_latency=2e-6,
                 inter_bandwidth=400e9 * factor, inter_latency=5e-6)
    assert time(c, fast) <= t * (1 + 1e-12)


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
