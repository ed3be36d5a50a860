"""The resolved, typed spec: what every later stage reads. Nothing downstream sees DSL text.

The model block (:class:`~llmp.spec.model.ModelSpec`) is in ``model.py``; the parallel and train
blocks, the choices they make and the ``Spec`` that gathers the blocks are here.

Numbers are SI and already unit-checked. A numeric field holds a SymPy expression only when the
spec left a symbol free (``hidden = symbol``) or derived a field from one; otherwise it is a
plain ``int``/``float``. Field names are the names used in the DSL, in ``--set section.field``
paths and in SymPy symbols.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from llmp.hardware.spec import Cluster, Dtype
from llmp.spec.model import Count, ModelSpec, Real


class Schedule(StrEnum):
    """Pipeline schedules; each is one entry of :data:`llmp.analytic.schedules.TABLE`."""

    GPIPE = "gpipe"
    ONE_F_ONE_B = "1f1b"
    INTERLEAVED = "interleaved"
    """Megatron's interleaved 1F1B over ``vp`` model chunks per rank."""
    ZB_H1 = "zb_h1"
    """Zero bubble, 1F1B's memory: weight gradients held back to fill the cool-down (Qi et al. 2024)."""
    ZB_V = "zb_v"
    """Zero bubble over two chunks per rank placed in a V (``vp = 2``; Qi et al. 2024)."""
    DUALPIPE = "dualpipe"
    """DeepSeek-V3's bidirectional pipeline: two model copies, fed from both ends."""


class PipeModule(StrEnum):
    """The DeepSpeed ``PipelineModule`` whose layer list a DeepSpeed ``partition`` method splits.

    Its list is more than the transformer layers: embedding, head and a few parameter-free
    functions are items too, and ``uniform`` counts them and ``type:`` matches their names.
    """

    GPT_NEOX = "gpt_neox"
    """GPT-NeoX ``GPT2ModelPipe`` (megatron/model/gpt2_model.py ``init_specs``): EmbeddingPipe,
    the function ``_pre_transformer_block``, the layers, ``_post_transformer_block``, NormPipe,
    then ParallelLinearPipe (or EmbeddingPipe again when tied). Run on EleutherAI's DeeperSpeed,
    the DeepSpeed fork GPT-NeoX pins."""
    MEGATRON_DEEPSPEED = "megatron_deepspeed"
    """Megatron-DeepSpeed ``GPTModelPipe`` (megatron/model/gpt_model.py): ``_to_float16``,
    EmbeddingPipe, a transpose lambda, the layers, ``undo``, the final LayerNorm, EmbeddingPipe
    again (tied head), ``float16_to_fp32``. Run on microsoft/DeepSpeed."""


class Recompute(StrEnum):
    NONE = "none"
    SELECTIVE = "selective"
    FULL = "full"


class ZeroStage(StrEnum):
    """Optimizer/gradient/parameter sharding over the data-parallel axis."""

    NONE = "none"
    Z1 = "1"
    """Optimizer states sharded."""
    Z2 = "2"
    """Optimizer states and gradients sharded."""
    Z3 = "3"
    """Optimizer states, gradients and parameters sharded (ZeRO-3)."""
    FSDP = "fsdp"
    """PyTorch FSDP FULL_SHARD: same traffic and memory as ZeRO-3."""


class Stack(StrEnum):
    """The training stack that ran the step (profiles in :mod:`llmp.stacks`)."""

    GENERIC = "generic"
    MEGATRON_LM = "megatron_lm"
    MEGATRON_CORE = "megatron_core"
    NEMO = "nemo"
    MEGATRON_DEEPSPEED = "megatron_deepspeed"
    GPT_NEOX = "gpt_neox"
    COMPOSER = "composer"
    TORCHTITAN = "torchtitan"
    NEMO_AUTOMODEL = "nemo_automodel"


