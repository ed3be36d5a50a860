"""The profiles of the stacks that run Megatron's model code on DeepSpeed's pipeline engine:
Megatron-DeepSpeed (BLOOM, MT-NLG) and GPT-NeoX (on DeeperSpeed, EleutherAI's fork).

Both carry their own copies of Megatron's kernels, each cited in its own repository, and both take
their pipeline partition, gradient reduction and ZeRO from DeepSpeed, whose citations they share
here (read as :mod:`llmp.stacks.catalog` says).
"""

from __future__ import annotations

from llmp.spec.spec import Attention as A
from llmp.spec.spec import CpComm, OptimizerKernel, PipeModule, Stack, ZeroStage
from llmp.spec.spec import Precision as P
from llmp.stacks.items import no
from llmp.stacks.profile import ClipScale, HostStyle, Item, LossSync, Profile, Unscale, ZeroGrad
from llmp.stacks.profile import SelectiveRecompute as SR

_NEOX = "EleutherAI/gpt-neox@e897c23:megatron/neox_arguments/neox_args.py"
_NEOX_20B = "EleutherAI/gpt-neox@252ddc5:configs/20B.yml"
_NEOX_TF = "EleutherAI/gpt-neox@ce9bee3:megatron/model/transformer.py"
_DS_PIPE = "microsoft/DeepSpeed@v0.9.5:deepspeed/runtime/pipe/engine.py"
_DS_ZERO = "microsoft/DeepSpeed@v0.9.5:deepspeed/runtime/zero/stage_1_and_2.py"
_DS_CONFIG = "https://www.deepspeed.ai/docs/config-json/#zero-optimizations-for-fp16-training"
_ALL_DEEPSPEED_ZERO = ("DeepSpeed runs ZeRO-1 with its pipeline engine only; stages 2 and 3 partition gradients, which "
                       f"the pipeline engine rejects ({_DS_PIPE} (PipelineEngine.__init__: assert "
                       "zero_optimization_stage() < ZeroStageEnum.gradients))")

_ENGINE = dict(
    zero_grad=Item(ZeroGrad.SET_TO_NONE, f"{_DS_ZERO} (zero_grad(set_to_none=True))"),
    loss_sync=Item(LossSync.PIPELINE_BROADCAST, f"{_DS_PIPE} (PipelineEngine._aggregate_total_loss)"),
    fp16_unscale=Item(Unscale.CHECK_THEN_CLIP_PASS, f"{_DS_ZERO} (has_overflow, then unscale_and_clip_grads)"),
    fsdp=no("ZeRO-3 is not combined with the pipeline engine", _ALL_DEEPSPEED_ZERO),
    pipeline_zero_max=Item(ZeroStage.Z1, _ALL_DEEPSPEED_ZERO),
)
"""What DeepSpeed's pipeline engine and ZeRO-1 decide for both stacks, cited once."""

