"""Hypothesis strategies over the typed specs, built directly from the dataclasses.

* :func:`model_specs` — decoder-only models with consistent shapes: heads divide hidden
  (``hidden = heads * head_dim``), kv_heads divide heads, arch-appropriate norm/activation.
* :func:`parallel_layouts` — degrees whose product dp * tp * pp * cp is exactly ``world``,
  tp within a node, ep dividing dp * cp, interleaving only with vp > 1 and pp > 1.
* :func:`devices`, :func:`links`, :func:`clusters` — datasheet-range hardware.
* :func:`specs` — whole specs that satisfy every cross-field check of ``llmp.dsl.checks``
  (the model's heads, widths and layers fit the layout; the batch splits into microbatches),
  under every precision, schedule and stack the layout rules let run (``variants``).

Import with ``from strategies import model_specs`` (pytest puts tests/ on ``sys.path``).
"""

from __future__ import annotations

import math

from hypothesis import strategies as st
from strategies_analytic import variants

from llmp.hardware.spec import Cluster, Device, Dtype, Link, Node
from llmp.spec.model import Activation, Arch, ModelSpec, MoeSpec, Norm, Position
from llmp.spec.spec import Optimizer, ParallelSpec, Precision, Recompute, Schedule, Spec, Stack, TrainSpec, ZeroStage
from llmp.stacks import defaults

GiB = 2**30


def _stack_decided(section: str) -> dict[str, object]:
    """The generic stack's values of the fields a stack decides, but ``zero``, which the strategies
    draw themselves."""
    return {k: v for k, v in defaults(Stack.GENERIC, section).items() if k != "zero"}


def divisors(n: int) -> list[int]:
    """Positive divisors of ``n`` in increasing order."""
    return [d for d in range(1, n + 1) if n % d == 0]


