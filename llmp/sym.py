"""SymPy on demand: a spec of plain numbers is parsed, priced and composed without importing it.

SymPy takes a third of a second to import, and only free symbols (``hidden = symbol``), the
closed forms of ``llmp sensitivity`` and the compiled sweep costs need it. Modules on the
numeric path therefore ask :func:`is_expr` instead of ``isinstance(x, sympy.Basic)``: while
SymPy has not been imported, no value can be one of its expressions. Code that builds
expressions calls :func:`sympy` (the module, imported on first use).
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any


def sympy() -> ModuleType:
    """The ``sympy`` module, imported on first use."""
    import sympy as sp

    return sp


def is_expr(x: Any) -> bool:
    """``x`` is a SymPy object (number or expression); False, without importing SymPy, while
    nothing has imported it."""
    sp = sys.modules.get("sympy")
    return sp is not None and isinstance(x, sp.Basic)


def has_free_symbols(x: Any) -> bool:
    """``x`` is a SymPy expression with a free symbol."""
    return is_expr(x) and bool(x.free_symbols)
