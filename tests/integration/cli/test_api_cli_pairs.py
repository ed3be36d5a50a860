"""One answer everywhere: each library function and its command, given the same inputs, give the
same result (the library carries the policy: residual store, derived fields; the command parses
flags and renders). Compared through the command's ``--json`` and the result's ``to_dict``, less
the wall-clock fields."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import llmp
from llmp.cli import main
from llmp.search import search
from llmp.sensitivity import sensitivity
from llmp.validate import validate

# ``llmp.validate``, ``llmp.search`` and ``llmp.sensitivity`` name both a public function and a
# subpackage: once the subpackage is imported, the package attribute is the module, so the
# functions are imported from where ``llmp``'s table points.

ROOT = Path(__file__).parents[3]
EXAMPLES = ROOT / "examples"
TIMING = ("seconds", "configs_per_s")


def _cli(capsys: pytest.CaptureFixture[str], *argv: object) -> object:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return _untimed(json.loads(out))


def _api(result: object) -> object:
    return _untimed(json.loads(json.dumps(result)))


def _untimed(data: object) -> object:
    if isinstance(data, dict):
        return {k: _untimed(v) for k, v in data.items() if k not in TIMING}
    if isinstance(data, list):
        return [_untimed(v) for v in data]
    return data


def test_predict(capsys):
    path = EXAMPLES / "llama3_8b_dgx_h100.llmp"
    assert _cli(capsys, "predict", path, "--json") == _api(llmp.predict(llmp.load(path)).to_dict())


def test_ops(capsys):
    path = EXAMPLES / "llama3_8b_dgx_h100.llmp"
    rows = llmp.ops(llmp.load(path))
    assert _cli(capsys, "ops", path, "--json") == _api([dict(r.to_dict(), intensity=r.intensity) for r in rows])
    assert any(r.factor != 1.0 for r in rows)  # the shipped residual store, as llmp predict applies it


def test_validate_applies_the_shipped_stores(capsys):
    csv = ROOT / "validation" / "torchtitan_llama3_h100.csv"
    api = validate([str(csv)])
    assert _cli(capsys, "validate", csv, "--json") == _api(api.to_dict())
    bare = validate([str(csv)], residuals=None)
    assert [r.predicted_s for r in api.rows] != [r.predicted_s for r in bare.rows]


def test_search_rederives_dp(capsys):
    # dp = GPUs / (tp pp): varying tp must move dp, or every tp but the spec's is a layout mismatch.
    path = EXAMPLES / "sweep_llama3_8b.llmp"
    api = search(llmp.load(path))
    assert api.feasible > 0
    assert _cli(capsys, "search", path, "--json") == _api(api.to_dict())


@pytest.mark.slow  # a symbolic sensitivity run twice, by the API and by the CLI
def test_sensitivity(capsys):
    path = ROOT / "tests" / "fixtures" / "small.llmp"
    wrt = ["model.hidden", "train.global_batch", "gpu.mem_bandwidth"]
    api = sensitivity(llmp.load(path), wrt=wrt)
    assert _cli(capsys, "sensitivity", path, "--json", *(a for w in wrt for a in ("--wrt", w))) == _api(api.to_dict())
    assert api.step_time_s == pytest.approx(llmp.predict(llmp.load(path)).step_time_s, rel=1e-12)
    assert next(f for f in api.fields if f.path == "model.hidden").moves  # the spec's derivations followed


def test_plan(capsys):
    path = EXAMPLES / "llama3_8b_dgx_h100.llmp"
    api = llmp.plan(path, tokens="1T", price_per_gpu_hour=2.0)
    assert _cli(capsys, "plan", path, "--tokens", "1T", "--price-per-gpu-hour", "2", "--json") == _api(api.to_dict())
