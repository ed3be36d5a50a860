"""Search configurations: sweep, drop what cannot run (with reasons), rank, and find the Pareto front.

    import llmp
    from llmp.search import load, search
    spec, resolve = load("examples/sweep_llama3_8b.llmp", vary=["train.recompute=none,full"])
    result = search(spec, resolve=resolve)
    result.ranked[0].config, result.infeasible, result.pareto
    search(llmp.load("examples/llama3_70b_dgx_h100.llmp"), gpus=[512])   # every layout on 512 GPUs

Modules: ``space`` (axes, ``--vary``, layouts, the product grid), ``engine`` (loading,
feasibility, evaluation), ``derived`` (the fields a spec derives from varied ones), ``bound`` and
``prune`` (lower bounds on the step time and the branch and bound of layout searches), ``rank``
(objectives, ordering, Pareto front), ``report`` (typed results).
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from llmp.callable_package import make_callable
from llmp.compose import predict
from llmp.compose.calibration_file import as_calibration
from llmp.errors import InputError, LlmpError
from llmp.search import engine, prune, rank
from llmp.search.derived import resolution_of
from llmp.search.engine import Progress, Resolve, load
from llmp.search.rank import Objective
from llmp.search.report import Candidate, SearchResult
from llmp.search.space import Grid, row_spec
from llmp.spec import specpath
from llmp.spec.spec import Spec

__all__ = ["Candidate", "Objective", "SearchResult", "load", "search"]

T = TypeVar("T")


def _collector_paused(fn: Callable[..., T]) -> Callable[..., T]:
    """``fn`` with Python's cyclic garbage collector paused while it runs (as it was after). A
    search builds and drops millions of small acyclic objects (specs, ops, kernels); the
    collector's passes over everything alive find nothing to free and cost about a tenth of it."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> T:
        if not gc.isenabled():
            return fn(*args, **kwargs)
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            gc.enable()

    return run


@_collector_paused
def search(spec: Spec, *, gpus: Sequence[int] = (), layouts: bool = False,
           objective: Objective | str = Objective.STEP_TIME, max_memory: float | None = None,
           gpu_hour_price: float = 1.0, top: int | None = 10, exhaustive: bool = False,
           progress: Progress | None = None, calibration: Any = None, resolve: Resolve | None = None,
           residuals: Any = "default") -> SearchResult:
    """Search ``spec``'s declared sweep lists and, with ``gpus`` (or ``layouts``: the spec's own
    GPU count), every layout on that many GPUs.

    ``max_memory``: bytes per GPU a configuration may use (None: each GPU's capacity). ``top``:
    how many ranked configurations to return (None: all feasible ones). ``calibration``: an
    ``llmp calibrate`` file of the spec's GPU and stack, applied to every configuration.
    ``resolve``: from :func:`load`, to derive again the fields the spec computes from varied
    ones (``dp = 64 / tp``); without it, the spec's own file is resolved again when it gives this
    spec (``llmp.search(llmp.load(path))`` then answers as ``llmp search path``), else derived
    fields keep the spec's values.

    A layout search with a ``top`` is a branch and bound (:mod:`llmp.search.prune`): it composes
    only the layouts whose lower bound can still reach the ranking or the Pareto front, and
    returns what the exhaustive search (``exhaustive=True``, or ``top=None``) returns for both.

    Every configuration is priced by the roofline composition (no residual models: the same
    numbers for a thousand layouts in a second). The ``top`` shown are then predicted as
    ``llmp predict`` predicts them, with ``residuals`` (``"default"``: the shipped store of the
    spec's device; None: none), and ordered by that prediction, so the step time a row shows is the
    one its reproduce command prints (:attr:`Candidate.predicted_step_time_s`).
    """
    start = time.perf_counter()
    objective = Objective(objective)
    if not (math.isfinite(gpu_hour_price) and gpu_hour_price > 0):
        raise InputError(f"--gpu-hour-price must be positive, got {gpu_hour_price:g}")
    if resolve is None:
        resolve = resolution_of(spec)
    built = engine.build(spec, gpus, layouts, resolve)
    grid, spec = built.grid, built.spec
    calibration, notes = _calibrated(spec, calibration, built.notes)
    gpus_col = _world(spec, grid)
    varies_gpus = len(np.unique(gpus_col[grid.reasons() == ""])) > 1
    x_name = "gpus" if varies_gpus else "cost"
    c = _compose(spec, grid, bounded=not (exhaustive or top is None or not (gpus or layouts)), objective=objective,
                 top=top, max_memory=max_memory, gpus=gpus_col, gpu_hour_price=gpu_hour_price, pareto_x=x_name,
                 calibration=calibration, progress=progress)
    r = _rank(spec, grid, c, gpus_col, varies_gpus, objective=objective, top=top, max_memory=max_memory,
              gpu_hour_price=gpu_hour_price)
    ranked = [r.table.candidate(int(i)) for i in r.shown]
    store = ""
    if residuals is not None and ranked:
        numeric = frozenset(specpath.paths(spec))
        ranked, store = _by_prediction(spec, grid, r.shown, numeric, ranked, objective, residuals, calibration)
    dropped = Counter(str(x) for x in c.reasons[(c.reasons != "") & ~c.pruned])
    return SearchResult(
        source=spec.source, objective=objective, axes=tuple((a.path, a.values) for a in built.axes),
        columns=_shown(grid), size=grid.size,
        feasible=len(r.good), groups=c.groups, pruned=int(np.count_nonzero(c.pruned)), infeasible=dict(dropped),
        ranked=tuple(ranked), ranked_by=store,
        pareto=tuple(r.table.candidate(int(i)) for i in r.front), pareto_axes=(x_name, "step_time_s"),
        seconds=time.perf_counter() - start, memory_limit_bytes=max_memory,
        gpu_hour_price=gpu_hour_price, notes=notes)