class Attention(StrEnum):
    """The attention-core kernels a stack launches."""

    FLASH2 = "flash2"
    """FlashAttention-2 (Dao 2023): one fused kernel forward, one backward."""
    FLASH3 = "flash3"
    """FlashAttention-3 (Shah et al. 2024, Hopper)."""
    FLASH1 = "flash1"
    """FlashAttention 1.x (Dao et al. 2022, flash-attn < 2.0): the fused kernels before FA2's work
    partitioning; llm-foundry's ``attn_impl: flash`` with its ``gpu`` extra until flash-attn 2 became it."""
    TRITON = "triton"
    """flash-attn's Triton FlashAttention (``flash_attn/flash_attn_triton.py``): llm-foundry's
    ``attn_impl: triton``, the only fused kernel of its time with an attention bias (ALiBi)."""
    CUDNN = "cudnn"
    """cuDNN fused attention (TransformerEngine's FusedAttention backend)."""
    SDPA = "sdpa"
    """torch.nn.functional.scaled_dot_product_attention (dispatches to a fused flash/cuDNN kernel)."""
    UNFUSED = "unfused"
    """baddbmm scores, masked_fill_ of the causal mask, softmax, dropout, bmm (eager PyTorch)."""
    UNFUSED_FUSED_SOFTMAX = "unfused_fused_softmax"
    """baddbmm scores, Megatron's fused scale + causal mask + softmax kernel, dropout, bmm."""

    @property
    def fused(self) -> bool:
        """One fused kernel (the s x s scores never reach memory)."""
        return self not in (Attention.UNFUSED, Attention.UNFUSED_FUSED_SOFTMAX)


class OptimizerKernel(StrEnum):
    """How the optimizer update is launched."""

    FUSED = "fused"
    """One multi-tensor kernel over every parameter (Apex/TE/DeepSpeed FusedAdam, torch fused=True)."""
    FOREACH = "foreach"
    """torch ``_foreach_*`` ops: one multi-tensor launch per elementwise step of the update."""
    PER_TENSOR = "per_tensor"
    """A Python loop over parameters: every elementwise step launched once per tensor."""


class Optimizer(StrEnum):
    ADAM = "adam"
    ADAMW = "adamw"
    SGD = "sgd"


class Precision(StrEnum):
    """The number format of the linear layers' GEMMs. The 8- and 4-bit ones are low-precision
    recipes over BF16 training (TransformerEngine's ``fp8_autocast``/``autocast``, torchao's
    ``Float8Linear``): parameters, activations, attention, norms, embeddings and the output head
    stay BF16 (:mod:`llmp.analytic.lowp`)."""

    FP32 = "fp32"
    TF32 = "tf32"
    BF16 = "bf16"
    FP16 = "fp16"
    FP8 = "fp8"
    """FP8 with per-tensor or 128-element block scales (``train.fp8_scaling``)."""
    MXFP8 = "mxfp8"
    """MXFP8 (TransformerEngine ``MXFP8BlockScaling``; Megatron ``--fp8-recipe mxfp8``): Blackwell."""
    NVFP4 = "nvfp4"
    """NVFP4 (TransformerEngine ``NVFP4BlockScaling``; Megatron ``--fp4-recipe nvfp4``): Blackwell."""

    @property
    def compute_dtype(self) -> Dtype:
        """The dtype whose peak rate the linear layers' GEMMs run at."""
        return Dtype(self.value)

    @property
    def low_precision(self) -> bool:
        """GEMMs in an 8- or 4-bit format quantised from BF16 by a recipe."""
        return self.compute_dtype.low_precision


