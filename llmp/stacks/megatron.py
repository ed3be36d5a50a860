"""The profiles of the stacks built on Megatron: legacy Megatron-LM, Megatron-Core with
TransformerEngine, and NeMo's performance recipes on Megatron-Core.

They share most of their code (NeMo trains Megatron-Core models; Megatron-Core grew out of
Megatron-LM), so they share most of their citations, which live here beside them (read as
:mod:`llmp.stacks.catalog` says).
"""

from __future__ import annotations

from llmp.spec.spec import Attention as A
from llmp.spec.spec import CpComm, OptimizerKernel, PipeModule, Stack, ZeroStage
from llmp.spec.spec import Precision as P
from llmp.stacks.items import EQUAL, TE_SAVE, no
from llmp.stacks.profile import ClipScale, HostStyle, Item, LossSync, Profile, Unscale, ZeroGrad
from llmp.stacks.profile import SelectiveRecompute as SR

_MLM_ARGS = "NVIDIA/Megatron-LM@v2.6:megatron/arguments.py"
_MC_CONFIG = "NVIDIA/Megatron-LM@core_r0.9.0:megatron/core/transformer/transformer_config.py"
_MC_ARGS = "NVIDIA/Megatron-LM@core_r0.9.0:megatron/training/arguments.py"
_MC_DDP = "NVIDIA/Megatron-LM@core_r0.9.0:megatron/core/distributed/distributed_data_parallel.py"
_MC_DDP_CONFIG = "NVIDIA/Megatron-LM@core_r0.9.0:megatron/core/distributed/distributed_data_parallel_config.py"
_MC_CLIP = "NVIDIA/Megatron-LM@core_r0.9.0:megatron/core/optimizer/clip_grads.py (clip_grad_norm_fp32)"
_MC_OPT = "NVIDIA/Megatron-LM@core_r0.9.0:megatron/core/optimizer/optimizer.py"
_TE_ATTN = ("NVIDIA/TransformerEngine@v1.11:transformer_engine/pytorch/attention.py (get_attention_backend: "
            "FlashAttention-2 or cuDNN FusedAttention, else UnfusedDotProductAttention)")
