"""Per-op FLOPs, bytes and seconds as closed forms in the spec's symbols.

:func:`cost` replaces every numeric field of the spec by its registry symbol (``hidden``,
``tp``, ``gpu_mem_bandwidth``, ``node_intra_bandwidth``, ...), builds the operator graph on the
symbols with the spec's own structure, and prices it. The spec's values come back as ``point``,
to substitute late (``expr.subs(point)`` for one number, :func:`~llmp.analytic.compile` for
many), so sensitivity analysis can differentiate with respect to any field.

A collective the machine's own measurements price (:mod:`~llmp.analytic.measured`) is a table, not
a formula: its closed form is NCCL's model scaled to the measurement at the spec's point, so its
value there is what ``llmp predict`` uses and its derivatives are the model's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import sympy as sp

from llmp.analytic import collectives
from llmp.analytic.graph import decompose
from llmp.analytic.kernels import Collective
from llmp.analytic.op import Op, OpGraph
from llmp.analytic.pricing import price
from llmp.analytic.shape import Structure
from llmp.analytic.structure import structure_of
from llmp.spec import specpath
from llmp.spec.spec import Spec


@dataclass(frozen=True, kw_only=True, slots=True)
class OpCost:
    """One op's cost per call, as expressions."""

    op: Op
    flops: sp.Expr
    bytes: sp.Expr
    time: sp.Expr
    """Roofline (kernels) or alpha-beta (collectives) seconds per call."""


@dataclass(frozen=True, kw_only=True, slots=True)
class SymbolicCost:
    """The operator graph on symbols, each op's closed-form cost, and the spec's point."""

    graph: OpGraph
    """Built from the symbolized spec (dims are expressions)."""
    ops: tuple[OpCost, ...]
    point: Mapping[sp.Symbol, Any]
    """Symbol → the spec's value."""
    spec: Spec
    """The symbolized spec the graph was built from."""


def cost(spec: Spec) -> SymbolicCost:
    """Closed-form per-op costs of ``spec`` (numeric fields become symbols; see ``point``)."""
    structure = structure_of(spec)
    sym_spec, point = specpath.symbolize(spec)
    graph = decompose(sym_spec, structure)
    prices = price(graph, sym_spec)
    scale = _measured_scale(spec, structure, len(graph.ops))
    ops = tuple(OpCost(op=op, flops=sp.sympify(f), bytes=sp.sympify(b), time=sp.sympify(t) * k)
                for op, f, b, t, k in zip(graph.ops, prices.flops, prices.bytes, prices.time, scale))
    return SymbolicCost(graph=graph, ops=ops, point=point, spec=sym_spec)


def _measured_scale(spec: Spec, structure: Structure, n: int) -> list[Any]:
    """Per op: measured / model seconds at the point for a collective a table serves, else 1."""
    graph = decompose(spec, structure)
    prices = price(graph, spec)
    if not any(s is not None and s.seconds is not None for s in prices.served):
        return [1] * n
    assert len(graph.ops) == n, "the numeric and the symbolic graph have the same ops"
    links = collectives.Links.of(spec)
    return [1 if s is None or s.seconds is None or not isinstance(op.work, Collective)
            else sp.Float(s.seconds) / sp.Float(float(collectives.time(op.work, links)))
            for op, s in zip(graph.ops, prices.served)]
