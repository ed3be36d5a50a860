"""The stack profiles: one :class:`~llmp.stacks.profile.Profile` per training stack in the
published data, each item citing the stack's code or documentation.

Citations read ``owner/repo@ref:path (symbol)``; ``ref`` is a release tag or the commit the
reference was read at. Items repeated across stacks cite each stack's own code (Megatron-DeepSpeed
and GPT-NeoX carry their own copies of Megatron's kernels).
"""

from __future__ import annotations

from types import MappingProxyType

from llmp.spec.spec import Attention as A
from llmp.spec.spec import CpComm, OptimizerKernel, PipeModule, Stack, ZeroStage
from llmp.spec.spec import Precision as P
from llmp.stacks.profile import ClipScale, HostStyle, Item, LossSync, Profile, Unscale, ZeroGrad
from llmp.stacks.profile import SelectiveRecompute as SR

_EQUAL = "equal split; layers that do not divide need stage_layers or first/last_stage_layers"

FLASH_LIKE = (A.FLASH2, A.FLASH3, A.CUDNN, A.SDPA)

# ---- shared sources -------------------------------------------------------------------------

_MLM_ARGS = "NVIDIA/Megatron-LM@v2.6:megatron/arguments.py"
_MC_CONFIG = "NVIDIA/Megatron-LM@core_r0.9.0:megatron/core/transformer/transformer_config.py"
_MC_ARGS = "NVIDIA/Megatron-LM@core_r0.9.0:megatron/training/arguments.py"
_MC_DDP = "NVIDIA/Megatron-LM@core_r0.9.0:megatron/core/distributed/distributed_data_parallel.py"
_MC_DDP_CONFIG = "NVIDIA/Megatron-LM@core_r0.9.0:megatron/core/distributed/distributed_data_parallel_config.py"
_MC_CLIP = "NVIDIA/Megatron-LM@core_r0.9.0:megatron/core/optimizer/clip_grads.py (clip_grad_norm_fp32)"
_MC_OPT = "NVIDIA/Megatron-LM@core_r0.9.0:megatron/core/optimizer/optimizer.py"
_TE_ATTN = ("NVIDIA/TransformerEngine@v1.11:transformer_engine/pytorch/attention.py (get_attention_backend: "
            "FlashAttention-2 or cuDNN FusedAttention, else UnfusedDotProductAttention)")
_TE_SAVE = ("NVIDIA/TransformerEngine@0004dbd (TE 1.x):transformer_engine/pytorch/module/linear.py (_Linear.forward: "
            "ctx.save_for_backward of the FP8 inputmat_t or inputmat), layernorm_linear.py (_LayerNormLinear.forward: "
            "the FP8 ln_out); TE 2.x keeps the quantised input's columnwise view (update_usage(rowwise_usage=False))")
_TORCHAO_SAVE = ("pytorch/ao@v0.8.0:torchao/float8/float8_linear.py (matmul_with_hp_or_float8_args.forward: "
                 "ctx.save_for_backward(input_hp, weight_hp_t))")
_NEOX = "EleutherAI/gpt-neox@e897c23:megatron/neox_arguments/neox_args.py"
_NEOX_20B = "EleutherAI/gpt-neox@252ddc5:configs/20B.yml"
_NEOX_TF = "EleutherAI/gpt-neox@ce9bee3:megatron/model/transformer.py"
_DS_PIPE = "microsoft/DeepSpeed@v0.9.5:deepspeed/runtime/pipe/engine.py"
_DS_ZERO = "microsoft/DeepSpeed@v0.9.5:deepspeed/runtime/zero/stage_1_and_2.py"
_DS_CONFIG = "https://www.deepspeed.ai/docs/config-json/#zero-optimizations-for-fp16-training"
_TORCH_CLIP = "pytorch/pytorch@v2.4.0:torch/nn/utils/clip_grad.py (clip_grad_norm_: foreach norm, then _foreach_mul_)"
_TORCH_ZERO = "pytorch/pytorch@v2.4.0:torch/optim/optimizer.py (zero_grad(set_to_none=True))"
_TITAN = "pytorch/torchtitan@v0.1.0:torchtitan/config_manager.py"
_FOUNDRY = "mosaicml/llm-foundry@v0.10.0"
_COMPOSER = "mosaicml/composer@v0.24.0"
_AUTOMODEL = "NVIDIA-NeMo/Automodel@v0.1.0:nemo_automodel/_transformers/auto_model.py"
_NEMO = "NVIDIA/NeMo@v2.0.0:nemo/collections/llm"
_VOCAB_PARALLEL_CE = ("the model-dtype logits and an FP32 softmax, as Megatron's vocab-parallel "
                      "cross-entropy keeps them")
_ALL_DEEPSPEED_ZERO = ("DeepSpeed runs ZeRO-1 with its pipeline engine only; stages 2 and 3 partition gradients, which "
                       f"the pipeline engine rejects ({_DS_PIPE} (PipelineEngine.__init__: assert "
                       "zero_optimization_stage() < ZeroStageEnum.gradients))")


def _no(what: str, source: str) -> Item:
    return Item(False, source, what)


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
    cuda_graphs=_no("eager launches", "llmp default"),
    zero=Item(ZeroStage.NONE, "llmp default"),
    cp_comm=Item(CpComm.P2P, "llmp default", "ring attention"),
    tp_comm_overlap=Item(False, "llmp default"),
    dp_overlap=Item(True, "llmp default"),
    dp_bucket_size=Item(100e6, "llmp default", "100 MB buckets"),
    param_gather_overlap=Item(False, "llmp default"),
    fsdp_prefetch=Item(True, "llmp default"),
    partition=Item("", "llmp default", _EQUAL),
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
    pipeline_host_sync=_no("the host runs ahead across pipeline tasks", "llmp default"),
    batch_host_sync=_no("no wait per microbatch", "llmp default"),
    fp32_loss_logits=Item(False, "llmp default", _VOCAB_PARALLEL_CE),
    lowp_saved_input=Item(True, "llmp default", "TransformerEngine's modules, the low-precision library of the "
                          "Megatron-family stacks"),
)

