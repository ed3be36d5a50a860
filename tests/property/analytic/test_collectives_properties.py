"""Collectives as NCCL runs them, as properties: time never falls as the message grows, the chosen
algorithm is the fastest candidate, crossing domains never beats staying inside, faster links never
cost more."""

from __future__ import annotations

import dataclasses

import pytest
from analytic_helpers import COLLECTIVE_KINDS as KINDS
from analytic_helpers import collective as _c
from analytic_helpers import nccl_links as links
from hypothesis import given, settings
from hypothesis import strategies as st

from llmp.analytic import nccl
from llmp.analytic.collectives import call, choice, time
from llmp.analytic.kernels import CollectiveKind, Tier
from llmp.analytic.nccl import Algorithm, Arch, Protocol

FABRICS = st.builds(links, arch=st.sampled_from(list(Arch)), nvls=st.booleans(), mesh=st.booleans(),
                    collnet=st.booleans(), intra=st.sampled_from([24e9, 150e9, 360e9, 700e9]),
                    inter=st.sampled_from([12.5e9, 100e9, 400e9, 800e9]), latency=st.sampled_from([0.0, 2e-6]))
SHAPES = st.tuples(st.sampled_from(KINDS), st.sampled_from([2, 4, 8]), st.sampled_from([1, 2, 4, 9, 64]))


@settings(max_examples=300)
@given(SHAPES, FABRICS, st.floats(1.0, 1e11), st.floats(1.0, 8.0))
def test_time_never_falls_as_the_message_grows(shape, fabric, size, factor):
    kind, r, domains = shape
    n, tier = r * domains, Tier.INTRA if domains == 1 else Tier.INTER
    assert time(_c(kind, size * factor, n, r, tier), fabric) >= time(_c(kind, size, n, r, tier), fabric) * (1 - 1e-12)


@settings(max_examples=300)
@given(SHAPES, FABRICS, st.floats(1.0, 1e11))
def test_the_time_is_that_of_the_fastest_candidate(shape, fabric, size):
    kind, r, domains = shape
    if kind in (CollectiveKind.ALL_TO_ALL, CollectiveKind.SEND_RECV):
        return  # grouped point-to-point: no algorithm to choose
    c = _c(kind, size, r * domains, r, Tier.INTRA if domains == 1 else Tier.INTER)
    found = {k: float(v) for k, v in nccl.candidates(call(c), fabric.fabric(r)).items()}
    a, p, t = choice(c, fabric)
    extra = time(c, fabric) - min(found.values())
    assert found[(Algorithm(a), Protocol(p))] == min(found.values())
    assert t == pytest.approx(time(c, fabric), rel=1e-12) and extra >= 0


@settings(max_examples=300)
@given(st.sampled_from([CollectiveKind.ALL_REDUCE, CollectiveKind.ALL_GATHER, CollectiveKind.REDUCE_SCATTER]),
       st.sampled_from([1, 2, 4, 8]), st.sampled_from([2, 4, 8]), FABRICS, st.floats(2**28, 1e11))
def test_crossing_domains_is_never_faster_than_staying_inside_at_equal_size(kind, r, domains, fabric, size):
    # Where the bytes dominate (256 MiB and more): NCCL's tree crosses N nodes in log2 N hops, which
    # beats a 2 (n - 1)-step ring or chain through 64 GPUs of one domain on latency alone, up to a few
    # MiB (NCCL's own model, tuning.cc).
    # Without in-network reduction (SHARP halves the bytes that cross, so it may beat a flat ring
    # inside a slow node) and with NICs no faster than the NVLink they sit behind.
    n = r * domains
    fabric = dataclasses.replace(fabric, collnet=False,
                                 inter_bandwidth=min(fabric.inter_bandwidth, fabric.intra_bandwidth * 8))
    inside = time(_c(kind, size, n), fabric)
    crossing = time(_c(kind, size, n, r, Tier.INTER), fabric)
    assert crossing >= inside * (1 - 1e-9)


@given(SHAPES, FABRICS, st.floats(1.0, 1e11), st.floats(1.0, 4.0))
def test_faster_links_never_cost_more(shape, fabric, size, factor):
    kind, r, domains = shape
    c = _c(kind, size, r * domains, r, Tier.INTRA if domains == 1 else Tier.INTER)
    # every bandwidth of the links scales, a mesh's pair links too (a faster intra with the same pair
    # links is a different topology, whose tree NCCL may size by the NIC: nvidia/nccl tree.cc)
    peer = fabric.intra_peer_bandwidth
    fast = dataclasses.replace(fabric, intra_bandwidth=fabric.intra_bandwidth * factor,
                               inter_bandwidth=fabric.inter_bandwidth * factor,
                               intra_peer_bandwidth=None if peer is None else peer * factor)
    assert time(c, fast) <= time(c, fabric) * (1 + 1e-12)
