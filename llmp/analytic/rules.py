"""The layout rules: which degrees, widths, batches and pipeline splits a step can run with.

One rulebook, two callers, so a layout means the same everywhere:

* ``llmp.load`` (:mod:`llmp.dsl.checks`) turns the first violation of :func:`layout` into a
  :class:`~llmp.errors.SpecError` pointing at the field in the file;
* :func:`~llmp.analytic.structure.structure_of`, which ``predict``, ``evaluate``, ``search``,
  ``plan``, ``sensitivity`` and ``validate`` all go through, turns the first violation of
  :func:`layout` or :func:`runnable` into an :class:`~llmp.errors.InfeasibleError`, which sweeps
  skip. A sweep point that ``load`` would refuse is never priced.

:func:`layout` holds the rules a well-formed spec must meet; a rule that involves a free symbol is
decided by SymPy when it can be (``8*x`` is divisible by 8 for any integer ``x``) and skipped when
it cannot: a symbolic spec is a family of specs and only the members later evaluated must meet it.
:func:`runnable` holds what a layout needs to run once the numbers are known (what a schedule
needs of the microbatches); it is checked when the
structure is built, so a spec file that breaks one still loads and a sweep over it skips the point.

Every field a rule reads decides the structure (:data:`~llmp.compose.sweep.STRUCTURAL`), so
sweeps evaluate the rules once per group and never on arrays.

Grouped-query attention with fewer kv heads than tp: Megatron replicates each kv head over
``tp / kv_heads`` ranks, so we require ``tp % kv_heads == 0`` there (and ``kv_heads % tp == 0``
when ``kv_heads >= tp``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from llmp.analytic import split as splits
from llmp.analytic.schedules import entry
from llmp.analytic.split import SplitError, split
from llmp.spec.spec import CpComm, Spec, ZeroStage
from llmp.spec.values import compare, divides
from llmp.stacks import profile


@dataclass(frozen=True, slots=True)
class Violation:
    """A broken rule: the equation with its values filled in, and the fields to point at."""

    message: str
    paths: tuple[str, ...]
    """Spec paths the rule reads, the one to blame first (the first one the file wrote)."""
    label: str
    hint: str | None = None


def _divides(d: Any, n: Any, message: str, paths: tuple[str, ...], hint: str | None = None) -> Iterator[Violation]:
    if divides(d, n) is False:
        remainder = f" = {n % d}" if isinstance(n, int) and isinstance(d, int) else ""
        yield Violation(message.replace("{rem}", remainder), paths, "not divisible", hint)


def layout(spec: Spec) -> Iterator[Violation]:
    """Every violated layout rule of ``spec``: :func:`shape`'s, then :func:`stack`'s."""
    yield from shape(spec)
    yield from stack(spec)


def shape(spec: Spec) -> Iterator[Violation]:
    """The rules of the mesh, the widths, the batch and the pipeline split."""
    for rule in (_world, _heads, _ulysses, _widths, _pipeline, _batch, _experts, _offload):
        yield from rule(spec)


def _world(spec: Spec) -> Iterator[Violation]:
    p, cl = spec.parallel, spec.cluster
    world = cl.world_size
    product = spec.world_size
    if compare(product, world) not in (0, None):
        yield Violation(f"dp({p.dp}) * tp({p.tp}) * pp({p.pp}) * cp({p.cp}) = {product} != {world} GPUs "
                        f"(cluster.nodes({cl.nodes}) * node.gpus_per_node({cl.node.gpus_per_node}))",
                        ("parallel.dp", "parallel.tp", "cluster.nodes"), "layout mismatch",
                        "make the degrees multiply to the GPU count, or leave dp out to derive it")
    node = cl.node
    yield from _divides(node.gpus_per_node, node.domain,
                        f"node.nvlink_domain({node.domain}) % gpus_per_node({node.gpus_per_node}){{rem}}: an "
                        "NVLink domain is a whole number of nodes", ("node.nvlink_domain",),
                        "give the GPUs of the whole switch fabric, e.g. 72 for 18 trays of 4")


def _heads(spec: Spec) -> Iterator[Violation]:
    m, tp = spec.model, spec.parallel.tp
    yield from _divides(tp, m.heads, f"model.heads({m.heads}) % tp({tp}){{rem}}: tp must divide the attention heads",
                        ("parallel.tp", "model.heads"))
    yield from _divides(m.kv_heads, m.heads, f"model.heads({m.heads}) % kv_heads({m.kv_heads}){{rem}}: kv_heads "
                        "must divide heads (each kv head serves a group of query heads)",
                        ("model.kv_heads", "model.heads"))
    if compare(m.kv_heads, tp) == -1:
        yield from _divides(m.kv_heads, tp, f"tp({tp}) % kv_heads({m.kv_heads}){{rem}}: with fewer kv heads than tp, "
                            "each kv head is replicated tp / kv_heads times", ("parallel.tp", "model.kv_heads"))
    else:
        yield from _divides(tp, m.kv_heads, f"model.kv_heads({m.kv_heads}) % tp({tp}){{rem}}: tp must divide the "
                            "kv heads", ("parallel.tp", "model.kv_heads"))


def _ulysses(spec: Spec) -> Iterator[Violation]:
    """``cp_comm = a2a`` hands each cp rank 1/cp of a tp rank's query and kv heads (TE
    ``flash_attn_a2a_communicate`` splits the head dimension by cp)."""
    m, p = spec.model, spec.parallel
    if p.cp_comm is not CpComm.A2A or compare(p.cp, 1) != 1:
        return
    hint = "use parallel.cp_comm = p2p or all_gather, or a cp that divides the heads of a tp rank"
    yield from _divides(p.cp * p.tp, m.heads, f"model.heads({m.heads}) % (tp({p.tp}) * cp({p.cp})){{rem}}: Ulysses "
                        "context parallelism splits each tp rank's heads over cp", ("parallel.cp", "model.heads"), hint)
    # Fewer kv heads than tp: each tp rank holds one replicated kv head, which cp cannot split.
    kv_heads = m.kv_heads if compare(m.kv_heads, p.tp) != -1 else p.tp
    yield from _divides(p.cp * p.tp, kv_heads, f"model.kv_heads({m.kv_heads}) % (tp({p.tp}) * cp({p.cp})){{rem}}: "
                        "Ulysses context parallelism splits each tp rank's kv heads over cp",
                        ("parallel.cp", "model.kv_heads"), hint)


def _widths(spec: Spec) -> Iterator[Violation]:
    m, p = spec.model, spec.parallel
    yield from _divides(p.tp, m.ffn_hidden, f"model.ffn_hidden({m.ffn_hidden}) % tp({p.tp}){{rem}}: tp must divide "
                        "the MLP width", ("parallel.tp", "model.ffn_hidden"))
    if m.moe is not None:
        yield from _divides(p.expert_tp, m.moe.expert_ffn_hidden,
                            f"model.moe.expert_ffn_hidden({m.moe.expert_ffn_hidden}) % etp({p.expert_tp}){{rem}}: the "
                            "expert tensor-parallel degree must divide the expert MLP width",
                            ("parallel.etp", "parallel.tp", "model.moe.expert_ffn_hidden"))
    if p.sequence_parallel:
        yield from _divides(p.tp, m.seq_len, f"model.seq_len({m.seq_len}) % tp({p.tp}){{rem}}: sequence parallelism "
                            "splits the sequence over tp", ("parallel.sequence_parallel", "model.seq_len"))
    yield from _divides(p.cp, m.seq_len, f"model.seq_len({m.seq_len}) % cp({p.cp}){{rem}}: context parallelism "
                        "splits the sequence over cp", ("parallel.cp", "model.seq_len"))


def _pipeline(spec: Spec) -> Iterator[Violation]:
    m, p = spec.model, spec.parallel
    if isinstance(p.pp, int) and isinstance(p.vp, int):
        # The schedule table lives with the composition; only its requirements are read here.
        # What a schedule needs of pp and vp is a property of the spec; what it needs of the
        # microbatches (the interleaved schedule's groups, DualPipe's even count) is :func:`runnable`'s.
        schedule = entry(p.schedule)
        unmet = schedule.requires(p.pp, p.vp, None, None)
        if unmet:
            yield Violation(unmet, ("parallel.schedule", "parallel.vp", "parallel.pp"), "bad schedule", schedule.hint)
    if all(isinstance(v, int) for v in (m.layers, p.pp, p.vp)):
        try:
            split(spec)
        except SplitError as err:
            if not err.symbolic:  # a free symbol leaves the split undecided: checked when evaluated
                yield Violation(err.message, (err.path,), err.label, err.hint)
    elif p.stage_layers is None and p.first_stage_layers is None and p.last_stage_layers is None \
            and not (p.account_for_embedding or p.account_for_loss or p.partition or p.pipeline_layout) \
            and splits.UNEVEN.get(spec.train.stack, (splits.Uneven.REFUSE, ""))[0] is splits.Uneven.REFUSE:
        yield from _divides(p.pp * p.vp, m.layers, f"model.layers({m.layers}) % (pp({p.pp}) * vp({p.vp})){{rem}}: the "
                            "layers do not split equally over the pipeline chunks", ("parallel.pp", "model.layers"))


def _batch(spec: Spec) -> Iterator[Violation]:
    t, p = spec.train, spec.parallel
    yield from _divides(t.micro_batch * p.dp, t.global_batch,
                        f"train.global_batch({t.global_batch}) % (micro_batch({t.micro_batch}) * dp({p.dp})){{rem}}: "
                        "the global batch must split into whole microbatches per data-parallel replica",
                        ("train.global_batch", "train.micro_batch"), "make global_batch a multiple of micro_batch * dp")


def _experts(spec: Spec) -> Iterator[Violation]:
    m, p = spec.model, spec.parallel
    if m.moe is None:
        if compare(p.ep, 1) == 1:
            yield Violation(f"ep({p.ep}) > 1 but the model has no moe block", ("parallel.ep",), "no experts",
                            "set ep = 1, or add moe { ... } to the model")
        return
    if compare(m.moe.top_k, m.moe.experts) == 1:
        yield Violation(f"model.moe.top_k({m.moe.top_k}) > experts({m.moe.experts})", ("model.moe.top_k",), "bad value")
    # MoE parallel folding (Megatron-Core): the expert mesh etp x ep x edp x pp covers the same ranks
    # as the attention mesh tp x cp x dp x pp (llmp.analytic.layout), so etp x ep must divide
    # tp x cp x dp; initialize_model_parallel raises "world_size ... is not divisible by
    # expert_tensor_model_pipeline_parallel size" otherwise (NVIDIA/Megatron-LM@00caa53:
    # megatron/core/parallel_state.py).
    yield from _divides(p.expert_tp * p.ep, p.tp * p.cp * p.dp,
                        f"tp({p.tp}) * cp({p.cp}) * dp({p.dp}) % (etp({p.expert_tp}) * ep({p.ep})){{rem}}: the expert "
                        "mesh etp x ep x edp must cover the ranks of a pipeline stage (MoE parallel folding)",
                        ("parallel.ep", "parallel.etp"),
                        "choose ep (and etp, default tp) so that etp * ep divides tp * cp * dp")
    yield from _divides(p.ep, m.moe.experts, f"model.moe.experts({m.moe.experts}) % ep({p.ep}){{rem}}: every "
                        "expert-parallel rank needs the same number of experts", ("parallel.ep", "model.moe.experts"))
    if compare(p.tp, 1) == 1 and not p.sequence_parallel:
        yield Violation(f"tp({p.tp}) > 1 with a moe block needs sequence_parallel = true: Megatron-Core refuses MoE "
                        "with tensor parallelism otherwise (megatron/training/arguments.py, validate_args: \"When "
                        "using MoE and tensor parallelism, sequence parallelism must be used.\")",
                        ("parallel.sequence_parallel", "parallel.tp"), "contradictory fields",
                        "set sequence_parallel = true, or tp = 1")
    if compare(m.moe.first_dense_layers, m.layers) in (0, 1):
        yield Violation(f"model.moe.first_dense_layers({m.moe.first_dense_layers}) >= layers({m.layers}): no layer "
                        "would be a MoE layer", ("model.moe.first_dense_layers",), "bad value",
                        "remove the moe block for a dense model")


def _offload(spec: Spec) -> Iterator[Violation]:
    """What offloading to host memory needs: a fraction of the optimizer, gradients and parameters
    only for an optimizer that runs on the host (FSDP's CPUOffload moves the update to the CPU with
    them; DeepSpeed offloads parameters only with the optimizer), parameters only where they are
    sharded and gathered per layer, fewer offloaded layers than a chunk holds (Megatron-Core:
    cpu_offloading_num_layers below num_layers), and the host's link and memory rates to price them."""
    t, p, m = spec.train, spec.parallel, spec.model
    f = t.offload_optimizer
    if compare(f, 1) == 1:
        yield Violation(f"train.offload_optimizer({f}) > 1: it is the fraction of the optimizer held on the host",
                        ("train.offload_optimizer",), "bad value", "give a fraction from 0 to 1")
    for name in ("offload_grads", "offload_params"):
        if getattr(t, name) and compare(f, 1) != 0:
            yield Violation(f"train.{name} = true needs train.offload_optimizer = 1 (got {f}): gradients and "
                            "parameters stay on the host only for an optimizer that runs there (DeepSpeed "
                            "ZeRO-Offload; FSDP CPUOffload updates on the CPU)",
                            (f"train.{name}", "train.offload_optimizer"), "contradictory fields",
                            "set offload_optimizer = 1")
    if t.offload_params and p.zero not in (ZeroStage.Z3, ZeroStage.FSDP):
        yield Violation(f"train.offload_params = true with parallel.zero = {p.zero.value}: only sharded parameters "
                        "gathered layer by layer (ZeRO-3, FSDP) live on the host between uses",
                        ("train.offload_params", "parallel.zero"), "contradictory fields", "set zero = 3 or fsdp")
    chunk = m.layers / (p.pp * p.vp)
    if compare(t.offload_activations, chunk) in (0, 1) and compare(t.offload_activations, 0) == 1:
        yield Violation(f"train.offload_activations({t.offload_activations}) >= the layers of a pipeline chunk "
                        f"(model.layers({m.layers}) / (pp({p.pp}) * vp({p.vp})) = {chunk}): Megatron-Core offloads "
                        "fewer layers than it builds (cpu_offloading_num_layers < num_layers)",
                        ("train.offload_activations",), "bad value", "offload fewer layers")
    gpu = spec.cluster.gpu
    offloads = compare(t.offload_activations, 0) == 1 or compare(f, 0) == 1 or t.offload_params or t.offload_grads
    if offloads and compare(gpu.host_bandwidth, 0) != 1:
        yield Violation(f"offloading to host memory with gpu {gpu.id}'s host_bandwidth not given: the copies cross "
                        "the GPU's host link", ("gpu.host_bandwidth", "train.offload_optimizer"), "missing field",
                        "give gpu.host_bandwidth (PCIe Gen5 x16: 64 GB/s per direction; NVLink-C2C: 450 GB/s)")
    if compare(f, 0) == 1 and compare(gpu.host_memory_bandwidth, 0) != 1:
        yield Violation(f"train.offload_optimizer({f}) with gpu {gpu.id}'s host_memory_bandwidth not given: the "
                        "host's update streams the offloaded states through host memory",
                        ("gpu.host_memory_bandwidth", "train.offload_optimizer"), "missing field",
                        "give gpu.host_memory_bandwidth, the host memory bandwidth per GPU")


