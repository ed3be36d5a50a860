"""Run a search: build the grid, drop what cannot run (with reasons), evaluate the rest vectorised.

1. :func:`build` resolves the spec with each ``--vary`` as a sweep (so values go through the
   resolver's unit and name checks), takes the declared sweeps and the layout axes as a grid, and
   computes the fields the spec derives from varied ones (``dp = 64 / tp``, ``ffn_hidden =
   4 * hidden``) with the resolver's own expressions (:mod:`llmp.search.derived`).
2. :func:`feasibility` runs the spec's cross-field checks and the step's structure checks once
   per group of configurations that share what those checks read, and names the reason of each
   dropped configuration.
3. :func:`evaluate_grid` calls :func:`llmp.compose.evaluate` on the feasible rows in chunks of
   whole structural groups (each group is one vectorised evaluation), reporting progress;
   :func:`evaluate_rows` composes chosen rows one at a time as ``llmp.predict`` does (without
   residual models), for the branch-and-bound of :mod:`llmp.search.prune`.
"""

from __future__ import annotations

import functools
import itertools
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from llmp.analytic.graph import decompose
from llmp.analytic.op import OpGraph
from llmp.analytic.pricing import Hardware, price
from llmp.analytic.schedules import entry
from llmp.analytic.shape import Structure
from llmp.analytic.split import split
from llmp.analytic.structure import structure_of
from llmp.compose import evaluate, reuse
from llmp.compose.memory import Memory, memory
from llmp.compose.overlap import OverlapRules
from llmp.compose.posterior import scaled
from llmp.compose.predictor import ROOFLINE_ONLY, model_flops_per_token
from llmp.compose.schedule import plan
from llmp.compose.step import compose, schedule_plan
from llmp.compose.sweep import structural
from llmp.dsl import checks
from llmp.dsl.overrides import SET_FILE
from llmp.errors import InfeasibleError, InputError, LlmpError
from llmp.search import derived, space
from llmp.search.bound import layout_bound
from llmp.search.derived import Resolution
from llmp.search.space import Grid
from llmp.spec import specpath
from llmp.spec.spec import Spec
from llmp.sym import has_free_symbols
from llmp.units import format_bytes

Progress = Callable[[int, int], None]
"""Called with (configurations evaluated, total) as the evaluation advances."""

