"""Fine-tuning steps: what LoRA and packed sequences change in the operator graph.

**LoRA** (Hu et al. 2021, arXiv:2106.09685) trains a low-rank pair beside each adapted linear
layer, ``y = x W + s (x A) B``, with ``W`` (and every other base weight: embedding, norms, head)
frozen. The stacks build it the same way, a wrapper that adds the adapter's output to the frozen
linear's (NVIDIA/NeMo@0044d77:nemo/collections/llm/peft/lora.py ``LoRALinear``, NeMo 2 and
Megatron-Bridge; NVIDIA-NeMo/Automodel@03bd7a9:nemo_automodel/components/_peft/lora.py
``LinearLoRA``/``TritonLinearLoRA``; Hugging Face ``peft``'s ``lora.Linear``), so per adapted GEMM
``m x n x k`` (``batch`` experts) the step gains:

* forward: ``x A`` (``m x r x k``), ``(x A) B`` (``m x n x r``) and the add of the two outputs;
* backward: the two adapters' input gradients (``d(xA) = dY B^T``, ``dx += d(xA) A^T``), their
  weight gradients (``dB = (xA)^T dY``, ``dA = x^T d(xA)``) and the add of ``dx`` to the frozen
  GEMM's;
* the frozen GEMM keeps its input gradient (dgrad) and loses its weight gradient (wgrad): autograd
  computes no gradient for a weight that does not require one. The tensor-parallel reduction of that
  input gradient, which Megatron hides behind the wgrad, then has nothing to hide behind: exposed.

Adapters run in the activation dtype: NeMo's adapters run "in original precision regardless of FP8
enabled" (``TELinearAdapter.forward``) and the TE-fused LoRA branch runs outside ``fp8_autocast``.
Under tensor parallelism an adapter follows its base layer (NeMo ``ParallelLinearAdapter``;
AutoModel ``ColwiseParallelLora``/``RowwiseParallelLora``,
NVIDIA-NeMo/Automodel@13994ba:nemo_automodel/components/distributed/parallel_styles.py): beside a
column-parallel GEMM ``A`` is split by its rank and its ``m x r`` output all-gathered, ``B`` by its
output columns; beside a row-parallel GEMM ``A`` is split by its input rows and its ``m x r``
partial sums all-reduced, ``B`` by the rank (its partial output joins the base layer's reduction).
NeMo's ``ParallelLinearAdapter`` gathers a row-parallel adapter's whole output instead, and reduces
a column-parallel adapter's input gradient by itself: those extra hidden-wide collectives are not
modelled.

Which linear layers get adapters is the spec's ``train.finetune.lora_*`` (default: all four, NeMo 2 /
Megatron-Bridge's ``LoRA.target_modules`` ``['linear_qkv', 'linear_proj', 'linear_fc1',
'linear_fc2']``); MLA's five projections count as ``qkv``, a MoE layer's experts and shared experts
as ``fc1``/``fc2``; the router, the output head and multi-token prediction modules get none.

**Packed sequences** (NeMo ``packed_sequence``, Megatron-Bridge packed SFT): samples of mean length
``sample_len`` are concatenated into one ``seq_len`` sequence and each attends only within itself
(FlashAttention's varlen kernels and TE's THD format with ``cu_seqlens``), so the attention core is
that of ``seq_len / sample_len`` causal sequences of ``sample_len`` tokens, not of one causal
``seq_len`` sequence; every other op sees the same ``seq_len`` tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llmp.spec.algebra import vmin
from llmp.spec.spec import FinetuneSpec, ParallelSpec, Spec

SPEC_FIELD: dict[str, str] = {
    "qkv": "lora_qkv", "q_proj": "lora_qkv", "q_down": "lora_qkv", "q_up": "lora_qkv", "kv_down": "lora_qkv",
    "kv_up": "lora_qkv", "proj": "lora_proj", "fc1": "lora_fc1", "fc2": "lora_fc2",
}
"""The last part of a layer GEMM's name (``attn.qkv``, ``moe.experts.fc1``) -> the spec field that
gives it an adapter."""

ROW_PARALLEL = frozenset({"proj", "fc2"})
"""GEMMs whose input is split over tensor-parallel ranks (their outputs are partial sums)."""
REPLICATED = frozenset({"q_down", "kv_down"})
"""GEMMs replicated on every tensor-parallel rank (MLA's down projections)."""

ADAPTER = ".lora_"
"""What an adapter op's name holds (``attn.qkv.lora_a``)."""


def _zero(x: Any) -> bool:
    return isinstance(x, int | float) and x == 0


@dataclass(frozen=True, slots=True)
class Tuning:
    """What a spec's fine-tuning changes in the graph (nothing for a pre-training step)."""

    frozen: bool
    """The base weights are frozen (LoRA): no weight gradients, sync or update of their own."""
    rank: Any
    """Each adapter's rank (0: none)."""
    adapted: frozenset[str]
    """Last name parts of the GEMMs that get an adapter (keys of :data:`SPEC_FIELD`)."""
    sample_len: Any
    """Mean tokens per packed sample; 0: not packed."""

    @classmethod
    def of(cls, spec: Spec) -> Tuning:
        ft = spec.train.finetune
        if ft is None:
            return cls(frozen=False, rank=0, adapted=frozenset(), sample_len=0)
        adapted = frozenset(part for part, f in SPEC_FIELD.items() if ft.lora and getattr(ft, f))
        return cls(frozen=ft.lora, rank=ft.lora_rank if ft.lora else 0,
                   adapted=frozenset() if _zero(ft.lora_rank) else adapted, sample_len=ft.sample_len)

    @property
    def packed(self) -> bool:
        """Samples are packed (a free symbol for ``sample_len`` counts as packed)."""
        return not _zero(self.sample_len)

    def adapts(self, name: str) -> bool:
        """A layer GEMM called ``name`` gets an adapter."""
        return name.rsplit(".", 1)[-1] in self.adapted


@dataclass(frozen=True, slots=True)
class AdapterShape:
    """The two GEMMs of one adapter on one GPU: ``x A`` is ``m x a_out x k``, ``(x A) B`` is
    ``m x n x b_in`` (``batch`` of each: experts); ``gather``/``reduce``: the ``m x rank`` output of
    ``x A`` is all-gathered (beside a column-parallel GEMM) or all-reduced (row-parallel) over the
    base layer's tensor-parallel group."""

    a_out: Any
    b_in: Any
    gather: bool
    reduce: bool


def adapter_shape(tuning: Tuning, p: ParallelSpec, name: str) -> AdapterShape:
    """How the adapter of the GEMM ``name`` splits over tensor parallelism (module docstring); an
    expert's follows the expert tensor-parallel degree ``etp``."""
    part = name.rsplit(".", 1)[-1]
    r = tuning.rank
    if part in REPLICATED:
        return AdapterShape(a_out=r, b_in=r, gather=False, reduce=False)
    tp = p.expert_tp if ".experts." in name else p.tp
    if part in ROW_PARALLEL:
        return AdapterShape(a_out=r, b_in=r / tp, gather=False, reduce=True)
    return AdapterShape(a_out=r / tp, b_in=r, gather=True, reduce=False)


def packed_attention(ft: FinetuneSpec | None, micro_batch: Any, seq_len: Any, seq_q: Any, window: Any,
                     windowed: bool) -> tuple[Any, Any, Any, Any]:
    """(batch, query rows, key length, window) of one rank's fused attention core: one causal
    sequence of ``seq_len`` keys (``seq_q`` query rows on this rank, 1/cp of them under context
    parallelism), or with packed samples ``seq_len / sample_len`` causal sequences per sequence,
    each of ``sample_len`` keys and the same share of query rows (module docstring). A window is
    capped at the keys there are: a query sees at most its whole causal past, so a window longer
    than the sequence is full causal attention (the kernel's band formula would shrink past it)."""
    if ft is None or _zero(ft.sample_len):
        return micro_batch, seq_q, seq_len, vmin(window, seq_len) if windowed else seq_len
    n = ft.sample_len
    return (micro_batch * seq_len / n, seq_q * n / seq_len, n, vmin(window, n) if windowed else n)
