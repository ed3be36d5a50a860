"""Cross-field checks: each rule fires with its equation filled in, and only when violated.

The base is tests/unit/dsl/fixtures/debug.llmp: 2 nodes x 4 GPUs, tp = 2, pp = 2 (dp derived = 2),
8 heads, 8 layers, global_batch 32, micro_batch 2.
"""

from __future__ import annotations

import re

import pytest
from test_resolve import debug, error

from llmp.analytic.structure import structure_of
from llmp.errors import InfeasibleError
from llmp.spec.symbols import symbol_for
from llmp.spec.values import divides

H = symbol_for("model.hidden")

VIOLATIONS = [
    pytest.param([("    pp = 2", "    pp = 2\n    dp = 4")], "layout mismatch",
                 "dp(4) * tp(2) * pp(2) * cp(1) = 16 != 8 GPUs (cluster.nodes(2) * "
                 "node.gpus_per_node(4))", id="world"),
    pytest.param([("  gpus_per_node = 4", "  gpus_per_node = 4  nvlink_domain = 6")], "not divisible",
                 "node.nvlink_domain(6) % gpus_per_node(4) = 2: an NVLink domain is a whole number "
                 "of nodes", id="nvlink-domain"),
    pytest.param([("hidden = 512", "hidden = 384"), ("heads = 8", "heads = 6"),
                  ("    tp = 2", "    tp = 4"), ("    pp = 2", "    pp = 1")], "not divisible",
                 "model.heads(6) % tp(4) = 2: tp must divide the attention heads", id="heads"),
    pytest.param([("hidden = 512", "hidden = 768"), ("heads = 8", "heads = 12  kv_heads = 6"),
                  ("    tp = 2", "    tp = 4"), ("    pp = 2", "    pp = 1")], "not divisible",
                 "model.kv_heads(6) % tp(4) = 2: tp must divide the kv heads", id="kv-heads"),
    pytest.param([("hidden = 512", "hidden = 768"), ("heads = 8", "heads = 12  kv_heads = 3"),
                  ("    tp = 2", "    tp = 4"), ("    pp = 2", "    pp = 1")], "not divisible",
                 "tp(4) % kv_heads(3) = 1: with fewer kv heads than tp, each kv head is "
                 "replicated tp / kv_heads times", id="gqa-replication"),
    pytest.param([("heads = 8", "heads = 8  kv_heads = 3")], "not divisible",
                 "model.heads(8) % kv_heads(3) = 2: kv_heads must divide heads (each kv head "
                 "serves a group of query heads)", id="heads-kv"),
    pytest.param([("heads = 8", "heads = 8  ffn_hidden = 1001")], "not divisible",
                 "model.ffn_hidden(1001) % tp(2) = 1: tp must divide the MLP width", id="ffn"),
    pytest.param([("layers = 8", "layers = 7")], "not divisible",
                 "model.layers(7) % (pp(2) * vp(1)) = 1: the layers do not split equally over the "
                 "pipeline chunks (Megatron-LM refuses this too)", id="layers"),
    pytest.param([("layers = 8", "layers = 6"), ("    pp = 2", "    pp = 2  vp = 2  "
                                                 "schedule = interleaved")], "not divisible",
                 "model.layers(6) % (pp(2) * vp(2)) = 2: the layers do not split equally over the "
                 "pipeline chunks (Megatron-LM refuses this too)", id="layers-vp"),
    pytest.param([("    pp = 2", "    pp = 2  stage_layers = [3, 4]")], "pipeline split",
                 "stage_layers sums to 7, not model.layers(8)", id="stage-layers-sum"),
    pytest.param([("    pp = 2", "    pp = 2  stage_layers = [2, 3, 3]")], "pipeline split",
                 "stage_layers has 3 entries; it needs pp(2)", id="stage-layers-length"),
    pytest.param([("    pp = 2", "    pp = 2  vp = 2  schedule = interleaved  stage_layers = [3, 5]")],
                 "pipeline split", "stage_layers entry 3 % vp(2) = 1: each stage's layers are split "
                 "equally over its vp chunks", id="stage-layers-vp"),
    pytest.param([("    pp = 2", "    pp = 2  stage_layers = [3, 5]  first_stage_layers = 3")],
                 "pipeline split", "stage_layers gives the split; drop first_stage_layers",
                 id="stage-layers-alone"),
    pytest.param([("    pp = 2", "    pp = 2  first_stage_layers = 3  account_for_loss = true")],
                 "pipeline split", "first_stage_layers cannot be combined with account_for_loss "
                 "(Megatron-LM refuses the mix)", id="megatron-mix"),
    pytest.param([("layers = 8", "layers = 9"), ("    tp = 2", "    tp = 1"),
                  ("    pp = 2", "    pp = 4  first_stage_layers = 4")], "pipeline split",
                 "the 5 remaining layers do not split equally over 3 middle stages (and their vp(1) "
                 "chunks), as Megatron-LM requires", id="megatron-middle"),
    pytest.param([("    pp = 2", "    pp = 2  vp = 2  schedule = interleaved  last_stage_layers = 3")],
                 "pipeline split", "last_stage_layers(3) % vp(2) = 1: a stage's layers are split "
                 "equally over its vp chunks (Megatron-LM requires it)", id="megatron-vp"),
    pytest.param([("    pp = 2", "    pp = 2  account_for_embedding = true")], "pipeline split",
                 "model.layers(8) + 1 accounted = 9 % (pp(2) * vp(1)) = 1: Megatron-LM needs the "
                 "accounted layers to split equally", id="megatron-accounting"),
    pytest.param([("    pp = 2", '    pp = 2  partition = "balanced"')], "pipeline split",
                 'partition = "balanced" is not a DeepSpeed partition method', id="partition-name"),
    pytest.param([("    pp = 2", '    pp = 2  partition = "type:(transformer"')], "pipeline split",
                 'partition = "type:(transformer": bad regular expression (missing ), unterminated '
                 "subpattern at position 0)", id="partition-regex"),
    pytest.param([("    pp = 2", '    pp = 2  vp = 2  schedule = interleaved  partition = "uniform"')],
                 "pipeline split", 'partition = "uniform" is DeepSpeed\'s pipeline, which has no '
                 "interleaved schedule; vp(2) must be 1", id="partition-vp"),
    pytest.param([("    pp = 2", '    pp = 2  partition = "uniform"  account_for_loss = true')],
                 "pipeline split", 'partition = "uniform" is DeepSpeed\'s split; account_for_loss are '
                 "Megatron-LM's", id="partition-megatron"),
    pytest.param([("    pp = 2", "    pp = 2  vp = 2")], "bad schedule",
                 "vp(2) > 1 needs schedule = interleaved or zb_v (got 1f1b)", id="vp-needs-interleaved"),
    pytest.param([("    pp = 2", "    pp = 2  schedule = zb_v")], "bad schedule",
                 "schedule = zb_v needs vp = 2 (two model chunks per pipeline rank, in a V), got vp(1)",
                 id="zb-v-needs-two-chunks"),
    pytest.param([("    pp = 2", "    pp = 2  vp = 2  schedule = zb_h1")], "bad schedule",
                 "vp(2) > 1 needs schedule = interleaved or zb_v (got zb_h1)", id="zb-h1-one-chunk"),
    pytest.param([("    pp = 2", "    pp = 1  schedule = dualpipe")], "bad schedule",
                 "schedule = dualpipe needs an even pp (ranks pair up from both ends), got pp(1)",
                 id="dualpipe-even-pp"),
    pytest.param([("    pp = 2", "    pp = 2  schedule = interleaved")], "bad schedule",
                 "schedule = interleaved needs vp > 1 (model chunks per pipeline rank)",
                 id="interleaved-needs-vp"),
    pytest.param([("    pp = 2", "    pp = 1  vp = 2  schedule = interleaved")], "bad schedule",
                 "schedule = interleaved needs pp > 1", id="interleaved-needs-pp"),
    pytest.param([("global_batch = 32", "global_batch = 30")], "not divisible",
                 "train.global_batch(30) % (micro_batch(2) * dp(2)) = 2: the global batch must "
                 "split into whole microbatches per data-parallel replica", id="batch"),
    pytest.param([("    pp = 2", "    pp = 2  ep = 2")], "no experts",
                 "ep(2) > 1 but the model has no moe block", id="ep-without-moe"),
    pytest.param([("seq_len = 1024", "seq_len = 1024  moe { experts = 8  top_k = 2 }"),
                  ("    pp = 2", "    pp = 2  ep = 4")], "not divisible",
                 "tp(2) * cp(1) * dp(2) % (etp(2) * ep(4)) = 4: the expert mesh etp x ep x edp must cover "
                 "the ranks of a pipeline stage (MoE parallel folding)", id="ep-dp"),
    pytest.param([("seq_len = 1024", "seq_len = 1024  moe { experts = 3  top_k = 2 }"),
                  ("    pp = 2", "    pp = 2  ep = 2")], "not divisible",
                 "model.moe.experts(3) % ep(2) = 1: every expert-parallel rank needs the same "
                 "number of experts", id="experts-ep"),
    pytest.param([("seq_len = 1024", "seq_len = 1024  moe { experts = 2  top_k = 3 }")],
                 "bad value", "model.moe.top_k(3) > experts(2)", id="top-k"),
    pytest.param([("seq_len = 1024", "seq_len = 1024  moe { experts = 8  top_k = 2 }")],
                 "contradictory fields", "tp(2) > 1 with a moe block needs sequence_parallel = true: "
                 "Megatron-Core refuses MoE with tensor parallelism otherwise (megatron/training/arguments.py, "
                 "validate_args: \"When using MoE and tensor parallelism, sequence parallelism must be used.\")",
                 id="moe-tp-needs-sp"),
    pytest.param([("seq_len = 1024", "seq_len = 1024  moe { experts = 8  top_k = 2  expert_ffn_hidden = 1536 }"),
                  ("    pp = 2", "    pp = 2  etp = 3  sequence_parallel = true")], "not divisible",
                 "tp(2) * cp(1) * dp(2) % (etp(3) * ep(1)) = 1: the expert mesh etp x ep x edp must cover "
                 "the ranks of a pipeline stage (MoE parallel folding)", id="etp"),
    pytest.param([("seq_len = 1024", "seq_len = 1024  moe { experts = 8  top_k = 2  imbalance = 0.5 }"),
                  ("    pp = 2", "    pp = 2  sequence_parallel = true")], "bad value",
                 "model.moe.imbalance(0.5) < 1: the busiest rank carries at least a balanced share of the "
                 "routed tokens", id="imbalance"),
    pytest.param([("seq_len = 1024", "seq_len = 1024  moe { experts = 8  top_k = 2  first_dense_layers = 8 }"),
                  ("    pp = 2", "    pp = 2  sequence_parallel = true")], "bad value",
                 "model.moe.first_dense_layers(8) >= layers(8): no layer would be a MoE layer",
                 id="all-dense"),
    pytest.param([("seq_len = 1024", "seq_len = 1024  full_attention_every = 2")], "contradictory fields",
                 "model.full_attention_every(2) is set but window = 0: without a window every layer attends "
                 "to the whole sequence", id="full-without-window"),
    pytest.param([("seq_len = 1024", "seq_len = 1024  mla { kv_lora_rank = 64  qk_nope_head_dim = 32  "
                   "qk_rope_head_dim = 16  v_head_dim = 32 }  position = learned")], "contradictory fields",
                 "a mla block with position = learned: multi-head latent attention rotates its "
                 "qk_rope_head_dim dims (decoupled RoPE, DeepSeek-V2 §2.1.3)", id="mla-needs-rotary"),
    pytest.param([("seq_len = 1024", "seq_len = 1025"),
                  ("    pp = 2", "    pp = 2  sequence_parallel = true")], "not divisible",
                 "model.seq_len(1025) % tp(2) = 1: sequence parallelism splits the sequence "
                 "over tp", id="sequence-parallel"),
    pytest.param([("seq_len = 1024", "seq_len = 1025"), ("    pp = 2", "    pp = 1  cp = 2")],
                 "not divisible", "model.seq_len(1025) % cp(2) = 1: context parallelism splits "
                 "the sequence over cp", id="context-parallel"),
]


