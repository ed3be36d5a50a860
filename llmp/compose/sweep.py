"""``evaluate(spec, grid)``: many configurations in a few vectorised calls (for ``search``).

``grid`` maps spec paths to equal-length arrays, one entry per configuration (a struct of
arrays). Configurations are grouped by what decides the *shape* of the operator graph and the
schedule (degrees, batch sizes, layer and head counts, sequence length, enum and bool fields;
see :data:`STRUCTURAL`); inside a group every numeric field is an array, the graph is built once
on arrays, each op kind is priced in one compiled call and the pipeline timeline runs once with
``numpy.maximum``. The results equal :func:`llmp.compose.predict` without residual models.
Infeasible configurations (layout cannot run) come back with ``feasible = False`` and NaNs.

A group is evaluated in chunks of at most :func:`chunk_size` configurations, so a sweep's peak
memory stays near :data:`MEMORY` however many configurations it has (each configuration is a
column of every op's arrays and of the pipeline timeline); chunks give the same numbers as one
call, every column being computed on its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from llmp.analytic.graph import decompose
from llmp.analytic.pricing import Hardware, price_arrays
from llmp.analytic.structure import structure_of
from llmp.compose import reuse
from llmp.compose.calibration_file import as_calibration
from llmp.compose.memory import memory
from llmp.compose.overlap import OverlapRules
from llmp.compose.posterior import scaled
from llmp.compose.prediction import COMM, COMPUTE
from llmp.compose.predictor import ROOFLINE_ONLY, model_flops_per_token
from llmp.compose.step import compose, schedule_plan
from llmp.errors import InfeasibleError, InputError
from llmp.spec import specpath
from llmp.spec.spec import Spec

STRUCTURAL: frozenset[str] = frozenset({
    "parallel.dp", "parallel.tp", "parallel.pp", "parallel.cp", "parallel.ep", "parallel.vp",
    "parallel.microbatch_group", "parallel.first_stage_layers", "parallel.last_stage_layers",
    "train.global_batch", "train.micro_batch", "model.layers", "model.heads", "model.kv_heads",
    "model.seq_len", "model.dropout", "model.moe.experts", "model.moe.shared_experts",
    "model.moe.top_k", "model.moe.first_dense_layers", "model.moe.every", "parallel.etp", "model.window",
    "model.full_attention_every", "model.mtp_layers", "model.mla.q_lora_rank",
    "node.gpus_per_node", "node.nvlink_domain", "cluster.nodes", "model.ffn_hidden", "model.moe.expert_ffn_hidden",
    "train.offload_activations", "train.offload_optimizer", "train.finetune.lora_rank", "train.finetune.sample_len"})
"""Numeric paths that change the graph's shape or the schedule, or that a layout rule reads
(:mod:`llmp.analytic.rules`: tp must divide the MLP widths); grouped on, not vectorised."""


def structural(spec: Spec) -> frozenset[str]:
    """:data:`STRUCTURAL`, plus every model size when DeepSpeed balances the pipeline stages by
    parameter count (``partition = "parameters"``): then they decide each stage's layers."""
    if spec.parallel.partition.lower() != "parameters":
        return STRUCTURAL
    return STRUCTURAL | {p for p in specpath.paths(spec) if p.startswith("model.")}

MEMORY = 512 * 2**20
"""Bytes of arrays one vectorised call may hold, about (:func:`chunk_size`)."""
ARRAYS_PER_OP = 16
"""Float arrays held per op and configuration while pricing and composing (its flops, bytes, time,
the roofline's and the overlap rules' intermediates: about 8 measured on GPT-3 175B, doubled)."""


