"""A numeric ``llmp predict`` never imports SymPy; symbolic commands still do.

SymPy's import is a third of a cold start, and a spec of plain numbers needs none of it
(``llmp.sym``). Each case runs in a fresh interpreter, since this test process has SymPy loaded.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"


def _imports_sympy(*argv: str) -> tuple[int, bool]:
    code = ("import sys, io, contextlib\n"
            "from llmp.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    rc = main({list(argv)!r})\n"
            "print(rc, 'sympy' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}).stdout.split()
    return int(out[-2]), out[-1] == "True"


@pytest.mark.parametrize("argv", [
    ("predict", str(EXAMPLES / "llama3_70b_dgx_h100.llmp")),
    ("predict", str(EXAMPLES / "gpt3_175b_dgx_a100.llmp"), "--json", "--set", "parallel.tp=4",
     "--set", "parallel.dp=8"),
    ("predict", str(EXAMPLES / "mixtral_8x7b_dgx_h100.llmp"), "--no-residuals"),
])
def test_numeric_predict_does_not_import_sympy(argv):
    rc, loaded = _imports_sympy(*argv)
    assert rc == 0
    assert not loaded


@pytest.mark.slow  # runs each symbolic command in a fresh interpreter
def test_symbolic_commands_still_import_sympy():
    rc, loaded = _imports_sympy("sensitivity", str(EXAMPLES / "llama3_8b_dgx_h100.llmp"), "--top", "3")
    assert rc == 0 and loaded
    rc, loaded = _imports_sympy("predict", str(EXAMPLES / "symbolic_hidden.llmp"))
    assert rc == 1 and loaded  # a free symbol: parsed with SymPy, then refused with a clear error