@pytest.mark.parametrize("replacements,label,message", VIOLATIONS)
def test_violation_is_reported_with_its_equation(replacements: list[tuple[str, str]], label: str,
                                                 message: str) -> None:
    err = error(*replacements)
    assert (err.label, err.message) == (label, message)
    assert err.span is not None and err.source_line is not None


@pytest.mark.parametrize("replacements", [
    [],
    [("hidden = 512", "hidden = 768"), ("heads = 8", "heads = 12  kv_heads = 2"),
     ("    tp = 2", "    tp = 4"), ("    pp = 2", "    pp = 1")],       # GQA: kv 2 < tp 4
    [("    pp = 2", "    pp = 2  vp = 2  schedule = interleaved")],
    [("    pp = 2", "    pp = 2  vp = 2  schedule = zb_v")],
    [("    pp = 2", "    pp = 2  schedule = zb_h1")],
    [("    pp = 2", "    pp = 2  schedule = dualpipe")],
    [("seq_len = 1024", "seq_len = 1024  moe { experts = 8  top_k = 2 }"),
     ("    pp = 2", "    pp = 2  ep = 2  sequence_parallel = true")],
    [("    pp = 2", "    pp = 1  cp = 2  sequence_parallel = true")],
    [("    tp = 2", "    tp = 4"), ("    pp = 2", "    pp = 2  dp = 1")],
    [("    tp = 2", "    tp = 8"), ("    pp = 2", "    pp = 1")],                # tp across two nodes
    [("  gpus_per_node = 4", "  gpus_per_node = 4  nvlink_domain = 8"), ("    tp = 2", "    tp = 8"),
     ("    pp = 2", "    pp = 1")],                                            # one NVLink domain
    [("layers = 8", "layers = 7"), ("    pp = 2", "    pp = 2  stage_layers = [3, 4]")],
    [("layers = 8", "layers = 7"), ("    pp = 2", "    pp = 2  last_stage_layers = 3")],
    [("layers = 8", "layers = 6"),
     ("    pp = 2", "    pp = 2  account_for_embedding = true  account_for_loss = true")],
    [("layers = 8", "layers = 7"), ("    pp = 2", '    pp = 2  partition = "type:transformer|mlp"')],
    [("seq_len = 1024", "seq_len = 1024  moe { experts = 8  top_k = 2  first_dense_layers = 1  every = 2 }"),
     ("    pp = 2", "    pp = 2  ep = 2  etp = 1  sequence_parallel = true  dispatcher = deepep")],
    [("seq_len = 1024", "seq_len = 1024  window = 128  full_attention_every = 2  mtp_layers = 1")],
])
def test_valid_layouts_pass(replacements: list[tuple[str, str]]) -> None:
    spec = debug(*replacements)
    p = spec.parallel
    assert p.dp * p.tp * p.pp * p.cp == spec.cluster.world_size


