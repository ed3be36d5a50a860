"""STACK.json: round trip, strict reading, and where a calibration applies."""

from __future__ import annotations

import copy
import dataclasses
import json

import numpy as np
import pytest
from strategies_analytic import llama, make_spec

from llmp.calibrate import fit_basis, load
from llmp.compose.band import CompositionTerm
from llmp.compose.calibration_file import Calibration, Source, from_dict
from llmp.compose.predictor import ROOFLINE_ONLY, priced
from llmp.errors import InputError
from llmp.spec.spec import Stack

TERM = CompositionTerm(below=0.0, above=0.5, within=0.1, source="test", sources=("a", "b"))


@pytest.fixture(scope="module")
def calibration() -> Calibration:
    rows = [priced(make_spec(llama(layers=layers, hidden=1024, heads=8, kv_heads=8, ffn=4096, vocab=1000,
                                   seq_len=512), tp=tp), None) for layers, tp in ((2, 1), (4, 2))]
    measured = [1.2 * float(p.step_time(p.times)) for p in rows]
    basis = fit_basis(rows, measured, ["runs:2", "runs:3"], TERM)
    spec = rows[0].spec
    return Calibration(gpu=spec.cluster.gpu.id, stack=spec.train.stack.value, bases=(basis,),
                       inputs=(Source(path="runs.csv", sha256="0" * 64, rows=("runs:2", "runs:3")),),
                       composition_term=TERM, created="2026-11-24")


def test_round_trip(calibration, tmp_path):
    path = calibration.save(tmp_path / "STACK.json")
    back = load(path)
    assert back.to_dict() == calibration.to_dict()
    assert back.path == str(path) and back.id.startswith("STACK@")
    assert back.bases[0].residuals == ROOFLINE_ONLY and back.rows == 2


def _broken(calibration, edit) -> dict:
    d = copy.deepcopy(calibration.to_dict())
    edit(d)
    return d


@pytest.mark.parametrize("edit, what", [
    (lambda d: d.pop("gpu"), "gpu"),
    (lambda d: d.update(version=1), "version"),
    (lambda d: d.update(bases=[]), "no fitted basis"),
    (lambda d: d["bases"][0]["posterior"].update(mean=[0.0] * 5), "mean"),
    (lambda d: d["bases"][0]["posterior"]["covariance"][0].__setitem__(1, 5.0), "symmetric"),
    (lambda d: d["bases"][0]["posterior"].update(noise=-1.0), "positive"),
    (lambda d: d["bases"][0]["posterior"].update(t_ref_s="fast"), "t_ref_s"),
    (lambda d: d["bases"][0]["posterior"]["prior"]["sigma"].pop("tensor"), "groups"),
    (lambda d: d["composition_term"].update(above=-1.0), "above"),
    (lambda d: d["bases"][0]["rows"][0].pop("measured_s"), "measured_s"),
])
def test_a_damaged_file_is_refused_by_name(calibration, edit, what):
    with pytest.raises(InputError, match=what):
        from_dict(_broken(calibration, edit), "STACK.json")


def test_non_numbers_are_refused(calibration, tmp_path):
    path = tmp_path / "nan.json"
    path.write_text(json.dumps(calibration.to_dict()).replace('"noise": ', '"noise": NaN, "x": ', 1))
    with pytest.raises(InputError, match="not valid JSON"):
        load(path)
    with pytest.raises(InputError, match="no such file"):
        load(tmp_path / "missing.json")


def test_it_applies_only_to_its_gpu_stack_and_store(calibration):
    spec = make_spec()
    calibration.check(spec)
    other_gpu = make_spec(device=dataclasses.replace(spec.cluster.gpu, id="other_gpu"))
    with pytest.raises(InputError, match="other_gpu"):
        calibration.check(other_gpu)
    other_stack = dataclasses.replace(spec, train=dataclasses.replace(spec.train, stack=Stack.TORCHTITAN))
    with pytest.raises(InputError, match="torchtitan"):
        calibration.check(other_stack)
    assert calibration.basis(ROOFLINE_ONLY) is calibration.bases[0]
    with pytest.raises(InputError, match="fitted on predictions made with"):
        calibration.basis("h100@123")


def test_posterior_covariance_is_usable(calibration):
    cov = np.asarray(calibration.bases[0].posterior.covariance)
    assert np.allclose(cov, cov.T) and np.linalg.eigvalsh(cov).min() >= -1e-12