MEGATRON_LM = Profile(
    stack=Stack.MEGATRON_LM, title="Megatron-LM (legacy, 2020-2022)",
    versions="Megatron-LM v2.x-v3.0: the SC21 paper runs (Narayanan et al. 2021) and the 2020 README tables",
    attention=Item(A.UNFUSED_FUSED_SOFTMAX, f"{_MLM_ARGS} (--no-masked-softmax-fusion: masked_softmax_fusion on "
                   "by default); NVIDIA/Megatron-LM@v2.6:megatron/model/transformer.py (ParallelAttention: baddbmm, "
                   "FusedScaleMaskSoftmax, attention dropout, bmm)",
                   "no flash attention before Megatron-Core (--use-flash-attn arrived in 2023)"),
    fused_norm=Item(True, "NVIDIA/Megatron-LM@v2.6:megatron/model/fused_layer_norm.py (MixedFusedLayerNorm, Apex "
                          "kernel)"),
    fused_bias_act=Item(True, f"{_MLM_ARGS} (--no-bias-gelu-fusion); megatron/model/fused_bias_gelu.py"),
    fused_bias_dropout_add=Item(True, f"{_MLM_ARGS} (--no-bias-dropout-fusion); megatron/model/transformer.py "
                                "(bias_dropout_add_fused_train)"),
    fused_rope=Item(False, "NVIDIA/Megatron-LM@v2.6:megatron/model/language_model.py (learned positions only)",
                    "GPT models of this era use learned positions; no RoPE kernel"),
    fused_cross_entropy=_no("eager vocab-parallel cross-entropy",
                            "NVIDIA/Megatron-LM@v2.6:megatron/mpu/cross_entropy.py (_VocabParallelCrossEntropy)"),
    grad_accum_fusion=Item(True, f"{_MLM_ARGS} (--no-gradient-accumulation-fusion; fused_weight_gradient_mlp_cuda)",
                           "added in v2.5 (2021); the 2020 runs accumulated with an add per microbatch"),
    optimizer_kernel=Item(OptimizerKernel.FUSED, "NVIDIA/Megatron-LM@v2.6:megatron/optimizer/__init__.py "
                          "(from apex.optimizers import FusedAdam as Adam)"),
    grad_clip=Item(True, f"{_MLM_ARGS} (--clip-grad, default 1.0); megatron/optimizer/clip_grads.py "
                         "(clip_grad_norm_fp32)"),
    vocab_divisible_by=Item(128, f"{_MLM_ARGS} (--make-vocab-size-divisible-by, default 128)"),
    cuda_graphs=_no("no CUDA graphs before Megatron-Core", _MLM_ARGS),
    zero=Item(ZeroStage.NONE, f"{_MLM_ARGS} (--use-distributed-optimizer arrived in v3.0, off by default)"),
    cp_comm=Item(CpComm.P2P, _MLM_ARGS, "no context parallelism before Megatron-Core"),
    tp_comm_overlap=_no("no userbuffers before Megatron-Core + TransformerEngine", _MLM_ARGS),
    dp_overlap=_no("the local DDP all-reduces the contiguous gradient buffer after the last backward",
                   "NVIDIA/Megatron-LM@v2.6:megatron/model/distributed.py "
                   f"(DistributedDataParallel.allreduce_gradients); {_MLM_ARGS} (--DDP-impl, default local)"),
    dp_bucket_size=Item(1e15, "NVIDIA/Megatron-LM@v2.6:megatron/model/distributed.py (one all-reduce per "
                        "contiguous buffer)", "one bucket: the whole buffer"),
    param_gather_overlap=_no("no distributed optimizer", _MLM_ARGS),
    fsdp_prefetch=Item(False, _MLM_ARGS, "no FSDP"),
    partition=Item("", "NVIDIA/Megatron-LM@v2.6:megatron/arguments.py (num_layers must divide by "
                       "pipeline_model_parallel_size)", _EQUAL),
    pipe_module=Item(PipeModule.GPT_NEOX, "unused without a DeepSpeed partition"),
    attentions=Item((A.UNFUSED, A.UNFUSED_FUSED_SOFTMAX), f"{_MLM_ARGS} (--no-masked-softmax-fusion)"),
    fused_softmax_max_seq=Item(2048, "NVIDIA/Megatron-LM@v2.6:megatron/model/fused_softmax.py "
                               "(FusedScaleMaskSoftmax.is_kernel_available: 16 < sk <= 2048)"),
    vocab_pad_tp=Item(True, "NVIDIA/Megatron-LM@v2.6:megatron/tokenizer/tokenizer.py (_vocab_size_with_padding: "
                      "multiple = make_vocab_size_divisible_by * tensor_model_parallel_size)"),
    zero_grad=Item(ZeroGrad.MEMSET, "NVIDIA/Megatron-LM@v2.6:megatron/model/distributed.py (zero_grad_buffer)"),
    clip_scale=Item(ClipScale.CONDITIONAL, "NVIDIA/Megatron-LM@v2.6:megatron/optimizer/clip_grads.py "
                    "(multi_tensor_scale only if clip_coeff < 1.0)"),
    loss_sync=Item(LossSync.PER_MICROBATCH, "NVIDIA/Megatron-LM@v2.6:pretrain_gpt.py (loss_func: "
                   "average_losses_across_data_parallel_group)"),
    fp16_unscale=Item(Unscale.CHECK_AND_UNSCALE, "NVIDIA/Megatron-LM@v2.6:megatron/optimizer/optimizer.py "
                      "(_unscale_main_grads_and_check_for_nan; all-reduce MAX over the model-parallel group)"),
    fsdp=_no("no FSDP", _MLM_ARGS),
    userbuffers=_no("no TransformerEngine", _MLM_ARGS),
    pipeline_zero_max=Item(ZeroStage.Z1, f"{_MLM_ARGS} (distributed optimizer = ZeRO-1)"),
    fp32_grads=Item((P.BF16,), f"{_MLM_ARGS} (validate_args: 'bfloat16 requires gradient accumulation and "
                    "all-reduce to be done in fp32'; --accumulate-allreduce-grads-in-fp32 is off otherwise); "
                    "megatron/model/distributed.py (grad buffers in fp32 when accumulate_allreduce_grads_in_fp32)",
                    "fp16 runs keep fp16 main grads"),
    selective_recompute=Item(SR.CORE_ATTENTION, "NVIDIA/Megatron-LM@v3.0:megatron/arguments.py "
                             "(--recompute-granularity selective); megatron/model/transformer.py (ParallelAttention: "
                             "_checkpointed_attention_forward over the core attention)",
                             "selective recompute arrived in v3.0 (2022) with sequence parallelism"),
    host_style=Item(HostStyle.MEGATRON, "NVIDIA/Megatron-LM@v2.6:megatron/model/transformer.py "
                    "(ParallelTransformerLayer, ParallelAttention, ParallelMLP); "
                    "megatron/mpu/layers.py (ColumnParallelLinear, RowParallelLinear); "
                    "megatron/mpu/mappings.py; megatron/model/fused_layer_norm.py; "
                    "megatron/model/fused_softmax.py; megatron/model/fused_bias_gelu.py"),
    pipeline_host_sync=Item(True, "NVIDIA/Megatron-LM@v2.6:megatron/p2p_communication.py (_communicate: "
                            "torch.cuda.synchronize() after batch_isend_irecv, 'to protect against race "
                            "condition')"),
    batch_host_sync=Item(True, "NVIDIA/Megatron-LM@v2.6:megatron/mpu/data.py (broadcast_data: torch.cat(...).cuda() "
                         "from pageable memory, ordered after a stream sync: "
                         "docs.nvidia.com/cuda/cuda-runtime-api/api-sync-behavior.html); pretrain_gpt.py "
                         "(get_batch)"),
    fp32_loss_logits=Item(False, "NVIDIA/Megatron-LM@v2.6:megatron/mpu/cross_entropy.py (_VocabParallelCrossEntropy: "
                               "the softmax computed in place on the FP32 logits it is given)"),
    lowp_saved_input=_no("no TransformerEngine: the GEMMs run in 16 bits", _MLM_ARGS),
)