class Fp8Scaling(StrEnum):
    """How ``precision = fp8`` scales its tensors (TransformerEngine recipes; Megatron-Core
    ``--fp8-recipe``)."""

    DELAYED = "delayed"
    """One FP32 scale per tensor from the amax history of earlier steps (TE ``DelayedScaling``,
    the default recipe on Hopper; Megatron ``--fp8-recipe delayed``): one read per quantisation."""
    CURRENT = "current"
    """One FP32 scale per tensor from this tensor's own amax (TE ``Float8CurrentScaling``;
    Megatron ``--fp8-recipe tensorwise``; torchao ``Float8Linear`` tensorwise): an amax pass,
    then the cast."""
    BLOCKWISE = "blockwise"
    """FP32 scales per 1x128 block of activations and gradients and per 128x128 block of weights
    (DeepSeek-V3 §3.3; TE ``Float8BlockScaling``; Megatron ``--fp8-recipe blockwise``)."""


def fp8_scaling(t: TrainSpec) -> Fp8Scaling | None:
    """The scaling recipe of an fp8 run (delayed when the spec names none); None otherwise."""
    if t.precision is not Precision.FP8:
        return None
    return Fp8Scaling.DELAYED if t.fp8_scaling is None else t.fp8_scaling


class CpComm(StrEnum):
    """How context-parallel ranks share keys and values (Megatron-Core ``--cp-comm-type``, passed to
    TransformerEngine's ``DotProductAttention(cp_comm_type=...)``; TE
    ``transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py``)."""

    P2P = "p2p"
    """Ring attention (``AttnFuncWithCPAndKVP2P``): cp - 1 exchanges of the local K/V block with the
    ring neighbours, each overlapped with the attention of the block in hand; dK/dV travel back."""
    ALL_GATHER = "all_gather"
    """All-gather K and V over cp before attention, reduce-scatter dK and dV after its backward
    (``AttnFuncWithCPAndKVAllGather``: "KV all-gather between CP ranks is exposed"; Llama 3 §3.3.2)."""
    A2A = "a2a"
    """DeepSpeed-Ulysses (``AttnFuncWithCPAndQKVOA2A``): all-to-all Q, K, V from sequence shards to head
    shards, attention over the whole sequence with heads / cp heads, all-to-all the output back; the
    backward mirrors both. Needs cp to divide the heads of a tp rank."""


class Dispatcher(StrEnum):
    """How tokens reach their experts across the expert-parallel ranks (Megatron-Core
    ``--moe-token-dispatcher-type``)."""

    ALLTOALL = "alltoall"
    """Permute, all-to-all over ep, all-gather over etp, sort by local expert; the reverse to
    combine (``MoEAlltoAllTokenDispatcher``): one row per (token, expert) pair on the wire."""
    ALLGATHER = "allgather"
    """All-gather every token over tp x ep, each rank keeps the rows of its experts, reduce-scatter
    the outputs back (``MoEAllGatherTokenDispatcher``)."""
    DEEPEP = "deepep"
    """DeepEP's fused dispatch/combine kernels (Megatron-Core ``flex`` dispatcher, NeMo AutoModel
    ``dispatcher: deepep | hybridep``): a token travels once to each rank holding one of its
    experts, then is permuted to the experts there."""


def replica_size(tp: Any, pp: Any, cp: Any) -> Any:
    """Devices one data-parallel replica spans: ``tp * pp * cp`` (``ep``, with ``etp``, is folded into
    the ``tp * cp * dp`` ranks of each pipeline stage and adds none). Ints, numpy columns of a sweep, or SymPy."""
    return tp * pp * cp


def world_size(dp: Any, tp: Any, pp: Any, cp: Any) -> Any:
    """Devices a layout occupies: ``dp`` replicas of :func:`replica_size`. The one place the
    degrees multiply to a device count (the spec, the graph's structure, the resolver's and the
    validation rows' derived ``dp`` all ask here)."""
    return dp * replica_size(tp, pp, cp)


