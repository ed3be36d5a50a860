"""Regimes of a step and where they flip.

* Op families per phase (:func:`family_regimes`): the family's calls as one aggregate roofline,
  ``C = sum w FLOPs / peak`` against ``M = sum w bytes / bandwidth`` (``w``: calls per GPU per
  step). It is compute-bound when ``C >= M``; the flip along a field solves ``C(x) = M(x)``, e.g.
  the HBM bandwidth ``peak * bytes / FLOPs`` or the micro-batch at which GEMMs turn compute-bound.
* Communication per axis (:func:`comm_regimes`): issued collective time against the exposed time
  in the prediction's breakdown.
* The step (:func:`step_regime`): which component dominates (compute, exposed communication,
  bubble, the device waiting for the host thread, ...).
* Kinks (:func:`kinks`): along a field, the nearest values where a ``Max``/``Min`` of the composed
  step time switches branch: an op's roofline side, a collective becoming hidden or exposed, a
  different pipeline stage setting the pace. Roofline kinks are named after their op.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import sympy as sp

from llmp.analytic import kernels
from llmp.analytic.kernels import Collective, Kernel
from llmp.analytic.pricing import Hardware
from llmp.analytic.symbolic import SymbolicCost
from llmp.compose.prediction import Prediction
from llmp.sensitivity.along import Along, nearest
from llmp.sensitivity.branches import KINKED, MAXIMA, MINIMA, Branches
from llmp.sensitivity.closed import op_weight
from llmp.sensitivity.report import CommRegime, FamilyRegime, Flip, StepRegime
from llmp.spec.symbols import path_for


def _sides(sc: SymbolicCost) -> list[tuple[str, str, str, sp.Expr, sp.Expr, sp.Expr, sp.Expr]]:
    """(phase, family, op name, weight, compute seconds, memory seconds, launch) per kernel op."""
    hw = Hardware.of(sc.spec)
    out = []
    for c in sc.ops:
        if not isinstance(c.op.work, Kernel):
            continue
        cost = kernels.cost(c.op.work)
        peak = hw.peak_for(c.op.work, cost.tensor_core)
        out.append((c.op.phase.value, c.op.family, c.op.name, op_weight(c.op, sc), c.flops / peak,
                    c.bytes / hw.mem_bandwidth, cost.launches * sp.sympify(hw.launch_overhead)))
    return out


def _bound(compute: float, memory: float, launch: float) -> str:
    if launch > max(compute, memory):
        return "latency"
    return "compute" if compute >= memory else "memory"


def family_regimes(sc: SymbolicCost, at: Branches, alongs: Sequence[Along]) -> tuple[FamilyRegime, ...]:
    """Each (phase, family)'s aggregate roofline at the point, and its flips along ``alongs``."""
    groups: dict[tuple[str, str], list[tuple[sp.Expr, sp.Expr, sp.Expr, sp.Expr]]] = defaultdict(list)
    for phase, family, _, w, tc, tm, launch in _sides(sc):
        groups[(phase, family)].append((w, tc, tm, launch))
    out = []
    for (phase, family), rows in groups.items():
        comp = sp.Add(*(w * tc for w, tc, _, _ in rows))
        mem = sp.Add(*(w * tm for w, _, tm, _ in rows))
        launch = sp.Add(*(w * lo for w, _, _, lo in rows))
        busy = sum(at.value(w) * (max(at.value(tc), at.value(tm)) + at.value(lo)) for w, tc, tm, lo in rows)
        c, m, lo = at.value(comp), at.value(mem), at.value(launch)
        if busy <= 0:
            continue
        flips = []
        for a in alongs:
            cx, mx = a(at.reduce(comp)), a(at.reduce(mem))
            if a.x not in (cx - mx).free_symbols:
                continue
            for r in nearest(a.roots(cx, mx), a.current, floor=a.floor):
                below, above = (a.at(r * f) for f in (1 - 1e-6, 1 + 1e-6))
                flips.append(Flip(path=a.path, at=r, current=a.current, subject=f"{phase} {family}",
                                  below=_bound(below.value(cx), below.value(mx), 0.0) + "-bound",
                                  above=_bound(above.value(cx), above.value(mx), 0.0) + "-bound"))
        out.append(FamilyRegime(phase=phase, family=family, bound=_bound(c, m, lo), busy_s=busy, compute_s=c,
                                memory_s=m, launch_s=lo, flips=tuple(flips)))
    return tuple(sorted(out, key=lambda r: -r.busy_s))