_MDS = "microsoft/Megatron-DeepSpeed@main:megatron"
MEGATRON_DEEPSPEED = Profile(
    stack=Stack.MEGATRON_DEEPSPEED, title="Megatron-DeepSpeed (BLOOM, MT-NLG)", **_ENGINE,
    versions="microsoft/Megatron-DeepSpeed and bigscience-workshop/Megatron-DeepSpeed 2021-2022, DeepSpeed pipeline "
             "engine",
    attention=Item(A.UNFUSED_FUSED_SOFTMAX, f"{_MDS}/arguments.py (masked_softmax_fusion on by default); "
                   f"{_MDS}/model/transformer.py (CoreAttention: baddbmm, FusedScaleMaskSoftmax, bmm)"),
    fused_norm=Item(True, f"{_MDS}/model/fused_layer_norm.py (MixedFusedLayerNorm)"),
    fused_bias_act=Item(True, f"{_MDS}/arguments.py (--no-bias-gelu-fusion)"),
    fused_bias_dropout_add=Item(True, f"{_MDS}/arguments.py (--no-bias-dropout-fusion)"),
    fused_rope=no("GPT models with learned positions or ALiBi (BLOOM)", f"{_MDS}/model/language_model.py"),
    fused_cross_entropy=no("eager vocab-parallel cross-entropy", f"{_MDS}/mpu/cross_entropy.py "
                                                                 "(_VocabParallelCrossEntropy)"),
    grad_accum_fusion=no("DeepSpeed owns the gradients: autograd accumulates .grad and the engine copies them",
                         f"{_DS_ZERO} (gradients accumulated into the partition buffers)"),
    optimizer_kernel=Item(OptimizerKernel.FUSED, f"{_MDS}/optimizer/__init__.py (apex FusedAdam); "
                          "microsoft/DeepSpeed@v0.9.5:deepspeed/ops/adam/fused_adam.py"),
    grad_clip=Item(True, f"{_DS_CONFIG} (gradient_clipping); {_DS_ZERO} (get_grad_norm_direct)"),
    vocab_divisible_by=Item(128, f"{_MDS}/arguments.py (--make-vocab-size-divisible-by, default 128)"),
    cuda_graphs=no("no CUDA graphs", _MDS),
    zero=Item(ZeroStage.NONE, f"{_DS_CONFIG} (zero_optimization.stage default 0)",
              "BLOOM-176B ran DeepSpeed's bf16 optimizer, which shards like ZeRO-1: set zero = 1 there"),
    cp_comm=Item(CpComm.P2P, _MDS, "no context parallelism in these runs (DeepSpeed-Ulysses: cp_comm = a2a)"),
    tp_comm_overlap=no("no userbuffers", _MDS),
    dp_overlap=no("the pipeline engine reduces gradients in its ReduceGrads instruction, after the last backward",
                  f"{_DS_PIPE} (PipelineEngine._exec_reduce_grads)"),
    dp_bucket_size=Item(1e9, f"{_DS_CONFIG} (reduce_bucket_size default 5e8 elements)", "5e8 16-bit gradients = 1 GB"),
    param_gather_overlap=no("ZeRO-1 all-gathers the updated parameters after the step", f"{_DS_ZERO} (step: "
                                                                                        "all_gather_dp_groups)"),
    fsdp_prefetch=Item(False, _DS_PIPE, "no ZeRO-3 with the pipeline engine"),
    partition=Item("type:transformer", "microsoft/Megatron-DeepSpeed:megatron/model/gpt_model.py "
                   "(GPTModelPipe: partition_method='type:transformer')"),
    pipe_module=Item(PipeModule.MEGATRON_DEEPSPEED, "microsoft/Megatron-DeepSpeed:megatron/model/gpt_model.py "
                                                    "(GPTModelPipe)"),
    attentions=Item((A.UNFUSED, A.UNFUSED_FUSED_SOFTMAX, A.FLASH2), f"{_MDS}/arguments.py (--use-flash-attn-v2)"),
    fused_softmax_max_seq=Item(2048, f"{_MDS}/model/fused_softmax.py (is_kernel_available: 16 < sk <= 2048)"),
    vocab_pad_tp=Item(True, f"{_MDS}/tokenizer/tokenizer.py (_vocab_size_with_padding)"),
    clip_scale=Item(ClipScale.WITH_UNSCALE, f"{_DS_ZERO} (unscale_and_clip_grads)"),
    userbuffers=no("no TransformerEngine", _MDS),
    fp32_grads=Item((P.BF16,), "microsoft/DeepSpeed@v0.9.5:deepspeed/runtime/bf16_optimizer.py (BF16_Optimizer: "
                    "fp32_groups_gradients, the gradients accumulated and reduced in FP32)",
                    "fp16 (ZeRO's FP16 optimizer) keeps fp16 gradients"),
    selective_recompute=Item(SR.CORE_ATTENTION, f"{_MDS}/arguments.py (--recompute-granularity selective); "
                             f"{_MDS}/model/transformer.py (ParallelAttention: checkpointed core attention)"),
    host_style=Item(HostStyle.MEGATRON, f"{_MDS}/model/transformer.py (ParallelTransformerLayer); "
                    f"{_MDS}/mpu/layers.py; {_MDS}/model/fused_softmax.py; "
                    f"{_MDS}/model/fused_bias_gelu.py"),
    pipeline_host_sync=no("DeepSpeed's pipeline engine sends with dist.send/recv and never synchronises the device",
                          "microsoft/DeepSpeed@v0.9.5:deepspeed/runtime/pipe/p2p.py (send, recv)"),
    batch_host_sync=Item(True, f"{_MDS}/core/tensor_parallel/data.py (broadcast_data: torch.cat(...).cuda() from "
                         "pageable memory, ordered after a stream sync: "
                         "docs.nvidia.com/cuda/cuda-runtime-api/api-sync-behavior.html); pretrain_gpt.py "
                         "(get_batch_pipe)"),
    fp32_loss_logits=Item(False, f"{_MDS}/core/tensor_parallel/cross_entropy.py (_VocabParallelCrossEntropy)"),
    lowp_saved_input=no("no TransformerEngine: the GEMMs run in 16 bits", _MDS),
)

