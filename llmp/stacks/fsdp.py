"""The profiles of the stacks that train on PyTorch FSDP: Composer / llm-foundry (FSDP),
torchtitan (FSDP2) and NeMo AutoModel (Hugging Face models on FSDP2).

Their kernels come from PyTorch itself (clipping, clearing gradients, SDPA) or from the libraries
they plug in (torchao, Liger, TransformerEngine), whose citations they share here (read as
:mod:`llmp.stacks.catalog` says).
"""

from __future__ import annotations

from llmp.spec.spec import Attention as A
from llmp.spec.spec import CpComm, OptimizerKernel, PipeModule, Stack, ZeroStage
from llmp.spec.spec import Precision as P
from llmp.stacks.items import EQUAL, TE_SAVE, no
from llmp.stacks.profile import ClipScale, HostStyle, Item, LossSync, Profile, Unscale, ZeroGrad
from llmp.stacks.profile import SelectiveRecompute as SR

_TORCH_CLIP = "pytorch/pytorch@v2.4.0:torch/nn/utils/clip_grad.py (clip_grad_norm_: foreach norm, then _foreach_mul_)"
_TORCH_ZERO = "pytorch/pytorch@v2.4.0:torch/optim/optimizer.py (zero_grad(set_to_none=True))"
_TITAN = "pytorch/torchtitan@v0.1.0:torchtitan/config_manager.py"
_FOUNDRY = "mosaicml/llm-foundry@v0.10.0"
_COMPOSER = "mosaicml/composer@v0.24.0"
_AUTOMODEL = "NVIDIA-NeMo/Automodel@v0.1.0:nemo_automodel/_transformers/auto_model.py"
_TORCHAO_SAVE = ("pytorch/ao@v0.8.0:torchao/float8/float8_linear.py (matmul_with_hp_or_float8_args.forward: "
                 "ctx.save_for_backward(input_hp, weight_hp_t))")
FLASH_LIKE = (A.FLASH2, A.FLASH3, A.CUDNN, A.SDPA)
"""Attention kernels that run as one fused kernel."""