def comm_regimes(sc: SymbolicCost, at: Branches, prediction: Prediction) -> tuple[CommRegime, ...]:
    """Per parallel axis: collective seconds issued per GPU and exposed on the critical rank."""
    issued: dict[str, float] = defaultdict(float)
    for c in sc.ops:
        if isinstance(c.op.work, Collective):
            issued[c.op.category] += at.value(op_weight(c.op, sc) * c.time)
    out = []
    for axis, total in issued.items():
        exposed = float(prediction.breakdown.get(axis, 0.0))
        if total <= 0:
            continue
        frac = exposed / total
        state = "hidden" if frac <= 0.01 else ("exposed" if frac >= 0.99 else "partly hidden")
        out.append(CommRegime(axis=axis, issued_s=total, exposed_s=exposed, state=state))
    return tuple(sorted(out, key=lambda c: -c.issued_s))


def step_regime(prediction: Prediction) -> StepRegime:
    t = prediction.step_time_s
    parts = {"compute": prediction.compute_s, "recompute": prediction.recompute_s,
             "communication": prediction.exposed_comm_s, "bubble": prediction.bubble_s,
             "optimizer": prediction.optimizer_s, "host": prediction.host_s}
    shares = {k: max(v, 0.0) / t for k, v in parts.items()}
    return StepRegime(dominant=max(shares, key=lambda k: shares[k]), shares=shares)


def _active(expr: sp.Basic, at: Branches) -> list[sp.Basic]:
    """The ``Max``/``Min`` nodes of ``expr`` that its value at the point goes through: below each,
    only its active argument is followed (a GEMM's tile configurations are a ``Min`` of rooflines,
    and the kinks of a configuration not chosen are not kinks of the step)."""
    out, stack, seen = [], [expr], set()
    while stack:
        e = stack.pop()
        if e in seen or not e.args:
            continue
        seen.add(e)
        if isinstance(e, KINKED):
            out.append(e)
            values = [at.value(arg) for arg in e.args]
            stack.append(e.args[values.index(max(values) if isinstance(e, MAXIMA) else min(values))])
        else:
            stack.extend(e.args)
    return out


def _roofline_names(sc: SymbolicCost, at: Branches) -> dict[sp.Basic, tuple[str, sp.Expr, sp.Expr]]:
    """Each kernel's active roofline nodes (as they appear in the step time) → (op name, compute
    seconds, memory seconds): its ``Max`` of compute and memory (``roofline.roofline`` puts compute
    first), or the ``Min`` choosing its tile configuration (``llmp.analytic.tiles``; empty sides)."""
    names: dict[sp.Basic, tuple[str, sp.Expr, sp.Expr]] = {}
    for c in sc.ops:
        if isinstance(c.op.work, Kernel):
            for node in _active(c.time, at):
                sides = node.args if isinstance(node, MAXIMA) and len(node.args) == 2 else (sp.S.Zero, sp.S.Zero)
                names.setdefault(node, (c.op.name, sides[0], sides[1]))
    return names


NEGLIGIBLE = 1e-3
"""A composition kink is shown only when a branch's elasticity there, ``(x / T) dT/dx``, reaches this:
below it the step time does not move with the field on either side (slopes of 1e-15 s per GB/s)."""


