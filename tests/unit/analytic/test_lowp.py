"""Low-precision recipes (fp8 with delayed/current/blockwise scaling, mxfp8, nvfp4): which GEMMs
run in low precision, which quantisation kernels feed them, the memory they keep, and which GPUs
refuse them. Specs are parsed from real .llmp text."""

from __future__ import annotations

import pytest
from analytic_helpers import LOWP_B200_EXAMPLE as B200
from analytic_helpers import LOWP_H100_EXAMPLE as H100
from analytic_helpers import example_gpu as _gpu

import llmp
from llmp.analytic import kernels, roofline
from llmp.analytic.block import Context
from llmp.analytic.kernels import Family, Kernel, Pass, Quantize
from llmp.analytic.layer import lowp_weights
from llmp.analytic.lowp import AMAX_HISTORY, AMAX_TENSORS
from llmp.analytic.structure import structure_of
from llmp.errors import SpecError
from llmp.hardware.spec import Dtype

RECIPES_H100 = [("bf16", None), ("fp8", "delayed"), ("fp8", "current"), ("fp8", "blockwise")]
RECIPES_B200 = [*RECIPES_H100, ("mxfp8", None), ("nvfp4", None)]


def _spec(path: str, precision: str, scaling: str | None):
    sets = [f"train.precision={precision}"] + ([f"train.fp8_scaling={scaling}"] if scaling else [])
    return llmp.load(path, overrides=sets)


# -- GEMMs ------------------------------------------------------------------------------------
def test_an_fp4_gemm_moves_half_the_operand_bytes_of_fp8_and_writes_bf16():
    m, n, k = 4096, 8192, 1024
    fp8 = kernels.cost(Kernel.make(Family.GEMM, Dtype.FP8, m=m, n=n, k=k, batch=1))
    fp4 = kernels.cost(Kernel.make(Family.GEMM, Dtype.NVFP4, m=m, n=n, k=k, batch=1))
    assert fp8.bytes == (m * k + k * n) + 2 * m * n
    assert fp4.bytes == pytest.approx((m * k + k * n) / 2 + (m * k + k * n) / 16 + 2 * m * n)
    assert fp4.flops == fp8.flops == 2 * m * n * k


def test_a_microscaling_gemm_without_a_measurement_borrows_the_fp8_efficiency():
    device = _gpu(B200)
    k = Kernel.make(Family.GEMM, Dtype.MXFP8, m=8192, n=8192, k=8192, batch=1)
    rate, which = roofline.ceiling(k, True, device)
    fp8 = device.achievable.rates[Dtype.FP8] / device.peak_flops[Dtype.FP8]
    assert which is roofline.Ceiling.ACHIEVABLE
    assert rate == pytest.approx(fp8 * device.peak_flops[Dtype.MXFP8])


# -- which ops run in low precision, which quantise ----------------------------------------------
def _ops(spec):
    return [op for op in llmp.analytic.ops(spec).ops]


@pytest.mark.parametrize("path,precision,scaling",
                         [(H100, p, s) for p, s in RECIPES_H100] + [(B200, p, s) for p, s in RECIPES_B200])
def test_only_the_linear_layers_run_in_low_precision(path, precision, scaling):
    ops = _ops(_spec(path, precision, scaling))
    low = precision != "bf16"
    gemms = {op.name: op.work.dtype for op in ops if isinstance(op.work, Kernel) and op.work.family is Family.GEMM}
    for name, dtype in gemms.items():
        linear = any(f".{g}" in name or name.startswith(g) for g in ("attn.qkv", "attn.proj", "mlp.fc1", "mlp.fc2"))
        if linear:
            assert dtype is (Dtype(precision) if low else Dtype.BF16), name
        if "logits" in name:
            assert dtype is Dtype.BF16, name
    for op in ops:
        if isinstance(op.work, Kernel) and op.work.family is Family.ATTENTION:
            assert op.work.dtype is Dtype.BF16
    quantize = [op for op in ops if isinstance(op.work, Kernel) and op.work.family is Family.QUANTIZE]
    assert bool(quantize) == low


