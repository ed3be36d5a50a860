"""The model block of a spec: which decoder-only transformer is trained, apart from how it is split
and what it runs on (model, parallelism and hardware stay separate specs, as Calculon and
llm-analysis keep them).

:class:`ModelSpec`, the blocks it holds (a mixture-of-experts MLP, multi-head latent attention) and
the choices only a model makes (architecture, norm, activation, positions, the MoE router). The
numeric field types every block uses, ``Count`` and ``Real``, live here, on the lowest module that
needs them; :mod:`llmp.spec.spec` holds the other blocks and the ``Spec`` that gathers them all.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeAlias

from llmp.spec.algebra import vmin

if TYPE_CHECKING:  # SymPy is imported only where a spec leaves a symbol free (llmp.sym)
    import sympy as sp

Count: TypeAlias = "int | sp.Expr"
Real: TypeAlias = "float | sp.Expr"


class Arch(StrEnum):
    GPT = "gpt"
    """LayerNorm, GELU MLP, learned positions, biases (GPT-2/3, Megatron GPT, MPT)."""
    LLAMA = "llama"
    """RMSNorm, SwiGLU MLP, rotary positions, GQA, no biases (Llama, Mistral, Qwen)."""


class Norm(StrEnum):
    LAYERNORM = "layernorm"
    RMSNORM = "rmsnorm"


class Activation(StrEnum):
    GELU = "gelu"
    SWIGLU = "swiglu"
    """silu(x W_gate) * (x W_up): three matrices."""
    RELU = "relu"
    SQUARED_RELU = "squared_relu"
    """relu(x)^2 without a gate (Primer, So et al. 2021; Nemotron-4): two matrices."""

    @property
    def gated(self) -> bool:
        """A gated MLP has a third (gate) matrix."""
        return self is Activation.SWIGLU


class Position(StrEnum):
    LEARNED = "learned"
    ROTARY = "rotary"
    ALIBI = "alibi"
    NONE = "none"


class Router(StrEnum):
    """How a MoE layer scores experts for each token (Megatron-Core ``--moe-router-score-function``)."""

    SOFTMAX = "softmax"
    """Softmax over the experts' logits, then top-k (Mixtral, Qwen3-MoE, gpt-oss: softmax of the
    top-k logits; Megatron ``topk_softmax_with_capacity``)."""
    SIGMOID = "sigmoid"
    """Sigmoid of each logit, top-k on the scores (DeepSeek-V3 §2.1.2, eq. 15), the chosen scores
    normalised to sum to one."""
    BALANCED = "balanced"
    """No learned gate: tokens dealt round-robin to the experts (NeMo AutoModel's
    ``FakeBalancedGate``, a benchmark setting: no gating GEMM, a perfectly even load)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class MoeSpec:
    """Mixture-of-experts MLP; ``None`` on the model means dense."""

    experts: Count
    """Routed experts per MoE layer."""
    top_k: Count
    """Experts each token is routed to."""
    expert_ffn_hidden: Count
    """Inner width of one expert's MLP."""
    shared_experts: Count = 0
    """Always-on experts (DeepSeek style), each of width ``expert_ffn_hidden``."""
    capacity_factor: Real | None = None
    """Token slots per expert relative to a balanced load, tokens beyond it dropped; None:
    dropless (Megatron's default ``--moe-expert-capacity-factor None``)."""
    imbalance: Real = 1.0
    """Routed tokens on the busiest expert-parallel rank relative to a balanced load: that rank
    sets the pace of the expert GEMMs and of the all-to-all (1: perfectly balanced)."""
    router: Router = Router.SOFTMAX
    expert_bias: bool = False
    """A per-expert bias added to the scores before top-k (DeepSeek-V3's auxiliary-loss-free
    balancing, Megatron ``--moe-router-enable-expert-bias``)."""
    aux_loss: bool = False
    """A load-balancing loss over the router's scores (Megatron ``--moe-aux-loss-coeff`` > 0)."""
    first_dense_layers: Count = 0
    """Leading layers with a dense MLP of ``model.ffn_hidden`` (DeepSeek-V3
    ``first_k_dense_replace`` = 3)."""
    every: Count = 1
    """Every n-th layer is a MoE layer, the others dense (Llama 4 ``interleave_moe_layer_step``:
    layers n-1, 2n-1, ...)."""

    @property
    def load(self) -> Any:
        """Rows the busiest rank's experts compute, relative to a balanced load: the imbalance,
        capped by the capacity when tokens beyond it are dropped."""
        if self.capacity_factor is None:
            return self.imbalance
        return vmin(self.imbalance, self.capacity_factor)


@dataclass(frozen=True, kw_only=True, slots=True)
class MlaSpec:
    """Multi-head latent attention (DeepSeek-V2 §2.1, DeepSeek-V3): queries and keys/values pass
    through low-rank compressions; ``None`` on the model means standard (GQA) attention."""

    q_lora_rank: Count = 0
    """Width of the compressed query (0: queries projected directly, DeepSeek-V2-Lite)."""
    kv_lora_rank: Count
    """Width of the compressed key/value latent."""
    qk_nope_head_dim: Count
    """Per-head query/key dims without rotary embedding."""
    qk_rope_head_dim: Count
    """Per-head query/key dims with rotary embedding (the key's are shared by all heads)."""
    v_head_dim: Count
    """Per-head value dims."""

    @property
    def qk_head_dim(self) -> Any:
        return self.qk_nope_head_dim + self.qk_rope_head_dim


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelSpec:
    """A decoder-only transformer."""

    name: str
    arch: Arch
    layers: Count
    hidden: Count
    heads: Count
    kv_heads: Count
    """Key/value heads (= heads for MHA; fewer for GQA; 1 for MQA)."""
    head_dim: Count
    """Per-head width; defaults to hidden / heads."""
    ffn_hidden: Count
    """MLP inner width (per matrix for SwiGLU)."""
    vocab: Count
    seq_len: Count
    norm: Norm
    activation: Activation
    position: Position
    tied_embeddings: bool
    bias: bool
    """Linear layers carry biases (GPT) or not (Llama)."""
    dropout: Real = 0.0
    rotary_pct: Real = 1.0
    """Fraction of each head's dims that rotary embedding rotates (GPT-NeoX-20B: 0.25)."""
    parallel_residual: bool = False
    """x + attn(norm(x)) + mlp(norm(x)): both branches read x, one residual add (GPT-J, NeoX, PaLM)."""
    shared_norm: bool = False
    """With parallel_residual: one input norm feeds both branches (GPT-J, PaLM); false keeps two
    (GPT-NeoX's untied pair, ``gpt_j_tied = false``)."""
    window: Count = 0
    """Sliding-window attention: each query attends to the ``window`` most recent tokens (itself
    included); 0: full causal attention."""
    full_attention_every: Count = 0
    """With a window: every n-th layer (layers n-1, 2n-1, ...) attends to the whole sequence, the
    others to the window (gpt-oss: 2); 0: every layer is windowed (Mistral 7B)."""
    mtp_layers: Count = 0
    """Multi-token prediction modules after the last layer (DeepSeek-V3 §2.2: depth 1), each a
    projection, one transformer layer and the shared output head."""
    moe: MoeSpec | None = None
    mla: MlaSpec | None = None
