"""One rulebook: ``llmp.load`` and ``llmp.evaluate`` (so search, plan and validate) accept the same layouts."""

from __future__ import annotations

from pathlib import Path

import pytest
from analytic_helpers import LAYOUT

import llmp
from llmp.compose.sweep import STRUCTURAL
from llmp.errors import SpecError

EXAMPLE = Path(__file__).parents[3] / "examples" / "llama3_8b_dgx_h100.llmp"


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
