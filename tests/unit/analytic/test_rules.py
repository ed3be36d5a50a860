"""One rulebook: ``llmp.load`` and ``llmp.evaluate`` (so search, plan and validate) accept the same layouts."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import specs

import llmp
from llmp.analytic import rules
from llmp.analytic.structure import structure_of
from llmp.compose.sweep import STRUCTURAL
from llmp.dsl.checks import check
from llmp.errors import InfeasibleError, SpecError
from llmp.spec import specpath

EXAMPLE = Path(__file__).parents[3] / "examples" / "llama3_8b_dgx_h100.llmp"
LAYOUT = ("parallel.dp", "parallel.tp", "parallel.pp", "parallel.cp", "parallel.ep", "model.heads", "model.kv_heads",
          "model.ffn_hidden", "model.seq_len", "model.layers", "train.global_batch", "train.micro_batch",
          "model.moe.expert_ffn_hidden", "model.moe.experts")


def _accepted_by_load(spec) -> bool:
    """What ``llmp.load`` decides of a spec: its cross-field checks (with no file to point into)."""
    try:
        check(spec, lambda _path: None)
    except SpecError:
        return False
    return True


@given(spec=specs(), data=st.data())
def test_load_and_evaluate_accept_the_same_layouts(spec, data):
    # evaluate, search, plan, predict and validate price a layout only once structure_of accepts it
    # (evaluate marks the point infeasible otherwise); load runs the language's checks.
    paths = [p for p in LAYOUT if p in specpath.paths(spec)]
    changed = data.draw(st.dictionaries(st.sampled_from(paths), st.integers(1, 64), min_size=1, max_size=3))
    varied = specpath.replace(spec, changed)
    loads = _accepted_by_load(varied)
    assert loads == (next(rules.layout(varied), None) is None)  # load refuses a layout by the rulebook only
    if not loads:
        with pytest.raises(InfeasibleError):  # and a layout the language refuses is never priced
            structure_of(varied)


def test_the_structure_groups_on_every_field_a_rule_reads():
    # evaluate checks the rules once per group of configurations; a field read by a rule must be
    # grouped on, or the rules would see an array (or skip it).
    assert {"model.ffn_hidden", "model.moe.expert_ffn_hidden"} <= STRUCTURAL
    assert set(LAYOUT) <= STRUCTURAL


def test_a_width_tp_does_not_divide_is_refused_by_load_and_evaluate():
    # Llama 3 8B's MLP is 14336 wide; 14338 does not split over tp = 4.
    with pytest.raises(SpecError, match=r"ffn_hidden\(14338\) % tp\(4\) = 2"):
        llmp.load(EXAMPLE, overrides=["model.ffn_hidden=14338", "parallel.tp=4", "parallel.dp=1"])
    spec = llmp.load(EXAMPLE, overrides=["parallel.tp=4", "parallel.dp=1"])
    out = llmp.evaluate(spec, {"model.ffn_hidden": [14336, 14338]})
    assert out["feasible"].tolist() == [True, False]