def _calibrated(spec: Spec, calibration: Any, notes: tuple[str, ...]) -> tuple[Any, tuple[str, ...]]:
    """The calibration read and checked against ``spec`` (None: none), and the notes that say so."""
    if calibration is not None:
        calibration = as_calibration(calibration)
        calibration.check(spec)
        notes += (f"calibrated by {calibration.id} ({calibration.rows} measured steps of {calibration.stack} on "
                  f"{calibration.gpu}, roofline basis)",)
    return calibration, notes


@dataclass(frozen=True, kw_only=True, slots=True)
class _Composed:
    """The grid as composed: its columns (NaN where not composed), why each configuration cannot
    run, which the branch and bound left out, and how many were composed."""

    values: dict[str, np.ndarray]
    reasons: np.ndarray
    pruned: np.ndarray
    groups: int


def _compose(spec: Spec, grid: Grid, *, bounded: bool, objective: Objective, top: int | None,
             max_memory: float | None, gpus: np.ndarray, gpu_hour_price: float, pareto_x: str,
             calibration: Any, progress: Progress | None) -> _Composed:
    """Every runnable configuration composed, or with ``bounded`` only those that can reach the
    ranking or the Pareto front (:mod:`llmp.search.prune`)."""
    if not bounded:
        reasons = engine.feasibility(spec, grid, max_memory)
        runnable = np.flatnonzero(reasons == "")
        values, groups = engine.evaluate_grid(spec, grid, runnable, progress, calibration)
        failed = runnable[~values["feasible"][runnable]]
        reasons[failed] = "infeasible layout"
        return _Composed(values=values, reasons=reasons, pruned=np.zeros(grid.size, dtype=bool), groups=groups)
    assert top is not None
    found = prune.search(spec, grid, objective=objective, top=top, max_memory=max_memory, gpus=gpus,
                         tokens=_column(spec, grid, "train.global_batch") * _column(spec, grid, "model.seq_len"),
                         gpu_hour_price=gpu_hour_price, pareto_x=pareto_x, calibration=calibration,
                         progress=progress)
    return _Composed(values=found.values, reasons=found.reasons, pruned=found.pruned,
                     groups=int(np.count_nonzero(~np.isnan(found.values["step_time_s"]))))


@dataclass(frozen=True, kw_only=True, slots=True)
class _Table:
    """The composed columns a candidate is read from."""

    grid: Grid
    values: dict[str, np.ndarray]
    gpus: np.ndarray
    cost: np.ndarray

    def candidate(self, i: int, predicted: float | None = None) -> Candidate:
        values = self.values
        config = {p: _plain(self.grid.columns[p][i]) for p in self.grid.columns}
        return Candidate(config=config, step_time_s=float(values["step_time_s"][i]),
                         tokens_per_s=float(values["tokens_per_s"][i]), mfu=float(values["mfu"][i]),
                         memory_per_gpu_bytes=float(values["memory_per_gpu_bytes"][i]), gpus=int(self.gpus[i]),
                         cost=float(self.cost[i]), predicted_step_time_s=predicted)