MEGATRON_CORE = Profile(
    stack=Stack.MEGATRON_CORE, title="Megatron-Core with TransformerEngine (2023+)",
    versions="Megatron-LM core_r0.5-0.9+ with --transformer-impl transformer_engine, as in its examples/ scripts",
    attention=Item(A.CUDNN, f"{_MC_ARGS} (--attention-backend auto); {_TE_ATTN}",
                   "TE picks cuDNN fused attention or FlashAttention-2 by GPU and version; both are one fused kernel"),
    fused_norm=Item(True, "NVIDIA/Megatron-LM@core_r0.9.0:megatron/core/extensions/transformer_engine.py "
                    "(TELayerNormColumnParallelLinear: TE LayerNormLinear runs the norm as TE's fused kernel)"),
    fused_bias_act=Item(True, f"{_MC_CONFIG} (bias_activation_fusion; --no-bias-gelu-fusion / "
                              "--no-bias-swiglu-fusion)"),
    fused_bias_dropout_add=Item(True, f"{_MC_CONFIG} (bias_dropout_fusion)"),
    fused_rope=Item(True, f"{_MC_CONFIG} (apply_rope_fusion; --no-rope-fusion)"),
    fused_cross_entropy=_no("cross_entropy_loss_fusion defaults to False: Megatron's eager vocab-parallel CE",
                            f"{_MC_CONFIG} (cross_entropy_loss_fusion = False); "
                            "megatron/core/tensor_parallel/cross_entropy.py (_VocabParallelCrossEntropy)"),
    grad_accum_fusion=Item(True, f"{_MC_CONFIG} (gradient_accumulation_fusion; --no-gradient-accumulation-fusion)"),
    optimizer_kernel=Item(OptimizerKernel.FUSED, "NVIDIA/Megatron-LM@core_r0.9.0:megatron/core/optimizer/__init__.py "
                          "(TE/Apex FusedAdam)"),
    grad_clip=Item(True, f"{_MC_ARGS} (--clip-grad, default 1.0); {_MC_CLIP}"),
    vocab_divisible_by=Item(128, f"{_MC_ARGS} (--make-vocab-size-divisible-by, default 128)"),
    cuda_graphs=_no("opt-in: --enable-cuda-graph (TransformerConfig.enable_cuda_graph = False)",
                    f"{_MC_CONFIG} (enable_cuda_graph)"),
    zero=Item(ZeroStage.Z1, f"{_MC_ARGS} (--use-distributed-optimizer, set by the examples/gpt3 and llama scripts)"),
    cp_comm=Item(CpComm.P2P, f"{_MC_ARGS} (--cp-comm-type, default p2p)", "ring attention in TransformerEngine"),
    tp_comm_overlap=_no("opt-in: --tp-comm-overlap needs userbuffers bootstrapping", f"{_MC_ARGS} (--tp-comm-overlap)"),
    dp_overlap=Item(True, f"{_MC_DDP_CONFIG} (overlap_grad_reduce; --overlap-grad-reduce in the examples scripts)"),
    dp_bucket_size=Item(160e6, f"{_MC_DDP} (bucket_size = max(40000000, 1000000 * dp_size) parameters)",
                        "40 M fp32 main grads = 160 MB; Megatron grows it to 1 M x dp parameters past dp = 40"),
    param_gather_overlap=Item(True, f"{_MC_DDP_CONFIG} (overlap_param_gather; --overlap-param-gather)"),
    fsdp_prefetch=Item(True, "NVIDIA/Megatron-LM@core_r0.9.0:megatron/core/distributed/"
                             "torch_fully_sharded_data_parallel.py"),
    partition=Item("", "NVIDIA/Megatron-LM@core_r0.9.0:megatron/core/transformer/transformer_block.py "
                       "(get_num_layers_to_build)", _EQUAL),
    pipe_module=Item(PipeModule.GPT_NEOX, "unused without a DeepSpeed partition"),
    attentions=Item(tuple(A), f"{_MC_ARGS} (--attention-backend flash|fused|unfused|local); {_TE_ATTN}"),
    fused_softmax_max_seq=Item(16384, "NVIDIA/Megatron-LM@core_r0.9.0:megatron/core/fusions/fused_softmax.py "
                               "(is_kernel_available: 16 < sk <= 16384)"),
    vocab_pad_tp=Item(True, "NVIDIA/Megatron-LM@core_r0.9.0:megatron/training/tokenizer/tokenizer.py "
                      "(_vocab_size_with_padding: make_vocab_size_divisible_by * tensor_model_parallel_size)"),
    zero_grad=Item(ZeroGrad.MEMSET, f"{_MC_DDP} (zero_grad_buffer: grad_data.zero_())"),
    clip_scale=Item(ClipScale.CONDITIONAL, f"{_MC_CLIP} (multi_tensor_scale only if clip_coeff < 1.0)"),
    loss_sync=Item(LossSync.PER_STEP, "NVIDIA/Megatron-LM@core_r0.9.0:megatron/training/training.py (train_step: "
                   "losses all-reduced over the data-parallel group once per step)"),
    fp16_unscale=Item(Unscale.CHECK_AND_UNSCALE, f"{_MC_OPT} (_unscale_main_grads_and_check_for_nan)"),
    fsdp=Item(True, "NVIDIA/Megatron-LM@core_r0.9.0:megatron/core/distributed/torch_fully_sharded_data_parallel.py"),
    userbuffers=Item(True, "NVIDIA/TransformerEngine@v1.11:transformer_engine/pytorch/module/base.py (initialize_ub)"),
    pipeline_zero_max=Item(ZeroStage.Z1, f"{_MC_ARGS} (distributed optimizer with pipeline parallelism)"),
    fp32_grads=Item((P.BF16, P.FP8, P.MXFP8, P.NVFP4), f"{_MC_ARGS} (validate_args: bf16 sets "
                    "accumulate_allreduce_grads_in_fp32, which becomes "
                    "DistributedDataParallelConfig.grad_reduce_in_fp32; FP8 runs pass --bf16 with --fp8-format); "
                    f"{_MC_DDP} (grad_dtype = torch.float if grad_reduce_in_fp32 else param.dtype: the "
                    "gradient-accumulation fusion adds each microbatch's wgrad into this FP32 "
                    "main_grad)", "fp16 runs keep fp16 main grads"),
    selective_recompute=Item(SR.CORE_ATTENTION, f"{_MC_CONFIG} (recompute_granularity 'selective': only the core "
                             "attention); megatron/core/transformer/attention.py "
                             "(Attention._checkpointed_attention_forward)",
                             "later releases add --recompute-modules, whose default is still core_attn"),
    host_style=Item(HostStyle.MEGATRON, "NVIDIA/Megatron-LM@core_r0.9.0:megatron/core/transformer/transformer_layer.py "
                    "(TransformerLayer), megatron/core/tensor_parallel/layers.py, "
                    "megatron/core/fusions/", "the TransformerEngine modules' own Python (FP8 metadata, workspace "
                    "checks) is not in the replica, which cannot run TransformerEngine on "
                    "a CPU: a lower bound of the host path"),
    pipeline_host_sync=Item(True, "NVIDIA/Megatron-LM@core_r0.9.0:megatron/core/pipeline_parallel/p2p_communication.py "
                            "(_communicate: torch.cuda.synchronize() when batch_p2p_sync); "
                            "megatron/core/model_parallel_config.py (batch_p2p_sync = True)"),
    batch_host_sync=_no("pinned batches copied with cuda(non_blocking=True)", "NVIDIA/Megatron-LM@core_r0.9.0:megatron/"
                        "training/utils.py (get_batch_on_this_tp_rank); training.py (pin_memory=True)"),
    fp32_loss_logits=Item(False, "NVIDIA/Megatron-LM@core_r0.9.0:megatron/core/tensor_parallel/cross_entropy.py "
                               "(VocabParallelCrossEntropy: in-place softmax of the logits)"),
    lowp_saved_input=Item(True, _TE_SAVE, "Megatron-Core builds its linear layers from TE "
                          "(TELayerNormColumnParallelLinear, TERowParallelLinear, TEGroupedLinear) and passes no "
                          "save_original_input"),
)

