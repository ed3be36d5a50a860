"""Cross-field checks on a resolved spec, each reported with its equation filled in.

A check that involves a free symbol is decided by SymPy when it can be (``8*x`` is divisible
by 8 for any integer ``x``) and skipped when it cannot: a symbolic spec is a family of specs
and only the members that are later evaluated need to satisfy it.

Grouped-query attention with fewer kv heads than tp: Megatron replicates each kv head over
``tp / kv_heads`` ranks, so we require ``tp % kv_heads == 0`` there (and ``kv_heads % tp == 0``
when ``kv_heads >= tp``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from llmp.dsl.spec import Position, Spec, ZeroStage
from llmp.errors import SpecError, Span
from llmp.sym import is_expr, sympy

if TYPE_CHECKING:  # SymPy only decides checks on free symbols (llmp.sym)
    import sympy as sp

SpanOf = Callable[[str], Span | None]


def _expr(x: Any) -> sp.Expr:
    return sympy().Integer(x) if isinstance(x, int) else x


def divides(d: Any, n: Any) -> bool | None:
    """Whether ``d`` divides ``n``; None when free symbols leave it undecided."""
    if isinstance(d, int) and isinstance(n, int):
        return n % d == 0
    zero = sympy().Mod(_expr(n), _expr(d)).is_zero
    return None if zero is None else bool(zero)


def _compare(a: Any, b: Any) -> int | None:
    """-1, 0 or 1 as ``a`` <, ==, > ``b``; None when undecided."""
    if not (is_expr(a) or is_expr(b)):  # plain numbers: no SymPy needed
        return (a > b) - (a < b)
    diff = sympy().expand(_expr(a) - _expr(b))
    if diff.is_zero:
        return 0
    if diff.is_positive:
        return 1
    if diff.is_negative:
        return -1
    return None


class _Checker:
    def __init__(self, spec: Spec, span_of: SpanOf) -> None:
        self.spec = spec
        self.span_of = span_of

    def fail(self, message: str, paths: tuple[str, ...], label: str, hint: str | None = None
             ) -> None:
        span = next((s for s in map(self.span_of, paths) if s is not None), None)
        raise SpecError(message, span, label=label, hint=hint)

    def need_divides(self, d: Any, n: Any, message: str, paths: tuple[str, ...],
                     hint: str | None = None) -> None:
        if divides(d, n) is False:
            remainder = f" = {n % d}" if isinstance(n, int) and isinstance(d, int) else ""
            self.fail(message.replace("{rem}", remainder), paths, "not divisible", hint)


def check(spec: Spec, span_of: SpanOf) -> None:
    """Raise :class:`SpecError` on the first violated cross-field rule."""
    c = _Checker(spec, span_of)
    _layout(c)
    _heads(c)
    _widths(c)
    _pipeline(c)
    _batch(c)
    _experts(c)
    _ceilings(c)
    _links(c)
    _model_shape(c)
    _stack(c)


def _layout(c: _Checker) -> None:
    p, cl = c.spec.parallel, c.spec.cluster
    world = cl.nodes * cl.node.gpus_per_node
    product = p.dp * p.tp * p.pp * p.cp
    if _compare(product, world) not in (0, None):
        c.fail(f"dp({p.dp}) * tp({p.tp}) * pp({p.pp}) * cp({p.cp}) = {product} != {world} GPUs "
               f"(cluster.nodes({cl.nodes}) * node.gpus_per_node({cl.node.gpus_per_node}))",
               ("parallel.dp", "parallel.tp", "cluster.nodes"), "layout mismatch",
               "make the degrees multiply to the GPU count, or leave dp out to derive it")
    node = cl.node
    c.need_divides(node.gpus_per_node, node.domain,
                   f"node.nvlink_domain({node.domain}) % gpus_per_node({node.gpus_per_node}){{rem}}: an "
                   "NVLink domain is a whole number of nodes", ("node.nvlink_domain",),
                   "give the GPUs of the whole switch fabric, e.g. 72 for 18 trays of 4")


def _heads(c: _Checker) -> None:
    m, tp = c.spec.model, c.spec.parallel.tp
    paths = ("parallel.tp", "model.heads")
    c.need_divides(tp, m.heads, f"model.heads({m.heads}) % tp({tp}){{rem}}: tp must divide the "
                   "attention heads", paths)
    c.need_divides(m.kv_heads, m.heads, f"model.heads({m.heads}) % kv_heads({m.kv_heads}){{rem}}"
                   ": kv_heads must divide heads (each kv head serves a group of query heads)",
                   ("model.kv_heads", "model.heads"))
    if _compare(m.kv_heads, tp) == -1:
        c.need_divides(m.kv_heads, tp, f"tp({tp}) % kv_heads({m.kv_heads}){{rem}}: with fewer kv "
                       "heads than tp, each kv head is replicated tp / kv_heads times",
                       ("parallel.tp", "model.kv_heads"))
    else:
        c.need_divides(tp, m.kv_heads, f"model.kv_heads({m.kv_heads}) % tp({tp}){{rem}}: tp must "
                       "divide the kv heads", ("parallel.tp", "model.kv_heads"))


def _widths(c: _Checker) -> None:
    m, p = c.spec.model, c.spec.parallel
    c.need_divides(p.tp, m.ffn_hidden, f"model.ffn_hidden({m.ffn_hidden}) % tp({p.tp}){{rem}}: "
                   "tp must divide the MLP width", ("parallel.tp", "model.ffn_hidden"))
    if m.moe is not None:
        c.need_divides(p.expert_tp, m.moe.expert_ffn_hidden,
                       f"model.moe.expert_ffn_hidden({m.moe.expert_ffn_hidden}) % etp({p.expert_tp})"
                       "{rem}: the expert tensor-parallel degree must divide the expert MLP width",
                       ("parallel.etp", "parallel.tp", "model.moe.expert_ffn_hidden"))
    if p.sequence_parallel:
        c.need_divides(p.tp, m.seq_len, f"model.seq_len({m.seq_len}) % tp({p.tp}){{rem}}: "
                       "sequence parallelism splits the sequence over tp",
                       ("parallel.sequence_parallel", "model.seq_len"))
    c.need_divides(p.cp, m.seq_len, f"model.seq_len({m.seq_len}) % cp({p.cp}){{rem}}: context "
                   "parallelism splits the sequence over cp", ("parallel.cp", "model.seq_len"))


def _pipeline(c: _Checker) -> None:
    m, p = c.spec.model, c.spec.parallel
    if isinstance(p.pp, int) and isinstance(p.vp, int):
        # The schedule table lives with the composition, which imports the DSL.
        from llmp.compose.schedules import entry

        # What a schedule needs of pp and vp is a property of the spec; what it needs of the
        # microbatches (the interleaved schedule's groups, DualPipe's even count) is a layout that
        # cannot run, an InfeasibleError when the structure is built, as sweeps expect.
        schedule = entry(p.schedule)
        unmet = schedule.requires(p.pp, p.vp, None, None)
        if unmet:
            c.fail(unmet, ("parallel.schedule", "parallel.vp", "parallel.pp"), "bad schedule", schedule.hint)
    if all(isinstance(v, int) for v in (m.layers, p.pp, p.vp)):
        try:
            # The split rules live with the analytic model; imported here because the analytic
            # package imports the DSL.
            from llmp.analytic.split import SplitError, split
            split(c.spec)
        except SplitError as err:
            if not err.symbolic:  # a free symbol leaves the split undecided: checked when evaluated
                c.fail(err.message, (err.path,), err.label, err.hint)
    elif p.stage_layers is None and p.first_stage_layers is None and p.last_stage_layers is None \
            and not (p.account_for_embedding or p.account_for_loss or p.partition):
        c.need_divides(p.pp * p.vp, m.layers, f"model.layers({m.layers}) % (pp({p.pp}) * vp({p.vp}))"
                       "{rem}: the layers do not split equally over the pipeline chunks",
                       ("parallel.pp", "model.layers"))


def _batch(c: _Checker) -> None:
    t, p = c.spec.train, c.spec.parallel
    c.need_divides(t.micro_batch * p.dp, t.global_batch,
                   f"train.global_batch({t.global_batch}) % (micro_batch({t.micro_batch}) * "
                   f"dp({p.dp})){{rem}}: the global batch must split into whole microbatches "
                   "per data-parallel replica", ("train.global_batch", "train.micro_batch"),
                   "make global_batch a multiple of micro_batch * dp")


def _experts(c: _Checker) -> None:
    m, p = c.spec.model, c.spec.parallel
    if m.moe is None:
        if _compare(p.ep, 1) == 1:
            c.fail(f"ep({p.ep}) > 1 but the model has no moe block", ("parallel.ep",),
                   "no experts", "set ep = 1, or add moe { ... } to the model")
        return
    if _compare(m.moe.top_k, m.moe.experts) == 1:
        c.fail(f"model.moe.top_k({m.moe.top_k}) > experts({m.moe.experts})",
               ("model.moe.top_k",), "bad value")
    c.need_divides(p.ep, p.dp * p.cp, f"dp({p.dp}) * cp({p.cp}) % ep({p.ep}){{rem}}: experts are "
                   "sharded over a slice of dp x cp", ("parallel.ep",))
    c.need_divides(p.ep, m.moe.experts, f"model.moe.experts({m.moe.experts}) % ep({p.ep}){{rem}}"
                   ": every expert-parallel rank needs the same number of experts",
                   ("parallel.ep", "model.moe.experts"))
    if p.etp is not None:
        c.need_divides(p.etp, p.tp, f"tp({p.tp}) % etp({p.etp}){{rem}}: llmp splits an expert over a "
                       "divisor of the tensor-parallel ranks (the rest hold copies)", ("parallel.etp",),
                       "give etp a divisor of tp, or leave it out (etp = tp)")
    if _compare(p.tp, 1) == 1 and not p.sequence_parallel:
        c.fail(f"tp({p.tp}) > 1 with a moe block needs sequence_parallel = true: Megatron-Core refuses MoE "
               "with tensor parallelism otherwise (megatron/training/arguments.py, validate_args: \"When "
               "using MoE and tensor parallelism, sequence parallelism must be used.\")",
               ("parallel.sequence_parallel", "parallel.tp"), "contradictory fields",
               "set sequence_parallel = true, or tp = 1")
    if _compare(m.moe.imbalance, 1) == -1:
        c.fail(f"model.moe.imbalance({m.moe.imbalance}) < 1: the busiest rank carries at least a balanced "
               "share of the routed tokens", ("model.moe.imbalance",), "bad value", "use 1 for a balanced load")
    last_dense = _compare(m.moe.first_dense_layers, m.layers)
    if last_dense in (0, 1):
        c.fail(f"model.moe.first_dense_layers({m.moe.first_dense_layers}) >= layers({m.layers}): no layer "
               "would be a MoE layer", ("model.moe.first_dense_layers",), "bad value",
               "remove the moe block for a dense model")


def _ceilings(c: _Checker) -> None:
    """A measured rate needs the dtype's datasheet peak and cannot beat it."""
    gpu = c.spec.cluster.gpu
    for block in ("achievable", "flash_attention"):
        measured = getattr(gpu, block)
        if measured is None:
            continue
        for dtype, rate in measured.rates.items():
            path = f"gpu.{block}.{dtype.value}"
            peak = gpu.peak_flops.get(dtype)
            if peak is None:
                c.fail(f"{path} is given but gpu '{gpu.id}' has no {dtype.value} peak in flops",
                       (path,), "no peak", f"add flops {{ {dtype.value} = ... }} or remove {path}")
            elif _compare(rate, peak) == 1:
                c.fail(f"{path}({_rate(rate, 1e12, 'TFLOP/s')}) > gpu.flops.{dtype.value}"
                       f"({_rate(peak, 1e12, 'TFLOP/s')}): a "
                       "measured rate cannot beat the datasheet peak", (path,), "bad value",
                       "check the units and the dtype of the measurement")


