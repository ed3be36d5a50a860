"""``predict(spec, residuals="default", level=0.8) -> Prediction``: the whole pipeline for one spec.

spec → structure and operator graph → per-op roofline / alpha-beta times → residual factors
(from the store ``llmp.residuals.store.choose`` picks: by default the one shipped for the spec's
device, else the cross-GPU one) → :class:`Priced` → composition over the pipeline schedule (the
point; the band's draws run through the same schedule, ``compose.band``) → memory →
:class:`Prediction`.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from llmp.analytic import kernels, params, roofline
from llmp.analytic.correction import Correction, Residuals
from llmp.analytic.graph import decompose
from llmp.analytic.kernels import Kernel
from llmp.analytic.op import Op, OpGraph, Part, Scope
from llmp.analytic.pricing import Hardware, Prices, price
from llmp.analytic.structure import structure_of
from llmp.compose import band, calibration, measured, reuse
from llmp.compose.calibration_file import as_calibration
from llmp.compose.caveats import caveats
from llmp.compose.memory import memory
from llmp.compose.overlap import OverlapRules
from llmp.compose.posterior import host_scale, scaled
from llmp.compose.prediction import (
    MemoryReport,
    OpRow,
    Prediction,
    Provenance,
    Report,
    ResidualUse,
)
from llmp.compose.priced import Priced
from llmp.compose.step import Step, schedule_plan
from llmp.errors import SpecError
from llmp.residuals import store
from llmp.spec import specpath
from llmp.spec.spec import Spec
from llmp.stacks import padded_vocab
from llmp.stacks.host import HOST_SPEED
from llmp.sym import has_free_symbols

ROOFLINE_ONLY = "roofline only (no residual models)"


def _require_numbers(spec: Spec) -> None:
    if "sympy" not in sys.modules:  # nothing has made an expression, so every field is a number
        return
    free = sorted({str(s) for path in specpath.paths(spec)
                   for v in [specpath.get(spec, path)] if has_free_symbols(v) for s in v.free_symbols})
    if free:
        raise SpecError(f"the spec leaves {', '.join(free)} free; a prediction needs numbers",
                        hint="give them values with --set section.field=value (free symbols are for sensitivity)")


def spec_hash(spec: Spec) -> str:
    """A short, stable digest of the resolved spec."""
    return hashlib.sha256(repr(spec).encode()).hexdigest()[:16]


def model_flops_per_token(spec: Spec) -> Any:
    """6 N + 12 L (heads head_dim) s: N = parameters in the layers' and the head's matmuls
    (PaLM app. B; for MoE the active parameters; with multi-head latent attention the head dim is
    the mean of the query/key and value head dims, QK^T and PV each counted at their own)."""
    m = spec.model
    matmul_params = params.active(m) - params.embedding_params(m) + m.vocab * m.hidden
    head_dim = m.head_dim if m.mla is None else (m.mla.qk_head_dim + m.mla.v_head_dim) / 2
    return 6 * matmul_params + 12 * m.layers * m.heads * head_dim * m.seq_len


def gpu_flops(graph: OpGraph, flops: Sequence[Any], keep: Callable[[Op], bool] = lambda op: True) -> float:
    """FLOPs one GPU executes per step (ops passing ``keep``), averaged over pipeline ranks.

    Every GPU of a pipeline rank does the same work, so the whole step's FLOPs are this times
    the number of GPUs.
    """
    st = graph.structure
    kinds, first_parts, last_parts, rank_parts = _flop_terms(graph, keep)

    def total(terms: tuple[tuple[int, Any], ...]) -> float:
        return sum(float(flops[i] * count) for i, count in terms)

    layer = sum(total(terms) * float(n) for terms, n in zip(kinds, graph.kind_layers)) / st.chunks
    first = sum(total(terms) for terms in first_parts)
    last = sum(total(terms) for terms in last_parts)
    chunks = st.microbatches * (st.chunks * layer + first + last)
    ranks = sum(total(terms) for terms in rank_parts)
    return (chunks + ranks) / st.pp


FlopTerms = tuple[tuple[int, Any], ...]


def _flop_terms(graph: OpGraph, keep: Callable[[Op], bool]) -> tuple[tuple[FlopTerms, ...], ...]:
    """What :func:`gpu_flops` sums, (position, count) of the ops ``keep`` passes, in its order:
    per layer kind (forward then backward), the first and the last chunk's ops per part, and
    each rank's once-per-step ops. From the graph alone, so kept in its memo (with ``keep``)."""
    key = ("flops", keep)
    cached = graph.memo.get(key)
    if cached is not None:
        return cached  # type: ignore[no-any-return]

    def terms(indices: Sequence[int]) -> FlopTerms:
        return tuple((i, graph.ops[i].count) for i in indices if keep(graph.ops[i]))

    parts = (Part.FORWARD, Part.BACKWARD)
    out = (tuple(terms([i for p in parts for i in graph.layer_indices(p, k)]) for k in range(len(graph.kind_layers))),
           tuple(terms(graph.indices(Scope.FIRST, p)) for p in parts),
           tuple(terms(graph.indices(Scope.LAST, p)) for p in parts),
           tuple(terms(graph.indices(Scope.RANK, r)) for r in range(graph.structure.pp)))
    graph.memo[key] = out
    return out


