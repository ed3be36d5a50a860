"""Cross-field checks: each rule fires with its equation filled in, and only when violated.

The base is tests/dsl/fixtures/debug.llmp: 2 nodes x 4 GPUs, tp = 2, pp = 2 (dp derived = 2),
8 heads, 8 layers, global_batch 32, micro_batch 2.
"""

from __future__ import annotations

import pytest

from llmp.dsl.checks import divides
from llmp.dsl.symbols import symbol_for

from test_resolve import debug, error

H = symbol_for("model.hidden")

VIOLATIONS = [
    pytest.param([("    pp = 2", "    pp = 2\n    dp = 4")], "layout mismatch",
                 "dp(4) * tp(2) * pp(2) * cp(1) = 16 != 8 GPUs (cluster.nodes(2) * "
                 "node.gpus_per_node(4))", id="world"),
    pytest.param([("    tp = 2", "    tp = 8"), ("    pp = 2", "    pp = 1")], "tp across nodes",
                 "tp(8) > node.gpus_per_node(4): tensor parallelism across nodes is not "
                 "supported", id="tp-in-node"),
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
                 "model.layers(7) % (pp(2) * vp(1)) = 1: every pipeline stage (and virtual "
                 "chunk) needs the same number of layers", id="layers"),
    pytest.param([("layers = 8", "layers = 6"), ("    pp = 2", "    pp = 2  vp = 2  "
                                                 "schedule = interleaved")], "not divisible",
                 "model.layers(6) % (pp(2) * vp(2)) = 2: every pipeline stage (and virtual "
                 "chunk) needs the same number of layers", id="layers-vp"),
    pytest.param([("    pp = 2", "    pp = 2  vp = 2")], "bad schedule",
                 "vp(2) > 1 needs schedule = interleaved (got 1f1b)", id="vp-needs-interleaved"),
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
                 "dp(2) * cp(1) % ep(4) = 2: experts are sharded over a slice of dp x cp",
                 id="ep-dp"),
    pytest.param([("seq_len = 1024", "seq_len = 1024  moe { experts = 3  top_k = 2 }"),
                  ("    pp = 2", "    pp = 2  ep = 2")], "not divisible",
                 "model.moe.experts(3) % ep(2) = 1: every expert-parallel rank needs the same "
                 "number of experts", id="experts-ep"),
    pytest.param([("seq_len = 1024", "seq_len = 1024  moe { experts = 2  top_k = 3 }")],
                 "bad value", "model.moe.top_k(3) > experts(2)", id="top-k"),
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
    [("seq_len = 1024", "seq_len = 1024  moe { experts = 8  top_k = 2 }"),
     ("    pp = 2", "    pp = 2  ep = 2")],
    [("    pp = 2", "    pp = 1  cp = 2  sequence_parallel = true")],
    [("    tp = 2", "    tp = 4"), ("    pp = 2", "    pp = 2  dp = 1")],
])
def test_valid_layouts_pass(replacements: list[tuple[str, str]]) -> None:
    spec = debug(*replacements)
    p = spec.parallel
    assert p.dp * p.tp * p.pp * p.cp == spec.cluster.world_size


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
