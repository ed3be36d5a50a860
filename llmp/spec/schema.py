"""What each block of a .llmp file may contain: field names, kinds, units, defaults, bounds.

This table is the single source of truth for the resolver (names, units, defaults), for
``--set`` path validation, for the SymPy symbol registry (``symbols.py``: integer counts,
positive rates) and for docs/language.md (a test checks every field is documented there).

Defaults are written as .llmp expressions (``"hidden / heads"``) and evaluated like user text,
so a default means exactly what the same line in a file would.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

from llmp.hardware.spec import Dtype, HostCpu, Microarch, Transport
from llmp.spec.model import Activation, Arch, Norm, Position, Router
from llmp.spec.ranges import RANGES, Range
from llmp.spec.spec import (
    Attention,
    CpComm,
    Dispatcher,
    FinetuneMethod,
    Fp8Scaling,
    Optimizer,
    OptimizerKernel,
    PipeModule,
    Precision,
    Recompute,
    Schedule,
    Stack,
    ZeroStage,
)
from llmp.units import BANDWIDTH, COMPUTE, COUNT, FREQUENCY, POWER, SIZE, TIME, Dimension


class Kind(StrEnum):
    COUNT = "count"
    """A whole number (layers, degrees, batch sizes); may be a free symbol."""
    REAL = "real"
    """A quantity with a dimension (or a plain fraction); stored as float SI; may be a symbol."""
    ENUM = "enum"
    BOOL = "bool"
    STRING = "string"
    REF = "ref"
    """The id of a block of another kind (``node.gpu = h100_sxm5_80gb``)."""
    LINK = "link"
    """A link: the id of a ``link`` block, or an inline ``link { ... }``."""
    COUNTS = "counts"
    """A list of whole numbers ``[9, 12, 12, 11]``: the list is the value, not a sweep."""


class Bound(StrEnum):
    POSITIVE = "positive"
    NONNEGATIVE = "nonnegative"
    FRACTION = "fraction"
    """0 <= x < 1 (dropout)."""
    EFFICIENCY = "efficiency"
    """0 < x <= 1 (the part of a line rate that is reached, e.g. a link's ``efficiency``)."""


BLOCK_ID = "<block id>"
"""Default marker: the id written after the block keyword (``gpu h100 { }`` → ``"h100"``)."""
STACK = "<stack>"
"""Default marker: the value the ``train.stack`` profile gives (:mod:`llmp.stacks`)."""


@dataclass(frozen=True, slots=True)
class FieldDef:
    """One field of a block."""

    name: str
    kind: Kind
    doc: str
    dim: Dimension = COUNT
    """Dimension of a REAL field (COUNT = a plain number such as dropout)."""
    enum: type[StrEnum] | None = None
    target: str = ""
    """Block kind a REF field names (``gpu``, ``node``)."""
    required: bool = False
    default: str | Mapping[str, str] | None = None
    """A .llmp expression, or one per ``model.arch`` value, or :data:`BLOCK_ID`; None: none."""
    bound: Bound | None = Bound.POSITIVE
    plausible: Range | None = None
    """The physical range of the values that are not 0 (:mod:`llmp.spec.ranges`); set by the section."""

    @property
    def numeric(self) -> bool:
        return self.kind in (Kind.COUNT, Kind.REAL)


@dataclass(frozen=True, slots=True)
class Section:
    """A block kind (or sub-block kind) and its fields."""

    name: str
    doc: str
    fields: Mapping[str, FieldDef]
    subs: Mapping[str, str] = field(default_factory=dict)
    """Sub-block name → section name (``moe`` → ``moe``)."""


def _section(name: str, doc: str, fields: list[FieldDef],
             subs: Mapping[str, str] | None = None) -> Section:
    ranged = [dataclasses.replace(f, plausible=RANGES.get((name, f.name))) for f in fields]
    return Section(name=name, doc=doc, fields=MappingProxyType({f.name: f for f in ranged}),
                   subs=MappingProxyType(dict(subs or {})))


def _count(name: str, doc: str, **kw: object) -> FieldDef:
    return FieldDef(name=name, kind=Kind.COUNT, doc=doc, **kw)  # type: ignore[arg-type]


def _real(name: str, dim: Dimension, doc: str, **kw: object) -> FieldDef:
    return FieldDef(name=name, kind=Kind.REAL, dim=dim, doc=doc, **kw)  # type: ignore[arg-type]


def _enum(name: str, enum: type[StrEnum], doc: str, **kw: object) -> FieldDef:
    return FieldDef(name=name, kind=Kind.ENUM, enum=enum, doc=doc, bound=None, **kw)  # type: ignore[arg-type]


def _bool(name: str, doc: str, default: str | Mapping[str, str]) -> FieldDef:
    return FieldDef(name=name, kind=Kind.BOOL, doc=doc, default=default, bound=None)


GPU = _section("gpu", "An accelerator (or a CPU socket used as one), as on its datasheet.", [
    FieldDef(name="name", kind=Kind.STRING, doc="Human name, e.g. \"NVIDIA H100 SXM5 80GB\".",
             default=BLOCK_ID, bound=None),
    FieldDef(name="vendor", kind=Kind.STRING, doc="Maker, e.g. \"NVIDIA\".", default='""',
             bound=None),
    _real("memory", SIZE, "Device memory capacity.", required=True),
    _real("mem_bandwidth", BANDWIDTH, "Peak device-memory bandwidth.", required=True),
    _count("sms", "Streaming multiprocessors (NVIDIA), compute units (AMD) or cores (CPU).",
           required=True),
    _real("clock", FREQUENCY, "Clock that reproduces the peak FLOP/s.", required=True),
    _real("l2_cache", SIZE, "Last-level cache (L2 on GPUs, L3 on CPUs).", required=True),
    _real("tdp", POWER, "Board power.", required=True),
    _real("launch_overhead", TIME, "Fixed cost per kernel launch (host + device side).",
          required=True),
    _real("scaleup_bandwidth", BANDWIDTH,
          "Scale-up (NVLink/xGMI) bandwidth per device, per direction; 0 if none.",
          default="0 B/s", bound=Bound.NONNEGATIVE),
    _real("host_bandwidth", BANDWIDTH,
          "Link to the host's memory (PCIe, NVLink-C2C) per device, per direction; 0 if not given.",
          default="0 B/s", bound=Bound.NONNEGATIVE),
    _real("host_memory_bandwidth", BANDWIDTH,
          "Host memory bandwidth one device's share of its host gets (a host-side optimizer streams "
          "through it); 0 if not given.", default="0 B/s", bound=Bound.NONNEGATIVE),
    _enum("microarch", Microarch, "Instruction-set target (sm70, sm80, sm86, sm90, sm100, gfx942, gfx950): "
          "which tiles its GEMM and attention kernels launch, and so how their grids fill the SMs. "
          "Absent: kernels are priced as if they filled every SM."),
], subs={"flops": "flops", "achievable": "achievable", "flash_attention": "flash_attention"})

FLOPS = _section("flops", "Dense peak FLOP/s per dtype (tensor cores where they exist); a "
                 "missing dtype is unsupported. At least one is required.", [
    _real(d.value, COMPUTE, f"Dense peak rate in {d.value}.") for d in Dtype])

_SOURCE = FieldDef(name="source", kind=Kind.STRING, doc="Where the rates were measured (benchmark, "
                   "figure, commit); the prediction's provenance quotes it.", default='""', bound=None)

ACHIEVABLE = _section("achievable", "The best dense-GEMM rate per dtype that a published "
                      "micro-benchmark measured on this device (e.g. Maximum Achievable Matmul "
                      "FLOPS); the roofline's compute ceiling for GEMMs. A dtype left out keeps "
                      "the datasheet peak.", [
    *(_real(d.value, COMPUTE, f"Attainable GEMM rate in {d.value}.") for d in Dtype), _SOURCE])

FLASH_ATTENTION = _section("flash_attention", "The best fused-attention rate per dtype that a "
                           "published micro-benchmark measured on this device, in the "
                           "FlashAttention FLOP convention (forward 4 b s^2 h d, halved if causal; "
                           "backward 2.5x forward); the compute ceiling of flash attention kernels. "
                           "A dtype left out falls back to `achievable`, then the datasheet peak.", [
    *(_real(d.value, COMPUTE, f"Attainable fused-attention rate in {d.value}.") for d in Dtype),
    _SOURCE])

LINK = _section("link", "A network tier: bandwidth per endpoint per direction and latency.", [
    _real("bandwidth", BANDWIDTH, "Per endpoint (per GPU inside a node, per node between "
          "nodes), per direction.", required=True),
    _real("latency", TIME, "Latency this link adds to every step of a collective, on top of "
          "NCCL's own per-step hardware latency for its transport (a NIC's: what NCCL's network "
          "plugin reports, 0 for InfiniBand); for a host link, the whole per-step latency.",
          required=True, bound=Bound.NONNEGATIVE),
    _real("efficiency", COUNT, "Fraction of `bandwidth` that collectives reach on large "
          "messages (nccl-tests bus bandwidth over line rate); 1 = line rate.", default="1",
          bound=Bound.EFFICIENCY),
    _real("peer_bandwidth", BANDWIDTH, "Bandwidth between one pair of endpoints, per direction, "
          "where endpoints are wired to each other without a switch (a mesh); a group of r "
          "endpoints then gets at most (r - 1) x this. Absent: every pair gets `bandwidth`."),
    _enum("transport", Transport, "What NCCL's cost model treats the link as: nvlink (a GPU "
          "fabric, Infinity Fabric too), pci, net (a NIC) or host (gloo between CPU processes: a "
          "plain alpha-beta ring). Absent: by its role, nvlink as a node's intra link, net as inter."),
    _bool("nvls", "The switch reduces and multicasts in hardware (NVLink SHARP, NVSwitch 3 and "
          "later): NCCL may run its NVLS and NVLS-tree algorithms.", "false"),
    _real("nvls_efficiency", COUNT, "With nvls: the fraction of the achievable bandwidth NCCL's NVLS "
          "runs at before all-reduce doubles it (NCCL's nvlsEfficiency), as measured. Absent: NCCL's "
          "constant (Hopper 0.85, Blackwell 0.74).", bound=Bound.EFFICIENCY),
    _bool("in_network_reduction", "The network reduces in its switches (InfiniBand SHARP through "
          "NCCL's CollNet, NCCL_COLLNET_ENABLE=1): NCCL may run CollNet and multi-node NVLS.", "false"),
])

NODE = _section("node", "A server: identical devices, an intra-node link and a network link.", [
    FieldDef(name="gpu", kind=Kind.REF, target="gpu", doc="Id of a gpu/device block.",
             required=True, bound=None),
    _count("gpus_per_node", "Devices in one node.", required=True),
    FieldDef(name="intra", kind=Kind.LINK, doc="Device-to-device link inside the node "
             "(bandwidth per device).", required=True, bound=None),
    FieldDef(name="inter", kind=Kind.LINK, doc="The node's injection into the network "
             "(bandwidth per node, all NICs together).", required=True, bound=None),
    _count("nvlink_domain", "The scale-up domain: GPUs joined by the intra link's switch "
           "fabric, a whole number of nodes (72 for a GB200 NVL72 rack of 4-GPU trays); groups "
           "inside it run on intra, the NICs stay per node.", default="gpus_per_node"),
    _enum("host_cpu", HostCpu, "The core of the host CPU that issues the kernels (zen2, zen3, zen4, "
          "sapphire_rapids, grace): the host thread's dispatch runs at its speed. Absent: at the speed "
          "of the CPU llmp's host costs were measured on."),
])

CLUSTER = _section("cluster", "`nodes` identical nodes on one network.", [
    FieldDef(name="node", kind=Kind.REF, target="node", doc="Id of a node block.",
             required=True, bound=None),
    _count("nodes", "Number of nodes.", default="1"),
    FieldDef(name="inter", kind=Kind.LINK, doc="Inter-node link in effect; overrides the "
             "node's own.", default="node.inter", bound=None),
])

MODEL = _section("model", "A decoder-only transformer.", [
    _enum("arch", Arch, "Architecture family; sets the defaults below.", required=True),
    _count("layers", "Transformer layers.", required=True),
    _count("hidden", "Model width (d_model).", required=True),
    _count("heads", "Attention (query) heads.", required=True),
    _count("kv_heads", "Key/value heads: = heads for MHA, fewer for GQA, 1 for MQA.",
           default="heads"),
    _count("head_dim", "Width of one head.", default="hidden / heads"),
    _count("ffn_hidden", "MLP inner width (per matrix for SwiGLU).",
           default={"gpt": "4 * hidden"}),
    _count("vocab", "Vocabulary size.", required=True),
    _count("seq_len", "Sequence length in tokens.", required=True),
    _enum("norm", Norm, "Normalisation.", default={"gpt": "layernorm", "llama": "rmsnorm"}),
    _enum("activation", Activation, "MLP activation.",
          default={"gpt": "gelu", "llama": "swiglu"}),
    _enum("position", Position, "Position encoding.",
          default={"gpt": "learned", "llama": "rotary"}),
    _bool("tied_embeddings", "Output head shares the input embedding.",
          {"gpt": "true", "llama": "false"}),
    _bool("bias", "Linear layers carry biases.", {"gpt": "true", "llama": "false"}),
    _real("dropout", COUNT, "Dropout probability.", default="0", bound=Bound.FRACTION),
    _real("rotary_pct", COUNT, "Fraction of each head's dims that rotary embedding rotates "
          "(GPT-NeoX-20B: 0.25).", default="1", bound=Bound.EFFICIENCY),
    _bool("parallel_residual", "x + attn(norm(x)) + mlp(norm(x)): both branches read x, one "
          "residual add (GPT-J, GPT-NeoX, PaLM).", "false"),
    _bool("shared_norm", "With parallel_residual: one norm feeds both branches (GPT-J, PaLM); "
          "false keeps two (GPT-NeoX-20B).", "false"),
    _count("window", "Sliding-window attention: keys each query attends to (itself included); "
           "0 = full causal attention.", default="0", bound=Bound.NONNEGATIVE),
    _count("full_attention_every", "With a window: every n-th layer attends to the whole "
           "sequence (gpt-oss: 2); 0 = every layer windowed.", default="0", bound=Bound.NONNEGATIVE),
    _count("mtp_layers", "Multi-token prediction modules after the last layer (DeepSeek-V3: 1).",
           default="0", bound=Bound.NONNEGATIVE),
], subs={"moe": "moe", "mla": "mla"})
MOE = _section("moe", "Mixture-of-experts MLP (absent: dense).", [
    _count("experts", "Routed experts per MoE layer.", required=True),
    _count("top_k", "Experts each token is routed to.", required=True),
    _count("expert_ffn_hidden", "Inner width of one expert's MLP.", default="model.ffn_hidden"),
    _count("shared_experts", "Always-on experts, each of width expert_ffn_hidden.",
           default="0", bound=Bound.NONNEGATIVE),
    _real("capacity_factor", COUNT, "Token slots per expert relative to a balanced load, tokens "
          "beyond them dropped; absent: dropless."),
    _real("imbalance", COUNT, "Routed tokens on the busiest expert-parallel rank relative to a "
          "balanced load (1 = balanced).", default="1"),
    _enum("router", Router, "Expert scores: softmax, sigmoid, or balanced (round-robin, no gate).",
          default="softmax"),
    _bool("expert_bias", "Per-expert score bias before top-k (DeepSeek-V3 auxiliary-loss-free "
          "balancing).", "false"),
    _bool("aux_loss", "A load-balancing loss over the router's scores.", "false"),
    _count("first_dense_layers", "Leading layers with a dense MLP of model.ffn_hidden "
           "(DeepSeek-V3: 3).", default="0", bound=Bound.NONNEGATIVE),
    _count("every", "Every n-th layer is a MoE layer, the others dense (Llama 4 Maverick: 2).",
           default="1"),
])
MLA = _section("mla", "Multi-head latent attention (DeepSeek-V2/V3; absent: standard attention).", [
    _count("q_lora_rank", "Compressed query width (0 = queries projected directly).", default="0",
           bound=Bound.NONNEGATIVE),
    _count("kv_lora_rank", "Compressed key/value latent width.", required=True),
    _count("qk_nope_head_dim", "Per-head query/key dims without rotary embedding.", required=True),
    _count("qk_rope_head_dim", "Per-head query/key dims with rotary embedding.", required=True),
    _count("v_head_dim", "Per-head value dims.", required=True),
])

TRAIN = _section("train", "One optimizer step of training.", [
    _enum("precision", Precision, "Number format of the linear layers' GEMMs (fp8, mxfp8 and nvfp4: "
          "low-precision recipes over BF16 training).", default="bf16"),
    FieldDef(name="fp8_scaling", kind=Kind.ENUM, enum=Fp8Scaling, doc="precision = fp8 only: delayed, "
             "current or blockwise scaling (TransformerEngine recipes); default delayed.", bound=None),
    _bool("fp8_param_gather", "Weights stored in FP8/MXFP8 with no BF16 copy, the distributed "
          "optimizer's parameter all-gather in FP8 (Megatron --fp8-param-gather); precision = fp8 "
          "(delayed or current scaling) or mxfp8, with zero = 1 or 2.", "false"),
    _enum("optimizer", Optimizer, "Optimizer.", default="adamw"),
    _count("global_batch", "Sequences per optimizer step.", required=True),
    _count("micro_batch", "Sequences per microbatch per data-parallel replica.", default="1"),
    _enum("recompute", Recompute, "Activation recomputation: selective = the stack's selective mode "
          "(the attention core; torchtitan: op-level SAC), full = every layer's forward.", default="none"),
    _bool("master_weights", "Mixed precision keeps an FP32 copy of the weights.", "true"),
    _bool("master_remainders", "The FP32 master copy kept as the 16 bits each BF16 parameter lacks "
          "(Apex DistributedFusedAdam store_param_remainders): 2 bytes per parameter instead of 4; "
          "needs master_weights and BF16 parameters.", "false"),
    FieldDef(name="fp32_grads", kind=Kind.BOOL, doc="Gradients accumulate and reduce in FP32 (Megatron "
             "grad_reduce_in_fp32); default: the stack's rule for the precision.", bound=None),
    _enum("stack", Stack, "Training stack; its profile gives the defaults marked 'stack'.",
          default="generic"),
    _enum("attention", Attention, "Attention-core kernels.", default=STACK),
    _bool("fused_norm", "Norms as one fused kernel (false: eager RMSNorm).", STACK),
    _bool("fused_bias_act", "Bias and activation in one kernel.", STACK),
    _bool("fused_bias_dropout_add", "Bias, dropout and residual add in one kernel.", STACK),
    _bool("fused_rope", "Rotary embedding as one kernel.", STACK),
    _bool("fused_cross_entropy", "Cross-entropy as one kernel (false: eager vocab-parallel).", STACK),
    _bool("grad_accum_fusion", "wgrad GEMMs accumulate into the gradient buffer (false: an add "
          "per microbatch).", STACK),
    _enum("optimizer_kernel", OptimizerKernel, "How the optimizer update launches.", default=STACK),
    _bool("grad_clip", "Clip gradients by their global norm every step.", STACK),
    _count("vocab_divisible_by", "Pad the vocab to a multiple of this (times tp where the stack "
           "does).", default=STACK),
    _count("offload_activations", "Layers per pipeline chunk whose activations go to host memory "
           "(Megatron --cpu-offloading-num-layers); fewer than the chunk's layers.", default="0",
           bound=Bound.NONNEGATIVE),
    _real("offload_optimizer", COUNT, "Fraction (0 to 1) of the optimizer states and master weights "
          "held and updated in host memory (Megatron --optimizer-offload-fraction; DeepSpeed "
          "ZeRO-Offload: 1).", default="0", bound=Bound.NONNEGATIVE),
    _bool("offload_grads", "Reduced gradients held in host memory for the host optimizer "
          "(DeepSpeed ZeRO-Offload; FSDP CPUOffload).", "false"),
    _bool("offload_params", "Sharded parameters held in host memory between uses (FSDP "
          "CPUOffload(offload_params=True), DeepSpeed ZeRO-3 offload_param).", "false"),
    _bool("offload_overlap", "The host optimizer's copies overlap its update (Megatron "
          "--overlap-cpu-optimizer-d2h-h2d).", "false"),
    _bool("cuda_graphs", "Replay the layers as CUDA graphs: no host dispatch or launch per kernel.", STACK),
], subs={"parallel": "parallel", "finetune": "finetune"})

FINETUNE = _section("finetune", "A fine-tuning step (absent: pre-training): which weights train and how "
                    "samples fill a sequence.", [
    _enum("method", FinetuneMethod, "full (SFT: every weight trains) or lora (frozen base weights, "
          "low-rank adapters train).", default="full"),
    _count("lora_rank", "Inner width (rank) of each LoRA adapter; 0: none (the frozen base alone).",
           default="32", bound=Bound.NONNEGATIVE),
    _bool("lora_qkv", "The QKV projection gets an adapter.", "true"),
    _bool("lora_proj", "The attention output projection gets an adapter.", "true"),
    _bool("lora_fc1", "The MLP's first matrix (gate and up) gets an adapter.", "true"),
    _bool("lora_fc2", "The MLP's second matrix gets an adapter.", "true"),
    _count("sample_len", "Packed sequences: mean tokens per sample packed into seq_len, attention "
           "within each sample; 0: one sequence of seq_len.", default="0", bound=Bound.NONNEGATIVE),
])

PARALLEL = _section("parallel", "How the model is split over the devices (may also be written "
                    "inside train).", [
    _count("dp", "Data-parallel degree.",
           default="cluster.nodes * node.gpus_per_node / (tp * pp * cp)"),
    _count("tp", "Tensor-parallel degree.", default="1"),
    _count("pp", "Pipeline-parallel degree.", default="1"),
    _count("cp", "Context-parallel degree.", default="1"),
    _enum("cp_comm", CpComm, "How context-parallel ranks share K and V (Megatron --cp-comm-type): "
          "p2p (ring), all_gather or a2a (Ulysses).", default=STACK),
    _count("ep", "Expert-parallel degree of the MoE layers (Megatron --expert-model-parallel-size): "
           "etp x ep is folded into the tp x cp x dp ranks of a pipeline stage.", default="1"),
    _count("etp", "Expert tensor-parallel degree: the ranks that split one expert's matrices (Megatron "
           "--expert-tensor-parallel-size); absent: tp."),
    _enum("dispatcher", Dispatcher, "MoE token dispatch: alltoall, allgather or deepep.",
          default="alltoall"),
    _count("vp", "Virtual pipeline chunks per pipeline rank (interleaved schedule; zb_v: 2).",
           default="1"),
    _count("microbatch_group", "Interleaved schedule: microbatches each model chunk runs in a row "
           "(Megatron --microbatch-group-size-per-virtual-pipeline-stage); default pp."),
    _bool("sequence_parallel", "Megatron sequence parallelism alongside tp.", "false"),
    _enum("zero", ZeroStage, "Optimizer/gradient/parameter sharding over dp: none, 0, 1, 2, 3 "
          "or fsdp.", default=STACK),
    _enum("schedule", Schedule, "Pipeline schedule: gpipe, 1f1b, interleaved (vp > 1), zb_h1, zb_v "
          "(vp = 2) or dualpipe (even pp and microbatches).", default="1f1b"),
    _bool("tp_comm_overlap", "TP collectives overlapped with GEMMs.", STACK),
    _bool("dp_overlap", "DP gradient reduction overlapped with backward.", STACK),
    _real("dp_bucket_size", SIZE, "Gradient bucket size.", default=STACK),
    _bool("param_gather_overlap", "ZeRO-1/2 parameter all-gather overlapped with the next "
          "step's forward.", STACK),
    _bool("fsdp_prefetch", "ZeRO-3/FSDP gathers prefetched one layer ahead.", STACK),
    FieldDef(name="stage_layers", kind=Kind.COUNTS, doc="Layers of each pipeline stage (pp "
             "entries, each a multiple of vp) or of each model chunk in model order (pp * vp "
             "entries).", bound=None),
    _count("first_stage_layers", "Layers on the first pipeline stage (Megatron "
           "--decoder-first-pipeline-num-layers)."),
    _count("last_stage_layers", "Layers on the last pipeline stage (Megatron "
           "--decoder-last-pipeline-num-layers)."),
    _bool("account_for_embedding", "The embedding counts as a layer in the pipeline split "
          "(Megatron --account-for-embedding-in-pipeline-split).", "false"),
    _bool("account_for_loss", "The output layer and loss count as a layer in the pipeline split "
          "(Megatron --account-for-loss-in-pipeline-split).", "false"),
    FieldDef(name="pipeline_layout", kind=Kind.STRING, doc="Megatron-Core pipeline layout "
             "(--pipeline-model-parallel-layout): one |-separated stage per model chunk, E embedding, t "
             "transformer layer, m MTP module, L loss, (..)*n and x*n repeats, e.g. \"Et|(tt|)*30mL\"; \"\" "
             "for none.", default='""', bound=None),
    FieldDef(name="partition", kind=Kind.STRING, doc="DeepSpeed pipeline partition_method: "
             "\"uniform\", \"parameters\" or \"type:REGEX\"; \"\" for none.", default=STACK,
             bound=None),
    _enum("pipe_module", PipeModule, "The DeepSpeed PipelineModule a partition method splits: "
          "gpt_neox or megatron_deepspeed.", default=STACK),
])

SECTIONS: Mapping[str, Section] = MappingProxyType({s.name: s for s in (
    GPU, FLOPS, ACHIEVABLE, FLASH_ATTENTION, LINK, NODE, CLUSTER, MODEL, MOE, MLA, TRAIN, FINETUNE, PARALLEL)})

TOP_LEVEL = ("gpu", "link", "node", "cluster", "model", "train", "parallel")
"""Section names a ``section.field`` reference may start with (the active ones)."""

KIND_SECTION = {"gpu": "gpu", "device": "gpu", "link": "link", "node": "node",
                "cluster": "cluster", "model": "model", "train": "train", "parallel": "parallel"}
"""Block keyword → section (``device`` is another name for ``gpu``)."""

NAMED_KINDS = frozenset({"gpu", "device", "link", "node", "cluster", "model"})
"""Block keywords that take an id."""

HARDWARE = frozenset({"gpu", "node", "cluster", "link", "flops", "achievable", "flash_attention"})
"""Sections whose symbols are named by their whole path (``gpu_mem_bandwidth``)."""


@functools.cache
def paths() -> Mapping[str, FieldDef]:
    """Every settable ``section.field`` path of an active spec, with its field, in order."""
    link_fields = {"node.intra", "node.inter", "cluster.inter"}
    found: dict[str, FieldDef] = {}
    for top in ("model", "train", "parallel", "cluster", "node", "gpu"):
        found.update(_walk(top, SECTIONS[top], link_fields))
    return MappingProxyType(found)


def _walk(prefix: str, section: Section, link_fields: set[str]) -> Iterator[tuple[str, FieldDef]]:
    for name, fdef in section.fields.items():
        path = f"{prefix}.{name}"
        yield path, fdef
        if fdef.kind is Kind.LINK and path in link_fields:
            yield from _walk(path, LINK, link_fields)
    for sub, target in section.subs.items():
        if target != "parallel":  # train.parallel is spelled parallel.*
            yield from _walk(f"{prefix}.{sub}", SECTIONS[target], link_fields)


def field_at(path: str) -> FieldDef | None:
    """The field a ``section.field`` path names, or None."""
    return paths().get(path)