def _bound(op_work: Any, t: float, hw: Hardware) -> str:
    if not isinstance(op_work, Kernel):
        return "network"
    c = kernels.cost(op_work)
    launch = c.launches * float(hw.launch_overhead)
    body = t - launch
    if launch > body:
        return "latency"
    memory = roofline.memory_bound(op_work, c, peak=float(hw.peak_for(op_work, c.tensor_core)),
                                   mem_bandwidth=float(hw.mem_bandwidth), grid=hw.grid)
    return "memory" if memory else "compute"


def _rows(graph: OpGraph, prices: Prices, corr: Correction, hw: Hardware) -> tuple[OpRow, ...]:
    rows = []
    for i, op in enumerate(graph.ops):
        f, b, t = float(prices.flops[i]), float(prices.bytes[i]), float(prices.time[i])
        rows.append(OpRow(name=op.name, family=op.family, category=op.category, phase=op.phase.value,
                          scope=op.scope.value, rank_kind=op.rank_kind.value if op.rank_kind else None,
                          count=float(op.count), flops=f, bytes=b, roofline_s=t, factor=float(corr.factor[i]),
                          covered=bool(corr.covered[i]), bound=_bound(op.work, t, hw)))
    return tuple(rows)


def choose_residuals(residuals: Residuals | str | os.PathLike[str] | None, spec: Spec) -> tuple[Residuals | None, str]:
    """The store that corrects ``spec`` and how it was chosen: ``llmp.residuals.store.choose``,
    imported only when a store may be needed (``None`` and ``"none"`` never read one)."""
    if residuals is None or residuals == "none":
        return None, "residual models turned off"
    if isinstance(residuals, (str, os.PathLike)):
        choice = store.choose(residuals, spec.cluster.gpu)
        return choice.residuals, choice.note
    return residuals, "given"


def _residual_use(residuals: Residuals, graph: OpGraph, corr: Correction, served: np.ndarray) -> ResidualUse:
    flagged = corr.out_of_domain if corr.out_of_domain is not None else [False] * len(graph.ops)
    path = getattr(residuals, "path", None)
    return ResidualUse(id=residuals.id, path=str(path) if path is not None else "",
                       scope=getattr(residuals, "scope", "custom"),
                       covered=tuple(sorted({op.family for op, c, m in zip(graph.ops, corr.covered, served)
                                             if c and not m})),
                       out_of_domain=tuple(sorted({op.name for op, f in zip(graph.ops, flagged) if f})))


def zero_shot(p: Priced, term: band.CompositionTerm, level: float = band.LEVEL) -> band.Band:
    """The uncalibrated band of ``p`` with composition term ``term``: its ops' errors, the host
    thread's speed where a host issues the kernels (``llmp.stacks.host.HOST_SPEED``), the term."""
    host = HOST_SPEED if OverlapRules.of(p.spec).host is not None else None
    return band.zero_shot(p.step_time, p.times, p.errors, term, level, host=host)