def _layer_quantize(spec) -> dict[str, Kernel]:
    """fc1's quantisation kernels in a layer, by name after ``mlp.fc1.`` (``quantize_input.cast``)."""
    return {op.name.split("mlp.fc1.", 1)[1]: op.work for op in _ops(spec)
            if "mlp.fc1.quantize" in op.name and not op.name.startswith("recompute")}


@pytest.mark.parametrize("path,precision,scaling,amax,variant", [
    (H100, "fp8", "delayed", False, Quantize.BOTH),      # Hopper: cast + transpose, one read
    (H100, "fp8", "current", True, Quantize.BOTH),       # an amax pass first
    (B200, "fp8", "delayed", False, Quantize.CAST),      # Blackwell reads FP8 in any layout
    (B200, "fp8", "current", True, Quantize.CAST),
    (H100, "fp8", "blockwise", False, Quantize.BOTH),    # 1x128 both ways from the BF16 source
    (B200, "mxfp8", None, False, Quantize.BOTH),         # 1x32 rowwise and columnwise, no transpose
    (B200, "nvfp4", None, True, Quantize.BOTH),          # global amax, then 1x16 both ways
])
def test_each_operand_is_quantised_as_its_recipe_says(path, precision, scaling, amax, variant):
    q = _layer_quantize(_spec(path, precision, scaling))
    for operand in ("quantize_input", "quantize_grad"):
        names = {n for n in q if n.startswith(f"{operand}.")}
        assert any(n.endswith(".cast") for n in names)
        assert any(n.endswith(".amax") for n in names) == amax
        cast = next(q[n] for n in names if n.endswith(".cast"))
        assert cast.variant == variant
        assert cast.dtype is Dtype(precision)
    grad = next(k for n, k in q.items() if n.startswith("quantize_grad."))
    assert grad.pass_ is Pass.BWD
    weight = {n.rsplit(".", 1)[1] for n in q if n.startswith("quantize_weight.")}
    assert ("transpose" in weight) == (scaling == "blockwise" and path == H100)


def test_an_amax_pass_reads_what_the_cast_reads():
    n = 1 << 20
    amax = kernels.cost(Kernel.make(Family.QUANTIZE, Dtype.FP8, Pass.FWD, Quantize.AMAX, elements=n, scales=1))
    cast = kernels.cost(Kernel.make(Family.QUANTIZE, Dtype.FP8, Pass.FWD, Quantize.CAST, elements=n, scales=1))
    both = kernels.cost(Kernel.make(Family.QUANTIZE, Dtype.FP8, Pass.FWD, Quantize.BOTH, elements=n, scales=1))
    assert amax.bytes == 2 * n and cast.bytes == 3 * n + 4 and both.bytes == 4 * n + 4


def test_current_scaling_costs_one_more_read_per_operand():
    delayed = llmp.predict(_spec(H100, "fp8", "delayed"), residuals=None)
    current = llmp.predict(_spec(H100, "fp8", "current"), residuals=None)
    assert current.total_s > delayed.total_s


def test_fp8_is_faster_than_bf16_and_nvfp4_faster_than_mxfp8_on_b200_without_residuals():
    t = {p: llmp.predict(_spec(B200, p, None), residuals=None).total_s for p in ("bf16", "mxfp8", "nvfp4")}
    assert t["nvfp4"] < t["mxfp8"] < t["bf16"]


# -- memory -------------------------------------------------------------------------------------
@pytest.mark.parametrize("path,precision,scaling,per_weight", [
    (H100, "fp8", "delayed", 2),                 # rowwise + transpose
    (H100, "fp8", "current", 2),
    (B200, "fp8", "delayed", 1),                 # one copy serves both views
    (B200, "mxfp8", None, 2 + 2 / 32),           # two differently blocked copies, E8M0 scales
    (B200, "nvfp4", None, 2 * 0.5 + 2 / 256),    # two FP4 copies, one E4M3 scale per 16x16
])
def test_memory_grows_by_the_documented_weight_copies(path, precision, scaling, per_weight):
    bf16 = llmp.predict(_spec(path, "bf16", None), residuals=None).memory
    spec = _spec(path, precision, scaling)
    low = llmp.predict(spec, residuals=None).memory
    ctx = Context.of(spec, structure_of(spec))
    assert ctx.recipe is not None and ctx.recipe.weight_copy_bytes() == pytest.approx(per_weight)
    lowp = lowp_weights(ctx, structure_of(spec).kinds[0])
    elements, modules = lowp.total, lowp.modules
    layers = spec.model.layers / (spec.parallel.pp * spec.parallel.vp) * spec.parallel.vp  # per rank, even split
    history = 4 * AMAX_HISTORY * AMAX_TENSORS * modules * layers if scaling == "delayed" else 0
    assert low.weights - bf16.weights == pytest.approx(layers * elements * per_weight + history)
    assert (low.grads, low.optimizer) == (bf16.grads, bf16.optimizer)
    assert low.activations < bf16.activations  # GEMM inputs kept quantised: tests/unit/compose/test_lowp_activations.py


