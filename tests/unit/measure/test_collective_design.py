"""The collective design: group shapes as layouts place ranks, sizes as the analytic layer sends them."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import llmp
from llmp.analytic import collectives as analytic
from llmp.analytic import layout
from llmp.analytic.kernels import Collective, CollectiveKind, Tier
from llmp.measure import collectives
from llmp.residuals import dataset

ROOT = Path(__file__).resolve().parents[3]
POWERS = st.sampled_from([1, 2, 4, 8])


@given(local=st.sampled_from([1, 2, 3, 4, 6, 8]), nodes=st.sampled_from([1, 2, 3, 4, 8]))
def test_every_shape_partitions_the_world(local: int, nodes: int) -> None:
    """Each case keeps every rank busy in exactly one group of the shape, with per_node members on
    each node it touches: the placement the analytic model prices (every group of an axis at once)."""
    world = local * nodes
    shapes = collectives.shapes(local, nodes)
    assert len(set(shapes)) == len(shapes)
    for shape in shapes:
        groups = collectives.groups(shape, local, nodes)
        assert sorted(r for g in groups for r in g) == list(range(world))
        for g in groups:
            assert len(g) == shape.size
            per_node = {}
            for r in g:
                per_node[r // local] = per_node.get(r // local, 0) + 1
            assert set(per_node.values()) == {shape.per_node}
            assert len(per_node) == shape.nodes and (shape.tier == "intra") == (len(per_node) == 1)


@given(tp=POWERS, local=st.sampled_from([1, 2, 4, 8]), nodes=st.sampled_from([1, 2, 4]))
def test_tp_and_dp_groups_are_the_analytic_layouts(tp: int, local: int, nodes: int) -> None:
    """For tp x dp layouts, the tp and dp groups llmp.analytic.layout places are shapes the sampler
    measures; a tp group within a node and a dp group across nodes are the very same rank sets (a dp
    group inside one node is strided where the sampler's intra groups are consecutive: the same
    links on a switched node)."""
    world = local * nodes
    if tp > world:
        return
    placed = layout.placement((tp, 1, 1, 1, world // tp), (1, 1), local)
    shapes = {(s.size, s.per_node, s.tier): s for s in collectives.shapes(local, nodes)}
    members = layout.members((tp, 1, 1, 1, world // tp), (1, 1))
    for axis in ("tp", "dp"):
        size, per_node, tier = placed[axis]
        if size < 2:
            continue
        assert (size, per_node, str(tier)) in shapes, (axis, placed[axis])
        if (axis == "tp" and tp <= local) or (axis == "dp" and tier is Tier.INTER and tp <= local):
            mine = collectives.groups(shapes[(size, per_node, str(tier))], local, nodes)
            assert {frozenset(g) for g in mine} == {frozenset(int(r) for r in row) for row in members[axis]}


def test_the_design_spreads_every_kind_over_tiers_and_shapes() -> None:
    cases = collectives.plan(8, 4, "cuda", 12, 0)
    strata = {(c.kind, c.shape.tier) for c in cases}
    assert strata == {(k, t) for k in collectives.KINDS for t in ("intra", "inter")}
    for kind in collectives.KINDS:
        for tier in ("intra", "inter"):
            mine = [c for c in cases if (c.kind, c.shape.tier) == (kind, tier)]
            assert 8 <= len(mine) <= 12  # distinct keys of 12 draws
    assert all(c.shape.size == 2 for c in cases if c.kind == "send_recv")
    assert all(c.bytes % (4096 * c.shape.size) == 0 for c in cases)
    assert len({c.shape for c in cases if c.shape.tier == "inter"}) >= 5
    assert [c.key for c in collectives.plan(8, 4, "cuda", 12, 0)] == [c.key for c in cases]  # resumable
    assert {(c.kind, c.shape.tier) for c in collectives.plan(2, 1, "cpu", 3, 0)} == {
        (k, "intra") for k in collectives.KINDS}


SPECS = ("llama3_8b_dgx_h100", "llama3_70b_dgx_h100", "gpt3_175b_dgx_a100", "llama3_405b_pp16_vp8",
         "mixtral_8x7b_dgx_h100", "deepseek_v3_h800")


@pytest.mark.parametrize("name", SPECS)
def test_sizes_cover_the_messages_layouts_send(name: str) -> None:
    """No message of an example layout is below the range; those above it are bandwidth-bound."""
    spec = llmp.load(ROOT / "examples" / f"{name}.llmp")
    lo, hi = collectives.SIZE_RANGE["cuda"]
    axes = {a.value for a in layout.Axis}
    sizes = [float(o.bytes) for o in llmp.ops(spec) if o.phase == "comm" and o.category in axes and float(o.bytes)]
    assert sizes and min(sizes) >= lo
    links = analytic.Links.of(spec)
    for kind in CollectiveKind:
        for group, per_node, tier in ((8, 8, Tier.INTRA), (16, 1, Tier.INTER)):
            g = 2 if kind is CollectiveKind.SEND_RECV else group
            at = [float(analytic.time(Collective(kind=kind, bytes=size, group=g, ranks_per_node=min(per_node, g),
                                                 tier=tier), links)) for size in (hi, 2 * hi)]
            assert 1.9 < at[1] / at[0] <= 2.0 + 1e-9


def test_the_catalog_node_links_price_the_plan() -> None:
    """The sampler's CPU collectives run on the catalog's cpu_host links (what llmp fit reads)."""
    node = dataset.catalog_node("cpu", "cpu_host")
    links = dataset.node_links(node)
    case = collectives.plan(2, 1, "cpu", 1, 0)[0]
    item = Collective(kind=CollectiveKind(case.kind), bytes=case.bytes, group=case.shape.size,
                      ranks_per_node=case.shape.per_node, tier=Tier(case.shape.tier))
    assert float(analytic.time(item, links)) > 0