@dataclass(frozen=True, kw_only=True, slots=True)
class ParallelSpec:
    """How the model is split over the devices: the attention layers over tp x cp x dp x pp, the
    expert layers over etp x ep x edp x pp on the same ranks (Megatron-Core's MoE parallel folding;
    :mod:`llmp.analytic.layout` places both). The fields a stack decides have no default here (see
    :class:`TrainSpec`)."""

    dp: Count = 1
    tp: Count = 1
    pp: Count = 1
    cp: Count = 1
    """Context (sequence) parallel degree for attention."""
    ep: Count = 1
    """Expert parallel degree (Megatron ``--expert-model-parallel-size``): each MoE layer's experts are
    split over ep ranks of a pipeline stage; etp x ep divides tp x cp x dp, the rest is the expert
    data-parallel degree edp = tp cp dp / (etp ep)."""
    etp: Count | None = None
    """Expert tensor-parallel degree: the ranks that split one expert's matrices (Megatron
    ``--expert-tensor-parallel-size``, which defaults to tp). None: tp."""
    dispatcher: Dispatcher = Dispatcher.ALLTOALL
    """How MoE tokens reach their experts."""
    cp_comm: CpComm
    """How the cp ranks share keys and values (see :class:`CpComm`)."""
    vp: Count = 1
    """Virtual pipeline chunks per pipeline rank (interleaved schedule; zb_v places two in a V)."""
    microbatch_group: Count | None = None
    """Interleaved schedule: microbatches each model chunk runs in a row before the rank moves to its
    next chunk (Megatron ``--microbatch-group-size-per-virtual-pipeline-stage``). None: ``pp``."""
    sequence_parallel: bool = False
    zero: ZeroStage
    schedule: Schedule = Schedule.ONE_F_ONE_B
    tp_comm_overlap: bool
    """TP collectives overlapped with GEMMs (TransformerEngine userbuffers); exposed otherwise."""
    dp_overlap: bool
    """DP gradient reduction overlapped with backward, bucket by bucket."""
    dp_bucket_size: Real
    """Bytes per gradient bucket (PyTorch DDP default 25 MB)."""
    param_gather_overlap: bool
    """ZeRO-1/2 (distributed optimizer) parameter all-gather overlapped with the next step's
    forward (Megatron-Core ``overlap_param_gather``); exposed after the update otherwise."""
    fsdp_prefetch: bool
    """ZeRO-3/FSDP gathers prefetched one layer ahead; exposed per layer otherwise."""
    stage_layers: tuple[int, ...] | None = None
    """Transformer layers of each pipeline stage (``pp`` entries; each a multiple of ``vp``) or of
    each model chunk in model order (``pp * vp`` entries). None: derived (see
    :mod:`llmp.analytic.split`)."""
    first_stage_layers: Count | None = None
    """Layers on the first pipeline stage (Megatron ``--decoder-first-pipeline-num-layers``)."""
    last_stage_layers: Count | None = None
    """Layers on the last pipeline stage (Megatron ``--decoder-last-pipeline-num-layers``)."""
    account_for_embedding: bool = False
    """The embedding counts as one layer in the split (Megatron
    ``--account-for-embedding-in-pipeline-split``): the first chunk gets one layer fewer."""
    account_for_loss: bool = False
    """The output layer and loss count as one layer (Megatron
    ``--account-for-loss-in-pipeline-split``): the last chunk gets one layer fewer."""
    pipeline_layout: str = ""
    """Megatron-Core ``--pipeline-model-parallel-layout``: the layers of every chunk spelt out
    (``Et|(tt|)*30mL``; :mod:`llmp.analytic.split`); "" = none."""
    partition: str
    """DeepSpeed ``partition_method``: ``uniform``, ``parameters`` or ``type:REGEX``; "" = none."""
    pipe_module: PipeModule
    """Whose pipeline layer list a DeepSpeed ``partition`` splits."""

    @property
    def expert_tp(self) -> Count:
        """The tensor-parallel degree that splits one expert: ``etp``, or ``tp`` when not given."""
        return self.tp if self.etp is None else self.etp

    @property
    def world_size(self) -> Count:
        """Devices the layout occupies (:func:`world_size`)."""
        return world_size(self.dp, self.tp, self.pp, self.cp)