def _links(c: _Checker) -> None:
    """One pair of endpoints cannot get more than an endpoint's whole bandwidth."""
    cl = c.spec.cluster
    for path, link in (("node.intra", cl.node.intra), ("node.inter", cl.node.inter),
                       ("cluster.inter", cl.inter)):
        if link.peer_bandwidth is not None and _compare(link.peer_bandwidth, link.bandwidth) == 1:
            c.fail(f"{path}.peer_bandwidth({_rate(link.peer_bandwidth, 1e9, 'GB/s')}) > {path}.bandwidth"
                   f"({_rate(link.bandwidth, 1e9, 'GB/s')}) on link {link.id}: one pair of endpoints cannot "
                   "get more than an endpoint's whole bandwidth", (f"{path}.peer_bandwidth",),
                   "bad value", "peer_bandwidth is per pair, bandwidth per endpoint (all its links)")


def _rate(value: Any, scale: float, unit: str) -> str:
    """``value`` (SI) in ``unit`` for a message; a symbolic value as its expression."""
    return f"{float(value) / scale:g} {unit}" if isinstance(value, int | float) else str(value)


def _model_shape(c: _Checker) -> None:
    """Fields that only mean something together with another."""
    m = c.spec.model
    if m.position is not Position.ROTARY and _compare(m.rotary_pct, 1) == -1:
        c.fail(f"model.rotary_pct({m.rotary_pct}) < 1 but position = {m.position.value}: only rotary "
               "embedding rotates a part of each head", ("model.rotary_pct",), "contradictory fields",
               "set position = rotary, or remove rotary_pct")
    if _compare(m.full_attention_every, 0) == 1 and _compare(m.window, 0) == 0:
        c.fail(f"model.full_attention_every({m.full_attention_every}) is set but window = 0: without a window "
               "every layer attends to the whole sequence", ("model.full_attention_every",),
               "contradictory fields", "give the sliding window, e.g. window = 128")
    if m.mla is not None and m.position is not Position.ROTARY:
        c.fail(f"a mla block with position = {m.position.value}: multi-head latent attention rotates its "
               "qk_rope_head_dim dims (decoupled RoPE, DeepSeek-V2 §2.1.3)", ("model.position",),
               "contradictory fields", "set position = rotary")
    if m.shared_norm and not m.parallel_residual:
        c.fail("model.shared_norm = true needs parallel_residual = true (one norm feeding both parallel branches)",
               ("model.shared_norm",), "contradictory fields", "set parallel_residual = true, or remove shared_norm")


