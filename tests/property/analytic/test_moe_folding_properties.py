"""MoE parallel folding on generated degrees: every folded mesh covers the world once per group
kind."""

from __future__ import annotations

from analytic_helpers import folded_groups as _groups
from hypothesis import assume, given, settings
from hypothesis import strategies as st

DEGREES = st.sampled_from([1, 2, 4])


@settings(max_examples=120, deadline=None)
@given(tp=DEGREES, cp=DEGREES, dp=st.sampled_from([1, 2, 3, 4, 8]), pp=st.sampled_from([1, 2, 3]),
       etp=DEGREES, ep=st.sampled_from([1, 2, 4, 8, 16]))
def test_every_folded_mesh_covers_the_world_once_per_group_kind(tp, cp, dp, pp, etp, ep):
    assume((tp * cp * dp) % (etp * ep) == 0)
    world = tp * cp * dp * pp
    edp = tp * cp * dp // (etp * ep)
    assert etp * ep * edp * pp == world
    g = _groups(tp, cp, dp, pp, etp, ep)
    sizes = {"tp": tp, "cp": cp, "pp": pp, "dp": dp * cp, "ep": ep, "etp": etp, "etp_ep": etp * ep, "expert_dp": edp}
    stage_of = {r: p for group in g["pp"] for p, r in enumerate(group)}
    for name, rows in g.items():
        flat = sorted(r for row in rows for r in row)
        assert flat == list(range(world)), name  # every rank in exactly one group of each kind
        assert all(len(row) == sizes[name] for row in rows), name
        if name != "pp":  # attention and expert groups stay inside one pipeline stage
            assert all(len({stage_of[r] for r in row}) == 1 for row in rows), name
