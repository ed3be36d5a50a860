"""``llmp calibrate --suggest``: the runs worth measuring are those that teach the factors most."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmp import dsl
from llmp.calibrate.suggest import suggest
from llmp.cli import main
from llmp.compose.posterior import PARAMS
from llmp.compose.predictor import priced

ROOT = Path(__file__).resolve().parents[3]
SPEC = ROOT / "examples" / "llama3_8b_dgx_h100.llmp"


PROGRESS: list[tuple[int, int]] = []


@pytest.fixture(scope="module")
def suggested():
    return suggest(SPEC, 3, gpus=[16], candidates=25, progress=lambda done, total: PROGRESS.append((done, total)))


def test_progress_is_told_of_every_candidate(suggested):
    done = [d for d, _ in PROGRESS]
    assert done == sorted(done) and PROGRESS[-1][0] == PROGRESS[-1][1] >= suggested.candidates
    assert len(PROGRESS) == PROGRESS[-1][1] + 1


def test_each_pick_is_the_spec_its_set_arguments_give(suggested):
    # the candidates are built from the loaded spec, not parsed again: the --set arguments printed
    # must still give the very step that was priced
    for p in suggested.picks:
        again = priced(dsl.load(SPEC, p.overrides), "default")
        assert float(again.step_time(again.times)) == pytest.approx(p.step_time_s, rel=1e-12)


def test_suggested_runs_are_distinct_feasible_layouts_that_narrow_every_factor(suggested):
    assert len(suggested.picks) == 3
    assert len({p.overrides for p in suggested.picks}) == 3
    assert suggested.candidates >= 3
    for k in PARAMS:
        assert suggested.expected_sd[k] <= suggested.prior_sd[k] * (1 + 1e-12)
    assert [p.gain for p in suggested.picks] == sorted((p.gain for p in suggested.picks), reverse=True)


def test_a_layout_inside_one_node_teaches_nothing_of_the_network(suggested):
    for p in suggested.picks:
        shares = p.shares
        assert 0.0 <= shares["tensor"] <= 1.0 + 1e-6
        if "cluster.nodes=1" in p.overrides:
            assert abs(shares["inter"]) < 1e-9


def test_the_command_lists_the_runs_and_refuses_what_it_cannot_use(capsys, tmp_path):
    assert main(["calibrate", "--suggest", "2", "--spec", str(SPEC), "--gpus", "16", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["picks"]) == 2 and all(p["set"] for p in out["picks"])
    assert main(["calibrate", "--suggest", "2"]) == 1
    assert "--spec" in capsys.readouterr().err
    assert main(["calibrate", "--suggest", "0", "--spec", str(SPEC)]) == 1
    assert "from 1 to 50" in capsys.readouterr().err
    assert main(["calibrate", "x.csv"]) == 1
    assert "-o STACK.json" in capsys.readouterr().err