NEMO = Profile(
    stack=Stack.NEMO, title="NeMo 2.0 / Megatron-Bridge performance recipes (incl. DGX Cloud benchmarking)",
    versions="NeMo 24.07+ performance recipes and NVIDIA DGX Cloud benchmarking recipes (Megatron-Core + TE "
             "underneath)",
    attention=Item(A.CUDNN, f"{_NEMO}/gpt/model/base.py (GPTConfig: TE spec); {_TE_ATTN}"),
    fused_norm=Item(True, f"{_NEMO}/gpt/model/base.py (transformer_layer_spec: TE LayerNormLinear)"),
    fused_bias_act=Item(True, f"{_NEMO}/gpt/model/base.py (GPTConfig.bias_activation_fusion = True)"),
    fused_bias_dropout_add=Item(True, f"{_NEMO}/gpt/model/base.py (GPTConfig.bias_dropout_fusion = True)"),
    fused_rope=Item(True, f"{_NEMO}/gpt/model/base.py (GPTConfig.apply_rope_fusion = True)"),
    fused_cross_entropy=Item(True, f"{_NEMO}/gpt/model/base.py (GPTConfig.cross_entropy_loss_fusion = True)"),
    grad_accum_fusion=Item(True, f"{_NEMO}/gpt/model/base.py (GPTConfig.gradient_accumulation_fusion)"),
    optimizer_kernel=Item(OptimizerKernel.FUSED, f"{_NEMO}/recipes/optim/adam.py "
                                                 "(distributed_fused_adam_with_cosine_annealing)"),
    grad_clip=Item(True, f"{_NEMO}/recipes/optim/adam.py (clip_grad = 1.0)"),
    vocab_divisible_by=Item(128, f"{_NEMO}/gpt/model/base.py (GPTConfig.make_vocab_size_divisible_by = 128)"),
    cuda_graphs=_no("the performance recipes leave enable_cuda_graph off unless a recipe sets it",
                    f"{_NEMO}/gpt/model/base.py (GPTConfig, TransformerConfig.enable_cuda_graph = False)"),
    zero=Item(ZeroStage.Z1, f"{_NEMO}/recipes/optim/adam.py (use_distributed_optimizer = True)"),
    cp_comm=Item(CpComm.P2P, f"{_NEMO} (cp_comm_type passed to Megatron-Core, default p2p)",
                 "ring attention in TransformerEngine"),
    tp_comm_overlap=Item(True, f"{_NEMO}/recipes/tp_overlap_configs/userbuffers.py; "
                         "nemo/lightning/pytorch/callbacks/megatron_comm_overlap.py (MegatronCommOverlapCallback)",
                         "the performance recipes turn it on for tp > 1"),
    dp_overlap=Item(True, f"{_NEMO}/recipes/llama3_8b.py (DistributedDataParallelConfig(overlap_grad_reduce=True))"),
    dp_bucket_size=Item(160e6, f"{_MC_DDP} (bucket_size = max(40000000, 1000000 * dp_size) parameters)",
                        "40 M fp32 main grads = 160 MB"),
    param_gather_overlap=Item(True, f"{_NEMO}/recipes/llama3_8b.py "
                                    "(DistributedDataParallelConfig(overlap_param_gather=True))"),
    fsdp_prefetch=Item(True, f"{_MC_DDP_CONFIG}"),
    partition=Item("", "NVIDIA/Megatron-LM@core_r0.9.0:megatron/core/transformer/transformer_block.py "
                       "(get_num_layers_to_build)", _EQUAL),
    pipe_module=Item(PipeModule.GPT_NEOX, "unused without a DeepSpeed partition"),
    attentions=Item(tuple(A), _TE_ATTN),
    fused_softmax_max_seq=Item(16384, "NVIDIA/Megatron-LM@core_r0.9.0:megatron/core/fusions/fused_softmax.py"),
    vocab_pad_tp=Item(True, "NVIDIA/NeMo@v2.0.0:nemo/collections/llm/gpt/model/base.py (get_vocab_size: "
                      "make_vocab_size_divisible_by * tensor_model_parallel_size)"),
    zero_grad=Item(ZeroGrad.MEMSET, f"{_MC_DDP} (zero_grad_buffer)"),
    clip_scale=Item(ClipScale.CONDITIONAL, _MC_CLIP),
    loss_sync=Item(LossSync.PER_STEP, "NVIDIA/NeMo@v2.0.0:nemo/lightning/megatron_parallel.py "
                                      "(MaskedTokenLossReduction)"),
    fp16_unscale=Item(Unscale.CHECK_AND_UNSCALE, _MC_OPT),
    fsdp=Item(True, f"{_MC_DDP_CONFIG}"),
    userbuffers=Item(True, "NVIDIA/TransformerEngine@v1.11:transformer_engine/pytorch/module/base.py (initialize_ub)"),
    pipeline_zero_max=Item(ZeroStage.Z1, f"{_MC_ARGS} (distributed optimizer with pipeline parallelism)"),
    fp32_grads=Item((P.BF16, P.FP8, P.MXFP8, P.NVFP4), f"{_NEMO}/recipes/llama31_405b.py "
                    "(DistributedDataParallelConfig(grad_reduce_in_fp32=True)); NeMo 1 (24.07): optim.grad_sync_dtype "
                    "defaults to fp32 (Apex DistributedFusedAdam: grad_sync_dtype = dtype), and the "
                    "NeMo-Framework-Launcher configs and H100 FP8 scripts that change it say so "
                    "(nemotron_340b.yaml: grad_sync_dtype: bf16; examples/training/*/h100/*_fp8*.sh: "
                    "+training.model.optim.grad_sync_dtype=bf16), which the validation rows set per model"),
    selective_recompute=Item(SR.CORE_ATTENTION, f"{_MC_CONFIG} (recompute_granularity 'selective', as NeMo passes it "
                             "through MegatronStrategy)"),
    host_style=Item(HostStyle.MEGATRON, "NVIDIA/Megatron-LM@core_r0.9.0:megatron/core/transformer/transformer_layer.py "
                    "(NeMo 2 trains Megatron-Core models)", "TransformerEngine's own Python is not in the replica: "
                    "a lower bound"),
    pipeline_host_sync=Item(True, "NVIDIA/Megatron-LM@core_r0.9.0:megatron/core/model_parallel_config.py "
                            "(batch_p2p_sync = True, which NeMo passes through)"),
    batch_host_sync=_no("Megatron-Core's pinned, non-blocking batch copies",
                        "NVIDIA/NeMo@v2.0.0:nemo/collections/llm/gpt/model/base.py (gpt_data_step: non_blocking=True)"),
    fp32_loss_logits=Item(False, f"{_NEMO}/gpt/model/base.py (Megatron-Core GPT models: Megatron-Core's "
                               "vocab-parallel cross-entropy)"),
    lowp_saved_input=Item(True, _TE_SAVE, "NeMo trains Megatron-Core models with TE layers"),
)