@pytest.mark.parametrize("replacements,message", [
    ([("    pp = 2", "    pp = 2  schedule = dualpipe"), ("global_batch = 32", "global_batch = 36")],
     "schedule = dualpipe needs an even number of microbatches, at least 2 * pp(2) = 4, got microbatches(9)"),
    ([("    pp = 2", "    pp = 2  vp = 2  schedule = interleaved"), ("global_batch = 32", "global_batch = 20")],
     "the interleaved schedule's last group of microbatches(5) % microbatch_group(2) = 1 is shorter than pp(2)"),
])
def test_a_schedules_microbatch_rules_make_the_layout_infeasible(replacements, message) -> None:
    # The spec is well formed; the layout cannot run (sweeps skip it), said when the structure is built.
    spec = debug(*replacements)
    with pytest.raises(InfeasibleError, match=re.escape(message)):
        structure_of(spec)


def test_the_world_check_points_at_dp() -> None:
    err = error(("    pp = 2", "    pp = 2\n    dp = 4"))
    assert (err.span.line, err.span.column) == (49, 10)
    assert err.source_line == "    dp = 4"


def test_divides_decides_what_sympy_can() -> None:
    assert divides(2, 4 * H) is True
    assert divides(2, 2 * H + 1) is False
    assert divides(8, H) is None
    assert divides(3, 9) is True and divides(3, 10) is False


def test_unrelated_fields_are_not_checked_against_each_other() -> None:
    # vocab need not divide by tp (Megatron pads the embedding), nor hidden by heads * head_dim
    debug(("vocab = 32_000", "vocab = 32_001"), ("heads = 8", "heads = 8  head_dim = 80"))
