"""The collective design on generated clusters: every group shape partitions the world, and the tp
and dp groups are the analytic layouts."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from llmp.analytic import layout
from llmp.analytic.kernels import Tier
from llmp.measure import collectives

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
