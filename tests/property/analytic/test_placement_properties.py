"""Groups across nodes and NVLink domains on generated meshes: placement counts every group's
members per domain, the link tier follows the domain, and a spanning group costs between its domain
part and a flat ring over the NICs."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable

from hypothesis import assume, given, settings
from hypothesis import strategies as st
from strategies_analytic import llama, make_spec

from llmp.analytic import layout, nccl
from llmp.analytic.collectives import Links, call, excess, time
from llmp.analytic.kernels import Collective, CollectiveKind, Tier
from llmp.analytic.structure import structure_of

MESH = st.tuples(*(st.sampled_from([1, 2, 3, 4]) for _ in layout.MESH_ORDER))


def _footprint(groups: list[list[int]], domain: int) -> tuple[int, int, Tier]:
    """(size, fewest members per domain of a crossing group, tier) of a list of groups."""
    footprints, crossing = [], False
    for members in groups:
        counts: dict[int, int] = {}
        for rank in members:
            counts[rank // domain] = counts.get(rank // domain, 0) + 1
        if len(counts) > 1:
            crossing = True
            footprints.append(min(counts.values()))
    n = len(groups[0])
    return (n, min(footprints), Tier.INTER) if crossing else (n, n, Tier.INTRA)


def _brute_force(sizes: tuple[int, ...], expert: tuple[int, int], domain: int) -> dict[str, tuple[int, int, Tier]]:
    """Every group's members, rank by rank, from the two meshes' definitions: the attention mesh
    rank t + tp (c + cp (i + dp_in (p + pp o))), and within each stage the expert mesh index
    j = et + etp (e + ep x) over the stage's ranks in increasing order."""
    tp, cp, dp_in, pp, dp_out = sizes
    etp, ep = expert
    coords = list(itertools.product(range(tp), range(cp), range(dp_in), range(pp), range(dp_out)))

    def rank(t: int, c: int, i: int, p: int, o: int) -> int:
        return t + tp * (c + cp * (i + dp_in * (p + pp * o)))

    def groups(key: Callable[..., object]) -> list[list[int]]:
        found: dict[object, list[int]] = {}
        for co in coords:
            found.setdefault(key(*co), []).append(rank(*co))
        return list(found.values())

    out = {"tp": _footprint(groups(lambda t, c, i, p, o: (c, i, p, o)), domain),
           "cp": _footprint(groups(lambda t, c, i, p, o: (t, i, p, o)), domain),
           "pp": _footprint(groups(lambda t, c, i, p, o: (t, c, i, o)), domain),
           "dp": _footprint(groups(lambda t, c, i, p, o: (t, p)), domain)}
    stage = {p: sorted(rank(*co) for co in coords if co[3] == p) for p in range(pp)}
    expert_of = {r: (p, j % etp, (j // etp) % ep, j // (etp * ep)) for p, rs in stage.items() for j, r in enumerate(rs)}
    for name, key in (("ep", lambda p, t, e, x: (p, t, x)), ("etp", lambda p, t, e, x: (p, e, x)),
                      ("etp_ep", lambda p, t, e, x: (p, x)), ("expert_dp", lambda p, t, e, x: (p, t, e))):
        found: dict[object, list[int]] = {}
        for r, co in sorted(expert_of.items()):
            found.setdefault(key(*co), []).append(r)
        out[name] = _footprint(list(found.values()), domain)
    return out


@settings(max_examples=150)
@given(MESH, st.sampled_from([1, 2, 3, 4]), st.sampled_from([1, 2, 3, 4]), st.sampled_from([1, 2, 3, 4, 6, 8]))
def test_placement_counts_every_groups_members_per_domain(sizes, etp, ep, domain):
    assume((sizes[0] * sizes[1] * sizes[2] * sizes[4]) % (etp * ep) == 0)
    placed = layout.placement(sizes, (etp, ep), domain)
    assert placed == _brute_force(sizes, (etp, ep), domain)


@given(st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2, 4, 8, 16]), st.sampled_from([1, 2, 4]))
def test_a_group_within_a_domain_is_intra_and_beyond_it_inter(gpn, tp, nodes_per_domain):
    nodes = max(1, 16 // gpn)
    if tp > gpn * nodes or (gpn * nodes) % tp:
        return
    domain = gpn * nodes_per_domain
    model = llama(layers=2, hidden=2048, heads=16, kv_heads=16, ffn=5632, vocab=32000, seq_len=1024)
    spec = make_spec(model, nodes=nodes, gpus_per_node=gpn, tp=tp, global_batch=16 * nodes * gpn // tp)
    spec = dataclasses.replace(spec, cluster=dataclasses.replace(
        spec.cluster, node=dataclasses.replace(spec.cluster.node, nvlink_domain=domain)))
    g = layout.group(spec, "tp", structure_of(spec))
    assert g.tier is (Tier.INTRA if tp <= domain else Tier.INTER)
    assert g.ranks_per_node == min(tp, domain)


LINKS = Links(gpus_per_node=4, intra_bandwidth=240e9, intra_latency=3e-6, inter_bandwidth=100e9, inter_latency=6e-6)


@settings(max_examples=200)
@given(st.sampled_from([1, 2, 4]), st.sampled_from([2, 4, 8, 16]), st.floats(1e3, 1e10),
       st.sampled_from(list(CollectiveKind)), st.booleans())
def test_a_spanning_group_costs_at_least_its_domain_part_and_at_most_a_flat_ring_over_the_nics(
        r, nodes, size, kind, mesh):
    # Links with NVLink at least as fast as one NIC rail (true of every catalog node).
    links = dataclasses.replace(LINKS, intra_peer_bandwidth=80e9 if mesh else None)
    n = r * nodes
    spanning = time(Collective(kind=kind, bytes=size, group=n, ranks_per_node=r, tier=Tier.INTER), links)
    inside = time(Collective(kind=kind, bytes=size, group=r, ranks_per_node=r, tier=Tier.INTRA), links)
    assert spanning >= inside * (1 - 1e-12) if r > 1 else spanning > 0
    if kind in (CollectiveKind.ALL_REDUCE, CollectiveKind.ALL_GATHER, CollectiveKind.REDUCE_SCATTER):
        # NCCL picks the fastest: never slower than its flat Simple ring over the NIC rails (plus the
        # links' own latency per ring step)
        c = Collective(kind=kind, bytes=size, group=n, ranks_per_node=r, tier=Tier.INTER)
        flat = nccl.ring(call(c), links.fabric(r), nccl.Protocol.SIMPLE) + excess(call(c), links)
        assert spanning <= flat * (1 + 1e-12)


@settings(max_examples=100)
@given(st.sampled_from([2, 4]), st.sampled_from([2, 4, 8]), st.floats(1e6, 1e10))
def test_a_spanning_all_reduce_moves_its_bytes_no_faster_than_inside_one_domain(r, nodes, size):
    # Bandwidth terms only: NCCL's tree crosses N nodes in log2 N hops, which can beat a ring of n
    # GPUs inside one (hypothetical) domain on latency (tuning.cc), never on bytes.
    links = dataclasses.replace(LINKS, intra_latency=0.0, inter_latency=0.0)
    n = r * nodes
    spanning = time(Collective(kind=CollectiveKind.ALL_REDUCE, bytes=size, group=n, ranks_per_node=r,
                               tier=Tier.INTER), links)
    one_domain = time(Collective(kind=CollectiveKind.ALL_REDUCE, bytes=size, group=n, ranks_per_node=n,
                                 tier=Tier.INTRA), links)
    assert spanning >= one_domain * (1 - 1e-12)
