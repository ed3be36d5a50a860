"""The best layout for a GPU count: ``llmp.search``'s layout space, narrowed, searched branch-and-bound.

A plan needs the best layout for one or many GPU counts, so this module

1. narrows the space with rules a training team follows anyway (:func:`narrow`);
2. hands the rest to search's branch and bound (:mod:`llmp.search.prune`) for the single best by
   step time: layouts are taken in order of a lower bound on their step time and composed only
   while the bound can still beat the best found.

Because the bound never exceeds the composed step time, the layout returned is the one an
exhaustive search of the narrowed space ranks first by step time (``tests/plan`` checks that).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from llmp.analytic import params
from llmp.search import engine, prune, rank
from llmp.search.rank import Objective
from llmp.search.report import set_text
from llmp.search.space import Grid
from llmp.spec.spec import Spec, world_size

PP_LIMIT = 63
"""Largest pipeline degree the plan tries, a bound on its search rather than on what llmp can
compose (``llmp predict`` takes any pp): no published run uses more than 32 stages (Llama 3 405B:
16; Megatron SC21 1T: 64 is the exception)."""
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
    cp = float(spec.parallel.cp)
    return world_size(cols["parallel.dp"], cols["parallel.tp"], cols["parallel.pp"], cp)


def matmul_params(spec: Spec) -> tuple[float, float]:
    """(parameters in every matmul a token passes through, those of them inside the layers): the
    ``N`` of 6 N FLOPs per token (PaLM app. B; active parameters for MoE)."""
    m = spec.model
    layers = float(params.active(m) - params.embedding_params(m))
    return layers + float(m.vocab * m.hidden), layers


def best(source: str, sets: Sequence[str], gpus: int) -> Layout | None:
    """The layout with the shortest step time (search's composition, no residual models) on
    ``gpus`` GPUs, or None when no layout of the narrowed space can run."""
    found = ranked(source, sets, gpus, 1)
    return found[0] if found else None


def ranked(source: str, sets: Sequence[str], gpus: int, top: int) -> list[Layout]:
    """The ``top`` layouts with the shortest step times (search's composition) on ``gpus`` GPUs,
    best first; empty when none of the narrowed space can run."""
    spec, resolve = engine.load(source, sets)
    built = engine.build(spec, [gpus], False, resolve)
    spec, grid = built.spec, built.grid
    reasons = narrow(spec, grid)
    space = int(np.count_nonzero(reasons == ""))
    narrowed = Grid(columns=grid.columns, varied=grid.varied, size=grid.size, dropped=reasons)
    world = np.full(grid.size, float(gpus))
    tokens = np.full(grid.size, float(spec.tokens_per_step))
    found = prune.search(spec, narrowed, objective=Objective.STEP_TIME, top=top, max_memory=None, gpus=world,
                         tokens=tokens, gpu_hour_price=1.0, pareto_x=None)
    good = np.flatnonzero(found.values["feasible"])
    checked = np.flatnonzero(found.checked)
    dropped = Counter(str(r) for r in found.reasons[checked] if r != "")
    step = found.values["step_time_s"]
    order = good[rank.order(step[good], step[good], Objective.STEP_TIME)][:top] if len(good) else good
    return [Layout(gpus=gpus, config={p: _plain(c[i]) for p, c in grid.columns.items()},
                   roofline_step_s=float(step[i]), memory_per_gpu_bytes=float(found.values["memory_per_gpu_bytes"][i]),
                   space=space, checked=len(checked), evaluated=int(np.count_nonzero(~np.isnan(step))),
                   dropped=dict(dropped)) for i in (int(j) for j in order)]


def _plain(v: Any) -> Any:
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, float, np.integer, np.floating)):
        f = float(v)
        return int(f) if f.is_integer() else f
    return str(v)