GPT_NEOX = Profile(
    stack=Stack.GPT_NEOX, title="GPT-NeoX (EleutherAI, on DeepSpeed/DeeperSpeed)", **_ENGINE,
    versions="GPT-NeoX v1.0-v2.0 (GPT-NeoX-20B, 2022; the seed paper's Perlmutter and Vista runs)",
    attention=Item(A.UNFUSED, f"{_NEOX} (attention_config default [[['global'], n_layers]]); {_NEOX_TF} "
                   "(ParallelSelfAttention.attention: baddbmm, FusedScaleMaskSoftmax, attention_dropout, bmm)",
                   "scaled_upper_triang_masked_softmax_fusion defaults to False: masked_fill_ then torch softmax; "
                   "configs/20B.yml turns the fused softmax on; attention_config 'flash' selects FlashAttention-2 "
                   "(v2.0)"),
    fused_norm=no("RMSNorm is eager PyTorch (x.norm, div, mul); LayerNorm is one kernel (Apex or torch) either way",
                  "EleutherAI/gpt-neox@058f7d2:megatron/model/norms.py (RMSNorm.forward); "
                  f"{_NEOX} (rmsnorm_fusion = False, layernorm_fusion = False)"),
    fused_bias_act=no("bias add, then GELU", f"{_NEOX} (bias_gelu_fusion = False); {_NEOX_TF} (ParallelMLP.forward)"),
    fused_bias_dropout_add=no("bias add, dropout and residual add as separate kernels",
                              f"{_NEOX} (bias_dropout_fusion = False); {_NEOX_TF} (get_bias_dropout_add)"),
    fused_rope=no("t * cos + rotate_half(t) * sin in eager PyTorch", f"{_NEOX} (rope_fusion = False); "
                  "EleutherAI/gpt-neox@b0b561f:megatron/model/positional_embeddings.py (apply_rotary_pos_emb)"),
    fused_cross_entropy=no("Megatron's eager vocab-parallel cross-entropy",
                           "EleutherAI/gpt-neox@557751f:megatron/model/gpt2_model.py (cross_entropy: "
                           "mpu.vocab_parallel_cross_entropy)"),
    grad_accum_fusion=no("autograd accumulates the fp16 .grad of every parameter each microbatch",
                         f"{_DS_ZERO} (ZeRO-1: gradients reduced only at the accumulation boundary)"),
    optimizer_kernel=Item(OptimizerKernel.FUSED, "EleutherAI/gpt-neox@9c645dd:megatron/training.py (get_optimizer: "
                          "adam -> apex/DeepSpeed FusedAdam)"),
    grad_clip=Item(True, f"{_NEOX} (clip_grad = 1.0); {_NEOX_20B} (gradient_clipping: 1.0)"),
    vocab_divisible_by=Item(128, f"{_NEOX} (make_vocab_size_divisible_by = 128)"),
    cuda_graphs=no("no CUDA graphs", _NEOX),
    zero=Item(ZeroStage.Z1, f"{_NEOX_20B} (zero_optimization.stage: 1, as in the repository's configs)"),
    cp_comm=Item(CpComm.P2P, _NEOX, "no context parallelism"),
    tp_comm_overlap=no("no userbuffers", _NEOX),
    dp_overlap=no("every NeoX model is a DeepSpeed PipelineModule (pipe_parallel_size >= 1): gradients are "
                  "reduced in the ReduceGrads instruction after the last backward",
                  f"{_DS_PIPE} (PipelineEngine._exec_reduce_grads); {_NEOX} (is_pipe_parallel)"),
    dp_bucket_size=Item(2.52e9, f"{_NEOX_20B} (reduce_bucket_size: 1260000000 fp16 elements)", "1.26e9 x 2 bytes"),
    param_gather_overlap=no("ZeRO-1 all-gathers the updated fp16 parameters after the step",
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
    clip_scale=Item(ClipScale.WITH_UNSCALE, f"{_DS_ZERO} (unscale_and_clip_grads: combined_scale)"),
    userbuffers=no("no TransformerEngine in the runs modelled", _NEOX),
    fp32_grads=Item((P.BF16,), "microsoft/DeepSpeed@v0.9.5:deepspeed/runtime/bf16_optimizer.py (BF16_Optimizer: "
                    "fp32_groups_gradients)", "fp16 (ZeRO's FP16 optimizer) keeps fp16 gradients"),
    selective_recompute=Item(SR.CORE_ATTENTION, f"{_NEOX} (checkpoint_activations, checkpoint_num_layers: whole layers "
                                                "only)",
                             "GPT-NeoX has no selective mode of its own: a spec asking for one gets llmp's "
                             "core-attention meaning"),
    host_style=Item(HostStyle.MEGATRON, f"{_NEOX_TF} (ParallelTransformerLayer, ParallelSelfAttention, "
                    "ParallelMLP); EleutherAI/gpt-neox:megatron/mpu/layers.py"),
    pipeline_host_sync=no("DeepSpeed's pipeline engine sends with dist.send/recv and never synchronises the device",
                          "microsoft/DeepSpeed@v0.9.5:deepspeed/runtime/pipe/p2p.py (send, recv)"),
    batch_host_sync=Item(True, "EleutherAI/gpt-neox:megatron/mpu/data.py (broadcast_data: torch.cat(...).cuda() "
                         "from pageable memory, ordered after a stream sync: "
                         "docs.nvidia.com/cuda/cuda-runtime-api/api-sync-behavior.html); "
                         "megatron/training.py (get_batch_pipe)"),
    fp32_loss_logits=Item(False, "EleutherAI/gpt-neox@e897c23:megatron/mpu/cross_entropy.py "
                               "(_VocabParallelCrossEntropy)"),
    lowp_saved_input=no("no TransformerEngine: the GEMMs run in 16 bits", _NEOX),
)