def _stack(c: _Checker) -> None:
    """A field the spec set that the chosen stack cannot do (each rule cites the profile item)."""
    from llmp.stacks import profile  # stacks imports the spec types

    t, p = c.spec.train, c.spec.parallel
    prof = profile(t.stack)
    name = t.stack.value
    if t.attention not in prof.attentions.value:
        known = ", ".join(a.value for a in prof.attentions.value)
        c.fail(f"train.attention = {t.attention.value} but stack {name} launches only {known} "
               f"({prof.attentions.source})", ("train.attention", "train.stack"), "contradictory fields",
               f"pick one of {known}, or another stack")
    if t.attention.value == "unfused_fused_softmax" and t.precision.value not in ("fp16", "bf16"):
        c.fail(f"train.attention = unfused_fused_softmax needs fp16 or bf16 scores (precision = {t.precision.value}): "
               "the fused masked softmax kernel takes 16-bit inputs only", ("train.attention", "train.precision"),
               "contradictory fields", "use attention = unfused, or precision = bf16")
    if p.tp_comm_overlap and not prof.userbuffers.value:
        c.fail(f"parallel.tp_comm_overlap = true but stack {name} has no userbuffers overlap of TP "
               f"communication ({prof.userbuffers.source})", ("parallel.tp_comm_overlap", "train.stack"),
               "contradictory fields", "set tp_comm_overlap = false, or use stack = megatron_core or nemo")
    if p.zero in (ZeroStage.Z3, ZeroStage.FSDP) and not prof.fsdp.value:
        c.fail(f"parallel.zero = {p.zero.value} but stack {name} does not shard parameters ({prof.fsdp.source})",
               ("parallel.zero", "train.stack"), "contradictory fields", "use zero = 1, or an FSDP stack")
    order = list(ZeroStage)
    if _compare(p.pp, 1) == 1 and order.index(p.zero) > order.index(prof.pipeline_zero_max.value):
        c.fail(f"parallel.zero = {p.zero.value} with pp({p.pp}) > 1: stack {name} runs at most ZeRO "
               f"{prof.pipeline_zero_max.value.value} with pipeline parallelism ({prof.pipeline_zero_max.source})",
               ("parallel.zero", "parallel.pp"), "contradictory fields",
               f"use zero = {prof.pipeline_zero_max.value.value} or less, or pp = 1")