_MDS = "microsoft/Megatron-DeepSpeed@main:megatron"
MEGATRON_DEEPSPEED = Profile(
    stack=Stack.MEGATRON_DEEPSPEED, title="Megatron-DeepSpeed (BLOOM, MT-NLG)",
    versions="microsoft/Megatron-DeepSpeed and bigscience-workshop/Megatron-DeepSpeed 2021-2022, DeepSpeed pipeline "
             "engine",
    attention=Item(A.UNFUSED_FUSED_SOFTMAX, f"{_MDS}/arguments.py (masked_softmax_fusion on by default); "
                   f"{_MDS}/model/transformer.py (CoreAttention: baddbmm, FusedScaleMaskSoftmax, bmm)"),
    fused_norm=Item(True, f"{_MDS}/model/fused_layer_norm.py (MixedFusedLayerNorm)"),
    fused_bias_act=Item(True, f"{_MDS}/arguments.py (--no-bias-gelu-fusion)"),
    fused_bias_dropout_add=Item(True, f"{_MDS}/arguments.py (--no-bias-dropout-fusion)"),
    fused_rope=_no("GPT models with learned positions or ALiBi (BLOOM)", f"{_MDS}/model/language_model.py"),
    fused_cross_entropy=_no("eager vocab-parallel cross-entropy", f"{_MDS}/mpu/cross_entropy.py "
                                                                  "(_VocabParallelCrossEntropy)"),
    grad_accum_fusion=_no("DeepSpeed owns the gradients: autograd accumulates .grad and the engine copies them",
                          f"{_DS_ZERO} (gradients accumulated into the partition buffers)"),
    optimizer_kernel=Item(OptimizerKernel.FUSED, f"{_MDS}/optimizer/__init__.py (apex FusedAdam); "
                          "microsoft/DeepSpeed@v0.9.5:deepspeed/ops/adam/fused_adam.py"),
    grad_clip=Item(True, f"{_DS_CONFIG} (gradient_clipping); {_DS_ZERO} (get_grad_norm_direct)"),
    vocab_divisible_by=Item(128, f"{_MDS}/arguments.py (--make-vocab-size-divisible-by, default 128)"),
    cuda_graphs=_no("no CUDA graphs", _MDS),
    zero=Item(ZeroStage.NONE, f"{_DS_CONFIG} (zero_optimization.stage default 0)",
              "BLOOM-176B ran DeepSpeed's bf16 optimizer, which shards like ZeRO-1: set zero = 1 there"),
    cp_comm=Item(CpComm.P2P, _MDS, "no context parallelism in these runs (DeepSpeed-Ulysses: cp_comm = a2a)"),
    tp_comm_overlap=_no("no userbuffers", _MDS),
    dp_overlap=_no("the pipeline engine reduces gradients in its ReduceGrads instruction, after the last backward",
                   f"{_DS_PIPE} (PipelineEngine._exec_reduce_grads)"),
    dp_bucket_size=Item(1e9, f"{_DS_CONFIG} (reduce_bucket_size default 5e8 elements)", "5e8 16-bit gradients = 1 GB"),
    param_gather_overlap=_no("ZeRO-1 all-gathers the updated parameters after the step", f"{_DS_ZERO} (step: "
                                                                                         "all_gather_dp_groups)"),
    fsdp_prefetch=Item(False, _DS_PIPE, "no ZeRO-3 with the pipeline engine"),
    partition=Item("type:transformer", "microsoft/Megatron-DeepSpeed:megatron/model/gpt_model.py "
                   "(GPTModelPipe: partition_method='type:transformer')"),
    pipe_module=Item(PipeModule.MEGATRON_DEEPSPEED, "microsoft/Megatron-DeepSpeed:megatron/model/gpt_model.py "
                                                    "(GPTModelPipe)"),
    attentions=Item((A.UNFUSED, A.UNFUSED_FUSED_SOFTMAX, A.FLASH2), f"{_MDS}/arguments.py (--use-flash-attn-v2)"),
    fused_softmax_max_seq=Item(2048, f"{_MDS}/model/fused_softmax.py (is_kernel_available: 16 < sk <= 2048)"),
    vocab_pad_tp=Item(True, f"{_MDS}/tokenizer/tokenizer.py (_vocab_size_with_padding)"),
    zero_grad=Item(ZeroGrad.SET_TO_NONE, f"{_DS_ZERO} (zero_grad(set_to_none=True))"),
    clip_scale=Item(ClipScale.WITH_UNSCALE, f"{_DS_ZERO} (unscale_and_clip_grads)"),
    loss_sync=Item(LossSync.PIPELINE_BROADCAST, f"{_DS_PIPE} (PipelineEngine._aggregate_total_loss)"),
    fp16_unscale=Item(Unscale.CHECK_THEN_CLIP_PASS, f"{_DS_ZERO} (has_overflow, then unscale_and_clip_grads)"),
    fsdp=_no("ZeRO-3 is not combined with the pipeline engine", _ALL_DEEPSPEED_ZERO),
    userbuffers=_no("no TransformerEngine", _MDS),
    pipeline_zero_max=Item(ZeroStage.Z1, _ALL_DEEPSPEED_ZERO),
    fp32_grads=Item((P.BF16,), "microsoft/DeepSpeed@v0.9.5:deepspeed/runtime/bf16_optimizer.py (BF16_Optimizer: "
                    "fp32_groups_gradients, the gradients accumulated and reduced in FP32)",
                    "fp16 (ZeRO's FP16 optimizer) keeps fp16 gradients"),
    selective_recompute=Item(SR.CORE_ATTENTION, f"{_MDS}/arguments.py (--recompute-granularity selective); "
                             f"{_MDS}/model/transformer.py (ParallelAttention: checkpointed core attention)"),
    host_style=Item(HostStyle.MEGATRON, f"{_MDS}/model/transformer.py (ParallelTransformerLayer); "
                    f"{_MDS}/mpu/layers.py; {_MDS}/model/fused_softmax.py; "
                    f"{_MDS}/model/fused_bias_gelu.py"),
    pipeline_host_sync=_no("DeepSpeed's pipeline engine sends with dist.send/recv and never synchronises the device",
                           "microsoft/DeepSpeed@v0.9.5:deepspeed/runtime/pipe/p2p.py (send, recv)"),
    batch_host_sync=Item(True, f"{_MDS}/core/tensor_parallel/data.py (broadcast_data: torch.cat(...).cuda() from "
                         "pageable memory, ordered after a stream sync: "
                         "docs.nvidia.com/cuda/cuda-runtime-api/api-sync-behavior.html); pretrain_gpt.py "
                         "(get_batch_pipe)"),
    fp32_loss_logits=Item(False, f"{_MDS}/core/tensor_parallel/cross_entropy.py (_VocabParallelCrossEntropy)"),
    lowp_saved_input=_no("no TransformerEngine: the GEMMs run in 16 bits", _MDS),
)

