"""Kernel variants on generated shapes: an unfused norm moves more bytes in more launches for the
same FLOPs, an unfused cross entropy moves more bytes, and a causal fused softmax does about half
the work of the full square."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from residual_helpers import norm_kernel as _norm

from llmp.analytic import kernels
from llmp.analytic.kernels import Family, Fusion, Kernel, Pass, SoftmaxKind
from llmp.hardware.spec import Dtype

sizes = st.integers(min_value=1, max_value=1 << 14)
passes = st.sampled_from(list(Pass))


@given(tokens=sizes, hidden=sizes, pass_=passes)
def test_unfused_norm_moves_more_bytes_in_more_launches_for_the_same_flops(tokens, hidden, pass_):
    fused = kernels.cost(_norm(Fusion.FUSED, pass_, tokens, hidden))
    unfused = kernels.cost(_norm(Fusion.UNFUSED, pass_, tokens, hidden))
    assert unfused.flops == fused.flops
    assert unfused.bytes > fused.bytes
    assert unfused.launches > fused.launches == 1


@given(tokens=sizes, vocab=sizes, pass_=passes)
def test_unfused_cross_entropy_moves_more_bytes(tokens, vocab, pass_):
    def ce(variant: str) -> kernels.KernelCost:
        return kernels.cost(Kernel.make(Family.CROSS_ENTROPY, Dtype.BF16, pass_, variant, tokens=tokens, vocab=vocab))

    assert ce(Fusion.UNFUSED).bytes > ce(Fusion.FUSED).bytes
    assert ce(Fusion.UNFUSED).flops == ce(Fusion.FUSED).flops


@given(rows=sizes, cols=st.integers(min_value=2, max_value=1 << 14), pass_=passes)
def test_causal_fused_softmax_does_about_half_the_work_of_the_full_square(rows, cols, pass_):
    def sm(variant: str) -> kernels.KernelCost:
        return kernels.cost(Kernel.make(Family.SOFTMAX, Dtype.FP16, pass_, variant, rows=rows, cols=cols))

    full, causal = sm(SoftmaxKind.PLAIN), sm(SoftmaxKind.CAUSAL_FUSED)
    assert causal.flops <= full.flops / 2
    assert causal.bytes < full.bytes
