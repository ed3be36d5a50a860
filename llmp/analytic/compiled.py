"""SymPy expressions compiled to numpy functions: once per expression, lazily, cached.

``compile(exprs)`` lambdifies a tuple of expressions with ``modules="numpy"`` and ``cse=True``.
The argument order is derived, never typed: spec symbols in the order of the symbol registry
(``llmp.spec.symbols``), then any other symbols by name. The result is called with a struct of
arrays (``{symbol or name: value}``), so one call evaluates a whole sweep; scalars broadcast
against arrays (``Max``/``Min`` print as ``numpy.maximum``/``minimum`` reductions).

:func:`kernel_evaluator` and :func:`collective_evaluator` compile the cost of one *kind* of op
(a kernel family with its dtype, pass, variant and flags; a collective kind on a link tier) as a
function of its dims and the hardware numbers, from the very formulas of
:mod:`llmp.analytic.kernels` and :mod:`llmp.analytic.collectives`. A sweep then prices every op
of a kind in one call.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy as sp

from llmp.analytic import collectives, kernels, roofline
from llmp.analytic.kernels import DIMS, Collective, CollectiveKind, Kernel, Tier
from llmp.errors import SpecError
from llmp.hardware.spec import Microarch
from llmp.spec.symbols import registry


@dataclass(frozen=True, slots=True)
class CompiledCost:
    """Compiled expressions: ``self(values)`` returns one numpy array per expression."""

    args: tuple[sp.Symbol, ...]
    exprs: tuple[sp.Expr, ...]
    fn: Callable[..., Any]

    def __call__(self, values: Mapping[Any, Any]) -> tuple[np.ndarray, ...]:
        inputs = []
        for sym in self.args:
            if sym in values:
                inputs.append(values[sym])
            elif sym.name in values:
                inputs.append(values[sym.name])
            else:
                raise SpecError(f"no value for the symbol {sym.name!r}",
                                hint="give every free symbol a value (e.g. --set)")
        out = self.fn(*inputs)
        return tuple(np.asarray(x, dtype=float) for x in out)


def _order(symbols: set[sp.Symbol]) -> tuple[sp.Symbol, ...]:
    rank = {name: i for i, name in enumerate(registry())}
    return tuple(sorted(symbols, key=lambda s: (rank.get(s.name, len(rank)), s.name)))


@functools.cache
def _compile(exprs: tuple[sp.Expr, ...], args: tuple[sp.Symbol, ...]) -> CompiledCost:
    fn = sp.lambdify(args, list(exprs), modules="numpy", cse=True)
    return CompiledCost(args=args, exprs=exprs, fn=fn)


# Shadows the builtin on purpose: `llmp.analytic.compile` is the API's name for this stage.
def compile(exprs: Sequence[Any], args: Sequence[sp.Symbol] | None = None) -> CompiledCost:
    """Lambdify ``exprs`` (cached on the expressions and the argument tuple)."""
    exprs_t = tuple(sp.sympify(e) for e in exprs)
    if args is None:
        free: set[sp.Symbol] = set().union(*(e.free_symbols for e in exprs_t)) if exprs_t else set()
        args_t = _order(free)
    else:
        args_t = tuple(args)
    return _compile(exprs_t, args_t)


# Hardware arguments of a compiled kernel cost, after its dims.
PEAK, MEM_BW, LAUNCH, SMS = sp.symbols("peak mem_bandwidth launch_overhead sms", positive=True)
_FLAGS = frozenset({"causal", "flash", "rms"})


def kernel_key(k: Kernel) -> tuple[Any, ...]:
    """What fixes the shape of a kernel's cost formula: family, dtype, pass, variant, flags."""
    flags = tuple((n, bool(v)) for n, v in k.dims if n in _FLAGS)
    return (k.family, k.dtype, k.pass_, k.variant, flags)


def numeric_dims(k: Kernel) -> tuple[Any, ...]:
    return tuple(v for n, v in k.dims if n not in _FLAGS)


@functools.cache
def kernel_evaluator(key: tuple[Any, ...], microarch: Microarch | None = None) -> tuple[CompiledCost, bool]:
    """(flops, bytes, time) of one kernel kind as a function of (dims..., peak, bw, launch, sms),
    its tiles quantized as on ``microarch`` (None: the plain roofline, ``sms`` unused).

    Also returns whether the kind runs on tensor cores (which peak to pass).
    """
    family, dtype, pass_, variant, flags = key
    flag = dict(flags)
    dims = {n: flag[n] if n in flag else sp.Symbol(f"dim_{n}", positive=True) for n in DIMS[family]}
    k = Kernel.make(family, dtype, pass_, variant, **dims)
    c = kernels.cost(k)
    t = roofline.roofline(k, c, peak=PEAK, mem_bandwidth=MEM_BW, launch_overhead=LAUNCH,
                          grid=roofline.Grid(sms=SMS, microarch=microarch))
    args = (*(v for v in dims.values() if isinstance(v, sp.Symbol)), PEAK, MEM_BW, LAUNCH, SMS)
    return compile((c.flops, c.bytes, t), args), c.tensor_core


LINK_ARGS = ("gpus_per_node", "intra_bandwidth", "intra_latency", "inter_bandwidth", "inter_latency",
             "intra_peer_bandwidth", "host_bandwidth", "host_memory_bandwidth", "host_latency", "nvls_efficiency")
"""The :class:`~llmp.analytic.collectives.Links` fields a compiled collective cost takes, in order."""
_COLL = sp.symbols("bytes group ranks_per_node", positive=True)


@functools.cache
def collective_evaluator(kind: CollectiveKind, tier: Tier, links_kind: tuple[Any, ...]) -> CompiledCost:
    """Seconds of one collective kind on one tier as a function of (bytes, group, ranks_per_node,
    then the ``LINK_ARGS``), for links of ``links_kind`` (:attr:`~llmp.analytic.collectives.Links.kind`:
    NCCL's table row, the transports, NVLS and CollNet, and whether the node is a mesh, in which case
    ``intra_peer_bandwidth`` limits a group; otherwise that argument is unused)."""
    size, n, r = _COLL
    arch, intra, inter, nvls, collnet, mesh = links_kind
    symbols = {name: sp.Symbol(name, positive=True) for name in LINK_ARGS}
    links = collectives.Links(**{**symbols, "intra_peer_bandwidth": symbols["intra_peer_bandwidth"] if mesh else None},
                              arch=arch, intra_transport=intra, inter_transport=inter, nvls=nvls, collnet=collnet)
    t = collectives.time(Collective(kind=kind, bytes=size, group=n, ranks_per_node=r, tier=tier), links)
    return compile((t,), (size, n, r, *symbols.values()))