def stack(spec: Spec) -> Iterator[Violation]:
    """What the training stack can run with pipeline parallelism (the profile item cites it)."""
    p = spec.parallel
    item = profile(spec.train.stack).pipeline_zero_max
    order = list(ZeroStage)
    if compare(p.pp, 1) == 1 and order.index(p.zero) > order.index(item.value):
        yield Violation(f"parallel.zero = {p.zero.value} with pp({p.pp}) > 1: stack {spec.train.stack.value} runs at "
                        f"most ZeRO {item.value.value} with pipeline parallelism ({item.source})",
                        ("parallel.zero", "parallel.pp"), "contradictory fields",
                        f"use zero = {item.value.value} or less, or pp = 1")


MAX_MICROBATCHES = 50_000
"""Microbatches per pipeline in one step, at most: about 45x the most in validation/ (SC21 Table 2's
GPT 529.6B: global batch 2240 over dp 2 at micro batch 1, 1,120 per pipeline). The schedule plan
has one node per task, so a step of millions would take minutes and gigabytes to build."""


def runnable(spec: Spec, microbatches: int, group: int) -> Iterator[Violation]:
    """What a layout with numeric degrees needs to run, beyond :func:`layout`: ``microbatches``
    per pipeline and the interleaved schedule's ``group`` of them."""
    p, m = spec.parallel, spec.model
    pp, vp, dp = (int(x) for x in (p.pp, p.vp, p.dp))
    if vp > 1 and pp == 1:
        yield Violation(f"vp = {vp} (virtual pipeline stages) needs pp > 1", ("parallel.vp",), "bad schedule")
    if microbatches < 1:
        yield Violation(f"global_batch({spec.train.global_batch}) < micro_batch({spec.train.micro_batch}) * dp({dp})",
                        ("train.global_batch",), "not divisible")
    if microbatches > MAX_MICROBATCHES:
        yield Violation(f"global_batch({spec.train.global_batch}) / (micro_batch({spec.train.micro_batch}) * dp({dp})) "
                        f"= {microbatches} microbatches per pipeline and step, more than {MAX_MICROBATCHES:,}",
                        ("train.global_batch", "train.micro_batch"), "too many microbatches",
                        "a step of that many microbatches is likely a slip (a token count as the batch); use a "
                        "larger micro_batch or dp, or a smaller global_batch")
    schedule = entry(p.schedule)
    unmet = schedule.requires(pp, vp, microbatches, group)
    if unmet:
        yield Violation(unmet, ("parallel.schedule",), "bad schedule", schedule.hint)
    if m.moe is not None and m.parallel_residual:
        yield Violation("a parallel residual with a MoE MLP: llmp models MoE layers with the sequential residual "
                        "(every MoE model it knows uses one)", ("model.parallel_residual",), "contradictory fields")
