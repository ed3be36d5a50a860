"""FlashAttention 1.x and the Triton kernel: FlashAttention-2's algorithm at its published relative rate."""

from __future__ import annotations

import pytest

from llmp.analytic import kernels, roofline
from llmp.analytic.kernels import AttentionKernel, Family, Kernel, Pass
from llmp.dsl import catalog
from llmp.hardware import published
from llmp.hardware.spec import Dtype
from llmp.residuals import features

A100 = catalog.gpu("a100_sxm4_80gb")


def attention(variant: str, *, head_dim: int = 128, causal: int = 1, pass_: Pass = Pass.FWD) -> Kernel:
    return Kernel.make(Family.ATTENTION, Dtype.BF16, pass_, variant, batch=4, heads=32, kv_heads=32, seq_q=8192,
                       seq_kv=8192, head_dim=head_dim, head_dim_v=head_dim, window=8192, causal=causal, flash=1)


@pytest.mark.parametrize("variant", ["flash1", "triton"])
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("causal", [0, 1])
def test_the_ceiling_is_flash2s_times_the_published_relative_rate(variant, head_dim, causal):
    slow, fast = attention(variant, head_dim=head_dim, causal=causal), attention("", head_dim=head_dim, causal=causal)
    cost = kernels.cost(slow)
    assert cost == kernels.cost(fast)  # the same work and traffic
    (rate, which), (fa2, fa2_which) = roofline.ceiling(slow, True, A100), roofline.ceiling(fast, True, A100)
    assert which is fa2_which is roofline.Ceiling.FLASH_ATTENTION
    assert rate / fa2 == pytest.approx(published.relative_rate(variant, head_dim, bool(causal)))


def test_relative_rates_read_from_the_figures():
    # The figures put both at 0.41-0.74 of FlashAttention-2 (A100 and H100, fwd+bwd), lowest at head dim 128.
    for variant in ("flash1", "triton"):
        for head_dim in (64, 128):
            for causal in (False, True):
                assert 0.4 <= published.relative_rate(variant, head_dim, causal) <= 0.7
    assert published.relative_rate("flash1", 128, False) < published.relative_rate("flash1", 64, False)
    assert published.relative_rate("triton", 100, True) == published.relative_rate("triton", 128, True)
    every = published.relative_rate("flash1", None, True)
    assert published.relative_rate("flash1", 128, True) <= every <= published.relative_rate("flash1", 64, True)


def test_the_store_reads_them_as_flash2_with_no_column_of_their_own():
    assert not {"is_flash1", "is_triton"} & set(features.FEATURES["attention"])
    slow = attention(AttentionKernel.TRITON, pass_=Pass.BWD)
    assert kernels.algorithm(slow) == attention("", pass_=Pass.BWD)
    assert kernels.algorithm(attention("cudnn")) == attention("cudnn")


def test_the_slower_kernel_is_never_faster_on_any_shape():
    for seq in (512, 2048, 16384):
        for head_dim in (64, 96, 128):
            fast = Kernel.make(Family.ATTENTION, Dtype.BF16, Pass.FWD, "", batch=1, heads=16, kv_heads=16,
                               seq_q=seq, seq_kv=seq, head_dim=head_dim, head_dim_v=head_dim, window=seq, causal=1,
                               flash=1)
            for variant in ("flash1", "triton"):
                slow = kernels.algorithm(fast).__class__(fast.family, fast.dims, fast.dtype, fast.pass_, variant)
                assert features.roofline_seconds(slow, A100)[1] > features.roofline_seconds(fast, A100)[1]


def test_stacks_say_which_of_them_they_launch():
    from pathlib import Path

    from llmp import dsl
    from llmp.errors import SpecError

    example = Path(__file__).resolve().parents[3] / "examples" / "llama3_8b_dgx_h100.llmp"
    for stack in ("megatron_core", "nemo"):  # TransformerEngine has no Triton backend
        with pytest.raises(SpecError, match="launches only"):
            dsl.load(example, overrides=[f"train.stack={stack}", "train.attention=triton"])
    for stack, kernel in (("composer", "triton"), ("megatron_core", "flash1")):
        spec = dsl.load(example, overrides=[f"train.stack={stack}", f"train.attention={kernel}"])
        assert spec.train.attention == kernel