@dataclass(frozen=True, kw_only=True, slots=True)
class _Ranking:
    """The configurations that fit, the ``top`` of them in order, and the Pareto front."""

    table: _Table
    good: np.ndarray
    shown: np.ndarray
    front: np.ndarray


def _rank(spec: Spec, grid: Grid, c: _Composed, gpus: np.ndarray, varies_gpus: bool, *, objective: Objective,
          top: int | None, max_memory: float | None, gpu_hour_price: float) -> _Ranking:
    """The composed configurations that fit in memory (the rest marked out of memory in
    ``c.reasons``), ranked by ``objective``, and their front of step time against the GPUs (when
    they vary) or the cost."""
    values = c.values
    mem = values["memory_per_gpu_bytes"]
    limit = engine.memory_limit(spec, grid, max_memory)
    ok = values["feasible"] & (mem <= limit)
    engine.mark_oom(c.reasons, values["feasible"] & ~ok, limit)
    cost = rank.cost(gpus, values["tokens_per_s"], gpu_hour_price)
    objective_values = {Objective.STEP_TIME: values["step_time_s"], Objective.TOKENS_PER_S: values["tokens_per_s"],
                        Objective.COST: cost}[objective]
    good = np.flatnonzero(ok)
    order = good[rank.order(objective_values[good], values["step_time_s"][good], objective)]
    shown = order if top is None else order[:top]
    x = gpus if varies_gpus else cost
    front = good[rank.pareto(x[good], values["step_time_s"][good])] if len(good) else good
    return _Ranking(table=_Table(grid=grid, values=values, gpus=gpus, cost=cost), good=good, shown=shown, front=front)


def _by_prediction(spec: Spec, grid: Grid, rows: np.ndarray, numeric: frozenset[str], ranked: list[Candidate],
                   objective: Objective, residuals: Any, calibration: Any) -> tuple[list[Candidate], str]:
    """The ranked candidates predicted as ``llmp predict`` predicts them (residual models applied)
    and ordered by that prediction, and the residual store's id ("" when none applied)."""
    out, store = [], ""
    for i, c in zip(rows, ranked):
        try:
            pred = predict(row_spec(spec, grid.columns, int(i), None, numeric), residuals, calibration=calibration)
        except LlmpError:
            out.append(c)
            continue
        store = pred.provenance.residuals
        low, high = pred.band
        out.append(dataclasses.replace(c, predicted_step_time_s=float(pred.step_time_s),
                                       band_s=(float(low), float(high))))
    out.sort(key=lambda c: c.objective_value(objective))
    return out, store


def _world(spec: Spec, grid: Grid) -> np.ndarray:
    """GPUs of each configuration: dp x tp x pp x cp (the spec's value where a degree is not varied)."""
    world = np.ones(grid.size)
    for path in ("parallel.dp", "parallel.tp", "parallel.pp", "parallel.cp"):
        world = world * (grid.columns[path].astype(float) if path in grid.columns else float(specpath.get(spec, path)))
    return np.rint(world).astype(int)


def _column(spec: Spec, grid: Grid, path: str) -> np.ndarray:
    """Field ``path`` of every configuration, as floats."""
    if path in grid.columns:
        return grid.columns[path].astype(float)
    return np.full(grid.size, float(specpath.get(spec, path)))


def _shown(grid: Grid) -> tuple[str, ...]:
    """Varied fields with more than one value, then derived fields that change across the grid."""
    def varies(path: str) -> bool:
        col = grid.columns[path]
        return len(np.unique(col.astype(str) if col.dtype == object else col)) > 1

    return tuple(p for p in dict.fromkeys([*grid.varied, *grid.columns]) if varies(p))


def _plain(v: object) -> object:
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, float, np.integer, np.floating)):
        f = float(v)
        return int(f) if f.is_integer() else f
    return v


make_callable(__name__, search)  # llmp.search(...) is this function, whichever was imported first