def chunk_size(ops: int, tasks: int, budget: int = MEMORY) -> int:
    """Configurations per vectorised call: ``budget`` over the bytes one takes, 8 per float of
    :data:`ARRAYS_PER_OP` per op and of each pipeline task's work and end (the whole plan's tasks,
    the most :func:`~llmp.compose.periodic.rank_end` times)."""
    return max(1, budget // (8 * (ARRAYS_PER_OP * ops + 2 * tasks)))


OUTPUTS = ("step_time_s", "tokens_per_s", "mfu", "memory_per_gpu_bytes", "compute_s", "exposed_comm_s",
           "bubble_s", "recompute_s", "optimizer_s")


def _set_field(spec: Spec, path: str, value: Any) -> Spec:
    """Set a non-numeric field (enum or bool) of the model, train or parallel section."""
    section, _, name = path.partition(".")
    if section not in ("model", "train", "parallel") or "." in name:
        raise InputError(f"cannot vary {path!r} in a sweep", hint="vary numeric fields or model/train/parallel options")
    block = getattr(spec, section)
    current = getattr(block, name)
    value = type(current)(value) if not isinstance(current, bool) else bool(value)
    return dataclasses.replace(spec, **{section: dataclasses.replace(block, **{name: value})})


def _columns(spec: Spec, grid: Mapping[str, Any]) -> tuple[int, dict[str, np.ndarray], dict[str, np.ndarray]]:
    numeric_paths = set(specpath.paths(spec))
    lengths = {np.size(v) for v in grid.values()}
    if len(lengths) > 1:
        raise InputError(f"sweep arrays differ in length: {sorted(lengths)}")
    n = lengths.pop() if lengths else 1
    numeric, other = {}, {}
    for path, values in grid.items():
        arr = np.asarray(values).reshape(n)
        if path in numeric_paths:
            numeric[path] = arr.astype(float)
        else:
            other[path] = arr
    return n, numeric, other


def evaluate(spec: Spec, grid: Mapping[str, Any], calibration: Any = None, *,
             budget: int = MEMORY) -> dict[str, np.ndarray]:
    """Step time, throughput, MFU, memory and breakdown sums for every configuration of ``grid``.

    ``calibration``: an ``llmp calibrate`` file (or loaded calibration) of the spec's GPU and
    stack; its roofline basis (this composition has no residual models) scales each op's time by
    its group's factor and adds the per-step overhead to the step time. ``budget``: bytes of arrays
    one vectorised call may hold (:data:`MEMORY`)."""
    posterior = None
    if calibration is not None:
        cal = as_calibration(calibration)
        assert cal is not None, "a calibration was given"
        cal.check(spec)
        posterior = cal.basis(ROOFLINE_ONLY).posterior
    n, numeric, other = _columns(spec, grid)
    shape = structural(spec)
    keys = [p for p in numeric if p in shape]
    codes = [np.unique(other[p], return_inverse=True)[1] for p in other]
    table = np.column_stack([numeric[p] for p in keys] + codes) if keys or codes else np.zeros((n, 0))
    groups, inverse = np.unique(table, axis=0, return_inverse=True)
    inverse = inverse.reshape(n)
    out = {k: np.full(n, np.nan) for k in OUTPUTS}
    out["oom"] = np.zeros(n, dtype=bool)
    out["feasible"] = np.zeros(n, dtype=bool)
    for g in range(len(groups)):
        idx = np.flatnonzero(inverse == g)
        i0 = idx[0]
        s = spec
        for path, col in other.items():
            s = _set_field(s, path, col[i0])
        fixed = {p: _scalar(numeric[p][i0]) for p in numeric if p in shape}
        try:
            size = _group_chunk(specpath.replace(s, {p: _scalar(numeric[p][i0]) for p in numeric}), budget)
            for part in np.array_split(idx, -(-len(idx) // size)):
                result = _evaluate_group(specpath.replace(s, fixed | {p: numeric[p][part] for p in numeric
                                                                      if p not in shape}), len(part), posterior)
                for k, v in result.items():
                    out[k][part] = v
                out["feasible"][part] = True
        except InfeasibleError:  # as one call would: the whole group
            for k in OUTPUTS:
                out[k][idx] = np.nan
            out["oom"][idx] = out["feasible"][idx] = False
    return out


def _group_chunk(spec: Spec, budget: int) -> int:
    """:func:`chunk_size` for the group of ``spec`` (one configuration of it)."""
    st = structure_of(spec)
    graph = reuse.GRAPHS.get(reuse.graph_key(spec), lambda: decompose(spec, st))
    return chunk_size(len(graph.ops), len(schedule_plan(graph, spec.parallel.schedule).rank), budget)


def _scalar(x: float) -> int | float:
    return int(x) if float(x).is_integer() else float(x)


def _evaluate_group(spec: Spec, k: int, posterior: Any = None) -> dict[str, np.ndarray]:
    st = structure_of(spec)
    graph = decompose(spec, st)
    prices = price_arrays(graph, spec, k)
    times, overhead = list(prices.time), 0.0
    if posterior is not None:
        times = scaled(graph, times, np.asarray(posterior.mean[:-1]))
    step = compose(graph, times, OverlapRules.of(spec), spec.parallel.schedule)
    if posterior is not None:
        overhead = posterior.overhead_at(step.step_time)
    mem = memory(spec, st, schedule_plan(graph, spec.parallel.schedule))
    t = np.broadcast_to(np.asarray(step.step_time, float) + overhead, (k,))
    world = st.world_size
    tokens = np.asarray(spec.tokens_per_step, float)
    peak = Hardware.of(spec).peak_of(spec.train.precision.compute_dtype, f"precision {spec.train.precision.value}")
    bd = step.breakdown

    def total(cats: tuple[str, ...]) -> np.ndarray:
        return np.broadcast_to(np.asarray(sum(bd.get(c, 0.0) for c in cats), float), (k,))

    return {
        "step_time_s": t, "tokens_per_s": tokens / t,
        "mfu": tokens * np.asarray(model_flops_per_token(spec), float) / (t * world * np.asarray(peak, float)),
        "memory_per_gpu_bytes": np.broadcast_to(np.asarray(mem.total, float), (k,)),
        "oom": np.broadcast_to(np.asarray(mem.oom), (k,)),
        "compute_s": total(COMPUTE), "exposed_comm_s": total(COMM), "bubble_s": total(("bubble",)),
        "recompute_s": total(("recompute",)), "optimizer_s": total(("optimizer",)),
    }
