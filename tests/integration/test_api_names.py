"""``llmp.validate``, ``llmp.search`` and ``llmp.sensitivity`` are API functions whatever was
imported first: their packages, once loaded, answer a call as the function."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROGRAM = """
import llmp.search.engine, llmp.validate.rows, llmp.sensitivity.analysis   # the packages first
import llmp
from llmp.search import search
from llmp.sensitivity import sensitivity
from llmp.validate import validate
spec = llmp.load("examples/sweep_llama3_8b.llmp")
a, b = llmp.search(spec), search(spec)
assert [c.config for c in a.ranked] == [c.config for c in b.ranked] and a.feasible == b.feasible == 6
v = llmp.validate(["validation/megatron_sc21.csv"], sources=["megatron-sc21-table1"])
assert len(v.rows) == len(validate(["validation/megatron_sc21.csv"], sources=["megatron-sc21-table1"]).rows) == 10
s = llmp.sensitivity(llmp.load("examples/llama3_8b_dgx_h100.llmp"))
assert s.step_time_s == sensitivity(llmp.load("examples/llama3_8b_dgx_h100.llmp")).step_time_s
print("ok")
"""


@pytest.mark.slow  # a fresh interpreter running every API function
def test_the_api_functions_survive_their_packages_being_imported_first():
    done = subprocess.run([sys.executable, "-c", PROGRAM], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "ok"