COMPOSER = Profile(
    stack=Stack.COMPOSER, title="Composer / llm-foundry (PyTorch FSDP)",
    versions="llm-foundry v0.4-v0.10 MPT training (the llm-foundry throughput tables)",
    attention=Item(A.FLASH2, f"{_FOUNDRY}:llmfoundry/models/mpt/configuration_mpt.py (attn_config_defaults "
                   "attn_impl = 'flash')", "older releases used 'triton' or 'torch'"),
    fused_norm=Item(True, f"{_FOUNDRY}:llmfoundry/models/layers/norm.py (LPLayerNorm: torch layer_norm, one kernel)"),
    fused_bias_act=Item(True, f"{_FOUNDRY}:llmfoundry/models/layers/ffn.py (MPTMLP: no bias, one GELU kernel)"),
    fused_bias_dropout_add=Item(True, f"{_FOUNDRY}:llmfoundry/models/mpt/modeling_mpt.py (no_bias, dropout 0: "
                                "one residual add)"),
    fused_rope=no("MPT uses ALiBi; Llama-style models rotate in eager PyTorch",
                  f"{_FOUNDRY}:llmfoundry/models/layers/attention.py (apply_rotary_pos_emb from HF)"),
    fused_cross_entropy=Item(True, f"{_FOUNDRY}:llmfoundry/models/mpt/modeling_mpt.py (loss_fn 'fused_crossentropy': "
                             "flash_attn.losses.cross_entropy)"),
    grad_accum_fusion=no("FSDP adds each microbatch's reduce-scattered gradient shard into .grad",
                         "pytorch/pytorch@v2.3.0:torch/distributed/fsdp/_runtime_utils.py (_post_backward_hook)"),
    optimizer_kernel=Item(OptimizerKernel.PER_TENSOR, f"{_COMPOSER}:composer/optim/decoupled_weight_decay.py "
                          "(DecoupledAdamW.adamw: a loop over params)"),
    grad_clip=Item(True, f"{_FOUNDRY}:scripts/train/yamls/pretrain/mpt-7b.yaml (algorithms.gradient_clipping: "
                   f"clipping_type norm, threshold 1.0); {_COMPOSER}:composer/algorithms/gradient_clipping"),
    vocab_divisible_by=Item(1, f"{_FOUNDRY}:llmfoundry/models/mpt/configuration_mpt.py (vocab_size 50368, given "
                            "already padded)"),
    cuda_graphs=no("no CUDA graphs", _COMPOSER),
    zero=Item(ZeroStage.FSDP, f"{_FOUNDRY}:scripts/train/yamls/pretrain/mpt-7b.yaml (fsdp_config.sharding_strategy: "
              "FULL_SHARD)"),
    cp_comm=Item(CpComm.P2P, _FOUNDRY, "no context parallelism"),
    tp_comm_overlap=no("no tensor parallelism in these runs", _FOUNDRY),
    dp_overlap=Item(True, "pytorch/pytorch@v2.3.0:torch/distributed/fsdp (reduce-scatter per wrapped block)",
                    "FSDP reduces per layer; no DDP buckets"),
    dp_bucket_size=Item(100e6, "unused with FSDP", "FSDP reduce-scatters per wrapped block"),
    param_gather_overlap=no("FSDP gathers per layer instead", _FOUNDRY),
    fsdp_prefetch=Item(True, f"{_COMPOSER}:composer/distributed/dist_strategy.py (backward_prefetch BACKWARD_PRE, "
                       "limit_all_gathers)"),
    partition=Item("", "unused: llm-foundry trains with FSDP, without pipeline parallelism", EQUAL),
    pipe_module=Item(PipeModule.GPT_NEOX, "unused without a DeepSpeed partition"),
    attentions=Item((A.FLASH2, A.FLASH1, A.TRITON, A.SDPA, A.UNFUSED),
                    f"{_FOUNDRY}:llmfoundry/models/layers/attention.py (attn_impl flash | torch); earlier releases "
                    "also attn_impl triton (flash-attn's Triton kernel), and 'flash' ran flash-attn 1.x with the 'gpu' "
                    "extra (mosaicml/llm-foundry setup.py of the releases on Composer 0.17: extra_deps gpu = "
                    "flash-attn==1.0.9, gpu-flash2 = flash-attn==2.5.0)"),
    fused_softmax_max_seq=Item(0, _FOUNDRY, "no fused masked softmax kernel"),
    vocab_pad_tp=no("no tensor parallelism", _FOUNDRY),
    zero_grad=Item(ZeroGrad.SET_TO_NONE, _TORCH_ZERO),
    clip_scale=Item(ClipScale.ALWAYS, _TORCH_CLIP),
    loss_sync=Item(LossSync.NONE, f"{_COMPOSER}:composer/trainer/trainer.py (train loss logged without a per-step "
                   "all-reduce)"),
    fp16_unscale=Item(Unscale.CHECK_AND_UNSCALE,
                      "pytorch/pytorch@v2.3.0:torch/distributed/fsdp/sharded_grad_scaler.py"),
    fsdp=Item(True, f"{_COMPOSER}:composer/distributed/dist_strategy.py"),
    userbuffers=no("no TransformerEngine", _FOUNDRY),
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
    pipeline_host_sync=no("no pipeline parallelism", _FOUNDRY),
    batch_host_sync=no("pinned batches moved with non_blocking=True", f"{_COMPOSER}:composer/devices/device_gpu.py "
                       "(DeviceGPU.tensor_to_device)"),
    fp32_loss_logits=Item(False, "mosaicml/llm-foundry@8c8dd48f72:llmfoundry/models/mpt/modeling_mpt.py "
                               "(ComposerMPTCausalLM: loss_fn default 'fused_crossentropy', flash_attn's "
                               "CrossEntropyLoss on the model-dtype logits)"),
    lowp_saved_input=Item(True, f"{_COMPOSER}:composer/core/precision.py (amp_fp8 runs TE's fp8_autocast); "
                          f"{_FOUNDRY}:llmfoundry/models/layers/fc.py (fc_type 'te': te.Linear); {TE_SAVE}"),
)

