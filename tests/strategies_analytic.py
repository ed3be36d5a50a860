"""Specs built directly from the dataclasses, and hypothesis strategies over them.

The hardware numbers are the H100 SXM5 / DGX H100 datasheet values of the catalog (dense BF16
989 TFLOP/s, 3.35 TB/s, NVLink4 450 GB/s per direction, 8 x 400 Gb/s NDR per node); models are
Llama-like (RMSNorm, SwiGLU, rotary, GQA) or GPT-like (LayerNorm, GELU, learned positions).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import strategies as st

from llmp.analytic.structure import structure_of
from llmp.dsl.checks import check
from llmp.errors import LlmpError
from llmp.hardware.spec import Cluster, Device, Dtype, Link, Node
from llmp.spec.model import Activation, Arch, MlaSpec, ModelSpec, MoeSpec, Norm, Position, Router
from llmp.spec.spec import (
    Attention,
    Dispatcher,
    ParallelSpec,
    Precision,
    Recompute,
    Schedule,
    Spec,
    Stack,
    TrainSpec,
    ZeroStage,
)
from llmp.stacks import DEFAULT_FIELDS, defaults, profile

TERA = 1e12


def h100(**over: Any) -> Device:
    base = dict(id="h100_sxm5_80gb", name="NVIDIA H100 SXM5 80GB", vendor="NVIDIA",
                peak_flops={Dtype.FP64: 34 * TERA, Dtype.FP32: 67 * TERA, Dtype.TF32: 494.5 * TERA,
                            Dtype.BF16: 989 * TERA, Dtype.FP16: 989 * TERA, Dtype.FP8: 1979 * TERA},
                memory=80 * 2**30, mem_bandwidth=3.35e12, sms=132, clock=1.83e9, l2_cache=50 * 2**20,
                tdp=700.0, launch_overhead=5e-6, scaleup_bandwidth=450e9)
    base.update(over)
    return Device(**base)


def cluster(nodes: int = 1, gpus_per_node: int = 8, device: Device | None = None,
            intra_bw: float = 450e9, inter_bw: float = 400e9, intra_lat: float = 2e-6,
            inter_lat: float = 5e-6) -> Cluster:
    inter = Link(id="ndr", bandwidth=inter_bw, latency=inter_lat)
    node = Node(id="dgx_h100", gpu=device or h100(), gpus_per_node=gpus_per_node,
                intra=Link(id="nvlink4", bandwidth=intra_bw, latency=intra_lat), inter=inter)
    return Cluster(id="test", node=node, nodes=nodes, inter=inter)


def llama(layers: int = 32, hidden: int = 4096, heads: int = 32, kv_heads: int = 8, ffn: int = 14336,
          vocab: int = 128256, seq_len: int = 8192, **over: Any) -> ModelSpec:
    base = dict(name="llama", arch=Arch.LLAMA, layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads,
                head_dim=hidden // heads, ffn_hidden=ffn, vocab=vocab, seq_len=seq_len, norm=Norm.RMSNORM,
                activation=Activation.SWIGLU, position=Position.ROTARY, tied_embeddings=False, bias=False)
    base.update(over)
    return ModelSpec(**base)


def gpt(layers: int = 24, hidden: int = 2048, heads: int = 16, vocab: int = 51200, seq_len: int = 2048,
        **over: Any) -> ModelSpec:
    base = dict(name="gpt", arch=Arch.GPT, layers=layers, hidden=hidden, heads=heads, kv_heads=heads,
                head_dim=hidden // heads, ffn_hidden=4 * hidden, vocab=vocab, seq_len=seq_len,
                norm=Norm.LAYERNORM, activation=Activation.GELU, position=Position.LEARNED,
                tied_embeddings=True, bias=True)
    base.update(over)
    return ModelSpec(**base)


def mixtral(**over: Any) -> ModelSpec:
    moe = MoeSpec(experts=8, top_k=2, expert_ffn_hidden=14336)
    return llama(vocab=32000, seq_len=4096, moe=moe, **over)


def make_spec(model: ModelSpec | None = None, *, nodes: int = 1, gpus_per_node: int = 8,
              global_batch: int = 64, micro_batch: int = 1, recompute: Recompute = Recompute.NONE,
              precision: Precision = Precision.BF16, flash: bool = True, device: Device | None = None,
              cluster_kw: dict[str, Any] | None = None, **parallel: Any) -> Spec:
    """A spec; ``dp`` defaults to the rest of the world after tp, pp and cp."""
    model = model or llama(layers=4, hidden=1024, heads=8, kv_heads=4, ffn=2816, vocab=32000, seq_len=2048)
    world = nodes * gpus_per_node
    tp, pp, cp = (parallel.get(k, 1) for k in ("tp", "pp", "cp"))
    parallel.setdefault("dp", world // (tp * pp * cp))
    if parallel.get("vp", 1) > 1:
        parallel.setdefault("schedule", Schedule.INTERLEAVED)
    return Spec(model=model,
                train=TrainSpec(**{**defaults(Stack.GENERIC, "train"),
                                   "attention": Attention.FLASH2 if flash else Attention.UNFUSED},
                                precision=precision, global_batch=global_batch, micro_batch=micro_batch,
                                recompute=recompute),
                parallel=ParallelSpec(**{**defaults(Stack.GENERIC, "parallel"), **parallel}),
                cluster=cluster(nodes, gpus_per_node, device, **(cluster_kw or {})))


def with_parallel(spec: Spec, **over: Any) -> Spec:
    return dataclasses.replace(spec, parallel=dataclasses.replace(spec.parallel, **over))


def with_train(spec: Spec, **over: Any) -> Spec:
    return dataclasses.replace(spec, train=dataclasses.replace(spec.train, **over))


@st.composite
def small_models(draw: st.DrawFn, *, moe: bool | None = None) -> ModelSpec:
    """Llama-like (maybe MoE) or GPT-like models with heads dividing hidden, kv_heads dividing heads
    (``moe``: only MoE models, or only dense ones)."""
    heads = draw(st.sampled_from([4, 8, 16, 32]))
    head_dim = draw(st.sampled_from([32, 64, 128]))
    kv = draw(st.sampled_from([h for h in (1, 2, 4, 8, 16, 32) if heads % h == 0]))
    layers = draw(st.sampled_from([2, 4, 8, 16]))
    seq = draw(st.sampled_from([512, 1024, 2048, 4096]))
    vocab = draw(st.sampled_from([32000, 50304, 128256]))
    hidden = heads * head_dim
    kinds = {None: ["llama", "gpt", "moe", "deepseek"], True: ["moe", "deepseek"], False: ["llama", "gpt"]}[moe]
    kind = draw(st.sampled_from(kinds))
    if kind == "gpt":
        return gpt(layers=layers, hidden=hidden, heads=heads, vocab=vocab, seq_len=seq,
                   dropout=draw(st.sampled_from([0.0, 0.1])))
    ffn = draw(st.sampled_from([2, 3, 4])) * hidden
    over: dict[str, Any] = {}
    if kind in ("moe", "deepseek"):
        experts = draw(st.sampled_from([4, 8]))
        over["moe"] = MoeSpec(
            experts=experts, top_k=draw(st.sampled_from([1, 2])), expert_ffn_hidden=ffn,
            shared_experts=draw(st.sampled_from([0, 1])), capacity_factor=draw(st.sampled_from([None, 1.0, 1.25])),
            imbalance=draw(st.sampled_from([1.0, 1.5])),
            router=draw(st.sampled_from(list(Router))), expert_bias=draw(st.booleans()), aux_loss=draw(st.booleans()),
            first_dense_layers=draw(st.sampled_from([0, 1])) if layers >= 4 else 0,
            every=draw(st.sampled_from([1, 2])))
        if draw(st.booleans()):  # alternating sliding-window attention (gpt-oss)
            over.update(window=seq // 4, full_attention_every=draw(st.sampled_from([0, 2])))
    if kind == "deepseek":  # multi-head latent attention and multi-token prediction
        over["mla"] = MlaSpec(q_lora_rank=draw(st.sampled_from([0, hidden // 2])), kv_lora_rank=hidden // 4,
                              qk_nope_head_dim=head_dim, qk_rope_head_dim=head_dim // 2, v_head_dim=head_dim)
        over["kv_heads"] = heads
        over["mtp_layers"] = draw(st.sampled_from([0, 1]))
    return llama(**{"layers": layers, "hidden": hidden, "heads": heads, "kv_heads": kv, "ffn": ffn, "vocab": vocab,
                    "seq_len": seq, **over})


@st.composite
def specs(draw: st.DrawFn, *, max_world: int = 64, moe: bool | None = None,
          recompute: Recompute | None = None) -> Spec:
    """Feasible specs: degrees divide the model, dp * tp * pp * cp = GPUs, ep divides dp * cp
    (``moe``, ``recompute``: fixed, so a property about one case filters no examples away)."""
    model = draw(small_models(moe=moe))
    tp = draw(st.sampled_from([t for t in (1, 2, 4, 8) if model.heads % t == 0
                               and (model.kv_heads % t == 0 or t % model.kv_heads == 0)]))
    pp = draw(st.sampled_from([p for p in (1, 2, 4) if model.layers % p == 0]))
    cp = draw(st.sampled_from([1, 2]))
    dp = draw(st.sampled_from([1, 2, 4]))
    world = dp * tp * pp * cp
    gpn = min(8, world)
    if world % gpn or world > max_world:
        world, dp = tp * pp * cp, 1
        gpn = min(8, world)
    nodes = world // gpn
    ep, etp, dispatcher = 1, None, Dispatcher.ALLTOALL
    if model.moe is not None:
        ep = draw(st.sampled_from([e for e in (1, 2, 4) if dp % e == 0 and model.moe.experts % e == 0]))
        etp = draw(st.sampled_from([None, *(e for e in (1, 2, 4, 8) if tp % e == 0)]))
        dispatcher = draw(st.sampled_from(list(Dispatcher)))
    m = draw(st.sampled_from([1, 2, 4, 8]))
    micro = draw(st.sampled_from([1, 2]))
    vp = 1
    if pp > 1 and draw(st.booleans()) and model.layers % (2 * pp) == 0 and m % pp == 0:
        vp = 2
    schedule = Schedule.INTERLEAVED if vp > 1 else draw(st.sampled_from([Schedule.GPIPE, Schedule.ONE_F_ONE_B]))
    plain = make_spec(model, nodes=nodes, gpus_per_node=gpn, global_batch=m * micro * dp, micro_batch=micro,
                     recompute=recompute if recompute is not None else draw(st.sampled_from(list(Recompute))),
                     flash=draw(st.booleans()),
                     tp=tp, pp=pp, cp=cp, dp=dp, ep=ep, etp=etp, dispatcher=dispatcher, vp=vp, schedule=schedule,
                     # Megatron-Core (and llmp.load) refuse MoE with tp > 1 but no sequence parallelism
                     sequence_parallel=tp > 1 and (model.moe is not None or draw(st.booleans())),
                     zero=draw(st.sampled_from(list(ZeroStage))),
                     tp_comm_overlap=draw(st.booleans()), dp_overlap=draw(st.booleans()))
    return draw(variants(plain))


@st.composite
def variants(draw: st.DrawFn, spec: Spec) -> Spec:
    """``spec`` under a drawn precision (every one the device has a peak for: the low-precision
    recipes too), pipeline schedule (the zero-bubble ones and DualPipe too) and training stack
    (its profile's defaults), each kept only where the layout rules let it run: a draw the rules
    refuse falls back to the spec's own value, so no example is filtered away."""
    peaks = spec.cluster.node.gpu.peak_flops
    precision = draw(st.sampled_from([p for p in Precision if p.compute_dtype in peaks]))
    spec = _runs(spec, with_train(spec, precision=precision))
    schedule = draw(st.sampled_from(list(Schedule)))
    vp = {Schedule.ZB_V: 2, Schedule.INTERLEAVED: spec.parallel.vp}.get(schedule, 1)
    spec = _runs(spec, with_parallel(spec, schedule=schedule, vp=vp))
    stack = draw(st.sampled_from(list(Stack)))
    prof = profile(stack)
    train = {n: getattr(prof, n).value for n in DEFAULT_FIELDS["train"] if hasattr(prof, n)}
    return _runs(spec, with_train(spec, stack=stack, **train))


def _runs(before: Spec, after: Spec) -> Spec:
    """``after`` when it passes ``llmp.load``'s cross-field checks and the layout rules let it run
    (what ``predict`` checks), else ``before``."""
    try:
        check(after, lambda path: None)
        structure_of(after)
    except LlmpError:
        return before
    return after
