"""Fine-tuning steps (``train.finetune``): LoRA's frozen base and adapters, packed samples' attention,
what only the adapters pay (gradients, sync, optimizer), and the checks, on real parsed specs."""

from __future__ import annotations

import pytest
from analytic_helpers import finetune_spec as _spec

from llmp.analytic import params
from llmp.analytic.block import Context
from llmp.analytic.derived import derived
from llmp.analytic.graph import decompose
from llmp.analytic.kernels import Kernel, Pass, cost
from llmp.analytic.layer import adapter_weights
from llmp.analytic.structure import structure_of
from llmp.compose import predict
from llmp.errors import SpecError

LORA = "finetune { method = lora  lora_rank = 16 }"


def _ops(spec):
    return {op.name: op for op in decompose(spec).ops}


def test_a_lora_step_is_shorter_than_the_full_step_of_the_same_model():
    full, lora = predict(_spec("finetune { method = full }"), residuals=None), predict(_spec(LORA), residuals=None)
    assert lora.step_time_s < full.step_time_s
    assert lora.memory.grads < full.memory.grads / 100 and lora.memory.optimizer < full.memory.optimizer / 100
    # pre-training and full fine-tuning of whole sequences are the same step
    assert full.step_time_s == pytest.approx(predict(_spec(), residuals=None).step_time_s, rel=1e-12)


def test_frozen_base_gemms_keep_dgrad_and_lose_wgrad_while_adapters_have_both():
    ops = _ops(_spec(LORA))
    for gemm in ("attn.qkv", "attn.proj", "mlp.fc1", "mlp.fc2"):
        assert f"layer.{gemm}.dgrad" in ops and f"layer.{gemm}.wgrad" not in ops
        for part in ("lora_a", "lora_b"):
            assert {f"layer.{gemm}.{part}", f"layer.{gemm}.{part}.dgrad", f"layer.{gemm}.{part}.wgrad"} <= set(ops)
    assert "head.logits.dgrad" in ops and "head.logits.wgrad" not in ops
    assert "embedding.lookup" in ops and "embedding.lookup.bwd" not in ops  # a frozen embedding: no backward
    full = _ops(_spec("finetune { method = full }"))
    assert "layer.attn.qkv.wgrad" in full and not any(".lora_" in name for name in full)


def test_only_the_chosen_modules_get_adapters_of_the_rank_given():
    ops = _ops(_spec("finetune { method = lora  lora_rank = 8  lora_proj = false  lora_fc2 = false }"))
    adapted = {name.split(".")[2] for name in ops if name.endswith(".lora_a")}
    assert adapted == {"qkv", "fc1"}
    a = ops["layer.attn.qkv.lora_a"].work
    assert isinstance(a, Kernel) and (a.dim("m"), a.dim("n"), a.dim("k")) == (4096, 8, 2048)


def test_under_tensor_parallelism_adapters_split_like_their_layers():
    spec = _spec(LORA, tp=2)
    ops = _ops(spec)
    col_a, row_a = ops["layer.attn.qkv.lora_a"].work, ops["layer.attn.proj.lora_a"].work
    assert col_a.dim("n") == 8 and row_a.dim("n") == 16 and row_a.dim("k") == 1024  # r / tp, and k / tp
    assert "layer.attn.qkv.lora_a.tp_all_gather" in ops and "layer.attn.proj.lora_a.tp_all_reduce" in ops
    st_ = structure_of(spec)
    ctx = Context.of(spec, st_)
    m, ft = spec.model, spec.train.finetune
    assert adapter_weights(ctx, st_.kinds[0]).total == pytest.approx(params.lora_params(m, ft) / 2, rel=1e-12)


def test_optimizer_states_and_gradients_are_those_of_the_adapters_alone():
    for rank in (8, 16, 64):
        spec = _spec(f"finetune {{ method = lora  lora_rank = {rank} }}")
        mem = predict(spec, residuals=None).memory
        adapters = params.trainable_params(spec.model, spec.train.finetune)
        assert adapters == spec.model.layers * params.lora_params(spec.model, spec.train.finetune)
        assert derived(spec)["trainable_params"] == adapters  # what llmp check shows
        assert mem.optimizer == pytest.approx(12 * adapters, rel=1e-12)  # AdamW's moments and FP32 master copy
        assert mem.grads == pytest.approx(4 * adapters, rel=1e-12)  # FP32 gradients of the generic stack


def test_zero_and_fsdp_shard_only_what_trains():
    z1 = predict(_spec(LORA, zero="1", sets=("cluster.nodes=1",)), residuals=None)
    plain = predict(_spec(LORA), residuals=None)
    assert z1.memory.optimizer == pytest.approx(plain.memory.optimizer / 8, rel=1e-12)
    spec = _spec(LORA, zero="fsdp")
    ops = _ops(spec)
    gather = ops["layer.layer.zero_all_gather"].work
    scatter = ops["layer.layer.zero_grad_reduce_scatter"].work
    # the frozen layer is gathered in BF16, only its adapters' FP32 gradients are reduce-scattered
    assert gather.bytes == pytest.approx(2 * params.layer_params(spec.model), rel=1e-12)
    assert scatter.bytes == pytest.approx(4 * params.lora_params(spec.model, spec.train.finetune), rel=1e-12)
    assert "embedding.embedding.zero_grad_reduce_scatter" not in ops and "embedding.embedding.zero_all_gather" in ops


def _core_flops(spec) -> float:
    core = _ops(spec)["layer.attn.core"].work
    assert isinstance(core, Kernel) and core.pass_ is Pass.FWD
    return float(cost(core).flops)


@pytest.mark.parametrize("sample_len", [128, 300, 1024, 4096])
def test_packed_attention_costs_the_samples_own_causal_attention(sample_len):
    whole = _core_flops(_spec("finetune { method = full }"))
    packed = _core_flops(_spec(f"finetune {{ method = full  sample_len = {sample_len} }}"))
    assert packed == pytest.approx(whole * sample_len / 4096, rel=1e-9)  # (s / n) sequences of n^2 / 2 pairs
    if sample_len < 4096:
        assert packed < whole


def test_packing_changes_nothing_but_the_attention_core():
    whole = _ops(_spec("finetune { method = full }"))
    packed = _ops(_spec("finetune { method = full  sample_len = 256 }"))
    assert set(whole) == set(packed)
    changed = {n for n in whole if whole[n].work != packed[n].work}
    assert changed == {"layer.attn.core", "layer.attn.core.bwd"}


@pytest.mark.parametrize("block, sets, message", [
    ("finetune { lora_rank = 8 }", (), "lora_rank is set but method = full"),
    ("finetune { method = lora  lora_rank = 4096 }", ("model.hidden=2048",), "lora_rank(4096) > model.hidden(2048)"),
    ("finetune { sample_len = 8192 }", (), "sample_len(8192) > model.seq_len(4096)"),
    ("finetune { sample_len = 512 }", ("train.attention=unfused",), "only a fused kernel attends within each"),
    ("finetune { method = qlora }", (), "qlora"),
    ("finetune { lora_rank = -1 }", (), "must be zero or more"),
])
def test_bad_fine_tuning_fields_are_refused_naming_the_field(block, sets, message):
    with pytest.raises(SpecError) as err:
        _spec(block, sets=sets)
    assert message in err.value.render()
