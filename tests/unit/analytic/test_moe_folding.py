"""MoE parallel folding: the attention and expert meshes as Megatron-Core builds them, layouts it
runs that unfolded MoE refused (ep > dp, ep across tp and cp), and what each mesh prices."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from analytic_helpers import folded_groups as _groups
from strategies_analytic import llama, make_spec, with_parallel

import llmp.dsl
from llmp.analytic import layout, params
from llmp.analytic.kernels import Tier
from llmp.analytic.structure import structure_of
from llmp.compose import predict
from llmp.errors import InfeasibleError
from llmp.spec.model import MoeSpec
from llmp.spec.spec import ZeroStage

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def test_attention_and_expert_groups_of_a_folded_layout_are_megatrons():
    """16 GPUs, tp 2, cp 2, dp 4, pp 1, etp 1, ep 8: the groups Megatron-Core's two rank generators
    give (NVIDIA/Megatron-LM@00caa53:megatron/core/parallel_state.py, ``initialize_model_parallel``;
    ``generate_masked_orthogonal_rank_groups`` with the default order ``tp-cp-ep-dp-pp``).

    Attention, ``RankGenerator(tp=2, ep=1, dp=4, pp=1, cp=2)``: rank = t + 2 (c + 2 d), so
    tp [0,1] [2,3] ...; cp [0,2] [1,3] [4,6] ...; dp [0,4,8,12] [1,5,9,13] [2,6,10,14] [3,7,11,15];
    dp-cp (the dense gradients' group) [0,2,4,...,14] [1,3,...,15].
    Experts, ``RankGenerator(tp=1, ep=8, dp=16 / (1 * 8 * 1) = 2, pp=1, cp=1)``: rank = e + 8 x, so
    ep [0..7] [8..15]; edp [0,8] [1,9] ... [7,15]; etp singletons; tp-ep = ep.
    EP 8 folds over tp x cp x 2 of the 4 dp replicas: unfolded MoE (ep a slice of dp x cp = 8) put
    its ranks 2 apart, over two nodes of 8; folded, they are one node."""
    g = _groups(tp=2, cp=2, dp=4, pp=1, etp=1, ep=8)
    assert g["tp"] == [[2 * i, 2 * i + 1] for i in range(8)]
    assert sorted(g["cp"]) == sorted([[b + t, b + t + 2] for b in (0, 4, 8, 12) for t in (0, 1)])
    assert sorted(g["dp"]) == [list(range(0, 16, 2)), list(range(1, 16, 2))]
    assert g["ep"] == [list(range(8)), list(range(8, 16))]
    assert sorted(g["expert_dp"]) == [[i, i + 8] for i in range(8)]
    assert g["etp_ep"] == g["ep"]
    assert sorted(g["etp"]) == [[i] for i in range(16)]


def test_expert_tensor_parallelism_folds_inside_ep_and_pp_stays_outermost():
    """16 GPUs, tp 2, dp 4, pp 2, etp 2, ep 4: edp = 2 * 1 * 4 / (2 * 4) = 1, dp_in = 4 = dp, so the
    pipeline dim is outermost, as in Megatron's default order. Attention: pp [i, i + 8]; experts
    per stage (rank = base + et + 2 e): etp [0,1] ..., ep [0,2,4,6] [1,3,5,7] [8,10,12,14] [9,...,15],
    tp-ep the whole stage [0..7] [8..15]."""
    g = _groups(tp=2, cp=1, dp=4, pp=2, etp=2, ep=4)
    assert sorted(g["pp"]) == [[i, i + 8] for i in range(8)]
    assert sorted(g["etp"]) == [[2 * i, 2 * i + 1] for i in range(8)]
    assert sorted(g["ep"]) == [[0, 2, 4, 6], [1, 3, 5, 7], [8, 10, 12, 14], [9, 11, 13, 15]]
    assert sorted(g["etp_ep"]) == [list(range(8)), list(range(8, 16))]
    assert sorted(g["expert_dp"]) == [[i] for i in range(16)]


def _moe(experts: int = 16, top_k: int = 2, layers: int = 2) -> object:
    return llama(layers=layers, hidden=1024, heads=8, kv_heads=4, ffn=2816, vocab=32000, seq_len=2048,
                 moe=MoeSpec(experts=experts, top_k=top_k, expert_ffn_hidden=1024))


@pytest.mark.parametrize("nodes, over, what", [
    (2, dict(tp=2, dp=8, ep=16, etp=1, sequence_parallel=True), "dp(8) * cp(1) % ep(16), refused when ep sliced dp"),
    (1, dict(tp=4, dp=2, ep=8, etp=1, sequence_parallel=True), "ep(8) over tp x dp"),
    (1, dict(tp=4, pp=2, dp=1, ep=4, etp=1, sequence_parallel=True), "ep(4) does not divide dp(1)"),
    (1, dict(cp=4, dp=2, ep=8), "ep folded over cp x dp"),
])
def test_layouts_megatron_core_runs_with_ep_beyond_dp_predict(nodes, over, what):
    spec = make_spec(_moe(), nodes=nodes, global_batch=16, **over)
    st_ = structure_of(spec)
    pred = predict(spec, residuals=None)
    assert math.isfinite(pred.step_time_s) and pred.step_time_s > 0, what
    assert st_.group_size("ep") == over["ep"] and pred.breakdown["ep"] > 0, what
    edp = st_.group_size("expert_dp")
    assert edp * over["ep"] * over.get("etp", over.get("tp", 1)) == st_.world_size // st_.pp, what


def test_folding_keeps_the_unfolded_layout_where_ep_slices_dp():
    # tp 2, ep 4 a slice of dp 8 (etp = tp): the expert-parallel ranks are tp apart, inside one node,
    # and the expert data-parallel group is dp / ep, as before folding.
    spec = make_spec(_moe(), nodes=2, tp=2, ep=4, global_batch=16, sequence_parallel=True)
    st_ = structure_of(spec)
    assert st_.group_size("expert_dp") == 2 and st_.tier("ep") is Tier.INTRA
    assert _groups(tp=2, cp=1, dp=8, pp=1, etp=2, ep=4)["ep"][0] == [0, 2, 4, 6]


def test_the_dispatch_crosses_the_nics_only_when_the_expert_group_leaves_the_node():
    inside = make_spec(_moe(), nodes=2, tp=2, dp=8, ep=8, etp=1, global_batch=16, sequence_parallel=True)
    across = with_parallel(inside, ep=16)
    assert structure_of(inside).tier("ep") is Tier.INTRA and structure_of(across).tier("ep") is Tier.INTER
    a2a = {s: sum(r.roofline_s for r in predict(spec, residuals=None).ops if ".moe.ep_dispatch" in r.name)
           for s, spec in (("inside", inside), ("across", across))}
    assert a2a["across"] > a2a["inside"] > 0


def test_expert_states_follow_the_expert_mesh():
    # Each rank holds experts / ep experts, each split etp ways, and ZeRO-1 shards their optimizer
    # states over edp = tp cp dp / (etp ep): ep 8 and ep 2 on tp 4 x dp 2 hold 1/8 and 1/2 of the
    # experts in weights, and both 1/8 of their optimizer states (edp 1 and 4).
    model = _moe(layers=2)

    def mem(ep: int, etp: int):
        spec = make_spec(model, nodes=1, tp=4, dp=2, ep=ep, etp=etp, global_batch=16, sequence_parallel=True,
                         zero=ZeroStage.Z1)
        return predict(spec, residuals=None).memory

    experts = 2 * 16 * params.mlp_params(model, 1024)  # two MoE layers
    eight, two = mem(8, 1), mem(2, 1)
    assert two.weights - eight.weights == pytest.approx(2 * experts * (1 / 2 - 1 / 8), rel=1e-9)
    assert two.optimizer == pytest.approx(eight.optimizer, rel=1e-12)
    split = mem(2, 4)  # each expert over 4 ranks: 1/2 of the experts, a quarter of each
    assert two.weights - split.weights == pytest.approx(2 * experts / 2 * (1 - 1 / 4), rel=1e-9)


def test_a_mesh_that_does_not_tile_the_stage_is_refused_with_the_equation():
    spec = make_spec(_moe(), nodes=1, tp=2, dp=4, ep=16, global_batch=16, sequence_parallel=True)
    with pytest.raises(InfeasibleError, match=r"tp\(2\) \* cp\(1\) \* dp\(4\) % \(etp\(2\) \* ep\(16\)\) = 8"):
        structure_of(spec)


def test_placement_of_a_big_folded_world_is_quick_and_whole():
    # 1024 GPUs, DeepSeek-V3's H100 recipe: tp 2, pp 8, ep 64, etp 1 (dp 64, edp 2).
    g = layout.members((2, 1, layout.dp_in(2, 1, 1, 64), 8, 64 // layout.dp_in(2, 1, 1, 64)), (1, 64))
    assert g["ep"].shape == (16, 64) and g["expert_dp"].shape == (512, 2)
    assert np.array_equal(np.sort(g["ep"].ravel()), np.arange(1024))


def test_deepseek_v3_example_on_pp8_vp4_with_the_recipes_layout_predicts():
    # examples/deepseek_v3_h800.llmp re-laid out as Megatron-Bridge's H100 recipe: pp 8 x vp 4, the
    # layout "Et|(tt|)*30mL", ep 64 folded over 8 nodes of dp 256.
    text = (EXAMPLES / "deepseek_v3_h800.llmp").read_text()
    text = text.replace("    pp = 16", "    pp = 8  vp = 4  schedule = interleaved").replace(
        "    dp = 128", "    dp = 256").replace("global_batch = 15360", "global_batch = 16384")
    text = "\n".join('    pipeline_layout = "Et|(tt|)*30mL"' if line.strip().startswith("stage_layers") else line
                     for line in text.splitlines())
    spec = llmp.dsl.loads(text, filename=str(EXAMPLES / "deepseek_v3_h800.llmp"))
    st_ = structure_of(spec)
    assert st_.chunk_layers == (1,) + (2,) * 30 + (0,) and st_.mtp_layers == 1
    assert st_.group_size("ep") == 64 and st_.group_size("expert_dp") == 4
    pred = predict(spec, residuals=None)
    assert math.isfinite(pred.step_time_s) and pred.breakdown["ep"] > 0 and not pred.memory.oom