GPT_NEOX = Profile(
    stack=Stack.GPT_NEOX, title="GPT-NeoX (EleutherAI, on DeepSpeed/DeeperSpeed)",
    versions="GPT-NeoX v1.0-v2.0 (GPT-NeoX-20B, 2022; the seed paper's Perlmutter and Vista runs)",
    attention=Item(A.UNFUSED, f"{_NEOX} (attention_config default [[['global'], n_layers]]); {_NEOX_TF} "
                   "(ParallelSelfAttention.attention: baddbmm, FusedScaleMaskSoftmax, attention_dropout, bmm)",
                   "scaled_upper_triang_masked_softmax_fusion defaults to False: masked_fill_ then torch softmax; "
                   "configs/20B.yml turns the fused softmax on; attention_config 'flash' selects FlashAttention-2 "
                   "(v2.0)"),
    fused_norm=_no("RMSNorm is eager PyTorch (x.norm, div, mul); LayerNorm is one kernel (Apex or torch) either way",
                   "EleutherAI/gpt-neox@058f7d2:megatron/model/norms.py (RMSNorm.forward); "
                   f"{_NEOX} (rmsnorm_fusion = False, layernorm_fusion = False)"),
    fused_bias_act=_no("bias add, then GELU", f"{_NEOX} (bias_gelu_fusion = False); {_NEOX_TF} (ParallelMLP.forward)"),
    fused_bias_dropout_add=_no("bias add, dropout and residual add as separate kernels",
                               f"{_NEOX} (bias_dropout_fusion = False); {_NEOX_TF} (get_bias_dropout_add)"),
    fused_rope=_no("t * cos + rotate_half(t) * sin in eager PyTorch", f"{_NEOX} (rope_fusion = False); "
                   "EleutherAI/gpt-neox@b0b561f:megatron/model/positional_embeddings.py (apply_rotary_pos_emb)"),
    fused_cross_entropy=_no("Megatron's eager vocab-parallel cross-entropy",
                            "EleutherAI/gpt-neox@557751f:megatron/model/gpt2_model.py (cross_entropy: "
                            "mpu.vocab_parallel_cross_entropy)"),
    grad_accum_fusion=_no("autograd accumulates the fp16 .grad of every parameter each microbatch",
                          f"{_DS_ZERO} (ZeRO-1: gradients reduced only at the accumulation boundary)"),
    optimizer_kernel=Item(OptimizerKernel.FUSED, "EleutherAI/gpt-neox@9c645dd:megatron/training.py (get_optimizer: "
                          "adam -> apex/DeepSpeed FusedAdam)"),
    grad_clip=Item(True, f"{_NEOX} (clip_grad = 1.0); {_NEOX_20B} (gradient_clipping: 1.0)"),
    vocab_divisible_by=Item(128, f"{_NEOX} (make_vocab_size_divisible_by = 128)"),
    cuda_graphs=_no("no CUDA graphs", _NEOX),
    zero=Item(ZeroStage.Z1, f"{_NEOX_20B} (zero_optimization.stage: 1, as in the repository's configs)"),
    cp_comm=Item(CpComm.P2P, _NEOX, "no context parallelism"),
    tp_comm_overlap=_no("no userbuffers", _NEOX),
    dp_overlap=_no("every NeoX model is a DeepSpeed PipelineModule (pipe_parallel_size >= 1): gradients are "
                   "reduced in the ReduceGrads instruction after the last backward",
                   f"{_DS_PIPE} (PipelineEngine._exec_reduce_grads); {_NEOX} (is_pipe_parallel)"),
    dp_bucket_size=Item(2.52e9, f"{_NEOX_20B} (reduce_bucket_size: 1260000000 fp16 elements)", "1.26e9 x 2 bytes"),
    param_gather_overlap=_no("ZeRO-1 all-gathers the updated fp16 parameters after the step",
                             f"{_DS_ZERO} (step: all_gather_dp_groups; {_NEOX_20B} allgather_bucket_size)"),
    fsdp_prefetch=Item(False, _DS_PIPE, "no ZeRO-3 with the pipeline engine"),
    partition=Item("type:transformer|mlp", "EleutherAI/gpt-neox:megatron/neox_arguments/neox_args.py "
                   "(pipe_partition_method default; configs/20B.yml does not override it)",
                   "balances the layers whose names match: 44 layers on pp 8 give 5, 6, 6, 6, 6, 6, 6, 3"),
    pipe_module=Item(PipeModule.GPT_NEOX, "EleutherAI/gpt-neox:megatron/model/gpt2_model.py (GPT2ModelPipe)"),
    attentions=Item((A.UNFUSED, A.UNFUSED_FUSED_SOFTMAX, A.FLASH2),
                    f"{_NEOX_TF} (ParallelSelfAttention.__init__: global -> FusedScaleMaskSoftmax, flash -> "
                    "flash_attn_unpadded_qkvpacked_func_cuda)"),
    fused_softmax_max_seq=Item(2048, "EleutherAI/gpt-neox@0885768:megatron/model/fused_softmax.py "
                               "(is_kernel_available: 16 < sq <= 2048)"),
    vocab_pad_tp=Item(True, "EleutherAI/gpt-neox:megatron/tokenizer/tokenizer.py (_vocab_size_with_padding: "
                      "multiple = make_vocab_size_divisible_by * model_parallel_size)"),
    zero_grad=Item(ZeroGrad.SET_TO_NONE, f"{_DS_ZERO} (zero_grad(set_to_none=True))"),
    clip_scale=Item(ClipScale.WITH_UNSCALE, f"{_DS_ZERO} (unscale_and_clip_grads: combined_scale)"),
    loss_sync=Item(LossSync.PIPELINE_BROADCAST, f"{_DS_PIPE} (PipelineEngine._aggregate_total_loss)"),
    fp16_unscale=Item(Unscale.CHECK_THEN_CLIP_PASS, f"{_DS_ZERO} (has_overflow, then unscale_and_clip_grads)"),
    fsdp=_no("ZeRO-3 is not combined with the pipeline engine", _ALL_DEEPSPEED_ZERO),
    userbuffers=_no("no TransformerEngine in the runs modelled", _NEOX),
    pipeline_zero_max=Item(ZeroStage.Z1, _ALL_DEEPSPEED_ZERO),
    fp32_grads=Item((P.BF16,), "microsoft/DeepSpeed@v0.9.5:deepspeed/runtime/bf16_optimizer.py (BF16_Optimizer: "
                    "fp32_groups_gradients)", "fp16 (ZeRO's FP16 optimizer) keeps fp16 gradients"),
    selective_recompute=Item(SR.CORE_ATTENTION, f"{_NEOX} (checkpoint_activations, checkpoint_num_layers: whole layers "
                                                "only)",
                             "GPT-NeoX has no selective mode of its own: a spec asking for one gets llmp's "
                             "core-attention meaning"),
    host_style=Item(HostStyle.MEGATRON, f"{_NEOX_TF} (ParallelTransformerLayer, ParallelSelfAttention, "
                    "ParallelMLP); EleutherAI/gpt-neox:megatron/mpu/layers.py"),
    pipeline_host_sync=_no("DeepSpeed's pipeline engine sends with dist.send/recv and never synchronises the device",
                           "microsoft/DeepSpeed@v0.9.5:deepspeed/runtime/pipe/p2p.py (send, recv)"),
    batch_host_sync=Item(True, "EleutherAI/gpt-neox:megatron/mpu/data.py (broadcast_data: torch.cat(...).cuda() "
                         "from pageable memory, ordered after a stream sync: "
                         "docs.nvidia.com/cuda/cuda-runtime-api/api-sync-behavior.html); "
                         "megatron/training.py (get_batch_pipe)"),
    fp32_loss_logits=Item(False, "EleutherAI/gpt-neox@e897c23:megatron/mpu/cross_entropy.py "
                               "(_VocabParallelCrossEntropy)"),
    lowp_saved_input=_no("no TransformerEngine: the GEMMs run in 16 bits", _NEOX),
)

COMPOSER = Profile(
    stack=Stack.COMPOSER, title="Composer / llm-foundry (PyTorch FSDP)",
    versions="llm-foundry v0.4-v0.10 MPT training (the llm-foundry throughput tables)",
    attention=Item(A.FLASH2, f"{_FOUNDRY}:llmfoundry/models/mpt/configuration_mpt.py (attn_config_defaults "
                   "attn_impl = 'flash')", "older releases used 'triton' or 'torch'"),
    fused_norm=Item(True, f"{_FOUNDRY}:llmfoundry/models/layers/norm.py (LPLayerNorm: torch layer_norm, one kernel)"),
    fused_bias_act=Item(True, f"{_FOUNDRY}:llmfoundry/models/layers/ffn.py (MPTMLP: no bias, one GELU kernel)"),
    fused_bias_dropout_add=Item(True, f"{_FOUNDRY}:llmfoundry/models/mpt/modeling_mpt.py (no_bias, dropout 0: "
                                "one residual add)"),
    fused_rope=_no("MPT uses ALiBi; Llama-style models rotate in eager PyTorch",
                   f"{_FOUNDRY}:llmfoundry/models/layers/attention.py (apply_rotary_pos_emb from HF)"),
    fused_cross_entropy=Item(True, f"{_FOUNDRY}:llmfoundry/models/mpt/modeling_mpt.py (loss_fn 'fused_crossentropy': "
                             "flash_attn.losses.cross_entropy)"),
    grad_accum_fusion=_no("FSDP adds each microbatch's reduce-scattered gradient shard into .grad",
                          "pytorch/pytorch@v2.3.0:torch/distributed/fsdp/_runtime_utils.py (_post_backward_hook)"),
    optimizer_kernel=Item(OptimizerKernel.PER_TENSOR, f"{_COMPOSER}:composer/optim/decoupled_weight_decay.py "
                          "(DecoupledAdamW.adamw: a loop over params)"),
    grad_clip=Item(True, f"{_FOUNDRY}:scripts/train/yamls/pretrain/mpt-7b.yaml (algorithms.gradient_clipping: "
                   f"clipping_type norm, threshold 1.0); {_COMPOSER}:composer/algorithms/gradient_clipping"),
    vocab_divisible_by=Item(1, f"{_FOUNDRY}:llmfoundry/models/mpt/configuration_mpt.py (vocab_size 50368, given "
                            "already padded)"),
    cuda_graphs=_no("no CUDA graphs", _COMPOSER),
    zero=Item(ZeroStage.FSDP, f"{_FOUNDRY}:scripts/train/yamls/pretrain/mpt-7b.yaml (fsdp_config.sharding_strategy: "
              "FULL_SHARD)"),
    cp_comm=Item(CpComm.P2P, _FOUNDRY, "no context parallelism"),
    tp_comm_overlap=_no("no tensor parallelism in these runs", _FOUNDRY),
    dp_overlap=Item(True, "pytorch/pytorch@v2.3.0:torch/distributed/fsdp (reduce-scatter per wrapped block)",
                    "FSDP reduces per layer; no DDP buckets"),
    dp_bucket_size=Item(100e6, "unused with FSDP", "FSDP reduce-scatters per wrapped block"),
    param_gather_overlap=_no("FSDP gathers per layer instead", _FOUNDRY),
    fsdp_prefetch=Item(True, f"{_COMPOSER}:composer/distributed/dist_strategy.py (backward_prefetch BACKWARD_PRE, "
                       "limit_all_gathers)"),
    partition=Item("", "unused: llm-foundry trains with FSDP, without pipeline parallelism", _EQUAL),
    pipe_module=Item(PipeModule.GPT_NEOX, "unused without a DeepSpeed partition"),
    attentions=Item((A.FLASH2, A.SDPA, A.UNFUSED), f"{_FOUNDRY}:llmfoundry/models/layers/attention.py "
                    "(attn_impl flash | torch)"),
    fused_softmax_max_seq=Item(0, _FOUNDRY, "no fused masked softmax kernel"),
    vocab_pad_tp=_no("no tensor parallelism", _FOUNDRY),
    zero_grad=Item(ZeroGrad.SET_TO_NONE, _TORCH_ZERO),
    clip_scale=Item(ClipScale.ALWAYS, _TORCH_CLIP),
    loss_sync=Item(LossSync.NONE, f"{_COMPOSER}:composer/trainer/trainer.py (train loss logged without a per-step "
                   "all-reduce)"),
    fp16_unscale=Item(Unscale.CHECK_AND_UNSCALE,
                      "pytorch/pytorch@v2.3.0:torch/distributed/fsdp/sharded_grad_scaler.py"),
    fsdp=Item(True, f"{_COMPOSER}:composer/distributed/dist_strategy.py"),
    userbuffers=_no("no TransformerEngine", _FOUNDRY),
    pipeline_zero_max=Item(ZeroStage.FSDP, _FOUNDRY, "the llm-foundry runs use no pipeline parallelism; not "
                                                     "restricted"),
    fp32_grads=Item((P.BF16, P.FP8, P.MXFP8, P.NVFP4), "pytorch/pytorch@v2.3.0:torch/distributed/fsdp/_flat_param.py "
                    "(the sharded flat parameter stays FP32 and its gradient is cast to it after the reduce-scatter)",
                    "the reduce-scatter itself runs in Composer's mixed_precision reduce_dtype (FP32 or the 16-bit "
                    "dtype, by version and setting); llmp prices it in FP32"),
    selective_recompute=Item(SR.CORE_ATTENTION, f"{_FOUNDRY}:llmfoundry/models/mpt/modeling_mpt.py "
                             "(activation_checkpointing_fn: whole MPTBlocks only)",
                             "no selective mode of its own: a spec asking for one gets llmp's core-attention meaning"),
    host_style=Item(HostStyle.TORCH, f"{_FOUNDRY}:llmfoundry/models/mpt/modeling_mpt.py (MPTBlock: torch modules)"),
    pipeline_host_sync=_no("no pipeline parallelism", _FOUNDRY),
    batch_host_sync=_no("pinned batches moved with non_blocking=True", f"{_COMPOSER}:composer/devices/device_gpu.py "
                        "(DeviceGPU.tensor_to_device)"),
    fp32_loss_logits=Item(False, "mosaicml/llm-foundry@8c8dd48f72:llmfoundry/models/mpt/modeling_mpt.py "
                               "(ComposerMPTCausalLM: loss_fn default 'fused_crossentropy', flash_attn's "
                               "CrossEntropyLoss on the model-dtype logits)"),
    lowp_saved_input=Item(True, f"{_COMPOSER}:composer/core/precision.py (amp_fp8 runs TE's fp8_autocast); "
                          f"{_FOUNDRY}:llmfoundry/models/layers/fc.py (fc_type 'te': te.Linear); {_TE_SAVE}"),
)

