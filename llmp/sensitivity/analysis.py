"""The sensitivity of the step time to every numeric field, from the composed closed form.

:func:`operating_point` builds the step time as one SymPy expression of every field
(:func:`llmp.compose.closed_form.step_time_expr`: roofline and alpha-beta op times composed through the
pipeline schedule, overlap and optimizer) and the point where the spec puts it. :func:`analyze`
then differentiates it with SymPy: the ``Max``/``Min`` branches active at the point are kept
(:mod:`~llmp.sensitivity.branches`), each field's symbol is differentiated, and a field's total
derivative follows the spec's derivations by the chain rule (:mod:`~llmp.sensitivity.fields`).

What is held fixed: every other field that the spec does not derive from the one varied, the
structure of the step (which collectives exist, how many pipeline chunk kinds there are), and the
residual correction factors: each op's time is its closed form times the factor ``llmp predict``
applies at the point (the same store, chosen the same way), so the step time at the point is
predict's and the derivatives are predict's wherever no residual tree changes its leaf.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import sympy as sp

from llmp.analytic.correction import Residuals
from llmp.analytic.symbolic import SymbolicCost, cost
from llmp.compose import predict
from llmp.compose.closed_form import step_time_expr
from llmp.compose.prediction import Prediction
from llmp.compose.predictor import ROOFLINE_ONLY
from llmp.errors import SpecError
from llmp.progress import Progress, tick
from llmp.search.derived import resolution_of
from llmp.sensitivity import regimes
from llmp.sensitivity.along import Along
from llmp.sensitivity.branches import Branches
from llmp.sensitivity.closed import phase_time, pretty, specialise
from llmp.sensitivity.fields import (
    Resolve,
    canonical,
    derivations,
    free_paths,
    is_integer,
    pin,
)
from llmp.sensitivity.report import FieldSensitivity, Flip, Sensitivity
from llmp.spec import specpath
from llmp.spec.spec import Spec
from llmp.spec.symbols import symbol_for

AGREE_REL = 1e-9


@dataclass(frozen=True, kw_only=True, slots=True)
class Operating:
    """A spec's step time as an expression, and the point (every field's value) to read it at."""

    spec: Spec
    """The spec as given (free fields stay free: their derivations are read from it)."""
    pinned: Spec
    """The spec with free fields at their ``--at`` values: all numbers."""
    step: sp.Expr
    """Closed-form step time in the symbols of every numeric field."""
    cost: SymbolicCost
    point: Mapping[sp.Symbol, float]
    prediction: Prediction
    branches: Branches
    """Evaluator at the point (caches values and active branches)."""
    resolve: Resolve | None
    residuals: str
    """The residual store whose factors are held at their values at the point (or none)."""
    derivations: dict[str, tuple[dict[str, sp.Expr], bool]] = field(default_factory=dict)
    """Cache of :meth:`derived` (the spec is resolved again once per field)."""

    @property
    def local(self) -> sp.Expr:
        """The step time with the branches active at the point: smooth around it."""
        return self.branches.reduce(self.step)

    def value(self, path: str) -> float:
        return self.point[symbol_for(path)]

    def derived(self, path: str) -> tuple[dict[str, sp.Expr], bool]:
        """Fields that move with ``path`` (see :func:`~llmp.sensitivity.fields.derivations`)."""
        if path not in self.derivations:
            self.derivations[path] = derivations(self.spec, path, self.resolve)
        return self.derivations[path]

    def along(self, path: str) -> Along:
        derived, _ = self.derived(path)
        return Along(path, self.value(path), self.point, derived)


def operating_point(spec: Spec, at: Mapping[str, float] | None = None, resolve: Resolve | None = None,
                    residuals: Residuals | str | os.PathLike[str] | None = "default") -> Operating:
    """The step time of ``spec`` at its point; ``at`` gives its free fields values (path → SI).

    ``residuals`` is :func:`llmp.predict`'s argument: its factors at the point multiply each op's
    closed form, held fixed, so the closed form at the point is the prediction's step time.
    """
    pinned = pin(spec, at or {}) if free_paths(spec) else spec
    sc = cost(pinned)
    point = {s: float(v) for s, v in sc.point.items()}
    prediction = predict(pinned, residuals)
    return Operating(spec=spec, pinned=pinned, step=step_time_expr(pinned, prediction.ops), cost=sc, point=point,
                     prediction=prediction, branches=Branches(point), resolve=resolve,
                     residuals=prediction.provenance.residuals)


class _Gradient:
    """∂expr/∂symbol at the point, one SymPy derivative per symbol, computed when first asked."""

    def __init__(self, expr: sp.Expr, at: Branches) -> None:
        self._expr = expr
        self._at = at
        self._free = expr.free_symbols
        self._cache: dict[sp.Symbol, float] = {}

    def __call__(self, sym: sp.Symbol) -> float:
        if sym not in self._free:
            return 0.0
        if sym not in self._cache:
            self._cache[sym] = self._at.value(sp.diff(self._expr, sym))
        return self._cache[sym]

    def along(self, rates: Mapping[sp.Symbol, float]) -> float:
        """The directional derivative when field symbols move at ``rates`` (chain rule)."""
        return sum(self(s) * r for s, r in rates.items())


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1e-300)


def _field(op: Operating, path: str, grad: _Gradient, ties: Sequence[tuple[_Gradient, _Gradient]],
           t: float) -> FieldSensitivity:
    derived, known = op.derived(path)
    sym = symbol_for(path)
    present = set(specpath.paths(op.pinned))
    rates = {symbol_for(p): op.branches.value(sp.diff(e, sym)) for p, e in derived.items() if p in present}
    d = grad.along(rates)
    one_sided = any(not _close(a.along(rates), b.along(rates)) for a, b in ties)
    x = op.value(path)
    moves = tuple(p for p in derived if p != path and rates.get(symbol_for(p), 0.0) != 0.0)
    return FieldSensitivity(path=path, value=x, derivative=d, elasticity=x * d / t if t else 0.0,
                            integer=is_integer(path), moves=moves, derivations_known=known, one_sided=one_sided)


def derivatives(op: Operating, wrt: Sequence[str] = ()) -> tuple[FieldSensitivity, ...]:
    """dT/dx and the elasticity for each field of ``wrt`` (default: every numeric field), sorted by
    |elasticity|, fields with a zero derivative last."""
    paths = [canonical(op.pinned, w) for w in wrt] if wrt else list(specpath.paths(op.pinned))
    grad = _Gradient(op.local, op.branches)
    ties = [(_Gradient(tie.chosen, op.branches), _Gradient(tie.other, op.branches)) for tie in op.branches.ties]
    t = op.branches.value(op.local)
    return tuple(sorted((_field(op, p, grad, ties, t) for p in dict.fromkeys(paths)),
                        key=lambda f: (f.derivative == 0.0, -abs(f.elasticity))))


def analyze(op: Operating, wrt: Sequence[str] = (), *, progress: Progress | None = None) -> Sensitivity:
    """Derivatives and elasticities for ``wrt`` (default: every numeric field), regimes and flips;
    ``progress`` is told of the derivatives, then of each field searched for kinks."""
    tick(progress, 0, 1)
    fields = derivatives(op, wrt)
    t = op.branches.value(op.local)
    flip_on = regimes.merge_paths(
        regimes.flip_paths(op.cost, specpath.paths(op.pinned), float(op.pinned.cluster.nodes)),
        [canonical(op.pinned, w) for w in wrt])
    alongs = [op.along(p) for p in flip_on]
    kinks_found: list[Flip] = []
    for i, a in enumerate(alongs):
        tick(progress, i + 1, len(alongs) + 1)
        kinks_found += regimes.kinks(op.step, op.cost, op.branches, a)
    kinks = tuple(kinks_found)
    return Sensitivity(
        source=op.spec.source, step_time_s=op.prediction.step_time_s, closed_form_s=t, residuals=op.residuals,
        fields=fields,
        regimes=regimes.family_regimes(op.cost, op.branches, alongs),
        comm=regimes.comm_regimes(op.cost, op.branches, op.prediction), step=regimes.step_regime(op.prediction),
        kinks=kinks, free=_free_forms(op), notes=_notes(op, fields, t))


def sensitivity(spec: Spec, *, wrt: Sequence[str] = (), at: Mapping[str, float] | None = None,
                resolve: Resolve | None = None,
                residuals: Residuals | str | os.PathLike[str] | None = "default") -> Sensitivity:
    """Sensitivity of ``spec``'s step time (see :func:`analyze`); ``resolve`` re-resolves the spec's
    source with extra ``--set`` overrides, so derivatives follow the spec's derivations (None: the
    spec's own file, when it alone gives this spec, as ``llmp sensitivity`` does); ``residuals``
    as for :func:`llmp.predict` (their factors held at the point)."""
    return analyze(operating_point(spec, at, resolve if resolve is not None else resolution_of(spec), residuals), wrt)


def _notes(op: Operating, fields: Sequence[FieldSensitivity], t: float) -> tuple[str, ...]:
    held = ("no residual models (the bare roofline composition)" if op.residuals == ROOFLINE_ONLY else
            f"each op's residual factor ({op.residuals}) held at its value at the point, as llmp predict applies it")
    notes = [("derivatives are SymPy derivatives of the composed closed form (roofline and alpha-beta op times "
             f"through the pipeline schedule and overlap rules); {held}"),
             ("counts (layers, degrees, batch sizes, ...) are differentiated as if they were continuous; "
             "the step's structure (which collectives exist, the pipeline's chunk kinds) is held fixed")]
    if any(not f.derivations_known for f in fields):
        notes.append("some fields were varied alone: the spec's derivations from them could not be resolved")
    else:
        notes.append("a field's derivative includes the fields the spec derives from it (`moves`), as --set would")
    if abs(t / op.prediction.step_time_s - 1) > AGREE_REL:
        notes.append(f"the closed form ({t:.6g} s) differs from the simulated pipeline "
                     f"({op.prediction.step_time_s:.6g} s): uneven stages; derivatives are of the closed form")
    if any(f.one_sided for f in fields):
        notes.append("the point sits on a kink for the fields marked one-sided: their derivative is one branch's")
    return tuple(notes)


def _free_forms(op: Operating) -> dict[str, str]:
    """Closed forms of the step time in the spec's free fields, full and near the point."""
    free = free_paths(op.spec)
    if not free:
        return {}
    syms = [symbol_for(p) for p in free]
    keep = {symbol_for(p): {symbol_for(q): e for q, e in op.derived(p)[0].items()} for p in free}
    full = specialise(op.step, op.point, keep)
    near = Branches({s: op.point[s] for s in syms}).reduce(full)
    names = ", ".join(s.name for s in syms)
    out = {f"T({names})": pretty(full), f"T({names}) near the point": pretty(near)}
    for s in syms:
        out[f"dT/d{s.name} near the point"] = pretty(sp.diff(near, s))
    return out


