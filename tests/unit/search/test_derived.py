"""Derived fields follow the varied ones exactly as ``llmp.load`` with ``--set`` derives them, and a
numeric search needs no SymPy to do it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from llmp import dsl
from llmp.search import derived, engine
from llmp.spec import specpath

ROOT = Path(__file__).parents[3]
LLAMA = ROOT / "examples" / "llama3_8b_dgx_h100.llmp"
DERIVED = ROOT / "tests" / "unit" / "dsl" / "fixtures" / "llama_sweep.llmp"
SMALL = ROOT / "tests" / "fixtures" / "small.llmp"
SETS = ["node.intra.bandwidth=gpu.mem_bandwidth / 3", "cluster.inter.latency=gpu.launch_overhead * 7"]
VARY = ["gpu.mem_bandwidth=2TB/s,3.35TB/s,1.1e12B/s", "gpu.launch_overhead=3us,4.5us"]


def _grid(path: Path, sets=(), vary=(), gpus=()):
    spec, resolve = engine.load(path, sets, vary)
    return engine.build(spec, gpus, False, resolve).grid


def test_derived_values_equal_a_load_with_the_varied_values_set():
    # Quantities with units (bandwidth, time) derived from varied ones, through sections.
    grid = _grid(LLAMA, SETS, VARY)
    for i in range(grid.size):
        varied = [f"gpu.mem_bandwidth={float(grid.columns['gpu.mem_bandwidth'][i])!r}B/s",
                  f"gpu.launch_overhead={float(grid.columns['gpu.launch_overhead'][i])!r}s"]
        direct = dsl.load(LLAMA, [*SETS, *varied])
        assert grid.columns["node.intra.bandwidth"][i] == direct.cluster.node.intra.bandwidth
        assert grid.columns["cluster.inter.latency"][i] == direct.cluster.inter.latency
    assert grid.columns["node.intra.bandwidth"][0] != grid.columns["node.intra.bandwidth"][2]


@pytest.mark.parametrize(("path", "vary", "gpus", "fields"), [
    (DERIVED, (), (), {"parallel.dp", "train.global_batch"}),
    (LLAMA, ("model.hidden=2048,4096",), (), {"model.head_dim"}),
    (SMALL, (), (8,), {"node.nvlink_domain"}),
    # tp = 3 leaves dp = 8 / 3, which the resolver refuses: derived symbolically, as before
    (SMALL, ("parallel.tp=1,2,3,4",), (), {"parallel.dp"}),
])
def test_numeric_and_symbolic_derivations_agree(path, vary, gpus, fields):
    spec, resolve = engine.load(path, vary=vary)
    plain = engine.build(spec, gpus, False).grid
    grid, notes = derived.derive(resolve, spec, plain)
    numeric = [p for p in plain.columns if p in specpath.paths(spec) and plain.columns[p].dtype != object]
    symbolic, _ = derived._symbolic(resolve, spec, plain, numeric)
    assert set(grid.columns) - set(plain.columns) == set(symbolic.columns) - set(plain.columns) == fields
    for path_ in fields:
        np.testing.assert_allclose(grid.columns[path_], symbolic.columns[path_], rtol=1e-15)
    assert notes == []


def test_a_layout_search_never_imports_sympy():
    code = ("import sys\nfrom llmp.search import load, search\n"
            f"spec, resolve = load({str(LLAMA)!r})\n"
            "result = search(spec, gpus=[16], resolve=resolve, top=3)\n"
            "assert result.ranked and 'sympy' not in sys.modules, sorted(m for m in sys.modules if 'sympy' in m)[:3]\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