TORCHTITAN = Profile(
    stack=Stack.TORCHTITAN, title="torchtitan (PyTorch FSDP2)",
    versions="torchtitan v0.1 (2024-2025), eager mode (training.compile = false)",
    attention=Item(A.SDPA, "pytorch/torchtitan@v0.1.0:torchtitan/models/llama/model.py (Attention.forward: "
                   "F.scaled_dot_product_attention(is_causal=True))"),
    fused_norm=_no("nn.RMSNorm in eager mode is a chain of kernels", f"{_TITAN} (model.norm_type = 'rmsnorm'); "
                   "pytorch/torchtitan@v0.1.0:torchtitan/models/norms.py"),
    fused_bias_act=_no("F.silu(w1(x)) * w3(x): two kernels",
                       "pytorch/torchtitan@v0.1.0:torchtitan/models/llama/model.py (FeedForward.forward)"),
    fused_bias_dropout_add=Item(True, "pytorch/torchtitan@v0.1.0:torchtitan/models/llama/model.py (no bias, no "
                                "dropout: one residual add)"),
    fused_rope=_no("apply_rotary_emb: complex multiply in eager PyTorch",
                   "pytorch/torchtitan@v0.1.0:torchtitan/models/llama/model.py (apply_rotary_emb)"),
    fused_cross_entropy=_no("F.cross_entropy on float logits (log_softmax + nll_loss)",
                            "pytorch/torchtitan@v0.1.0:torchtitan/train.py (loss_fn)"),
    grad_accum_fusion=_no("FSDP2 adds each microbatch's gradient shard",
                          "pytorch/pytorch@v2.5.0:torch/distributed/_composable/fsdp"),
    optimizer_kernel=Item(OptimizerKernel.FUSED, f"{_TITAN} (optimizer.implementation = 'fused')"),
    grad_clip=Item(True, f"{_TITAN} (training.max_norm = 1.0); {_TORCH_CLIP}"),
    vocab_divisible_by=Item(1, "pytorch/torchtitan@v0.1.0:torchtitan/models/llama/__init__.py (vocab from the "
                               "tokenizer)"),
    cuda_graphs=_no("no CUDA graphs in training", _TITAN),
    zero=Item(ZeroStage.FSDP, f"{_TITAN} (training.data_parallel_shard_degree = -1: FSDP2 over every GPU)"),
    cp_comm=Item(CpComm.ALL_GATHER, f"{_TITAN} (experimental.context_parallel_rotate_method = 'allgather')",
                 "K/V shards all-gathered after the first sub-SDPA; modelled exposed"),
    tp_comm_overlap=_no("async TP is opt-in", f"{_TITAN} (experimental.enable_async_tensor_parallel = False)"),
    dp_overlap=Item(True, "pytorch/pytorch@v2.5.0:torch/distributed/_composable/fsdp (reduce-scatter per block)"),
    dp_bucket_size=Item(100e6, "unused with FSDP", "FSDP2 reduce-scatters per block"),
    param_gather_overlap=_no("FSDP2 gathers per block instead", _TITAN),
    fsdp_prefetch=Item(True, "pytorch/pytorch@v2.5.0:torch/distributed/_composable/fsdp/fully_shard.py "
                       "(implicit forward and backward prefetching)"),
    partition=Item("", "pytorch/torchtitan:torchtitan/distributed/pipeline.py (layers split evenly over "
                       "stages)", _EQUAL),
    pipe_module=Item(PipeModule.GPT_NEOX, "unused without a DeepSpeed partition"),
    attentions=Item((A.SDPA, A.FLASH2, A.CUDNN), f"{_TITAN} (model.use_flex_attn = False: SDPA)"),
    fused_softmax_max_seq=Item(0, _TITAN, "no fused masked softmax kernel"),
    vocab_pad_tp=_no("DTensor shards the embedding unevenly", _TITAN),
    zero_grad=Item(ZeroGrad.SET_TO_NONE, _TORCH_ZERO),
    clip_scale=Item(ClipScale.ALWAYS, _TORCH_CLIP),
    loss_sync=Item(LossSync.NONE, f"{_TITAN} (metrics.log_freq = 10: the loss is all-reduced only on log steps)"),
    fp16_unscale=Item(Unscale.CHECK_AND_UNSCALE, "pytorch/pytorch@v2.5.0:torch/amp/grad_scaler.py"),
    fsdp=Item(True, _TITAN),
    userbuffers=_no("no TransformerEngine", _TITAN),
    pipeline_zero_max=Item(ZeroStage.FSDP, "pytorch/torchtitan@v0.1.0:torchtitan/parallelisms/pipeline_llama.py (PP "
                                           "with FSDP2)"),
    fp32_grads=Item((P.BF16, P.FP8, P.MXFP8, P.NVFP4), f"{_TITAN} (training.mixed_precision_reduce = 'float32': FSDP2 "
                    "MixedPrecisionPolicy(reduce_dtype=float32)); pytorch/pytorch@v2.5.0:torch/distributed/_composable/"
                    "fsdp/_fsdp_param.py (the sharded parameter, and so its gradient, stays FP32; Float8 casts only "
                    "the GEMM inputs)"),
    selective_recompute=Item(SR.OP_SAC, f"{_TITAN} (activation_checkpoint.selective_ac_option = 'op' in the Llama 3 "
                             "train configs); pytorch/torchtitan@v0.1.0:torchtitan/parallelisms/parallelize_llama.py "
                             "(_save_list: aten.mm, the SDPA flash/efficient kernels, reduce_scatter_tensor; "
                             "_custom_policy: 'Saves output of all compute ops, except every second mm'); "
                             "pytorch/pytorch@v2.5.0:torch/utils/checkpoint.py (non-reentrant checkpoint, early_stop "
                             "= True)"),
    host_style=Item(HostStyle.TORCH, "pytorch/torchtitan@v0.1.0:torchtitan/models/llama/model.py (TransformerBlock)"),
    pipeline_host_sync=_no("torch.distributed.pipelining sends asynchronously and waits on the stream",
                           "pytorch/pytorch@v2.5.0:torch/distributed/pipelining/schedules.py (_batch_p2p: "
                           "dist.batch_isend_irecv, work.wait())"),
    batch_host_sync=_no("one batch per step, copied once: no wait per microbatch",
                        "pytorch/torchtitan@v0.1.0:torchtitan/train.py (input_ids.to(device_type))"),
    fp32_loss_logits=Item(True, "pytorch/torchtitan@v0.1.0:torchtitan/models/llama/model.py (self.output(h).float()); "
                              "train.py (loss_fn: F.cross_entropy; del pred before loss.backward())"),
    lowp_saved_input=_no("torchao Float8Linear saves the BF16 input", _TORCHAO_SAVE),
)