def closed_form(spec: Spec, *, keep: Sequence[str] = (), phase: str | None = None,
                at: Mapping[str, float] | None = None, resolve: Resolve | None = None) -> sp.Expr:
    """The step time (or one phase's busy time) as an expression of the kept fields.

    Kept: ``keep`` plus the spec's free fields that ``at`` gives no value; every other field
    takes its value, fields derived from a kept one follow it. Nothing kept: every field stays
    a symbol.
    """
    free = free_paths(spec)
    unpinned = [p for p in free if p not in (at or {})]
    if unpinned:
        values = {p: symbol_for(p) for p in specpath.paths(spec)
                  if isinstance(specpath.get(spec, p), sp.Basic) and specpath.get(spec, p).free_symbols}
        base, kept = specpath.replace(spec, values), [*unpinned, *keep]
    else:
        base, kept = (pin(spec, at or {}) if free else spec), list(keep)
    try:
        sc = cost(base)
        expr = step_time_expr(base) if phase is None else phase_time(sc, phase)
    except SpecError as err:
        if not unpinned:
            raise
        raise SpecError(f"{err.message}: a free field decides the shape of the step", label="needs a value",
                        hint=f"give the free fields values, e.g. --at {unpinned[0]}=VALUE") from None
    if not kept:
        return expr
    point = {s: float(v) for s, v in sc.point.items()}
    paths = dict.fromkeys(canonical(spec, k) for k in kept)
    keepmap = {symbol_for(p): {symbol_for(q): e for q, e in derivations(spec, p, resolve)[0].items()} for p in paths}
    return specialise(expr, point, keepmap)


def symbolic_forms(spec: Spec, resolve: Resolve | None = None) -> dict[str, sp.Expr]:
    """For a spec whose free fields have no values: ``T(free)`` and its derivatives.

    Derivatives of a maximum come out with unit-step factors (1 where that branch is active).
    """
    free = free_paths(spec)
    if not free:
        raise SpecError("the spec has no free fields", label="nothing free",
                        hint="write `field = symbol` in the spec, or ask for derivatives at its point")
    full = closed_form(spec, resolve=resolve)
    out = {"T": full}
    for p in free:
        out[f"dT/d{symbol_for(p).name}"] = sp.diff(full, symbol_for(p))
    return out


def curve(op: Operating, path: str, factor: float = 4.0, n: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """``T(x)`` for ``x`` from ``value / factor`` to ``value * factor`` (closed form, counts relaxed)."""
    a = op.along(path)
    fn = sp.lambdify(a.x, a(op.step), modules="numpy")
    xs = np.geomspace(a.current / factor, a.current * factor, n) if a.current > 0 else np.linspace(0.0, 1.0, n)
    ts = np.broadcast_to(np.asarray(fn(xs), dtype=float), xs.shape)
    return xs, ts
