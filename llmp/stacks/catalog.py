"""The stack profiles: one :class:`~llmp.stacks.profile.Profile` per training stack in the
published data, each item citing the stack's code or documentation.

Each family of stacks has its module (:mod:`llmp.stacks.megatron`, :mod:`llmp.stacks.deepspeed`,
:mod:`llmp.stacks.fsdp`), beside the citations its members share; this module holds llmp's own
generic profile and the table of them all. Citations read ``owner/repo@ref:path (symbol)``; ``ref``
is a release tag or the commit the reference was read at. Items repeated across stacks cite each
stack's own code (Megatron-DeepSpeed and GPT-NeoX carry their own copies of Megatron's kernels).
"""

from __future__ import annotations

from types import MappingProxyType

from llmp.spec.spec import Attention as A
from llmp.spec.spec import CpComm, OptimizerKernel, PipeModule, Stack, ZeroStage
from llmp.spec.spec import Precision as P
from llmp.stacks.deepspeed import GPT_NEOX, MEGATRON_DEEPSPEED
from llmp.stacks.fsdp import COMPOSER, NEMO_AUTOMODEL, TORCHTITAN
from llmp.stacks.items import EQUAL, no
from llmp.stacks.megatron import MEGATRON_CORE, MEGATRON_LM, NEMO
from llmp.stacks.profile import ClipScale, HostStyle, Item, LossSync, Profile, Unscale, ZeroGrad
from llmp.stacks.profile import SelectiveRecompute as SR

_VOCAB_PARALLEL_CE = ("the model-dtype logits and an FP32 softmax, as Megatron's vocab-parallel "
                      "cross-entropy keeps them")


GENERIC = Profile(
    stack=Stack.GENERIC, title="generic (llmp's defaults before stacks)",
    versions="no particular stack: fused kernels everywhere, no fixed per-step work beyond the optimizer",
    attention=Item(A.FLASH2, "llmp default", "a fused flash kernel"),
    fused_norm=Item(True, "llmp default"),
    fused_bias_act=Item(True, "llmp default"),
    fused_bias_dropout_add=Item(True, "llmp default"),
    fused_rope=Item(True, "llmp default"),
    fused_cross_entropy=Item(True, "llmp default"),
    grad_accum_fusion=Item(True, "llmp default"),
    optimizer_kernel=Item(OptimizerKernel.FUSED, "llmp default"),
    grad_clip=Item(False, "llmp default", "no per-step clipping work"),
    vocab_divisible_by=Item(1, "llmp default", "the vocab as given"),
    cuda_graphs=no("eager launches", "llmp default"),
    zero=Item(ZeroStage.NONE, "llmp default"),
    cp_comm=Item(CpComm.P2P, "llmp default", "ring attention"),
    tp_comm_overlap=Item(False, "llmp default"),
    dp_overlap=Item(True, "llmp default"),
    dp_bucket_size=Item(100e6, "llmp default", "100 MB buckets"),
    param_gather_overlap=Item(False, "llmp default"),
    fsdp_prefetch=Item(True, "llmp default"),
    partition=Item("", "llmp default", EQUAL),
    pipe_module=Item(PipeModule.GPT_NEOX, "unused without a DeepSpeed partition"),
    attentions=Item(tuple(A), "llmp default"),
    fused_softmax_max_seq=Item(16384, "llmp default"),
    vocab_pad_tp=Item(False, "llmp default"),
    zero_grad=Item(ZeroGrad.SET_TO_NONE, "llmp default", "no kernel"),
    clip_scale=Item(ClipScale.ALWAYS, "llmp default"),
    loss_sync=Item(LossSync.NONE, "llmp default"),
    fp16_unscale=Item(Unscale.NONE, "llmp default", "fp16 loss scaling not modelled"),
    fsdp=Item(True, "llmp default"),
    userbuffers=Item(True, "llmp default"),
    pipeline_zero_max=Item(ZeroStage.FSDP, "llmp default"),
    fp32_grads=Item((P.BF16, P.FP8, P.MXFP8, P.NVFP4), "llmp default", "FP32 main grads when the parameters are BF16 "
                                                                       "(FP8 GEMMs run over BF16 parameters)"),
    selective_recompute=Item(SR.CORE_ATTENTION, "llmp default (Korthikanti et al. 2022, §5)"),
    host_style=Item(HostStyle.TORCH, "llmp default", "a plain eager PyTorch block"),
    pipeline_host_sync=no("the host runs ahead across pipeline tasks", "llmp default"),
    batch_host_sync=no("no wait per microbatch", "llmp default"),
    fp32_loss_logits=Item(False, "llmp default", _VOCAB_PARALLEL_CE),
    lowp_saved_input=Item(True, "llmp default", "TransformerEngine's modules, the low-precision library of the "
                          "Megatron-family stacks"),
)

PROFILES = MappingProxyType({p.stack: p for p in (
    GENERIC, MEGATRON_LM, MEGATRON_CORE, NEMO, MEGATRON_DEEPSPEED, GPT_NEOX, COMPOSER, TORCHTITAN, NEMO_AUTOMODEL)})
"""Every stack's profile, keyed by :class:`~llmp.spec.spec.Stack`."""
