"""Helpers that the unit tests of ``llmp.analytic`` (``tests/unit/analytic/``) and their properties
(``tests/property/analytic/``) both use: one home, imported under the name each test module reads.

Import with ``from analytic_helpers import collective as _c`` (pytest puts tests/ on ``sys.path``).
Sections follow the test modules they serve.
"""

from __future__ import annotations

import dataclasses

from strategies_analytic import h100, llama, make_spec, with_parallel, with_train

import llmp
from llmp import dsl
from llmp.analytic import kernels, layout, nccl, roofline
from llmp.analytic.block import Context
from llmp.analytic.collectives import Links
from llmp.analytic.grads import grad_bytes
from llmp.analytic.graph import decompose
from llmp.analytic.kernels import Collective, CollectiveKind, Family, Kernel, Pass, Tier
from llmp.analytic.layer import layer_ops
from llmp.analytic.nccl import Arch
from llmp.analytic.pricing import price
from llmp.analytic.roofline import Grid
from llmp.analytic.structure import structure_of
from llmp.compose.predictor import gpu_flops
from llmp.hardware.spec import Attainable, Dtype, Link, Microarch, Node
from llmp.spec.spec import Precision, Recompute, Schedule, Stack

# ---- several modules (calibration, collectives, recompute; compose): a collective, a block context


def collective(kind: CollectiveKind, size: float, n: int, r: int | None = None, tier: Tier = Tier.INTRA) -> Collective:
    return Collective(kind=kind, bytes=size, group=n, ranks_per_node=n if r is None else r, tier=tier)


def context(spec) -> Context:
    return Context.of(spec, structure_of(spec))


# ---- calibration (test_calibration.py) -------------------------------------------------------

TERA = 1e12


def calibration_node(efficiency: float = 1.0, peer: float | None = None, gpus: int = 8) -> Node:
    intra = Link(id="nv", bandwidth=300e9, latency=3e-6, efficiency=efficiency, peer_bandwidth=peer)
    return Node(id="n", gpu=h100(), gpus_per_node=gpus, intra=intra, inter=Link(id="ib", bandwidth=200e9, latency=5e-6))


def calibrated(gemm: float = 794.5 * TERA, attention: float | None = 338 * TERA):
    flash = None if attention is None else Attainable(rates={Dtype.BF16: attention}, source="FA2 figure")
    return h100(achievable=Attainable(rates={Dtype.BF16: gemm}, source="MAMF"), flash_attention=flash)


# ---- collectives (test_collectives.py) -------------------------------------------------------

COLLECTIVE_KINDS = [CollectiveKind.ALL_REDUCE, CollectiveKind.ALL_GATHER, CollectiveKind.REDUCE_SCATTER,
                    CollectiveKind.ALL_TO_ALL, CollectiveKind.SEND_RECV]


def nccl_links(arch=Arch.HOPPER, nvls=False, mesh=False, collnet=False, intra=360e9, inter=400e9, latency=0.0):
    return Links(gpus_per_node=8, intra_bandwidth=intra, intra_latency=latency, inter_bandwidth=inter,
                 inter_latency=latency / 2, intra_peer_bandwidth=intra / 3 if mesh else None, arch=arch,
                 nvls=nvls, nvls_efficiency=nccl.NVLS_EFFICIENCY[arch], collnet=collnet)


# ---- context parallelism (test_context_parallel.py) ------------------------------------------

def cp_model(seq_len=8192):
    return llama(layers=2, hidden=1024, heads=16, kv_heads=8, ffn=2816, vocab=32000, seq_len=seq_len)


def cp_spec(cp_comm, cp=2, tp=2):
    return with_parallel(make_spec(cp_model(), global_batch=8 // (tp * cp) * 4, tp=tp, cp=cp,
                                   sequence_parallel=tp > 1), cp_comm=cp_comm)


# ---- fine-tuning (test_finetune.py) ----------------------------------------------------------

FINETUNE_LLAMA = """
use "dgx_h100"
model m {{ arch = llama  layers = 4  hidden = 2048  heads = 16  kv_heads = 4  ffn_hidden = 5632
          vocab = 32000  seq_len = 4096 }}
cluster c {{ node = dgx_h100 }}
train {{
  global_batch = 16  micro_batch = 1
  parallel {{ tp = {tp}  zero = {zero} }}
  {finetune}
}}
"""


def finetune_spec(finetune: str = "", tp: int = 1, zero: str = "none", sets: tuple[str, ...] = ()):
    text = FINETUNE_LLAMA.format(finetune=finetune, tp=tp, zero=zero)
    return dsl.loads(text, filename="finetune.llmp", overrides=list(sets))


# ---- FLOP counting (test_flops.py) -----------------------------------------------------------

def step_flops(spec, families=(Family.GEMM, Family.ATTENTION)) -> float:
    """Executed FLOPs of the whole step over all GPUs, for the given kernel families."""
    g = decompose(spec)
    f = price(g, spec).flops

    def keep(op):
        return isinstance(op.work, Kernel) and op.work.family in families
    return gpu_flops(g, f, keep) * g.structure.world_size


# ---- gradient dtype (test_grad_dtype.py) -----------------------------------------------------

GRAD_MODEL = llama(layers=4, hidden=1024, heads=8, kv_heads=4, ffn=2816, vocab=32000, seq_len=1024)


def grad_spec(stack: Stack, precision: Precision, **train):
    return with_train(make_spec(GRAD_MODEL, gpus_per_node=8, global_batch=8), stack=stack, precision=precision,
                      **train)


def spec_grad_bytes(spec) -> int:
    return grad_bytes(Context.of(spec, structure_of(spec)))


# ---- low precision (test_lowp.py) ------------------------------------------------------------