class FinetuneMethod(StrEnum):
    """Which weights a fine-tuning step trains (:mod:`llmp.analytic.finetune`)."""

    FULL = "full"
    """Every weight, as pre-training does (supervised fine-tuning, SFT)."""
    LORA = "lora"
    """Low-rank adapters beside frozen base weights (Hu et al. 2021, arXiv:2106.09685): only the
    adapters have gradients, optimizer states and an update."""


@dataclass(frozen=True, kw_only=True, slots=True)
class FinetuneSpec:
    """A fine-tuning step: which weights train and how samples fill a sequence; ``None`` on the
    train block means a pre-training step."""

    method: FinetuneMethod = FinetuneMethod.FULL
    lora_rank: Count = 32
    """Inner width of each adapter (``x A B``: A is in x rank, B rank x out)."""
    lora_qkv: bool = True
    """The QKV projection (MLA: its projections) gets an adapter."""
    lora_proj: bool = True
    """The attention output projection gets an adapter."""
    lora_fc1: bool = True
    """The MLP's first matrix (gate and up for SwiGLU; every expert's) gets an adapter."""
    lora_fc2: bool = True
    """The MLP's second matrix gets an adapter."""
    sample_len: Count = 0
    """Packed sequences: the mean tokens of the samples packed into one ``seq_len`` sequence, each
    attending only within itself (``cu_seqlens``); 0: one sequence of ``seq_len`` tokens."""

    @property
    def lora(self) -> bool:
        return self.method is FinetuneMethod.LORA


