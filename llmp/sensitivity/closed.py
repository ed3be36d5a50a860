"""Closed forms for display: the step time, one phase's busy time, and their LaTeX.

The step time is :func:`llmp.compose.closed_form.step_time_expr` (the composed pipeline, overlap and
optimizer). A *phase* (``fwd``, ``bwd_act``, ``bwd_w``, ``optim``, ``comm``) has no time of its
own in an overlapped, pipelined step, so its closed form is its *busy* time: the seconds one GPU
spends in the phase's ops per step, averaged over the pipeline ranks, before any overlap
(collectives counted in full). :func:`op_weight` is how often an op runs per GPU per step.

``keep`` names the fields to leave symbolic; every other field is replaced by its value, so
``--latex --wrt model.hidden`` prints ``T(hidden)``. Fields derived from a kept field
(``head_dim = hidden / heads``) are written in terms of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sympy as sp

from llmp.analytic.op import Op, Phase, RankKind, Scope
from llmp.analytic.symbolic import SymbolicCost
from llmp.errors import SpecError

PHASES = tuple(p.value for p in Phase)


def op_weight(op: Op, sc: SymbolicCost) -> Any:
    """Calls of ``op`` per GPU per step, averaged over pipeline ranks (symbolic in the spec's fields).

    Per microbatch a rank runs ``layers / pp`` layers; the first and last chunks and the
    ``pp vp - 1`` chunk boundaries occur once per microbatch in the whole pipeline; once-per-step
    rank work runs on each of its ranks (with an even split, the middle ranks are ``pp`` less the
    ranks of the other kinds, so ``pp`` may stay a symbol).
    """
    spec = sc.spec
    m, pp, vp, layers = spec.microbatches, spec.parallel.pp, spec.parallel.vp, spec.model.layers
    if op.scope is Scope.LAYER:
        kinds = sc.graph.kind_layers
        reps = m * (layers if len(kinds) == 1 else kinds[op.kind]) / pp
    elif op.scope in (Scope.FIRST, Scope.LAST):
        reps = m / pp
    elif op.scope is Scope.BOUNDARY:
        reps = m * (pp * vp - 1) / pp
    else:
        st = sc.graph.structure
        middle = op.rank_kind is RankKind.MIDDLE and st.even
        reps = (pp - (st.pp - len(op.ranks)) if middle else len(op.ranks)) / pp
    return op.count * reps


def phase_time(sc: SymbolicCost, phase: str) -> sp.Expr:
    """Busy seconds per GPU per step in ``phase`` (see the module docstring)."""
    if phase not in PHASES:
        raise SpecError(f"unknown phase {phase!r}", label="bad --phase", hint=f"phases: {', '.join(PHASES)}")
    terms = [op_weight(c.op, sc) * c.time for c in sc.ops if c.op.phase.value == phase]
    return sp.Add(*terms)


def specialise(expr: sp.Expr, point: Mapping[sp.Symbol, float], keep: Mapping[sp.Symbol, Mapping[sp.Symbol, sp.Expr]]
               ) -> sp.Expr:
    """``expr`` with every symbol at its value except the kept ones.

    ``keep`` maps a kept symbol to its derivations (field symbol → expression of the kept
    symbol); those fields follow it instead of taking their values.
    """
    follow: dict[sp.Symbol, sp.Expr] = {}
    for derived in keep.values():
        follow.update({s: e for s, e in derived.items() if s not in keep})
    values = {s: number(v) for s, v in point.items() if s not in keep}
    return expr.xreplace(follow).xreplace(values)


def number(v: float) -> sp.Expr:
    """A SymPy number for a field value: an Integer when whole, else a Float."""
    return sp.Integer(int(v)) if float(v).is_integer() and abs(v) < 2**63 else sp.Float(v)


def latex(expr: sp.Expr, name: str = "T") -> str:
    """LaTeX of ``expr``, with repeated subexpressions pulled out (``x_0 = ...``) when that shortens it."""
    shown = rounded(expr)
    names = {s: r"\mathit{" + s.name.replace("_", r"\_") + "}" for s in shown.free_symbols}
    reps, (body,) = sp.cse(shown, symbols=sp.numbered_symbols("x_"))

    def tex(e: sp.Expr) -> str:
        return sp.latex(e, symbol_names=names)

    if not reps:
        return f"{name} = {tex(body)}"
    lines = [f"{sp.latex(s)} &= {tex(e)}" for s, e in reps]
    lines.append(f"{name} &= {tex(body)}")
    return "\\begin{aligned}\n" + " \\\\\n".join(lines) + "\n\\end{aligned}"


def rounded(expr: sp.Expr, digits: int = 4) -> sp.Expr:
    """``expr`` with its non-integer constants as ``digits``-digit floats (inside functions too)."""
    consts = {c: sp.Float(c, digits) for c in expr.atoms(sp.Rational, sp.Float) if not c.is_Integer}
    return expr.xreplace(consts)


def pretty(expr: sp.Expr) -> str:
    """A one-line text form with 4 significant digits."""
    return sp.sstr(rounded(expr))
