"""Notes → spec fields: every pattern of the table on real note text (synthetic variants:
``tests/property/validate/test_notes_properties.py``)."""

from __future__ import annotations

import re

import published_rows as P
import pytest

from llmp.spec.model import Activation, Norm, Position
from llmp.spec.spec import Attention, Recompute, ZeroStage
from llmp.validate import notes
from llmp.validate.cells import CellError
from llmp.validate.notes import MemoryKind

GIB = 2**30

CASES = [
    # (note text, {path: value}) — real notes first, then other hands
    ("GPT (LayerNorm, GeLU MLP); ffn derived (Megatron default 4*hidden)",
     {"model.norm": Norm.LAYERNORM, "model.activation": Activation.GELU}),
    ("GPT (RMSNorm, GeLU MLP); flags: --normalization=RMSNorm",
     {"model.norm": Norm.RMSNORM, "model.activation": Activation.GELU}),
    ("flags: --transformer-impl=transformer_engine --untie-embeddings-and-output-weights",
     {"model.tied_embeddings": False}),
    ("vocab NullTokenizer --vocab-size 131073, padded to a multiple of 128*TP = 131200",
     {"train.vocab_divisible_by": 128}),
    ("ALiBi, embedding LayerNorm, tied embeddings; vocab 250,680 tokens (embedding 250880 = padded, per README)",
     {"model.position": Position.ALIBI, "model.tied_embeddings": True, "model.vocab": 250880,
      "train.vocab_divisible_by": 1}),
    ("page notes: mock data; fake balanced MoE gate; no grad clipping", {"train.grad_clip": False}),
    ("flags: --attention-backend=unfused --deterministic-mode", {"train.attention": Attention.UNFUSED_FUSED_SOFTMAX}),
    ("flags: --attention-backend=flash", {"train.attention": Attention.FLASH2}),
    ("flags: --attention-backend=fused", {"train.attention": Attention.CUDNN}),
    ("flags: --attention-backend=auto", {}),
    ("flags: --transformer-impl=local --apply-query-key-layer-scaling",
     {"train.attention": Attention.UNFUSED_FUSED_SOFTMAX}),
    ("flags: --transformer-impl=local --no-masked-softmax-fusion", {"train.attention": Attention.UNFUSED}),
    ("flags: --no-gradient-accumulation-fusion --cross-entropy-loss-fusion",
     {"train.grad_accum_fusion": False, "train.fused_cross_entropy": True}),
    ("flags: --tp-comm-overlap --overlap-grad-reduce --overlap-param-gather",
     {"parallel.tp_comm_overlap": True, "parallel.dp_overlap": True, "parallel.param_gather_overlap": True}),
    ("NumParams consistent with learned positional embeddings (seq_len*d_model) + biases",
     {"model.position": Position.LEARNED}),
    ("torch.compile per TransformerBlock; Float8 training of nn.Linear",
     {"train.fused_norm": True, "train.fused_bias_act": True, "train.fused_rope": True}),
    ("eager mode; no torch.compile", {}),
    ("flags: --decoder-first-pipeline-num-layers=2 --decoder-last-pipeline-num-layers=2 "
     "--untie-embeddings-and-output-weights",
     {"parallel.first_stage_layers": 2, "parallel.last_stage_layers": 2, "model.tied_embeddings": False}),
    ("flags: --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split",
     {"parallel.account_for_embedding": True, "parallel.account_for_loss": True}),
    ("flags: --deterministic-mode --microbatch-group-size-per-virtual-pipeline-stage=5",
     {"parallel.microbatch_group": 5}),
    ("GPT_ARGS: --pp-partition-method 'type:transformer|embedding' --num-layers 70",
     {"parallel.partition": "type:transformer|embedding"}),
    # other hands
    ("activation gelu, LayerNorm", {"model.activation": Activation.GELU, "model.norm": Norm.LAYERNORM}),
    ("--swiglu --normalization RMSNorm --disable-bias-linear",
     {"model.activation": Activation.SWIGLU, "model.norm": Norm.RMSNORM, "model.bias": False}),
    ("squared-ReLU MLP, no gating", {"model.activation": Activation.SQUARED_RELU}),
    ("relu2 activation", {"model.activation": Activation.SQUARED_RELU}),
    ("ReLU MLP (OPT)", {"model.activation": Activation.RELU}),
    ("rotary 25%, parallel residual", {"model.rotary_pct": 0.25, "model.position": Position.ROTARY,
                                       "model.parallel_residual": True}),
    ("--rotary-percent 0.5", {"model.rotary_pct": 0.5, "model.position": Position.ROTARY}),
    ("rotary_pct=0.25", {"model.rotary_pct": 0.25, "model.position": Position.ROTARY}),
    ("50% rotary", {"model.rotary_pct": 0.5, "model.position": Position.ROTARY}),
    ("RoPE theta 500000", {"model.position": Position.ROTARY}),
    ("untied embeddings", {"model.tied_embeddings": False}),
    ("vocab padded to 50304", {"model.vocab": 50304, "train.vocab_divisible_by": 1}),
    ("--make-vocab-size-divisible-by 64", {"train.vocab_divisible_by": 64}),
    ("--use-distributed-optimizer --sequence-parallel",
     {"parallel.zero": ZeroStage.Z1, "parallel.sequence_parallel": True}),
    ("--recompute-granularity selective", {"train.recompute": Recompute.SELECTIVE}),
    ("--no-bias-gelu-fusion --no-rope-fusion", {"train.fused_bias_act": False, "train.fused_rope": False}),
    ("no biases in linear layers", {"model.bias": False}),
    ("num_layers_in_first_pipeline_stage: 7, num_layers_in_last_pipeline_stage=7",
     {"parallel.first_stage_layers": 7, "parallel.last_stage_layers": 7}),
    ("account_for_embedding_in_pipeline_split=True; account_for_loss_in_pipeline_split: true",
     {"parallel.account_for_embedding": True, "parallel.account_for_loss": True}),
    ('PipelineModule(partition_method="parameters")', {"parallel.partition": "parameters"}),
    ("--pp-partition-method uniform", {"parallel.partition": "uniform"}),
    ("account_for_loss_in_pipeline_split=False", {}),
    ("optim: grad_sync_dtype: bf16", {"train.fp32_grads": False}),
    ("--accumulate-allreduce-grads-in-fp32", {"train.fp32_grads": True}),
    ("DistributedDataParallelConfig(grad_reduce_in_fp32=False)", {"train.fp32_grads": False}),
    ("--no-gradient-accumulation-fusion --fp8-param-gather --normalization=RMSNorm",
     {"train.grad_accum_fusion": False, "train.fp8_param_gather": True, "model.norm": Norm.RMSNORM}),
    ("fp8_params: True", {"train.fp8_param_gather": True}),
    ("fp8_param_gather = True", {"train.fp8_param_gather": True}),
    ("flags: --attention-dropout 0.0 --hidden-dropout 0.0", {"model.dropout": 0.0}),
    ("hidden_dropout: 0.1", {"model.dropout": 0.1}),
]