@dataclass(frozen=True, kw_only=True, slots=True)
class TrainSpec:
    """One optimizer step of training. The fields a stack decides (``llmp.stacks.DEFAULT_FIELDS``)
    have no default here: their defaults live in the stack profiles alone (``llmp.stacks.defaults``)."""

    precision: Precision = Precision.BF16
    fp8_scaling: Fp8Scaling | None = None
    """With ``precision = fp8``: the scaling recipe (None: delayed, TransformerEngine's default
    on Hopper). Only fp8 takes one: MXFP8 and NVFP4 fix their block scales."""
    fp8_param_gather: bool = False
    """With ``precision = fp8`` (per-tensor scaling) or ``mxfp8`` and the distributed optimizer
    (ZeRO-1/2): the model's low-precision weights are stored quantised, with no BF16 copy beside
    them (Megatron-Core ``--fp8-param-gather``: TransformerEngine ``fp8_model_init``), and the
    distributed optimizer all-gathers FP8 bytes for per-tensor FP8 (:mod:`llmp.analytic.lowp`)."""
    optimizer: Optimizer = Optimizer.ADAMW
    global_batch: Count
    """Sequences per optimizer step."""
    micro_batch: Count = 1
    """Sequences per microbatch per data-parallel replica."""
    recompute: Recompute = Recompute.NONE
    master_weights: bool = True
    """Mixed precision keeps an FP32 copy of the weights in the optimizer."""
    master_remainders: bool = False
    """The FP32 master copy is kept as the 16 low-order bits each BF16 parameter lacks (Apex
    ``DistributedFusedAdam(store_param_remainders=True)``, TransformerEngine ``FusedAdam``'s option
    of the same name): 2 bytes per parameter in the optimizer instead of 4, the master value
    rebuilt from the BF16 parameter and its remainder at each step."""
    fp32_grads: bool | None = None
    """Gradients accumulate and are reduced in FP32 (Megatron's main grads with
    ``grad_reduce_in_fp32``; false: in the 16-bit dtype). None: the stack's rule for the precision."""
    stack: Stack = Stack.GENERIC
    """The training stack; its profile gives the defaults of the fields below."""
    attention: Attention
    fused_norm: bool
    """Norms run as one fused kernel (Apex/TE/torch LayerNorm); false: RMSNorm as eager PyTorch ops."""
    fused_bias_act: bool
    """Bias and activation in one kernel (bias-GELU, bias-SwiGLU); false: separate kernels."""
    fused_bias_dropout_add: bool
    """Bias, dropout and residual add in one kernel; false: separate kernels."""
    fused_rope: bool
    """Rotary embedding as one kernel; false: eager PyTorch ops."""
    fused_cross_entropy: bool
    """Cross-entropy as one kernel pass; false: Megatron's eager vocab-parallel chain."""
    grad_accum_fusion: bool
    """Weight-gradient GEMMs accumulate into the gradient buffer; false: an add kernel per microbatch."""
    optimizer_kernel: OptimizerKernel
    grad_clip: bool
    """Clip gradients by their global norm every step (a pass over the gradients and an all-reduce)."""
    vocab_divisible_by: Count
    """The embedding's rows are padded to a multiple of this (times tp where the stack does so)."""
    offload_activations: Count = 0
    """Transformer layers of each pipeline chunk whose saved activations go to host memory after their
    forward and come back before their backward (Megatron-Core ``--cpu-offloading
    --cpu-offloading-num-layers``: TransformerEngine's CPU offload, its copies on a side stream
    overlapped with the next layer's work); fewer than the chunk's layers."""
    offload_optimizer: Real = 0.0
    """Fraction of the optimizer states and master weights held and updated in host memory
    (Megatron-Core ``--optimizer-cpu-offload --optimizer-offload-fraction``; DeepSpeed ZeRO-Offload
    ``offload_optimizer``: 1): each step its gradients cross to the host, the host updates them and
    the new parameters cross back."""
    offload_grads: bool = False
    """The reduced gradients are held in host memory for the host optimizer (DeepSpeed ZeRO-Offload's
    gradient partitions; PyTorch FSDP ``CPUOffload(offload_params=True)``): the GPU keeps one bucket."""
    offload_params: bool = False
    """The sharded parameters are held in host memory between uses (PyTorch FSDP
    ``CPUOffload(offload_params=True)``, DeepSpeed ZeRO-3 ``offload_param``): each layer's shard
    crosses to the GPU before its gathers, prefetched with them."""
    offload_overlap: bool = False
    """The host optimizer's copies overlap its update, parameter group by group (Megatron-Core
    ``--overlap-cpu-optimizer-d2h-h2d``); otherwise they run one after another."""
    cuda_graphs: bool
    """The layers' forward and backward are captured once and replayed as CUDA graphs: one launch
    per captured region instead of Python, dispatch and a launch per kernel on the host."""
    finetune: FinetuneSpec | None = None
    """A fine-tuning step (LoRA, packed samples); None: pre-training."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Sweep:
    """A list of candidate values a spec declared for one field (``tp = [1, 2, 4, 8]``)."""

    path: str
    """``section.field`` as ``--set`` spells it."""
    values: tuple[Any, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class Spec:
    """Everything needed to predict one training step."""

    model: ModelSpec
    train: TrainSpec
    parallel: ParallelSpec
    cluster: Cluster
    sweeps: tuple[Sweep, ...] = ()
    """Declared sweep lists; each field holds its first value until ``search`` varies it."""
    symbols: tuple[str, ...] = ()
    """Paths of fields left free (``= symbol``) for sensitivity analysis."""
    source: str = "<spec>"
    """File the spec came from (for provenance and messages)."""
    stack_set: tuple[str, ...] = ()
    """Paths of stack-provided fields that the spec (or ``--set``) gave explicitly; the rest came
    from the stack's profile."""

    # Derived quantities: computed, never typed in.
    @property
    def world_size(self) -> Count:
        return self.parallel.world_size

    @property
    def microbatches(self) -> Count:
        """Microbatches per pipeline per step (gradient-accumulation steps)."""
        return self.train.global_batch / (self.train.micro_batch * self.parallel.dp)

    @property
    def tokens_per_step(self) -> Count:
        return self.train.global_batch * self.model.seq_len
