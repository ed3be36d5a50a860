"""Quantities computed from a spec, never typed in (``llmp check``'s ``derived``): world size,
microbatches, tokens per step, the padded vocab, parameters, layers per stage and chunk, the
cluster's peak. Exact: whole numbers stay ints, a ratio that is not whole is a ``Fraction`` (a
layout a user should see is uneven), and a free symbol keeps the SymPy expression.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from llmp.analytic import params
from llmp.analytic.split import SplitError, split
from llmp.spec.spec import Spec
from llmp.stacks import padded_vocab
from llmp.sym import sympy


def _ratio(a: Any, b: Any) -> Any:
    """``a / b`` exactly: an int when whole, a Fraction otherwise, SymPy when symbolic."""
    if isinstance(a, int) and isinstance(b, int):
        q = Fraction(a, b)
        return int(q) if q.denominator == 1 else q
    sp = sympy()
    return sp.simplify(sp.sympify(a) / b)


def derived(spec: Spec) -> dict[str, Any]:
    """Quantities computed from the spec (exact; SymPy expressions where symbols are free)."""
    m, p, cl = spec.model, spec.parallel, spec.cluster
    sp, vocab = sympy(), padded_vocab(spec)
    out: dict[str, Any] = {
        "world_size": spec.world_size,
        "gpus": cl.world_size,
        "microbatches": _ratio(spec.train.global_batch, spec.train.micro_batch * p.dp),
        "tokens_per_step": spec.tokens_per_step,
        "padded_vocab": vocab,
        "params": sp.expand(params.count(m, vocab)),
    }
    out.update(_layers(spec))
    if m.moe is not None:
        out["active_params"] = sp.expand(params.active(m, vocab))
    ft = spec.train.finetune
    if ft is not None and ft.lora:  # LoRA trains its adapters alone
        out["trainable_params"] = sp.expand(params.trainable_params(m, ft, vocab))
    dtype = spec.train.precision.compute_dtype
    peak = cl.gpu.peak_flops.get(dtype)
    if peak is not None:
        out["cluster_peak_flops"] = peak * cl.world_size
    return out


def _layers(spec: Spec) -> dict[str, Any]:
    """Layers per stage and chunk: one number for an even split, one per stage (and chunk) else."""
    m, p = spec.model, spec.parallel
    try:
        chunks = split(spec).chunks
    except SplitError:  # a free symbol leaves the split open
        chunks = ()
    if len(set(chunks)) > 1:
        stages = [sum(chunks[r::int(p.pp)]) for r in range(int(p.pp))]
        return {"stage_layers": stages, **({"chunk_layers": list(chunks)} if int(p.vp) > 1 else {})}
    return {"layers_per_stage": _ratio(m.layers, p.pp), "layers_per_chunk": _ratio(m.layers, p.pp * p.vp)}