TORCHTITAN = Profile(
    stack=Stack.TORCHTITAN, title="torchtitan (PyTorch FSDP2)",
    versions="torchtitan v0.1 (2024-2025), eager mode (training.compile = false)",
    attention=Item(A.SDPA, "pytorch/torchtitan@v0.1.0:torchtitan/models/llama/model.py (Attention.forward: "
                   "F.scaled_dot_product_attention(is_causal=True))"),
    fused_norm=no("nn.RMSNorm in eager mode is a chain of kernels", f"{_TITAN} (model.norm_type = 'rmsnorm'); "
                  "pytorch/torchtitan@v0.1.0:torchtitan/models/norms.py"),
    fused_bias_act=no("F.silu(w1(x)) * w3(x): two kernels",
                      "pytorch/torchtitan@v0.1.0:torchtitan/models/llama/model.py (FeedForward.forward)"),
    fused_bias_dropout_add=Item(True, "pytorch/torchtitan@v0.1.0:torchtitan/models/llama/model.py (no bias, no "
                                "dropout: one residual add)"),
    fused_rope=no("apply_rotary_emb: complex multiply in eager PyTorch",
                  "pytorch/torchtitan@v0.1.0:torchtitan/models/llama/model.py (apply_rotary_emb)"),
    fused_cross_entropy=no("F.cross_entropy on float logits (log_softmax + nll_loss)",
                           "pytorch/torchtitan@v0.1.0:torchtitan/train.py (loss_fn)"),
    grad_accum_fusion=no("FSDP2 adds each microbatch's gradient shard",
                         "pytorch/pytorch@v2.5.0:torch/distributed/_composable/fsdp"),
    optimizer_kernel=Item(OptimizerKernel.FUSED, f"{_TITAN} (optimizer.implementation = 'fused')"),
    grad_clip=Item(True, f"{_TITAN} (training.max_norm = 1.0); {_TORCH_CLIP}"),
    vocab_divisible_by=Item(1, "pytorch/torchtitan@v0.1.0:torchtitan/models/llama/__init__.py (vocab from the "
                               "tokenizer)"),
    cuda_graphs=no("no CUDA graphs in training", _TITAN),
    zero=Item(ZeroStage.FSDP, f"{_TITAN} (training.data_parallel_shard_degree = -1: FSDP2 over every GPU)"),
    cp_comm=Item(CpComm.ALL_GATHER, f"{_TITAN} (experimental.context_parallel_rotate_method = 'allgather')",
                 "K/V shards all-gathered after the first sub-SDPA; modelled exposed"),
    tp_comm_overlap=no("async TP is opt-in", f"{_TITAN} (experimental.enable_async_tensor_parallel = False)"),
    dp_overlap=Item(True, "pytorch/pytorch@v2.5.0:torch/distributed/_composable/fsdp (reduce-scatter per block)"),
    dp_bucket_size=Item(100e6, "unused with FSDP", "FSDP2 reduce-scatters per block"),
    param_gather_overlap=no("FSDP2 gathers per block instead", _TITAN),
    fsdp_prefetch=Item(True, "pytorch/pytorch@v2.5.0:torch/distributed/_composable/fsdp/fully_shard.py "
                       "(implicit forward and backward prefetching)"),
    partition=Item("", "pytorch/torchtitan:torchtitan/distributed/pipeline.py (layers split evenly over "
                       "stages)", EQUAL),
    pipe_module=Item(PipeModule.GPT_NEOX, "unused without a DeepSpeed partition"),
    attentions=Item((A.SDPA, A.FLASH2, A.CUDNN), f"{_TITAN} (model.use_flex_attn = False: SDPA)"),
    fused_softmax_max_seq=Item(0, _TITAN, "no fused masked softmax kernel"),
    vocab_pad_tp=no("DTensor shards the embedding unevenly", _TITAN),
    zero_grad=Item(ZeroGrad.SET_TO_NONE, _TORCH_ZERO),
    clip_scale=Item(ClipScale.ALWAYS, _TORCH_CLIP),
    loss_sync=Item(LossSync.NONE, f"{_TITAN} (metrics.log_freq = 10: the loss is all-reduced only on log steps)"),
    fp16_unscale=Item(Unscale.CHECK_AND_UNSCALE, "pytorch/pytorch@v2.5.0:torch/amp/grad_scaler.py"),
    fsdp=Item(True, _TITAN),
    userbuffers=no("no TransformerEngine", _TITAN),
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
    pipeline_host_sync=no("torch.distributed.pipelining sends asynchronously and waits on the stream",
                          "pytorch/pytorch@v2.5.0:torch/distributed/pipelining/schedules.py (_batch_p2p: "
                          "dist.batch_isend_irecv, work.wait())"),
    batch_host_sync=no("one batch per step, copied once: no wait per microbatch",
                       "pytorch/torchtitan@v0.1.0:torchtitan/train.py (input_ids.to(device_type))"),
    fp32_loss_logits=Item(True, "pytorch/torchtitan@v0.1.0:torchtitan/models/llama/model.py (self.output(h).float()); "
                              "train.py (loss_fn: F.cross_entropy; del pred before loss.backward())"),
    lowp_saved_input=no("torchao Float8Linear saves the BF16 input", _TORCHAO_SAVE),
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
    grad_accum_fusion=no("FSDP2 adds each microbatch's gradient shard",
                         "pytorch/pytorch@v2.5.0:torch/distributed/_composable/fsdp"),
    optimizer_kernel=Item(OptimizerKernel.FOREACH, "pytorch/pytorch@v2.5.0:torch/optim/adamw.py (foreach is the "
                          "default on CUDA when fused is not requested)"),
    grad_clip=Item(True, "NVIDIA-NeMo/Automodel@v0.1.0:nemo_automodel/recipes/llm/train_ft.py (max_grad_norm)"),
    vocab_divisible_by=Item(1, "the Hugging Face config's vocab_size"),
    cuda_graphs=no("no CUDA graphs", _AUTOMODEL),
    zero=Item(ZeroStage.FSDP, "NVIDIA-NeMo/Automodel@v0.1.0:nemo_automodel/components/distributed/fsdp2.py"),
    cp_comm=Item(CpComm.P2P, f"llmp default ({_AUTOMODEL}: context parallelism not read)"),
    tp_comm_overlap=no("no userbuffers", _AUTOMODEL),
    dp_overlap=Item(True, "pytorch/pytorch@v2.5.0:torch/distributed/_composable/fsdp (reduce-scatter per block)"),
    dp_bucket_size=Item(100e6, "unused with FSDP", "FSDP2 reduce-scatters per block"),
    param_gather_overlap=no("FSDP2 gathers per block instead", _AUTOMODEL),
    fsdp_prefetch=Item(True, "pytorch/pytorch@v2.5.0:torch/distributed/_composable/fsdp/fully_shard.py"),
    partition=Item("", "unused: the NeMo AutoModel runs modelled use FSDP2, without pipeline parallelism", EQUAL),
    pipe_module=Item(PipeModule.GPT_NEOX, "unused without a DeepSpeed partition"),
    attentions=Item((*FLASH_LIKE, A.UNFUSED), f"{_AUTOMODEL} (attn_implementation sdpa | flash_attention_2 | eager)"),
    fused_softmax_max_seq=Item(0, _AUTOMODEL, "no fused masked softmax kernel"),
    vocab_pad_tp=no("DTensor shards the embedding unevenly", _AUTOMODEL),
    zero_grad=Item(ZeroGrad.SET_TO_NONE, _TORCH_ZERO),
    clip_scale=Item(ClipScale.ALWAYS, _TORCH_CLIP),
    loss_sync=Item(LossSync.PER_STEP, "NVIDIA-NeMo/Automodel@v0.1.0:nemo_automodel/recipes/llm/train_ft.py "
                   "(the step's loss all-reduced over dp for logging)"),
    fp16_unscale=Item(Unscale.CHECK_AND_UNSCALE, "pytorch/pytorch@v2.5.0:torch/amp/grad_scaler.py"),
    fsdp=Item(True, _AUTOMODEL),
    userbuffers=no("no TransformerEngine", _AUTOMODEL),
    pipeline_zero_max=Item(ZeroStage.FSDP, "NVIDIA-NeMo/Automodel@v0.1.0 (PP with FSDP2)"),
    fp32_grads=Item((P.BF16, P.FP8, P.MXFP8, P.NVFP4),
                    "pytorch/pytorch@v2.5.0:torch/distributed/_composable/fsdp/_fsdp_param.py (the sharded FP32 "
                    "parameter's gradient); NVIDIA-NeMo/Automodel@v0.1.0:nemo_automodel/components/"
                    "distributed/fsdp2.py (MixedPrecisionPolicy reduce_dtype float32)"),
    selective_recompute=Item(SR.CORE_ATTENTION, "NVIDIA-NeMo/Automodel@v0.1.0:nemo_automodel/components/distributed/"
                             "fsdp2.py (activation_checkpointing: whole decoder layers only)",
                             "no selective mode of its own: a spec asking for one gets llmp's core-attention meaning"),
    host_style=Item(HostStyle.TORCH, f"{_AUTOMODEL} (Hugging Face modules)"),
    pipeline_host_sync=no("no pipeline parallelism in the runs modelled", _AUTOMODEL),
    batch_host_sync=no("no wait per microbatch", _AUTOMODEL),
    fp32_loss_logits=Item(False, "NVIDIA-NeMo/Automodel@51d4df5:examples/llm_benchmark/qwen/"
                               "qwen3_moe_30b_te_deepep.yaml (loss_fn MaskedCrossEntropy with fp32_upcast: false)",
                          "the class upcasts by default (nemo_automodel/components/loss/masked_ce.py); the benchmark "
                          "configs turn it off"),
    lowp_saved_input=no("torchao Float8Linear saves the BF16 input",
                        "NVIDIA-NeMo/Automodel@102dece:nemo_automodel/components/quantization/fp8.py "
                        f"(apply_fp8_to_model: torchao convert_to_float8_training); {_TORCHAO_SAVE}"),
)