@pytest.mark.parametrize("text, expected", CASES, ids=[c[0][:40] for c in CASES])
def test_note_patterns(text, expected):
    read = notes.read(text)
    assert {f.path: f.value for f in read.facts} == expected


def test_every_pattern_is_exercised():
    for pattern in notes.PATTERNS:
        assert any(re.search(pattern.regex, text, re.IGNORECASE) for text, _ in CASES), pattern.name


@pytest.mark.parametrize("text, fragment", [
    ("RMSNorm; LayerNorm", "model.norm both rmsnorm"),
    ("SwiGLU MLP; GeLU MLP", "model.activation"),
    ("rotary 250%", "not in (0, 1]"),
])
def test_contradicting_notes_are_refused(text, fragment):
    with pytest.raises(CellError, match=re.escape(fragment)):
        notes.read(text)


def test_unmodelled_and_unexpressible_statements():
    read = notes.read("flags: --deterministic-mode --decoder-first-pipeline-num-layers=2; env: NCCL_ALGO=Ring")
    assert any("deterministic" in u for u in read.unmodelled) and any("NCCL_ALGO" in u for u in read.unmodelled)
    assert read.unexpressible == ()  # uneven stages are expressible now
    assert notes.read("ActivationCPUOffload=False").unexpressible == ()
    assert notes.read("cpu offload of optimizer states").unexpressible


def test_memory_peaks_in_notes():
    (m,) = notes.memory_readings("...; golden mem-max-allocated-bytes max 56.36 GiB (one rank, as logged)")
    assert m.kind is MemoryKind.ALLOCATED and m.bytes == pytest.approx(56.36 * GIB) and m.one_rank
    (m,) = notes.memory_readings("max_reserved 70.5 GB")
    assert m.kind is MemoryKind.RESERVED and m.bytes == pytest.approx(70.5e9) and not m.one_rank
    assert notes.memory_readings("80GB HBM3 per GPU") == ()


def test_a_real_functional_test_note():
    note = P.FUNCTIONAL_7B_H100.splitlines()[1].rsplit(",\"", 1)[1]
    read = notes.read(note)
    said = {f.path: f.value for f in read.facts}
    assert said["model.tied_embeddings"] is False and said["train.grad_accum_fusion"] is False
    assert said["parallel.dp_overlap"] is True and said["train.vocab_divisible_by"] == 128
    assert read.memory[0].bytes == pytest.approx(56.55 * GIB)