LOWP_H100_EXAMPLE = "examples/llama3_70b_dgx_h100.llmp"
LOWP_B200_EXAMPLE = "examples/llama3_70b_nvfp4_dgx_b200.llmp"


def example_gpu(path: str):
    return llmp.load(path).cluster.gpu


# ---- MoE parallel folding (test_moe_folding.py) ----------------------------------------------

def folded_groups(tp: int, cp: int, dp: int, pp: int, etp: int, ep: int) -> dict[str, list[list[int]]]:
    inner = layout.dp_in(tp, cp, etp, ep)
    found = layout.members((tp, cp, inner, pp, dp // inner), (etp, ep))
    return {name: rows.tolist() for name, rows in found.items()}


# ---- selective recompute (test_recompute.py) -------------------------------------------------

RECOMPUTE_LLAMA = llama(layers=2, hidden=4096, heads=32, kv_heads=8, ffn=14336, vocab=128256, seq_len=8192)


def recomputed(spec) -> dict[str, object]:
    return {op.name.removeprefix("recompute.layer."): op for op in layer_ops(context(spec)) if op.recompute}


def titan_spec(model=RECOMPUTE_LLAMA, **parallel):
    gpus = parallel.get("tp", 1)
    # torchtitan's eager kernels (its profile): SiLU and the multiply apart, eager RMSNorm and RoPE
    return with_train(make_spec(model, gpus_per_node=gpus, global_batch=2, micro_batch=1, **parallel),
                      stack=Stack.TORCHTITAN, recompute=Recompute.SELECTIVE, fused_bias_act=False,
                      fused_norm=False, fused_rope=False)


# ---- layout rules (test_rules.py) ------------------------------------------------------------

LAYOUT = ("parallel.dp", "parallel.tp", "parallel.pp", "parallel.cp", "parallel.ep", "model.heads", "model.kv_heads",
          "model.ffn_hidden", "model.seq_len", "model.layers", "train.global_batch", "train.micro_batch",
          "model.moe.expert_ffn_hidden", "model.moe.experts")


# ---- pipeline splits (test_split.py) ---------------------------------------------------------

def split_spec(layers: int, pp: int, vp: int = 1, model=None, **parallel):
    model = model or llama(layers=layers, hidden=1024, heads=8, kv_heads=8, ffn=2816, vocab=32000, seq_len=1024)
    return make_spec(dataclasses.replace(model, layers=layers), gpus_per_node=pp, pp=pp, vp=vp,
                     global_batch=4 * pp, schedule=Schedule.INTERLEAVED if vp > 1 else Schedule.ONE_F_ONE_B,
                     **parallel)


# ---- tiles and waves (test_tiles.py) ---------------------------------------------------------

A100_GEMM_PEAK = 271.2e12  # A100's measured GEMM ceiling (catalog `achievable`)
A100_BANDWIDTH = 2.039e12


def gemm_time(m: int, n: int, k: int, batch: int = 1, *, arch: Microarch = Microarch.SM80, sm: int = 108,
              peak: float = A100_GEMM_PEAK) -> float:
    kern = Kernel.make(Family.GEMM, Dtype.FP16, m=m, n=n, k=k, batch=batch)
    return float(roofline.roofline(kern, kernels.cost(kern), peak=peak, mem_bandwidth=A100_BANDWIDTH,
                                   launch_overhead=0.0, grid=Grid(sms=sm, microarch=arch)))


def plain_time(m: int, n: int, k: int, batch: int = 1, peak: float = A100_GEMM_PEAK) -> float:
    kern = Kernel.make(Family.GEMM, Dtype.FP16, m=m, n=n, k=k, batch=batch)
    return float(roofline.roofline(kern, kernels.cost(kern), peak=peak, mem_bandwidth=A100_BANDWIDTH,
                                   launch_overhead=0.0))


def attention_kernel(batch: int, heads: int, seq: int, head_dim: int, *, causal: bool, bwd: bool = False,
                     variant: str = "") -> Kernel:
    return Kernel.make(Family.ATTENTION, Dtype.BF16, Pass.BWD if bwd else Pass.FWD, variant, batch=batch,
                       heads=heads, kv_heads=heads, seq_q=seq, seq_kv=seq, head_dim=head_dim,
                       head_dim_v=head_dim, window=seq, causal=causal, flash=True)


def attention_ratio(k: Kernel, arch: Microarch = Microarch.SM80, sm: int = 108) -> float:
    c = kernels.cost(k)
    q = roofline.roofline(k, c, peak=2e14, mem_bandwidth=1e15, launch_overhead=0.0, grid=Grid(sms=sm, microarch=arch))
    return float(q) / float(roofline.roofline(k, c, peak=2e14, mem_bandwidth=1e15, launch_overhead=0.0))


# ---- scaling laws (test_scaling.py, test_scaling_examples.py) --------------------------------

def scaled_hardware(spec, *, flops=1.0, mem=1.0, intra=1.0, inter=1.0):
    """``spec`` on hardware whose peaks, memory bandwidth and link bandwidths are scaled."""
    c = spec.cluster
    gpu = dataclasses.replace(c.gpu, peak_flops={d: v * flops for d, v in c.gpu.peak_flops.items()},
                              mem_bandwidth=c.gpu.mem_bandwidth * mem)
    node = dataclasses.replace(c.node, gpu=gpu,
                               intra=dataclasses.replace(c.node.intra, bandwidth=c.node.intra.bandwidth * intra))
    cl = dataclasses.replace(c, node=node, inter=dataclasses.replace(c.inter, bandwidth=c.inter.bandwidth * inter))
    return dataclasses.replace(spec, cluster=cl)
