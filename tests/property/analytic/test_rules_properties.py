"""One rulebook, on generated layouts: llmp.load and llmp.evaluate accept the same layouts."""

from __future__ import annotations

import pytest
from analytic_helpers import LAYOUT
from hypothesis import given
from hypothesis import strategies as st
from strategies import specs

from llmp.analytic import rules
from llmp.analytic.structure import structure_of
from llmp.dsl.checks import check
from llmp.errors import InfeasibleError, SpecError
from llmp.spec import specpath


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
