"""Regimes, flips and kinks against predict(); the ``llmp sensitivity`` command's contract and errors."""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

import pytest

from llmp import dsl
from llmp.cli import main
from llmp.compose import predict
from llmp.sensitivity import analyze, operating_point

SMALL = Path(__file__).parents[2] / "fixtures" / "small.llmp"
SYMBOLIC = Path(__file__).parents[3] / "examples" / "symbolic_hidden.llmp"


@pytest.fixture(scope="module")
def result():
    return analyze(operating_point(dsl.load(SMALL), None, lambda e: dsl.load(SMALL, list(e))))


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow  # the regimes of a whole spec solved symbolically, then checked against predict
def test_family_flip_along_bandwidth_is_where_flops_over_peak_equal_bytes_over_bandwidth(result):
    gemm = next(r for r in result.regimes if (r.phase, r.family) == ("fwd", "gemm"))
    assert gemm.bound == "compute" and gemm.compute_s > gemm.memory_s
    (flip,) = [f for f in gemm.flips if f.path == "gpu.mem_bandwidth"]
    # C = F / peak does not depend on the bandwidth, M = B / bw: C = M at bw = bw0 * M / C.
    assert flip.at == pytest.approx(flip.current * gemm.memory_s / gemm.compute_s, rel=1e-9)
    assert (flip.below, flip.above) == ("memory-bound", "compute-bound")
    norm = next(r for r in result.regimes if (r.phase, r.family) == ("fwd", "norm"))
    assert norm.bound == "memory" and all(f.at > f.current for f in norm.flips if f.path == "gpu.mem_bandwidth")


@pytest.mark.slow  # the regimes of a whole spec solved symbolically, then checked against predict
def test_roofline_kink_is_where_predict_changes_the_ops_bound(result):
    kink = next(k for k in result.kinks if k.path == "gpu.mem_bandwidth" and k.subject.startswith("roofline of"))
    name = kink.subject.removeprefix("roofline of ")

    def bound(bw: float) -> set[str]:
        p = predict(dsl.load(SMALL, [f"gpu.mem_bandwidth={bw:.9g} B/s"]))
        return {row.bound for row in p.ops if row.name == name}

    assert bound(kink.at * 0.999) == {kink.below.removesuffix("-bound")}
    assert bound(kink.at * 1.001) == {kink.above.removesuffix("-bound")}


@pytest.mark.slow  # the regimes of a whole spec solved symbolically, then checked against predict
def test_step_regime_and_communication(result):
    assert result.step.dominant == "compute"
    assert sum(result.step.shares.values()) == pytest.approx(1.0, rel=1e-9)
    tp = next(c for c in result.comm if c.axis == "tp")
    assert 0 < tp.exposed_s <= tp.issued_s and tp.state == "partly hidden"


@pytest.mark.slow  # a symbolic sensitivity run end to end through the CLI
def test_json_contract(capsys):
    code, out, err = run(capsys, "sensitivity", SMALL, "--json", "--wrt", "gpu.mem_bandwidth", "--wrt", "parallel.tp")
    assert (code, err) == (0, "")
    data = json.loads(out)
    assert [f["path"] for f in data["fields"]] == ["parallel.tp", "gpu.mem_bandwidth"]
    for f in data["fields"]:
        assert {"path", "value", "derivative", "elasticity"} <= set(f)
    assert {"families", "communication", "step"} <= set(data["regimes"])
    assert {"phase", "family", "bound", "flips"} <= set(data["regimes"]["families"][0])
    assert all({"path", "at", "current", "below", "above", "subject"} <= set(f) for f in data["flips"])
    assert data["flips"] and data["notes"]


@pytest.mark.slow  # a symbolic sensitivity run end to end through the CLI
def test_table_says_what_is_held_fixed(capsys):
    code, out, _ = run(capsys, "sensitivity", SMALL, "--top", "3")
    assert code == 0
    assert "differentiated as if they were continuous" in out
    assert "factors held at their values at the point" in out  # the residuals predict applies
    assert "... " in out and "more (--top)" in out


@pytest.mark.parametrize(("argv", "needle"), [
    (["--wrt", "model.hiden"], "did you mean 'model.hidden'?"),
    (["--wrt", "train.precision"], "not a numeric field"),
    (["--wrt", "model.moe.experts"], "not in this spec"),
    (["--at", "model.layers=4"], "not free in the spec"),
    (["--phase", "fwd"], "--latex"),
    (["--top", "0"], "positive"),
])
def test_errors_exit_1_with_a_message(capsys, argv, needle):
    code, out, err = run(capsys, "sensitivity", SMALL, *argv)
    assert code == 1 and out == ""
    assert needle in err and "Traceback" not in err


@pytest.mark.slow  # a symbolic sensitivity run end to end through the CLI
def test_free_symbol_without_a_value_prints_closed_forms_and_asks_for_at(capsys):
    code, out, _ = run(capsys, "sensitivity", SYMBOLIC, "--json")
    assert code == 0
    data = json.loads(out)
    assert data["free"] == ["model.hidden"] and data["fields"] is None
    assert "hidden" in data["closed_forms"]["T"] and "dT/dhidden" in data["closed_forms"]
    assert "--at model.hidden=" in data["note"]


@pytest.mark.slow  # a symbolic sensitivity run end to end through the CLI
def test_free_symbol_at_a_point_gives_elasticities(capsys):
    code, out, _ = run(capsys, "sensitivity", SYMBOLIC, "--at", "model.hidden=4096", "--wrt", "hidden", "--json")
    assert code == 0
    data = json.loads(out)
    (field,) = data["fields"]
    assert field["path"] == "model.hidden" and field["value"] == 4096 and field["elasticity"] > 0
    assert any(k.startswith("T(hidden) near the point") for k in data["free"])


def test_latex_of_a_phase_keeps_the_requested_fields(capsys):
    code, out, _ = run(capsys, "sensitivity", SMALL, "--latex", "--phase", "bwd_w", "--wrt", "model.hidden", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["symbols"] == ["hidden"] and "\\mathit{hidden}" in data["latex"]


@pytest.mark.slow  # renders a figure with matplotlib
def test_plot_writes_a_png(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "tornado.png"
    code, _, _ = run(capsys, "sensitivity", SMALL, "--plot", out, "--top", "4")
    assert code == 0 and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_is_a_clean_error(capsys, tmp_path, monkeypatch):
    # matplotlib is an optional extra: hide it as an environment without it would.
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    code, out, err = run(capsys, "sensitivity", SMALL, "--wrt", "model.hidden", "--plot", tmp_path / "t.png")
    assert code == 1 and out == ""
    assert "--plot needs matplotlib" in err and "pip install" in err


@pytest.mark.slow  # renders a figure with matplotlib
def test_plot_tick_labels_never_overlap():
    """The T(x) panels label 1, 2 and 5 per decade, never the crowded minor ticks."""
    pytest.importorskip("matplotlib")
    from llmp.sensitivity.plot import figure

    op = operating_point(dsl.load(Path(__file__).parents[3] / "examples" / "llama3_8b_dgx_h100.llmp"))
    fig = figure(analyze(op), op)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes[1:]:
        boxes = sorted((t.get_window_extent(renderer) for t in ax.get_xticklabels(which="both")
                        if t.get_visible() and t.get_text()), key=lambda b: b.x0)
        assert len(boxes) >= 2
        assert all(a.x1 <= b.x0 for a, b in itertools.pairwise(boxes)), [b.bounds for b in boxes]