# -- FP8 parameters (fp8_param_gather) -----------------------------------------------------------
def _small(precision: str = "fp8", *, gather: bool = True, gpu: str = "dgx_h100", moe: bool = False,
           extra: str = ""):
    """A small Llama on one node, tp 2, ZeRO-1 over dp 4 (a MoE variant: 4 experts, ep 2)."""
    moe_block = "moe { experts = 4  top_k = 2 }" if moe else ""
    ep = "ep = 2" if moe else ""
    return llmp.loads(f"""
use "{gpu}"
model m {{ arch = llama  layers = 4  hidden = 2048  heads = 16  kv_heads = 4  ffn_hidden = 5632
          vocab = 32000  seq_len = 2048  {moe_block} }}
cluster c {{ node = {gpu}  nodes = 1 }}
train {{ precision = {precision}  fp8_param_gather = {str(gather).lower()}  global_batch = 32  stack = megatron_core
        {extra}  parallel {{ tp = 2  sequence_parallel = true  zero = 1  {ep} }} }}
""", filename="examples/x.llmp")


def _gathers(spec) -> dict[str, float]:
    return {op.name: float(op.work.bytes) for op in llmp.analytic.ops(spec) if "param_all_gather" in op.name}


@pytest.mark.parametrize("gpu,precision,per_weight", [
    ("dgx_h100", "fp8", 2),          # Float8Tensor data + its transpose (Hopper)
    ("dgx_b200", "fp8", 1),          # data only: Blackwell reads FP8 columnwise
    ("dgx_b200", "mxfp8", 2 + 2 / 32),  # rowwise and columnwise MXFP8 data, E8M0 scales
])
def test_fp8_parameters_replace_the_bf16_weights_and_keep_the_optimizer_state(gpu, precision, per_weight):
    with_params = _small(precision, gpu=gpu)
    without = _small(precision, gather=False, gpu=gpu)
    bf16 = _small("bf16", gather=False, gpu=gpu)
    mem = {name: llmp.predict(s, residuals=None).memory for name, s in
           (("params", with_params), ("copies", without), ("bf16", bf16))}
    ctx = Context.of(with_params, structure_of(with_params))
    lowp = lowp_weights(ctx, structure_of(with_params).kinds[0])
    layers = with_params.model.layers
    history = 4 * AMAX_HISTORY * AMAX_TENSORS * lowp.modules * layers if precision == "fp8" else 0
    # each low-precision weight: its quantised copies in place of the 2-byte BF16 parameter
    assert mem["params"].weights - mem["bf16"].weights == pytest.approx(layers * lowp.total * (per_weight - 2)
                                                                         + history)
    assert mem["params"].weights < mem["copies"].weights
    assert mem["copies"].weights - mem["params"].weights == pytest.approx(2 * layers * lowp.total)
    for part in ("grads", "optimizer", "logits"):  # FP32 main params and moments unchanged
        assert getattr(mem["params"], part) == getattr(mem["copies"], part) == getattr(mem["bf16"], part)
    assert mem["params"].activations == mem["copies"].activations < mem["bf16"].activations  # quantised GEMM inputs


