"""The best layout for a GPU count: ``llmp.search``'s layout space, searched branch-and-bound.

``llmp.search`` enumerates every layout for ``N`` GPUs (tp, pp, vp, micro-batch, recompute,
sequence parallelism, ZeRO), checks each and evaluates the survivors one structural group at a
time, about 15 ms a layout on this 2-core machine: thousands of layouts take minutes. A plan
needs the best one for many GPU counts, so this module

1. narrows the space with rules a training team follows anyway (:func:`narrow`);
2. computes for every layout a lower bound on its step time from numbers alone (:func:`step_bound`):
   the matmul FLOPs (6 per parameter per token, plus one more forward under full recompute) at the
   fastest rate a GEMM is priced at, over all GPUs, times the pipeline's fill-and-drain factor;
3. checks and evaluates layouts in order of that bound, with search's own
   :func:`~llmp.search.engine.feasibility` and :func:`~llmp.search.engine.evaluate_grid`, and
   stops when the next bound is no better than the best step time found.

Because the bound never exceeds the evaluated step time, the layout returned is the one an
exhaustive search of the narrowed space ranks first by step time (``tests/plan`` checks both the
bound and that equality).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from llmp.analytic import params, specpath
from llmp.dsl.spec import Schedule, Spec
from llmp.search import engine
from llmp.search.space import Grid

PP_LIMIT = 63
"""Largest pipeline degree tried. ``llmp.compose.step.compose`` picks the critical rank with
``numpy.choose``, which takes at most 63 choices besides the index array (NumPy's 64-operand
limit), so evaluating a vectorised group with pp >= 64 raises; no published run uses more than
32 stages (Llama 3 405B: 16; Megatron SC21 1T: 64 is the exception)."""
BATCH = 12
"""Layouts checked and evaluated per round of the branch-and-bound (a round that finds nothing
better costs at most this many evaluations)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Layout:
    """The best layout found for one GPU count, with how the search got there."""

    gpus: int
    config: Mapping[str, Any]
    """Every field the layout sets (``parallel.tp``, ``cluster.nodes``, ...), as SI numbers,
    enum spellings or booleans."""
    roofline_step_s: float
    """Step time by search's evaluation (the roofline composition, no residual models): the
    number layouts are ranked by."""
    memory_per_gpu_bytes: float
    space: int
    """Layouts in the narrowed space for this count."""
    checked: int
    """Layouts whose rules and memory were checked."""
    evaluated: int
    """Layouts whose step was composed."""
    dropped: Mapping[str, int]
    """Reason -> checked layouts that cannot run (or do not fit) for it."""

    def overrides(self) -> list[str]:
        """``--set`` arguments that turn the spec into this layout."""
        from llmp.search.report import set_text

        return [set_text(p, v) for p, v in self.config.items()]


def narrow(spec: Spec, grid: Grid) -> np.ndarray:
    """Per layout of search's grid: ``""`` if the plan searches it, else why it does not.

    * tp stays inside the NVLink domain: tensor parallelism all-reduces (or all-gathers and
      reduce-scatters) activations twice per layer and pass, which only the scale-up fabric
      carries at speed (Narayanan et al. 2021, SC21, §3.3 takeaway #1: tensor parallelism up to
      the GPUs of a server, pipeline parallelism across servers).
    * sequence parallelism is on exactly when tp > 1: it replaces each tensor-parallel
      all-reduce by a reduce-scatter and an all-gather of the same volume and shards the
      activations between them (Korthikanti et al. 2022, §4.2.2), so it costs no time and saves
      memory; without tp it is the same layout.
    * the ZeRO stage is the spec's: it is a property of the training stack (Megatron's
      distributed optimizer is stage 1, DeepSpeed and FSDP choose theirs), not of the layout.
    * pp <= :data:`PP_LIMIT` (an evaluation limit, see there).
    """
    cols = grid.columns
    reasons = grid.reasons()
    domain = np.asarray(cols["node.nvlink_domain"], float) if "node.nvlink_domain" in cols else np.full(
        grid.size, float(spec.cluster.node.domain))
    default_gpn = np.full(grid.size, float(spec.cluster.node.gpus_per_node))
    gpus_per_node = np.asarray(cols.get("node.gpus_per_node", default_gpn), float)
    domain = np.minimum(np.where(np.isfinite(domain) & (domain > 0), domain, gpus_per_node), _world(spec, grid))
    tp = cols["parallel.tp"]
    rules = [
        (np.mod(domain, tp) != 0, "plan: tp beyond the NVLink domain (or not dividing it)"),
        (cols["parallel.pp"] > PP_LIMIT, f"plan: pp above {PP_LIMIT}"),
        (np.asarray(cols["parallel.sequence_parallel"], bool) != (tp > 1),
         "plan: sequence parallelism is on exactly when tp > 1"),
        (cols["parallel.zero"].astype(str) != spec.parallel.zero.value, "plan: the spec's ZeRO stage is kept"),
    ]
    for mask, why in rules:
        reasons[(reasons == "") & mask] = why
    return reasons


def _world(spec: Spec, grid: Grid) -> np.ndarray:
    cols = grid.columns
    cp = float(specpath.get(spec, "parallel.cp"))
    return cols["parallel.tp"] * cols["parallel.pp"] * cols["parallel.dp"] * cp