NEMO_AUTOMODEL = Profile(
    stack=Stack.NEMO_AUTOMODEL, title="NeMo AutoModel (Hugging Face models on FSDP2)",
    versions="NVIDIA-NeMo/Automodel 0.1-0.2 (the AutoModel performance summary)",
    attention=Item(A.SDPA, f"{_AUTOMODEL} (_patch_attention: attn_implementation 'sdpa')"),
    fused_norm=Item(True, f"{_AUTOMODEL} (_patch_liger_kernel: Liger fused RMSNorm)"),
    fused_bias_act=Item(True, f"{_AUTOMODEL} (_patch_liger_kernel: Liger SwiGLU)"),
    fused_bias_dropout_add=Item(True, "HF Llama-style blocks: no bias, no dropout, one residual add"),
    fused_rope=Item(True, f"{_AUTOMODEL} (_patch_liger_kernel: Liger RoPE)"),
    fused_cross_entropy=Item(True, f"{_AUTOMODEL} (_patch_liger_kernel: Liger fused linear cross-entropy)"),
    grad_accum_fusion=_no("FSDP2 adds each microbatch's gradient shard",
                          "pytorch/pytorch@v2.5.0:torch/distributed/_composable/fsdp"),
    optimizer_kernel=Item(OptimizerKernel.FOREACH, "pytorch/pytorch@v2.5.0:torch/optim/adamw.py (foreach is the "
                          "default on CUDA when fused is not requested)"),
    grad_clip=Item(True, "NVIDIA-NeMo/Automodel@v0.1.0:nemo_automodel/recipes/llm/train_ft.py (max_grad_norm)"),
    vocab_divisible_by=Item(1, "the Hugging Face config's vocab_size"),
    cuda_graphs=_no("no CUDA graphs", _AUTOMODEL),
    zero=Item(ZeroStage.FSDP, "NVIDIA-NeMo/Automodel@v0.1.0:nemo_automodel/components/distributed/fsdp2.py"),
    cp_comm=Item(CpComm.P2P, f"llmp default ({_AUTOMODEL}: context parallelism not read)"),
    tp_comm_overlap=_no("no userbuffers", _AUTOMODEL),
    dp_overlap=Item(True, "pytorch/pytorch@v2.5.0:torch/distributed/_composable/fsdp (reduce-scatter per block)"),
    dp_bucket_size=Item(100e6, "unused with FSDP", "FSDP2 reduce-scatters per block"),
    param_gather_overlap=_no("FSDP2 gathers per block instead", _AUTOMODEL),
    fsdp_prefetch=Item(True, "pytorch/pytorch@v2.5.0:torch/distributed/_composable/fsdp/fully_shard.py"),
    partition=Item("", "unused: the NeMo AutoModel runs modelled use FSDP2, without pipeline parallelism", _EQUAL),
    pipe_module=Item(PipeModule.GPT_NEOX, "unused without a DeepSpeed partition"),
    attentions=Item((*FLASH_LIKE, A.UNFUSED), f"{_AUTOMODEL} (attn_implementation sdpa | flash_attention_2 | eager)"),
    fused_softmax_max_seq=Item(0, _AUTOMODEL, "no fused masked softmax kernel"),
    vocab_pad_tp=_no("DTensor shards the embedding unevenly", _AUTOMODEL),
    zero_grad=Item(ZeroGrad.SET_TO_NONE, _TORCH_ZERO),
    clip_scale=Item(ClipScale.ALWAYS, _TORCH_CLIP),
    loss_sync=Item(LossSync.PER_STEP, "NVIDIA-NeMo/Automodel@v0.1.0:nemo_automodel/recipes/llm/train_ft.py "
                   "(the step's loss all-reduced over dp for logging)"),
    fp16_unscale=Item(Unscale.CHECK_AND_UNSCALE, "pytorch/pytorch@v2.5.0:torch/amp/grad_scaler.py"),
    fsdp=Item(True, _AUTOMODEL),
    userbuffers=_no("no TransformerEngine", _AUTOMODEL),
    pipeline_zero_max=Item(ZeroStage.FSDP, "NVIDIA-NeMo/Automodel@v0.1.0 (PP with FSDP2)"),
    fp32_grads=Item((P.BF16, P.FP8, P.MXFP8, P.NVFP4),
                    "pytorch/pytorch@v2.5.0:torch/distributed/_composable/fsdp/_fsdp_param.py (the sharded FP32 "
                    "parameter's gradient); NVIDIA-NeMo/Automodel@v0.1.0:nemo_automodel/components/"
                    "distributed/fsdp2.py (MixedPrecisionPolicy reduce_dtype float32)"),
    selective_recompute=Item(SR.CORE_ATTENTION, "NVIDIA-NeMo/Automodel@v0.1.0:nemo_automodel/components/distributed/"
                             "fsdp2.py (activation_checkpointing: whole decoder layers only)",
                             "no selective mode of its own: a spec asking for one gets llmp's core-attention meaning"),
    host_style=Item(HostStyle.TORCH, f"{_AUTOMODEL} (Hugging Face modules)"),
    pipeline_host_sync=_no("no pipeline parallelism in the runs modelled", _AUTOMODEL),
    batch_host_sync=_no("no wait per microbatch", _AUTOMODEL),
    fp32_loss_logits=Item(False, "NVIDIA-NeMo/Automodel@51d4df5:examples/llm_benchmark/qwen/"
                               "qwen3_moe_30b_te_deepep.yaml (loss_fn MaskedCrossEntropy with fp32_upcast: false)",
                          "the class upcasts by default (nemo_automodel/components/loss/masked_ce.py); the benchmark "
                          "configs turn it off"),
    lowp_saved_input=_no("torchao Float8Linear saves the BF16 input",
                         "NVIDIA-NeMo/Automodel@102dece:nemo_automodel/components/quantization/fp8.py "
                         f"(apply_fp8_to_model: torchao convert_to_float8_training); {_TORCHAO_SAVE}"),
)

PROFILES = MappingProxyType({p.stack: p for p in (
    GENERIC, MEGATRON_LM, MEGATRON_CORE, NEMO, MEGATRON_DEEPSPEED, GPT_NEOX, COMPOSER, TORCHTITAN, NEMO_AUTOMODEL)})
"""Every stack's profile, keyed by :class:`~llmp.spec.spec.Stack`."""