def priced(spec: Spec, residuals: Residuals | str | os.PathLike[str] | None = "default") -> Priced:
    """Decompose ``spec``, price every op and correct it with the chosen residual store; the graph,
    prices and correction of a spec seen lately are reused (``compose.reuse``)."""
    _require_numbers(spec)
    # A store read from a directory on every call is not kept: each read is a new object.
    transient = isinstance(residuals, (str, os.PathLike)) and residuals not in ("default", "none")
    residuals, note = choose_residuals(residuals, spec)
    key = reuse.graph_key(spec)
    graph = reuse.GRAPHS.get(key, lambda: decompose(spec, structure_of(spec)))

    def make() -> tuple[Residuals | None, Prices, Correction, band.OpErrors, float]:
        n = len(graph.ops)
        prices = price(graph, spec)
        corr = (Correction.identity(n) if residuals is None else
                residuals.correct([op.work for op in graph.ops], spec).check(n))
        corr = measured.apply(corr, prices)  # a machine's own measurements are not corrected again
        for a in (corr.factor, corr.low, corr.high, corr.covered, corr.out_of_domain):
            if isinstance(a, np.ndarray):
                a.flags.writeable = False  # shared by every prediction that reuses it
        errors = band.op_errors(graph, corr, spec.cluster.gpu.id)
        errors.sigma.flags.writeable = errors.column.flags.writeable = False
        return residuals, prices, corr, errors, gpu_flops(graph, prices.flops)

    which = None if transient else _store_identity(residuals)
    if which is not None:
        # The entry holds the store, so no other object can take its id while the entry lives.
        _, prices, corr, errors, flops = reuse.PRICED.get((key, reuse.hardware_key(spec), which), make)
    else:
        _, prices, corr, errors, flops = make()
    return Priced(spec=spec, graph=graph, prices=prices, correction=corr, residuals=residuals, note=note,
                  errors=errors, gpu_flops=flops)


def _store_identity(residuals: Residuals | None) -> tuple[int, ...] | None:
    """Which loaded store corrects (``()``: none), for llmp's own read-only stores, whose correction
    reads only the ops and the cluster; None for any other ``Residuals`` (not kept)."""
    if residuals is None:
        return ()
    if isinstance(residuals, store.Layered):  # made afresh by each choice, of two loaded stores
        return (id(residuals.primary), id(residuals.fallback))
    return (id(residuals),) if isinstance(residuals, store.Residuals) else None


def predict(spec: Spec, residuals: Residuals | str | os.PathLike[str] | None = "default", *,
            level: float = band.LEVEL, calibration: Any = None) -> Prediction:
    """Predict one training step of ``spec``; residual models correct each op's analytic time.

    ``residuals``: ``"default"`` (the store shipped for the spec's device if it serves the spec's
    numbers, else the shipped cross-GPU store, else none: the same choice as ``llmp predict``),
    ``None`` or ``"none"`` (the bare roofline composition), a store directory, or a loaded store.
    ``level``: how often the band should hold the real step (``compose.band``).
    ``calibration``: a ``STACK.json`` written by ``llmp calibrate`` (or a loaded
    ``llmp.compose.calibration_file.Calibration``) fitted on measured steps of this GPU and stack: its factors and
    per-step overhead correct the step, and its posterior gives the band. ``None``: zero-shot.
    """
    level = band.check_level(level)
    p = priced(spec, residuals)
    graph, hw = p.graph, Hardware.of(spec)
    model_id = ROOFLINE_ONLY if p.residuals is None else p.residuals.id
    times = p.times
    if calibration is None:
        step = p.compose(times)
        t = float(step.step_time)
        return _prediction(p, step, t, lambda: zero_shot(p, band.composition_term(), level), hw, model_id)
    cal = as_calibration(calibration)
    assert cal is not None, "a calibration was given"
    cal.check(spec)
    post = cal.basis(model_id).posterior
    theta = np.asarray(post.mean[:-1])
    step = p.compose(scaled(graph, times, theta), float(host_scale(theta)))
    overhead = float(post.overhead_at(step.step_time))
    t = float(step.step_time) + overhead
    factors = ", ".join(f"{g} x{f:.3f}" for g, f in post.factors.items())
    what = (f"{cal.id}: {post.rows} measured step{'s' if post.rows != 1 else ''} of {cal.stack} on {cal.gpu}; "
            f"factors {factors}; per-step overhead {overhead:.4g} s")
    return _prediction(p, step, t, lambda: post.band(p, level), hw, model_id, overhead=overhead, calibrated=what)