def kinks(step: sp.Expr, sc: SymbolicCost, at: Branches, a: Along) -> tuple[Flip, ...]:
    """The nearest branch switches of the step time along ``a`` (one below, one above the point).

    Each ``Max``/``Min`` of the step time whose arguments move with the field gives equations
    ``active(x) = other(x)`` between its branches (each reduced to its own active branches at
    the point, then restricted to the field).
    """
    moving = a.symbols
    names = _roofline_names(sc, at)
    total = abs(at.value(step))
    found: list[tuple[float, sp.Basic]] = []
    for node in _active(step, at):
        if not node.free_symbols & moving:
            continue
        values = [at.value(arg) for arg in node.args]
        best = max(values) if isinstance(node, MAXIMA) else min(values)
        active = a(at.reduce(node.args[values.index(best)]))
        for arg, v in zip(node.args, values):
            if v != best:
                found += [(r, node) for r in a.roots(active, a(at.reduce(arg)))]
    out = []
    for r in nearest(sorted({r for r, _ in found}), a.current, floor=a.floor):
        node = next(n for root, n in found if root == r)
        below, above = (a.at(r * f) for f in (1 - 1e-6, 1 + 1e-6))
        if node in names and isinstance(node, MINIMA):
            nx = a(node)
            lo, hi = (_slope(nx, a, r * f) for f in (1 - 1e-6, 1 + 1e-6))
            out.append(Flip(path=a.path, at=r, current=a.current, subject=f"tile configuration of {names[node][0]}",
                            below=f"its slope {lo:.3g}", above=f"its slope {hi:.3g}"))
        elif node in names:
            name, tc, tm = names[node]
            tcx, tmx = a(tc), a(tm)
            out.append(Flip(path=a.path, at=r, current=a.current, subject=f"roofline of {name}",
                            below=_bound(below.value(tcx), below.value(tmx), 0.0) + "-bound",
                            above=_bound(above.value(tcx), above.value(tmx), 0.0) + "-bound"))
        else:
            nx = a(node)
            lo, hi = (_slope(nx, a, r * f) for f in (1 - 1e-6, 1 + 1e-6))
            if max(abs(lo), abs(hi)) * r < NEGLIGIBLE * total:
                continue  # a switch between two branches that barely move the step: no regime change
            # shown as the step's elasticity (x / T) dT/dx on each side: a unitless share
            out.append(Flip(path=a.path, at=r, current=a.current, subject="composition term (overlap or pipeline)",
                            below=f"elasticity {lo * r / total:+.3f}", above=f"elasticity {hi * r / total:+.3f}"))
    return tuple(out)


def _slope(expr: sp.Expr, a: Along, value: float) -> float:
    """d expr / dx of the branch active at ``x = value``."""
    b = a.at(value)
    return b.value(sp.diff(b.reduce(expr), a.x))


def ceiling_paths(sc: SymbolicCost) -> tuple[str, ...]:
    """The compute-rate fields the tensor-core kernels run at (a datasheet peak, or a measured
    ceiling such as ``gpu.achievable.bf16`` where the catalog has one)."""
    hw = Hardware.of(sc.spec)
    found: dict[str, None] = {}
    for c in sc.ops:
        work = c.op.work
        if isinstance(work, Kernel) and kernels.cost(work).tensor_core:
            for sym in sp.sympify(hw.peak_for(work, True)).free_symbols:
                found[path_for(sym.name)] = None
    return tuple(found)


def flip_paths(sc: SymbolicCost, paths: Sequence[str], nodes: float) -> tuple[str, ...]:
    """The fields regimes are solved along by default, those present in the spec: HBM bandwidth,
    the compute ceilings, the micro-batch and the link bandwidths."""
    wanted = ["gpu.mem_bandwidth", *ceiling_paths(sc), "train.micro_batch", "node.intra.bandwidth"]
    if nodes > 1:
        wanted.append("cluster.inter.bandwidth")
    return tuple(p for p in wanted if p in paths)


def merge_paths(*groups: Sequence[str]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for g in groups:
        seen.update(dict.fromkeys(g))
    return tuple(seen)
