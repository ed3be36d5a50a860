"""The collective design: group shapes as layouts place ranks, sizes as the analytic layer sends them."""

from __future__ import annotations

from pathlib import Path

import pytest

import llmp
from llmp.analytic import collectives as analytic
from llmp.analytic import layout
from llmp.analytic.kernels import Collective, CollectiveKind, Tier
from llmp.measure import collectives
from llmp.residuals import dataset

ROOT = Path(__file__).resolve().parents[3]


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