HARDWARE = ("gpu.", "node.", "cluster.")
CHUNKS = 40
"""Evaluation calls per search (at least one structural group each), for the progress bar."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Built:
    """The base spec and the grid of configurations to evaluate on it."""

    spec: Spec
    grid: Grid
    axes: tuple[space.Axis, ...]
    notes: tuple[str, ...]


Resolve = Callable[[Sequence[str]], Spec]
"""Resolves the searched spec again with more ``--set`` overrides (to re-derive fields)."""


def load(source: str | os.PathLike[str], sets: Sequence[str] = (), vary: Sequence[str] = ()) -> tuple[Spec, Resolve]:
    """The spec at ``source`` with ``--set`` ``sets`` and each ``--vary`` as a declared sweep list
    (so its values go through the resolver's unit and name checks), and the
    :class:`~llmp.search.derived.Resolution` that resolves it again with more overrides, which
    :func:`build` uses to re-derive the fields computed from varied ones."""
    parsed = [space.parse_vary(v) for v in vary]
    resolve = Resolution(source, [*sets, *(space.sweep_override(p, values) for p, values in parsed)])
    try:
        spec = resolve(())
    except LlmpError as err:
        line = err.span.line - len(sets) if err.span is not None and err.span.file == SET_FILE else 0
        if not 0 < line <= len(vary):
            raise
        raise InputError(f"--vary {vary[line - 1]}: {err.message}", hint=err.hint) from None
    return spec, resolve


def build(spec: Spec, gpus: Sequence[int], layouts: bool, resolve: Resolve | None = None) -> Built:
    """The grid of ``spec``: its declared sweeps and, with ``gpus`` or ``layouts``, every layout.
    With ``resolve`` (from :func:`load`), fields the spec derives from varied ones are derived
    again for each configuration; without it they keep the spec's values."""
    declared = space.declared_axes(spec)
    if not (layouts or gpus):
        if not declared:
            raise InputError("nothing to search: the spec declares no sweep lists (and no --vary was given)",
                             hint="add --vary parallel.tp=1,2,4,8, or --gpus N to try every layout")
        grid = space.product(declared)
        axes = tuple(declared)
    else:
        if any(a.path == "parallel.dp" for a in declared):
            raise InputError("parallel.dp is derived from the GPU count when searching layouts",
                             hint="drop the dp sweep, or search without --gpus/--layouts")
        counts = list(gpus) or [int(spec.cluster.nodes * spec.cluster.node.gpus_per_node)]
        grids, axes_seen = [], []
        for n in counts:
            layout, fixed = space.layout_axes(spec, n)
            merged = space.merge_axes(layout, declared)
            grids.append(pipelines(spec, space.layout_columns(spec, space.product(merged, fixed), n)))
            axes_seen += merged
        grid = space.concat(grids)
        axes = tuple(space.merge_axes(axes_seen))
    grid, notes = derived.derive(resolve, spec, grid) if resolve is not None else (grid, [])
    free = [p for p in specpath.paths(spec) if p not in grid.columns
            and has_free_symbols(specpath.get(spec, p))]
    if free:
        raise InputError(f"the spec leaves {', '.join(free)} free; a search needs numbers",
                         hint=f"vary it (--vary {free[0]}=V1,V2) or pin it (--set {free[0]}=VALUE)")
    return Built(spec=spec, grid=grid, axes=axes, notes=tuple(notes))


SPLIT_FIELDS = ("parallel.pp", "parallel.vp", "parallel.schedule", "model.layers", "parallel.first_stage_layers",
                "parallel.last_stage_layers", "parallel.account_for_embedding", "parallel.account_for_loss")
"""What the schedule's pipeline requirements and the layer split read (without DeepSpeed's
``partition``, which also weighs the layers' parameters)."""


def pipelines(spec: Spec, grid: Grid) -> Grid:
    """Leave out the layouts whose pipeline cannot run: the schedule's requirements of pp and vp
    and the layer split, the rulebook's own functions (:mod:`llmp.analytic.rules`), evaluated
    once per combination of :data:`SPLIT_FIELDS` instead of once per layout (a layout search has
    thousands of layouts and a few dozen pipelines)."""
    if spec.parallel.partition:
        return grid
    dropped = grid.reasons()
    numeric = frozenset(specpath.paths(spec))
    paths = [p for p in SPLIT_FIELDS if p in grid.columns]
    for rows in space.groups(grid, paths, np.flatnonzero(dropped == "")):
        s = space.row_spec(spec, grid.columns, int(rows[0]), paths, numeric)
        unmet = entry(s.parallel.schedule).requires(int(s.parallel.pp), int(s.parallel.vp), None, None)
        try:
            if unmet:
                raise InfeasibleError(unmet, label="bad schedule")
            split(s)
        except LlmpError as err:
            dropped[rows] = reason(err)
    return Grid(columns=grid.columns, varied=grid.varied, size=grid.size, dropped=dropped)


def reason(err: LlmpError) -> str:
    """A reason shared by every configuration failing the same rule: numbers become ``N``."""
    text = re.sub(r"(?<=[(=] )\d+(\.\d+)?(e[+-]?\d+)?|(?<=[(=])\d+(\.\d+)?(e[+-]?\d+)?", "N", err.message)
    return text if err.label == "error" else f"{err.label}: {text}"


def mark_oom(reasons: np.ndarray, oom: np.ndarray, limit: np.ndarray) -> None:
    """Give the configurations ``oom`` their out-of-memory reason, naming each one's limit."""
    for value in np.unique(limit[oom]):
        reasons[oom & (limit == value)] = f"out of memory: more than {format_bytes(value, binary=True)} per GPU"


def memory_limit(spec: Spec, grid: Grid, max_memory: float | None) -> np.ndarray:
    """Bytes each configuration may use per GPU: ``max_memory``, else its GPU's capacity."""
    if max_memory is not None:
        return np.full(grid.size, float(max_memory))
    return grid.columns.get("gpu.memory", np.full(grid.size, float(specpath.get(spec, "gpu.memory"))))


def _is_layout(grid: Grid, path: str, fields: frozenset[str]) -> bool:
    return path in fields or grid.columns[path].dtype in (object, bool)


def feasibility(spec: Spec, grid: Grid, max_memory: float | None) -> np.ndarray:
    """Per configuration: ``""`` when it can run and fits in memory, else the reason it cannot.

    Hardware numbers are checked once per combination of them, on the spec's own layout (their
    rules, e.g. a measured rate not above the datasheet peak, involve no layout). The layout
    rules and the structure run once per group of configurations sharing the layout fields
    (:func:`shape` and the options); within a group memory is computed on arrays and compared
    with each configuration's limit (``max_memory``, else its GPU's capacity), so configurations
    that do not fit are dropped before their step time is evaluated.
    """
    reasons = grid.reasons()
    numeric = frozenset(specpath.paths(spec))
    fields = structural(spec)  # what the layout rules and the structure read; the rest are arrays
    hardware = [p for p in grid.columns if p.startswith(HARDWARE) and not _is_layout(grid, p, fields)]
    layout = [p for p in grid.columns if _is_layout(grid, p, fields)]
    arrays = [p for p in grid.columns if p in numeric and not _is_layout(grid, p, fields)]
    if hardware:
        for rows in space.groups(grid, hardware, np.flatnonzero(reasons == "")):
            try:
                checks.check(space.row_spec(spec, grid.columns, int(rows[0]), hardware, numeric), lambda _path: None)
            except LlmpError as err:
                reasons[rows] = reason(err)
    limit = memory_limit(spec, grid, max_memory)
    for rows in space.groups(grid, layout, np.flatnonzero(reasons == "")):
        try:
            s = space.row_spec(spec, grid.columns, int(rows[0]), layout, numeric)
            checks.check(s, lambda _path: None)
            st = structure_of(s)
        except LlmpError as err:
            reasons[rows] = reason(err)
            continue
        s = specpath.replace(s, {p: grid.columns[p][rows] for p in arrays})
        need = np.broadcast_to(np.asarray(memory(s, st, schedule_plan(decompose(s, st), s.parallel.schedule)).total,
                                          float), rows.shape)
        oom = np.zeros(grid.size, dtype=bool)
        oom[rows[need > limit[rows]]] = True
        mark_oom(reasons, oom, limit)
    return reasons


def evaluate_grid(spec: Spec, grid: Grid, rows: np.ndarray, progress: Progress | None = None,
                  calibration: Any = None) -> tuple[dict[str, np.ndarray], int]:
    """:func:`llmp.compose.evaluate` on ``rows`` of the grid, in chunks of whole structural groups;
    also returns the number of structural groups (one vectorised evaluation each)."""
    out = empty_values(grid.size)
    if len(rows) == 0:
        return out, 0
    fields = structural(spec)
    grouped = [p for p in grid.columns if p in fields or grid.columns[p].dtype == object
               or grid.columns[p].dtype == bool]
    keys = space.group_index(grid, grouped)[rows]
    ordered = rows[np.argsort(keys, kind="stable")]
    sorted_keys = np.sort(keys, kind="stable")
    starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
    bounds = [int(starts[int(j)]) for j in np.linspace(0, len(starts), min(CHUNKS, len(starts)) + 1)[:-1]]
    bounds.append(len(ordered))
    done = 0
    for a, b in itertools.pairwise(bounds):
        idx = ordered[a:b]
        result = evaluate(spec, {p: col[idx] for p, col in grid.columns.items()}, calibration)
        for k, column in out.items():
            column[idx] = result[k]
        done += len(idx)
        if progress is not None:
            progress(done, len(rows))
    return out, len(starts)


OUTPUTS = ("step_time_s", "tokens_per_s", "mfu", "memory_per_gpu_bytes")


def empty_values(size: int) -> dict[str, np.ndarray]:
    """The columns :func:`evaluate_grid` and :func:`evaluate_rows` fill: NaN and not feasible."""
    out = {k: np.full(size, np.nan) for k in OUTPUTS}
    out["feasible"] = np.zeros(size, dtype=bool)
    return out


Skip = Callable[[int, float], bool]
"""Given a row and a lower bound on its step time, whether it need not be composed."""


def evaluate_rows(spec: Spec, grid: Grid, rows: np.ndarray, limit: np.ndarray, calibration: Any = None,
                  skip: Skip | None = None) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """Check and compose each of ``rows`` on its own: the values (as :func:`evaluate_grid`
    returns them, for the grid's size), the reasons (as :func:`feasibility` gives them) and
    which rows ``skip`` left out.

    Each row's rules are checked and its memory compared with its ``limit``, then its graph is
    priced and (with ``skip``) its step bounded from below without the timeline
    (:func:`llmp.search.bound.layout_bound`), and last its step composed (and offered to ``skip``
    again); a row ``skip`` accepts stops there and counts as neither feasible nor dropped (one
    skipped after composing keeps its step time, not feasible). The step is composed
    exactly as ``llmp.predict(spec, None)`` (with ``calibration``, as ``predict(...,
    calibration=)``) composes it. A layout search has one structural group per layout, so the
    vectorised path would gain nothing there and would first compile every op kind's cost with
    SymPy (about a second); this path prices with plain floats and keeps graphs in
    :mod:`llmp.compose.reuse` for the next use of the same layout.
    """
    out = empty_values(grid.size)
    reasons = grid.reasons()
    skipped = np.zeros(grid.size, dtype=bool)
    post = None
    if calibration is not None:
        post = calibration.basis(ROOFLINE_ONLY).posterior

    def with_overhead(t: float) -> float:  # the calibration's per-step overhead (monotone: bounds stay bounds)
        return t if post is None else t + float(post.overhead_at(t))

    numeric = frozenset(specpath.paths(spec))
    for i in (int(r) for r in rows):
        s = space.row_spec(spec, grid.columns, i, None, numeric)
        fits = _fits(s, limit[i])
        if isinstance(fits, str):
            reasons[i] = fits
            continue
        st, mem = fits
        try:
            graph, times = _priced(s, st, post)
            if skip is not None and skip(i, with_overhead(layout_bound(graph, times, s))):
                skipped[i] = True
                continue
        except InfeasibleError:
            reasons[i] = "infeasible layout"
            continue
        try:
            step = compose(graph, times, OverlapRules.of(s), s.parallel.schedule)
        except InfeasibleError:
            reasons[i] = "infeasible layout"
            continue
        out["step_time_s"][i] = t = with_overhead(float(step.step_time))
        if skip is not None and skip(i, t):
            skipped[i] = True
            continue
        _record(out, i, s, graph, mem, t)
    return out, reasons, skipped


def _fits(s: Spec, limit: Any) -> tuple[Structure, Memory] | str:
    """The row's structure and memory, or why it cannot run: its rules, then its memory against
    ``limit`` (bytes per GPU)."""
    try:
        checks.check(s, lambda _path: None)
        st = structure_of(s)
    except LlmpError as err:
        return reason(err)
    try:
        # memory needs the structure and the schedule's plan (which the step reuses), not the
        # graph, and costs a fraction of pricing one: a layout that does not fit goes no further
        mem = memory(s, st, plan(s.parallel.schedule, st.pp, st.vp, st.microbatches, st.microbatch_group))
    except LlmpError as err:
        return reason(err)
    if float(mem.total) > limit:
        return f"out of memory: more than {format_bytes(limit, binary=True)} per GPU"
    return st, mem


def _priced(s: Spec, st: Structure, post: Any) -> tuple[OpGraph, list[float]]:
    """The row's graph (kept in :mod:`llmp.compose.reuse`) and predict's times with no residual
    models (each factor is 1), scaled by the calibration's posterior ``post`` (None: none)."""
    graph = reuse.GRAPHS.get(reuse.graph_key(s), functools.partial(decompose, s, st))
    times = [float(t) for t in price(graph, s).time]
    if post is not None:
        times = scaled(graph, times, np.asarray(post.mean[:-1]))
    return graph, times


def _record(out: dict[str, np.ndarray], i: int, s: Spec, graph: OpGraph, mem: Memory, t: float) -> None:
    """Row ``i`` composed to a step of ``t`` seconds: its throughput, MFU and memory, and that it runs."""
    tokens = float(s.tokens_per_step)
    peak = float(Hardware.of(s).peak_of(s.train.precision.compute_dtype, f"precision {s.train.precision.value}"))
    out["tokens_per_s"][i] = tokens / t
    out["mfu"][i] = tokens * float(model_flops_per_token(s)) / (t * graph.structure.world_size * peak)
    out["memory_per_gpu_bytes"][i] = float(mem.total)
    out["feasible"][i] = True