@st.composite
def moe_specs(draw: st.DrawFn, ffn_hidden: int) -> MoeSpec:
    experts = draw(st.sampled_from([2, 4, 8, 16, 32, 64]))
    return MoeSpec(experts=experts, top_k=draw(st.integers(1, min(8, experts))),
                   expert_ffn_hidden=draw(st.sampled_from([ffn_hidden, ffn_hidden // 2])),
                   shared_experts=draw(st.integers(0, 2)),
                   capacity_factor=draw(st.sampled_from([1.0, 1.25, 2.0])))


@st.composite
def model_specs(draw: st.DrawFn, arch: Arch | None = None, moe: bool | None = None) -> ModelSpec:
    """A model whose heads divide hidden and whose kv_heads divide heads."""
    arch = arch or draw(st.sampled_from(list(Arch)))
    heads = draw(st.sampled_from([1, 2, 4, 8, 12, 16, 32, 64]))
    head_dim = draw(st.sampled_from([32, 64, 128]))
    hidden = heads * head_dim
    kv_heads = heads if arch is Arch.GPT else draw(st.sampled_from(divisors(heads)))
    ffn_hidden = 4 * hidden if arch is Arch.GPT else 256 * draw(st.integers(1, 4 * hidden // 256 + 8))
    llama = arch is Arch.LLAMA
    with_moe = draw(st.booleans()) if moe is None else moe
    return ModelSpec(
        name=f"{arch.value}_{hidden}", arch=arch, layers=draw(st.integers(1, 48)), hidden=hidden,
        heads=heads, kv_heads=kv_heads, head_dim=head_dim, ffn_hidden=ffn_hidden,
        vocab=draw(st.integers(256, 200_000)), seq_len=2 ** draw(st.integers(7, 13)),
        norm=Norm.RMSNORM if llama else Norm.LAYERNORM,
        activation=Activation.SWIGLU if llama else Activation.GELU,
        position=Position.ROTARY if llama else Position.LEARNED,
        tied_embeddings=not llama, bias=not llama,
        dropout=0.0 if llama else draw(st.sampled_from([0.0, 0.1])),
        moe=draw(moe_specs(ffn_hidden)) if with_moe else None)


@st.composite
def parallel_layouts(draw: st.DrawFn, world: int, *, gpus_per_node: int = 8,
                     experts: int | None = None) -> ParallelSpec:
    """Degrees with dp * tp * pp * cp == world and tp <= gpus_per_node (tp divides it).

    With ``experts`` given, ep divides both dp * cp and the expert count; otherwise ep = 1.
    The layout knows nothing of a model: use :func:`specs` for layouts that fit one.
    """
    tp = draw(st.sampled_from([d for d in divisors(gpus_per_node) if world % d == 0]))
    pp = draw(st.sampled_from(divisors(world // tp)))
    cp = draw(st.sampled_from(divisors(world // (tp * pp))[:3]))
    dp = world // (tp * pp * cp)
    ep = 1 if experts is None else draw(st.sampled_from(divisors(math.gcd(dp * cp, experts))))
    vp = draw(st.sampled_from([1, 2])) if pp > 1 else 1
    return ParallelSpec(**_stack_decided("parallel"), dp=dp, tp=tp, pp=pp, cp=cp, ep=ep, vp=vp,
                        sequence_parallel=draw(st.booleans()) if tp > 1 else False,
                        zero=draw(st.sampled_from(list(ZeroStage))),
                        schedule=Schedule.INTERLEAVED if vp > 1 else draw(
                            st.sampled_from([Schedule.GPIPE, Schedule.ONE_F_ONE_B])))


def devices() -> st.SearchStrategy[Device]:
    """An accelerator with datasheet-range numbers (always at least a bf16 peak)."""
    tflops = st.floats(1.0, 5000.0).map(lambda x: x * 1e12)
    peaks = st.dictionaries(st.sampled_from(list(Dtype)), tflops, max_size=len(Dtype))
    return st.builds(
        lambda peak, bf16, **kw: Device(peak_flops={**peak, Dtype.BF16: bf16}, **kw),
        peak=peaks, bf16=tflops, id=st.sampled_from(["gpu_a", "gpu_b", "test_gpu"]),
        name=st.just("Test GPU"), vendor=st.sampled_from(["NVIDIA", "AMD", "test"]),
        memory=st.integers(8, 192).map(lambda g: float(g * GiB)),
        mem_bandwidth=st.floats(0.2e12, 8e12), sms=st.integers(1, 264),
        clock=st.floats(0.8e9, 3.0e9), l2_cache=st.integers(1, 256).map(lambda m: float(m * 2**20)),
        tdp=st.floats(50.0, 1200.0), launch_overhead=st.floats(1e-6, 2e-5),
        scaleup_bandwidth=st.floats(0.0, 900e9))


def links(kind: str = "link") -> st.SearchStrategy[Link]:
    return st.builds(Link, id=st.just(kind), bandwidth=st.floats(1e9, 1e12),
                     latency=st.floats(0.0, 2e-5))


@st.composite
def clusters(draw: st.DrawFn, gpus_per_node: int | None = None) -> Cluster:
    per_node = gpus_per_node or draw(st.sampled_from([1, 2, 4, 8]))
    inter = draw(links("inter"))
    node = Node(id="test_node", gpu=draw(devices()), gpus_per_node=per_node,
                intra=draw(links("intra")), inter=inter)
    return Cluster(id="test_cluster", node=node, nodes=draw(st.integers(1, 16)), inter=inter)


def _fits(tp: int, m: ModelSpec, sequence_parallel: bool) -> bool:
    widths = [m.heads, m.ffn_hidden] + ([m.moe.expert_ffn_hidden] if m.moe else [])
    kv_ok = m.kv_heads % tp == 0 if m.kv_heads >= tp else tp % m.kv_heads == 0
    sp_ok = not sequence_parallel or m.seq_len % tp == 0
    return kv_ok and sp_ok and all(w % tp == 0 for w in widths)


@st.composite
def specs(draw: st.DrawFn) -> Spec:
    """A whole spec that passes every cross-field check."""
    cluster = draw(clusters())
    model = draw(model_specs())
    world, per_node = cluster.world_size, cluster.node.gpus_per_node
    sequence_parallel = draw(st.booleans())
    tp = draw(st.sampled_from([d for d in divisors(per_node)
                               if world % d == 0 and _fits(d, model, sequence_parallel)]))
    if model.moe is not None and tp > 1 and not sequence_parallel:  # MoE with tp needs SP (Megatron)
        tp = 1
    pp = draw(st.sampled_from([d for d in divisors(world // tp) if model.layers % d == 0]))
    vps = [v for v in (2, 4) if pp > 1 and model.layers % (pp * v) == 0]
    vp = draw(st.sampled_from([1, *vps]))
    cp = draw(st.sampled_from([d for d in divisors(world // (tp * pp))[:3] if model.seq_len % d == 0]))
    dp = world // (tp * pp * cp)
    ep = 1 if model.moe is None else draw(
        st.sampled_from(divisors(math.gcd(dp * cp, model.moe.experts))))
    schedule = Schedule.INTERLEAVED if vp > 1 else draw(
        st.sampled_from([Schedule.GPIPE, Schedule.ONE_F_ONE_B]))
    parallel = ParallelSpec(**_stack_decided("parallel"), dp=dp, tp=tp, pp=pp, cp=cp, ep=ep, vp=vp,
                            sequence_parallel=sequence_parallel and tp > 1,
                            zero=draw(st.sampled_from(list(ZeroStage))), schedule=schedule)
    micro_batch = draw(st.sampled_from([1, 2, 4]))
    precisions = [p for p in (Precision.BF16, Precision.FP16)
                  if p.compute_dtype in cluster.gpu.peak_flops]
    train = TrainSpec(**_stack_decided("train"), precision=draw(st.sampled_from(precisions)),
                      optimizer=draw(st.sampled_from(list(Optimizer))),
                      global_batch=micro_batch * dp * draw(st.integers(1, 16)),
                      micro_batch=micro_batch, recompute=draw(st.sampled_from(list(Recompute))))
    return draw(variants(Spec(model=model, train=train, parallel=parallel, cluster=cluster)))