def ops(spec: Spec, residuals: Residuals | str | os.PathLike[str] | None = "default") -> tuple[OpRow, ...]:
    """Every op of ``spec``'s step with its FLOPs, bytes, analytic time per call, what bounds it and
    the residual factor :func:`predict` applies (the rows ``llmp ops`` prints; the bare graph is
    ``llmp.analytic.ops``)."""
    return predict(spec, residuals).ops


def _prediction(p: Priced, step: Step, t: float, uncertainty: Callable[[], band.Band], hw: Hardware, model_id: str, *,
                overhead: float = 0.0, calibrated: str = "") -> Prediction:
    spec, graph, prices, corr = p.spec, p.graph, p.prices, p.correction
    st = graph.structure
    breakdown = _clean(step.breakdown, t) | ({"overhead": overhead} if overhead > 0 else {})
    mem = memory(spec, st, schedule_plan(graph, spec.parallel.schedule))
    world = st.world_size
    tokens = float(spec.tokens_per_step)
    peak = float(hw.peak_of(spec.train.precision.compute_dtype, f"precision {spec.train.precision.value}"))
    parameters, active, per_token = _model_counts(spec, graph)
    model_flops = tokens * per_token
    derived = {
        "world_size": world, "microbatches": st.microbatches, "micro_batch": int(spec.train.micro_batch),
        "global_batch": int(spec.train.global_batch), "tokens_per_step": tokens,
        "layers_per_chunk": float(graph.layers_per_chunk),
        "parameters": parameters, "active_parameters": active, "model_flops_per_step": model_flops,
        "peak_flops": peak, "critical_rank": int(step.critical_rank),
    }
    mfu, hfu = model_flops / (t * world * peak), float(p.gpu_flops / (t * peak))
    return Prediction(
        step_time_s=t, tokens_per_s=tokens / t, mfu=mfu, hfu=hfu, caveats=caveats(spec, mfu, hfu),
        breakdown=breakdown,
        memory=MemoryReport(weights=float(mem.weights), grads=float(mem.grads), optimizer=float(mem.optimizer),
                            activations=float(mem.activations), logits=float(mem.logits),
                            overhead=float(mem.overhead), total=float(mem.total), capacity=float(mem.capacity),
                            oom=bool(mem.oom), rank=int(mem.rank), host=float(mem.host)),
        derived=derived, step=step,
        report=Report(ops=lambda: _rows(graph, prices, corr, hw),
                      provenance=lambda: _provenance(p, model_id, calibrated), uncertainty=uncertainty))


def _model_counts(spec: Spec, graph: OpGraph) -> tuple[float, float, float]:
    """(parameters, active parameters, model FLOPs per token) of ``spec``'s model, kept in the memo
    of its graph, whose key holds the model and the stack that pads its vocabulary."""
    counts = graph.memo.get("model_counts")
    if counts is None:
        vocab = padded_vocab(spec)
        counts = graph.memo["model_counts"] = (float(params.count(spec.model, vocab)),
                                               float(params.active(spec.model, vocab)),
                                               float(model_flops_per_token(spec)))
    return counts


def _provenance(p: Priced, model_id: str, calibrated: str) -> Provenance:
    spec, graph, corr, residuals = p.spec, p.graph, p.correction, p.residuals
    served = measured.served_mask(p.prices, len(graph.ops))
    return Provenance(spec_hash=spec_hash(spec), source=spec.source, residuals=model_id,
                      uncorrected=tuple(sorted({op.family for op, c in zip(graph.ops, corr.covered) if not c})),
                      residuals_note=p.note,
                      residual_store=None if residuals is None else _residual_use(residuals, graph, corr, served),
                      measured=measured.notes(graph, p.prices),
                      calibration=calibration.notes(graph, spec), stack=spec.train.stack.value,
                      calibrated_by=calibrated)


def _clean(breakdown: dict[str, Any], total: float) -> dict[str, float]:
    """Floats, with the rounding noise of an exact cancellation (a zero bubble) set to 0."""
    return {k: (0.0 if abs(float(v)) <= 1e-12 * total else float(v)) for k, v in breakdown.items()}