_NEMO = "NVIDIA/NeMo@v2.0.0:nemo/collections/llm"
_TE_KERNELS = tuple(a for a in A if a is not A.TRITON)
"""What a TransformerEngine stack launches: flash-attn (1.x in TE's first releases, 2.x, 3), cuDNN, or the
unfused path; flash-attn's Triton kernel is none of TE's backends."""


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
    fused_cross_entropy=no("eager vocab-parallel cross-entropy",
                           "NVIDIA/Megatron-LM@v2.6:megatron/mpu/cross_entropy.py (_VocabParallelCrossEntropy)"),
    grad_accum_fusion=Item(True, f"{_MLM_ARGS} (--no-gradient-accumulation-fusion; fused_weight_gradient_mlp_cuda)",
                           "added in v2.5 (2021); the 2020 runs accumulated with an add per microbatch"),
    optimizer_kernel=Item(OptimizerKernel.FUSED, "NVIDIA/Megatron-LM@v2.6:megatron/optimizer/__init__.py "
                          "(from apex.optimizers import FusedAdam as Adam)"),
    grad_clip=Item(True, f"{_MLM_ARGS} (--clip-grad, default 1.0); megatron/optimizer/clip_grads.py "
                         "(clip_grad_norm_fp32)"),
    vocab_divisible_by=Item(128, f"{_MLM_ARGS} (--make-vocab-size-divisible-by, default 128)"),
    cuda_graphs=no("no CUDA graphs before Megatron-Core", _MLM_ARGS),
    zero=Item(ZeroStage.NONE, f"{_MLM_ARGS} (--use-distributed-optimizer arrived in v3.0, off by default)"),
    cp_comm=Item(CpComm.P2P, _MLM_ARGS, "no context parallelism before Megatron-Core"),
    tp_comm_overlap=no("no userbuffers before Megatron-Core + TransformerEngine", _MLM_ARGS),
    dp_overlap=no("the local DDP all-reduces the contiguous gradient buffer after the last backward",
                  "NVIDIA/Megatron-LM@v2.6:megatron/model/distributed.py "
                  f"(DistributedDataParallel.allreduce_gradients); {_MLM_ARGS} (--DDP-impl, default local)"),
    dp_bucket_size=Item(1e15, "NVIDIA/Megatron-LM@v2.6:megatron/model/distributed.py (one all-reduce per "
                        "contiguous buffer)", "one bucket: the whole buffer"),
    param_gather_overlap=no("no distributed optimizer", _MLM_ARGS),
    fsdp_prefetch=Item(False, _MLM_ARGS, "no FSDP"),
    partition=Item("", "NVIDIA/Megatron-LM@v2.6:megatron/arguments.py (num_layers must divide by "
                       "pipeline_model_parallel_size)", EQUAL),
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
    fsdp=no("no FSDP", _MLM_ARGS),
    userbuffers=no("no TransformerEngine", _MLM_ARGS),
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
    lowp_saved_input=no("no TransformerEngine: the GEMMs run in 16 bits", _MLM_ARGS),
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
    fused_cross_entropy=no("cross_entropy_loss_fusion defaults to False: Megatron's eager vocab-parallel CE",
                           f"{_MC_CONFIG} (cross_entropy_loss_fusion = False); "
                           "megatron/core/tensor_parallel/cross_entropy.py (_VocabParallelCrossEntropy)"),
    grad_accum_fusion=Item(True, f"{_MC_CONFIG} (gradient_accumulation_fusion; --no-gradient-accumulation-fusion)"),
    optimizer_kernel=Item(OptimizerKernel.FUSED, "NVIDIA/Megatron-LM@core_r0.9.0:megatron/core/optimizer/__init__.py "
                          "(TE/Apex FusedAdam)"),
    grad_clip=Item(True, f"{_MC_ARGS} (--clip-grad, default 1.0); {_MC_CLIP}"),
    vocab_divisible_by=Item(128, f"{_MC_ARGS} (--make-vocab-size-divisible-by, default 128)"),
    cuda_graphs=no("opt-in: --enable-cuda-graph (TransformerConfig.enable_cuda_graph = False)",
                   f"{_MC_CONFIG} (enable_cuda_graph)"),
    zero=Item(ZeroStage.Z1, f"{_MC_ARGS} (--use-distributed-optimizer, set by the examples/gpt3 and llama scripts)"),
    cp_comm=Item(CpComm.P2P, f"{_MC_ARGS} (--cp-comm-type, default p2p)", "ring attention in TransformerEngine"),
    tp_comm_overlap=no("opt-in: --tp-comm-overlap needs userbuffers bootstrapping", f"{_MC_ARGS} (--tp-comm-overlap)"),
    dp_overlap=Item(True, f"{_MC_DDP_CONFIG} (overlap_grad_reduce; --overlap-grad-reduce in the examples scripts)"),
    dp_bucket_size=Item(160e6, f"{_MC_DDP} (bucket_size = max(40000000, 1000000 * dp_size) parameters)",
                        "40 M fp32 main grads = 160 MB; Megatron grows it to 1 M x dp parameters past dp = 40"),
    param_gather_overlap=Item(True, f"{_MC_DDP_CONFIG} (overlap_param_gather; --overlap-param-gather)"),
    fsdp_prefetch=Item(True, "NVIDIA/Megatron-LM@core_r0.9.0:megatron/core/distributed/"
                             "torch_fully_sharded_data_parallel.py"),
    partition=Item("", "NVIDIA/Megatron-LM@core_r0.9.0:megatron/core/transformer/transformer_block.py "
                       "(get_num_layers_to_build)", EQUAL),
    pipe_module=Item(PipeModule.GPT_NEOX, "unused without a DeepSpeed partition"),
    attentions=Item(_TE_KERNELS, f"{_MC_ARGS} (--attention-backend flash|fused|unfused|local); {_TE_ATTN}"),
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
    batch_host_sync=no("pinned batches copied with cuda(non_blocking=True)", "NVIDIA/Megatron-LM@core_r0.9.0:megatron/"
                       "training/utils.py (get_batch_on_this_tp_rank); training.py (pin_memory=True)"),
    fp32_loss_logits=Item(False, "NVIDIA/Megatron-LM@core_r0.9.0:megatron/core/tensor_parallel/cross_entropy.py "
                               "(VocabParallelCrossEntropy: in-place softmax of the logits)"),
    lowp_saved_input=Item(True, TE_SAVE, "Megatron-Core builds its linear layers from TE "
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
    cuda_graphs=no("the performance recipes leave enable_cuda_graph off unless a recipe sets it",
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
                       "(get_num_layers_to_build)", EQUAL),
    pipe_module=Item(PipeModule.GPT_NEOX, "unused without a DeepSpeed partition"),
    attentions=Item(_TE_KERNELS, _TE_ATTN),
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
    batch_host_sync=no("Megatron-Core's pinned, non-blocking batch copies",
                       "NVIDIA/NeMo@v2.0.0:nemo/collections/llm/gpt/model/base.py (gpt_data_step: non_blocking=True)"),
    fp32_loss_logits=Item(False, f"{_NEMO}/gpt/model/base.py (Megatron-Core GPT models: Megatron-Core's "
                               "vocab-parallel cross-entropy)"),
    lowp_saved_input=Item(True, TE_SAVE, "NeMo trains Megatron-Core models with TE layers"),
)
