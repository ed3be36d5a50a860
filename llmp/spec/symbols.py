"""The one registry of SymPy symbols for spec fields: name ↔ path ↔ assumptions.

A field left free in a spec (``hidden = symbol``) and a formula in ``llmp.analytic`` that
builds ``symbol_for("model.hidden")`` must be the *same* SymPy symbol, and SymPy symbols are
equal only when name and assumptions both match. So both go through :func:`symbol_for`.

Naming: model, moe, train and parallel fields use the bare field name (``hidden``, ``top_k``,
``micro_batch``, ``tp``), the names formulas are written in; hardware fields use the whole path
with underscores (``gpu_mem_bandwidth``, ``gpu_flops_bf16``, ``node_intra_bandwidth``,
``cluster_inter_bandwidth``, ``cluster_nodes``) because a bare ``bandwidth`` would be ambiguous.

Assumptions come from the schema: counts are ``integer=True, positive=True`` (or
``nonnegative=True`` where 0 is allowed, e.g. ``shared_experts``); rates, sizes and times are
``positive=True`` reals (``nonnegative=True`` for latencies and fractions; a link's
``efficiency`` is positive).
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

from llmp.errors import SpecError
from llmp.spec import schema
from llmp.spec.schema import Bound, FieldDef, Kind
from llmp.sym import sympy

if TYPE_CHECKING:  # the registry imports SymPy on first use: a numeric spec never needs it
    import sympy as sp


def symbol_name(path: str) -> str:
    """``model.hidden`` → ``hidden``; ``gpu.flops.bf16`` → ``gpu_flops_bf16``."""
    section = path.split(".", 1)[0]
    if section in schema.HARDWARE:
        return path.replace(".", "_")
    return path.rsplit(".", 1)[-1]


def assumptions(fdef: FieldDef) -> dict[str, bool]:
    """SymPy assumptions for a numeric field."""
    out: dict[str, bool] = {"integer": True} if fdef.kind is Kind.COUNT else {"real": True}
    if fdef.bound in (Bound.POSITIVE, Bound.EFFICIENCY):
        out["positive"] = True
    else:
        out["nonnegative"] = True
    return out


@functools.cache
def registry() -> Mapping[str, tuple[str, sp.Symbol]]:
    """Symbol name → (path, symbol) for every numeric field of a spec."""
    table: dict[str, tuple[str, sp.Symbol]] = {}
    for path, fdef in schema.paths().items():
        if not fdef.numeric:
            continue
        name = symbol_name(path)
        assert name not in table, f"two spec paths map to the symbol {name!r}"
        table[name] = (path, sympy().Symbol(name, **assumptions(fdef)))
    return MappingProxyType(table)


def symbol_for(path: str) -> sp.Symbol:
    """The SymPy symbol of a numeric spec field, e.g. ``symbol_for("model.hidden")``."""
    fdef = schema.field_at(path)
    if fdef is None or not fdef.numeric:
        numeric = [p for p, f in schema.paths().items() if f.numeric]
        close = difflib.get_close_matches(path, numeric, n=1)
        raise SpecError(f"no numeric spec field {path!r} to make a symbol of",
                        hint=f"did you mean {close[0]!r}?" if close else None)
    return registry()[symbol_name(path)][1]


def path_for(name: str) -> str:
    """The spec path of a registry symbol name: ``gpu_mem_bandwidth`` → ``gpu.mem_bandwidth``."""
    try:
        return registry()[name][0]
    except KeyError:
        close = difflib.get_close_matches(name, list(registry()), n=1)
        raise SpecError(f"no spec field has the symbol {name!r}",
                        hint=f"did you mean {close[0]!r}?" if close else None) from None


def symbols() -> Mapping[str, sp.Symbol]:
    """Name → symbol for every numeric spec field (``symbols()["tp"]``)."""
    return MappingProxyType({name: sym for name, (_, sym) in registry().items()})