@pytest.mark.parametrize("moe", [False, True])
def test_the_zero1_parameter_all_gather_moves_one_byte_per_fp8_weight(moe):
    with_params, without = _small(moe=moe), _small(gather=False, moe=moe)
    ctx = Context.of(with_params, structure_of(with_params))
    lowp = lowp_weights(ctx, structure_of(with_params).kinds[0])
    layers = with_params.model.layers
    before, after = _gathers(without), _gathers(with_params)
    assert before.keys() == after.keys() and before
    # the FP8 weights travel at 1 byte instead of 2; embedding, norms, router and head stay BF16
    assert before["step.dense_param_all_gather"] - after["step.dense_param_all_gather"] == pytest.approx(
        layers * lowp.dense)
    if moe:
        assert lowp.expert > 0
        assert before["step.expert_param_all_gather"] - after["step.expert_param_all_gather"] == pytest.approx(
            layers * lowp.expert)
    # the gradient reduce-scatter keeps the gradients' dtype
    grads = {n: op.work.bytes for n, op in ((o.name, o) for o in llmp.analytic.ops(without))
             if "grad_reduce_scatter" in n}
    assert grads == {n: op.work.bytes for n, op in ((o.name, o) for o in llmp.analytic.ops(with_params))
                     if "grad_reduce_scatter" in n}


def test_only_fp8_parameters_travel_at_one_byte_per_weight():
    """Dense FP8 weights are most of a Llama's parameters: the all-gather falls by nearly half."""
    before, after = _gathers(_small(gather=False)), _gathers(_small())
    ratio = after["step.dense_param_all_gather"] / before["step.dense_param_all_gather"]
    assert 0.5 < ratio < 0.75


def test_mxfp8_parameters_are_gathered_in_bf16():
    assert _gathers(_small("mxfp8", gpu="dgx_b200")) == _gathers(_small("mxfp8", gather=False, gpu="dgx_b200"))


@pytest.mark.parametrize("precision,extra,message", [
    ("bf16", "", "fp8_param_gather = true but precision = bf16"),
    ("nvfp4", "", "--fp4-param-gather for nvfp4 is not modelled"),
    ("fp8", "fp8_scaling = blockwise", "with fp8_scaling = blockwise"),
    ("fp8", "master_weights = false", "master_weights = false"),
])
def test_fp8_param_gather_outside_what_it_needs_is_refused_with_the_fix(precision, extra, message):
    gpu = "dgx_b200" if precision == "nvfp4" else "dgx_h100"
    with pytest.raises(SpecError, match=message) as err:
        _small(precision, gpu=gpu, extra=extra)
    assert "remove fp8_param_gather" in (err.value.hint or "") or "set master_weights" in (err.value.hint or "")


@pytest.mark.parametrize("zero", ["none", "3"])
def test_fp8_param_gather_needs_the_distributed_optimizer(zero):
    with pytest.raises(SpecError, match=f"parallel.zero = {zero}") as err:
        llmp.load(H100, overrides=["train.precision=fp8", "train.fp8_param_gather=true", f"parallel.zero={zero}"])
    assert "set parallel.zero = 1" in (err.value.hint or "")


# -- refusals -----------------------------------------------------------------------------------
@pytest.mark.parametrize("path,precision,names", [
    (H100, "nvfp4", "nvfp4"), (H100, "mxfp8", "mxfp8"),
    ("examples/gpt3_175b_dgx_a100.llmp", "fp8", "fp8"),
])
def test_a_gpu_without_the_formats_tensor_cores_refuses_it(path, precision, names):
    with pytest.raises(SpecError, match=f"no {names} peak") as err:
        llmp.load(path, overrides=[f"train.precision={precision}"])
    assert "use precision =" in (err.value.hint or "")


def test_a_scaling_recipe_needs_precision_fp8():
    with pytest.raises(SpecError, match="only fp8 takes a scaling recipe"):
        llmp.load(H100, overrides=["train.fp8_scaling=current"])
    with pytest.raises(SpecError, match="only fp8 takes a scaling recipe"):
        llmp.load(B200, overrides=["train.fp8_scaling=blockwise"])


def test_an_unknown_scaling_recipe_is_a_spec_error():
    with pytest.raises(SpecError):
        llmp.load(H100, overrides=["train.precision=fp8", "train.fp8_scaling=tensorwise"])