def gemm_rate(spec: Spec) -> float:
    """The fastest rate a GEMM of the training precision is priced at: the catalog's measured
    ``achievable`` rate where it has one, else the datasheet peak (``analytic.kernels.ceiling``)."""
    device = spec.cluster.gpu
    dtype = spec.train.precision.compute_dtype
    peak = float(device.peak_flops[dtype])
    if device.achievable is not None and dtype in device.achievable.rates:
        return max(float(device.achievable.rates[dtype]), 0.0) or peak
    return peak


def matmul_params(spec: Spec) -> tuple[float, float]:
    """(parameters in every matmul a token passes through, those of them inside the layers): the
    ``N`` of 6 N FLOPs per token (PaLM app. B; active parameters for MoE)."""
    m = spec.model
    layers = float(params.active(m) - params.embedding_params(m))
    return layers + float(m.vocab * m.hidden), layers


def step_bound(spec: Spec, grid: Grid) -> np.ndarray:
    """A lower bound on each layout's step time, in seconds.

    Work: 6 FLOPs per matmul parameter per token (forward 2, backward 4), plus a second forward
    of the layers (2 per layer parameter) under full recompute; no attention, norm or
    communication time, and every GEMM at :func:`gemm_rate` on every GPU at once.
    Pipeline: the first microbatch's forward and the last one's backward cross every stage in
    turn, so a step spans at least (m + pp - 1) microbatch-stage times where m fill the ranks:
    a factor 1 + (pp - 1)/m for GPipe and 1F1B and 1 + (pp - 1)/(vp m) for interleaved 1F1B
    (Narayanan et al. 2021, §2.2); schedules not named here get no factor.
    """
    cols = grid.columns
    total, layers = matmul_params(spec)
    seq = float(spec.model.seq_len)
    batch = np.asarray(cols.get("train.global_batch", np.full(grid.size, float(spec.train.global_batch))), float)
    world = _world(spec, grid)
    full = cols["train.recompute"].astype(str) == "full"
    flops = (6.0 * total + np.where(full, 2.0 * layers, 0.0)) * batch * seq
    ideal = flops / (world * gemm_rate(spec))
    pp = cols["parallel.pp"].astype(float)
    vp = cols["parallel.vp"].astype(float)
    m = batch / (cols["train.micro_batch"] * cols["parallel.dp"])
    schedule = cols["parallel.schedule"].astype(str)
    fill = np.where(schedule == Schedule.INTERLEAVED.value, (pp - 1) / (vp * m),
                    np.where(np.isin(schedule, (Schedule.ONE_F_ONE_B.value, Schedule.GPIPE.value)), (pp - 1) / m, 0.0))
    return ideal * (1.0 + np.maximum(fill, 0.0))


def _rows(grid: Grid, rows: np.ndarray) -> Grid:
    return Grid(columns={p: c[rows] for p, c in grid.columns.items()}, varied=grid.varied, size=len(rows))


def best(source: str, sets: list[str] | tuple[str, ...], gpus: int) -> Layout | None:
    """The layout with the shortest step time (search's evaluation) on ``gpus`` GPUs, or None
    when no layout of the narrowed space can run."""
    built = engine.build(source, list(sets), (), [gpus], False)
    spec, grid = built.spec, built.grid
    reasons = narrow(spec, grid)
    space = np.flatnonzero(reasons == "")
    bound = step_bound(spec, _rows(grid, space)) if len(space) else np.zeros(0)
    order = space[np.argsort(bound, kind="stable")]
    bound = np.sort(bound, kind="stable")
    best_i, best_t, best_mem = -1, np.inf, np.nan
    checked = evaluated = 0
    dropped: Counter[str] = Counter()
    start = 0
    while start < len(order) and bound[start] < best_t:
        stop = start + BATCH
        idx = order[start:stop][bound[start:stop] < best_t]
        start = stop
        sub = _rows(grid, idx)
        why = engine.feasibility(spec, sub, None)
        checked += len(idx)
        runnable = np.flatnonzero(why == "")
        values, _ = engine.evaluate_grid(spec, sub, runnable)
        evaluated += len(runnable)
        limit = engine.memory_limit(spec, sub, None)
        ok = values["feasible"] & (values["memory_per_gpu_bytes"] <= limit)
        why[runnable[~values["feasible"][runnable]]] = "infeasible layout"
        engine.mark_oom(why, values["feasible"] & ~ok, limit)
        dropped.update(str(r) for r in why[why != ""])
        good = np.flatnonzero(ok)
        if len(good):
            j = good[np.argmin(values["step_time_s"][good])]
            if values["step_time_s"][j] < best_t:
                best_i, best_t = int(idx[j]), float(values["step_time_s"][j])
                best_mem = float(values["memory_per_gpu_bytes"][j])
    if best_i < 0:
        return None
    config = {p: _plain(c[best_i]) for p, c in grid.columns.items()}
    return Layout(gpus=gpus, config=config, roofline_step_s=best_t, memory_per_gpu_bytes=best_mem,
                  space=len(space), checked=checked, evaluated=evaluated, dropped=dict(dropped))


def _plain(v: Any) -> Any:
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, float, np.integer, np.floating)):
        f = float(v)
        return int(f) if f.is_integer() else f
    return str(v)
