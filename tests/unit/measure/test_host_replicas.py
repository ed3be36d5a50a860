"""The torch replicas of each stack's layer code path (llmp.measure.host): they run every pass and
compute what a layer computes."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from llmp.measure import host  # noqa: E402


@pytest.mark.parametrize("style", sorted(host.STYLES))
def test_each_style_runs_its_passes(style):
    # Timed on a shared machine: only that each pass ran and took time (the figures themselves are
    # measured by benchmarks/host_costs.py, not asserted here).
    t = host.time_style(style, calls=3, repeats=1)
    assert t.style == style and min(t.fwd, t.bwd, t.full_fwd, t.full_bwd) > 0


def test_the_replicas_compute_what_a_layer_computes():
    # Host replicas, but real layers: same output shape as input, gradients reach the input.
    for style, make in host.STYLES.items():
        layer = make(host.Shape())
        x = host._input(style, host.Shape())
        y = layer.checkpointed(x)
        assert y.shape == x.shape
        y.sum().backward()
        assert x.grad is not None and torch.isfinite(x.grad).all()


def test_megatrons_fused_softmax_path_is_the_one_taken():
    s = host.Shape()
    assert host._FusedScaleMaskSoftmax.available(s.batch, s.heads, s.seq, s.seq)
