"""Context parallelism's three ways of sharing K and V (``parallel.cp_comm``, TE's ``cp_comm_type``)."""

from __future__ import annotations

import pytest
from analytic_helpers import cp_model as _model
from analytic_helpers import cp_spec as _spec

from llmp.analytic.graph import decompose
from llmp.analytic.kernels import Collective, CollectiveKind
from llmp.dsl import loads
from llmp.errors import SpecError
from llmp.spec.spec import CpComm


def _cp_ops(spec):
    return {op.name: op.work for op in decompose(spec).ops if isinstance(op.work, Collective)
            and op.name.split(".")[-1].startswith("cp_")}


def test_each_variant_moves_what_its_te_class_moves():
    cp, tp = 2, 2
    m = _model()
    rows = 1 * m.seq_len / cp
    kv = rows * 2 * (m.kv_heads * m.head_dim / tp) * 2  # K and V of the shard, bf16
    ring = _cp_ops(_spec(CpComm.P2P, cp, tp))
    assert {w.kind for w in ring.values()} == {CollectiveKind.SEND_RECV}
    gathered = _cp_ops(_spec(CpComm.ALL_GATHER, cp, tp))
    assert gathered["layer.attn.cp_kv_all_gather"].kind is CollectiveKind.ALL_GATHER
    assert float(gathered["layer.attn.cp_kv_all_gather"].bytes) == pytest.approx(cp * kv)
    assert gathered["layer.attn.cp_dkv_reduce_scatter"].kind is CollectiveKind.REDUCE_SCATTER
    ulysses = _cp_ops(_spec(CpComm.A2A, cp, tp))
    assert {w.kind for w in ulysses.values()} == {CollectiveKind.ALL_TO_ALL}
    assert set(ulysses) == {"layer.attn.cp_qkv_all_to_all", "layer.attn.cp_out_all_to_all",
                            "layer.attn.cp_dout_all_to_all", "layer.attn.cp_dqkv_all_to_all"}


def test_ulysses_runs_whole_sequences_of_fewer_heads():
    spec = _spec(CpComm.A2A, cp=2, tp=2)
    core = next(op.work for op in decompose(spec).ops if op.name == "layer.attn.core")
    assert core.dim("seq_q") == spec.model.seq_len
    assert core.dim("heads") == spec.model.heads / 4


def test_gathered_kv_before_the_core_and_its_gradient_after_the_core_backward():
    names = [op.name for op in decompose(_spec(CpComm.ALL_GATHER)).ops if op.name.startswith("layer.attn.")]
    assert names.index("layer.attn.cp_kv_all_gather") < names.index("layer.attn.core")
    assert names.index("layer.attn.core.bwd") < names.index("layer.attn.cp_dkv_reduce_scatter")


def test_without_cp_nothing_is_exchanged():
    assert not _cp_ops(_spec(CpComm.A2A, cp=1))


SPEC = """use "dgx_h100"
model m {{ arch = llama  layers = 2  hidden = 1024  heads = 16  kv_heads = {kv}  ffn_hidden = 2816
           vocab = 32000  seq_len = 8192 }}
cluster c {{ node = dgx_h100  nodes = 1 }}
train {{ precision = bf16  global_batch = 8  micro_batch = 1
        parallel {{ tp = 2  cp = 4  sequence_parallel = true  cp_comm = {comm} }} }}
"""


def test_ulysses_needs_cp_to_split_the_kv_heads_of_a_tp_rank():
    loads(SPEC.format(kv=8, comm="a2a"))
    loads(SPEC.format(kv=4, comm="p2p"))
    with pytest.raises(SpecError, match="Ulysses"):
        loads(SPEC.format(kv=4, comm="a2a"))
