"""The step-time band: stated level, correlated family errors, roofline widths, the composition term."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from compose_helpers import predict
from strategies_analytic import gpt, llama, make_spec, with_train

from llmp.analytic.correction import Correction
from llmp.analytic.kernels import Family, Kernel
from llmp.compose import band
from llmp.compose.band import CompositionTerm
from llmp.compose.composition_estimate import Observed, estimate_term
from llmp.compose.predictor import priced
from llmp.errors import InputError, ResidualSchemaError

NO_TERM = CompositionTerm(below=0.0, above=0.0, within=0.0, source="none")


class Widths:
    """A real Residuals implementation: factor 1 everywhere, a band of +-q (log) on the given families."""

    id = "widths-test"

    def __init__(self, q: dict[Family, float], level: float = 0.9):
        self.q, self.level = q, level

    def correct(self, items, spec):
        q = np.array([self.q.get(k.family, 0.0) if isinstance(k, Kernel) else 0.0 for k in items])
        ones = np.ones(len(items))
        return Correction(factor=ones, low=np.exp(-q), high=np.exp(q), covered=np.ones(len(items), bool),
                          level=self.level)


def zero_shot(spec, residuals, term=NO_TERM, level=0.8):
    p = priced(spec, residuals)
    errors = band.op_errors(p.graph, p.correction, spec.cluster.gpu.id)
    return p, band.zero_shot(p.step_time, p.times, errors, term, level)


def test_normal_draws_are_latin_hypercube_columns_and_reproducible():
    z = band.normal_draws(200, 3)
    assert z.shape == (200, 3)
    for j in range(3):  # every stratum exactly once
        assert np.allclose(np.sort(z[:, j]), np.sort(z[:, 0]))
    assert abs(z.mean()) < 1e-12 and np.std(z[:, 0]) == pytest.approx(1.0, abs=0.02)
    assert np.array_equal(z, band.normal_draws(200, 3))
    assert abs(np.corrcoef(z[:, 0], z[:, 1])[0, 1]) < 0.2


def test_level_conversion_and_checks():
    assert band.z_of(0.9) == pytest.approx(1.6449, abs=1e-4)
    assert band.z_of(0.8) == pytest.approx(1.2816, abs=1e-4)
    for bad in (1.0, 0.3, float("nan"), "0.8"):
        with pytest.raises(InputError):
            band.check_level(bad)


def test_without_any_error_the_band_is_the_point():
    spec = make_spec(gpt(layers=2), tp=2)
    p, b = zero_shot(spec, Widths({}))
    t = p.step_time(p.times)
    assert b.low == pytest.approx(t) and b.high == pytest.approx(t)


def test_the_composition_term_alone_gives_its_own_quantiles():
    spec = make_spec(gpt(layers=2), tp=2)
    term = CompositionTerm(below=0.1, above=0.4, within=0.1, source="test")
    p, b = zero_shot(spec, Widths({}), term)
    t = p.step_time(p.times)
    z = band.z_of(0.8)
    assert math.log(b.low / t) == pytest.approx(-0.1 * z, rel=0.02)
    assert math.log(b.high / t) == pytest.approx(0.4 * z, rel=0.02)
    (comp,) = [x for x in b.terms if x.name == "composition"]
    assert comp.share == pytest.approx(1.0)


def test_one_family_shares_one_error_across_every_layer():
    # Every kernel 1.5 (log) wide: if each op drew its own error, a deeper model would average them
    # away; drawn once per family, the band is as wide for 2 layers as for 16.
    q = {f: 0.5 for f in Family}
    widths = []
    for layers in (2, 16):
        # Layers replayed as CUDA graphs: a model this small is otherwise paced by the host thread,
        # whose time has no error to draw, and the device's band would not show.
        spec = make_spec(llama(layers=layers, hidden=1024, heads=8, kv_heads=8, ffn=4096, vocab=256, seq_len=1024),
                         gpus_per_node=1, global_batch=4)
        _, b = zero_shot(with_train(spec, cuda_graphs=True), Widths(q))
        widths.append(math.log(b.high / b.low))
    assert widths[0] == pytest.approx(widths[1], rel=0.1)
    # Hundreds of ops each drawing their own error would average to a band under 0.05 wide; the
    # families' own (independent) errors leave most of one family's 0.78.
    assert widths[1] > 0.35


def test_a_wider_family_takes_a_larger_share_and_a_higher_level_a_wider_band():
    spec = make_spec(gpt(layers=2), tp=2)
    _, narrow = zero_shot(spec, Widths({Family.GEMM: 0.1, Family.NORM: 0.1}))
    _, wide = zero_shot(spec, Widths({Family.GEMM: 0.6, Family.NORM: 0.1}))
    share = {t.name: t.share for t in wide.terms}
    assert wide.high / wide.low > narrow.high / narrow.low
    assert share["gemm"] > 0.9 and sum(share.values()) == pytest.approx(1.0)
    _, at95 = zero_shot(spec, Widths({Family.GEMM: 0.6}), level=0.95)
    assert at95.high / at95.low > wide.high / wide.low and at95.level == 0.95


def test_a_store_level_is_converted_not_reused():
    # The same interval read at 50% instead of 90% is a wider error (sigma = q / z(level)).
    spec = with_train(make_spec(gpt(layers=2), tp=2), cuda_graphs=True)  # the device paces the step
    _, at90 = zero_shot(spec, Widths({Family.GEMM: 0.3}, level=0.9))
    _, at50 = zero_shot(spec, Widths({Family.GEMM: 0.3}, level=0.5))
    ratio = math.log(at50.high / at50.low) / math.log(at90.high / at90.low)
    assert ratio == pytest.approx(band.z_of(0.9) / band.z_of(0.5), rel=0.05)


def test_families_no_store_serves_are_named_and_as_wide_as_the_roofline_error():
    spec = make_spec(gpt(layers=2), tp=2)
    p = predict(spec)  # the bare roofline: every family uncovered
    b = p.uncertainty
    assert set(b.uncovered) == {op.family for op in p.ops} and b.low < b.high
    widths = band.roofline_widths(spec.cluster.gpu.id)
    gemm = next(t for t in b.terms if t.name == "gemm")
    assert gemm.kind == "roofline" and gemm.sigma_above == pytest.approx(widths["gemm"].sigma)
    assert "roofline's measured error" in gemm.source
    optimizer = next(t for t in b.terms if t.name == "optimizer")  # no GPU measured it
    widest = max((w for f, w in widths.items() if f in {k.value for k in Family}), key=lambda w: w.sigma)
    assert optimizer.sigma_above == pytest.approx(widest.sigma) and "no public measurement" in optimizer.source


def test_a_device_store_overrides_the_pooled_roofline_error():
    own = band.roofline_widths("h100_sxm5_80gb")
    pooled = band.roofline_widths("no_such_gpu")
    assert own["gemm"].q != pooled["gemm"].q and "h100_sxm5_80gb" in own["gemm"].source
    assert "cross-GPU" in pooled["gemm"].source


def test_prediction_json_and_table_state_the_level_and_the_sources():
    spec = make_spec(gpt(layers=2), tp=2)
    p = predict(spec, level=0.9)
    d = json.loads(json.dumps(p.to_dict()))
    assert d["band_level"] == 0.9 and d["band"] == [p.band[0], p.band[1]]
    detail = d["band_detail"]
    assert detail["method"] == "zero-shot" and detail["uncovered"]
    assert {t["kind"] for t in detail["terms"]} >= {"roofline", "composition"}
    assert sum(t["share"] for t in detail["terms"]) == pytest.approx(1.0)
    assert "(90%)" in p.to_table().splitlines()[0]


def test_the_shipped_term_is_read_strictly():
    term = band.composition_term()
    assert term.above >= 0 and term.below >= 0 and "leave-one-source-out" in term.source
    good = term.to_dict()
    assert CompositionTerm.from_dict(good, "x") == term
    for bad in ({**good, "above": -1}, {**good, "below": float("nan")}, {**good, "format": "other"},
                {k: v for k, v in good.items() if k != "within"}, {**good, "above": True}):
        with pytest.raises(ResidualSchemaError):
            CompositionTerm.from_dict(bad, "x")


def _synthetic(source: str, n: int, below: float, above: float, rng: np.random.Generator) -> list[Observed]:
    """Measurements whose only error is a two-piece normal (below, above) around a point of 1 s."""
    z = band.normal_draws(band.DRAWS, 1, seed=1)[:, 0]
    e = rng.standard_normal(n)
    y = np.where(e < 0, below * e, above * e)
    return [Observed(point_s=1.0, measured_s=float(np.exp(v)), log_draws=np.zeros(band.DRAWS), term_draws=z,
                     source=source, group=source) for v in y]


def test_estimate_term_recovers_the_widths_and_covers_fresh_measurements():
    rng = np.random.default_rng(0)
    rows = [r for s in range(8) for r in _synthetic(f"s{s}", 60, 0.1, 0.4, rng)]
    term = estimate_term(rows, source="synthetic")
    assert term.below == pytest.approx(0.1, rel=0.3) and term.above == pytest.approx(0.4, rel=0.3)
    fresh = _synthetic("new", 2000, 0.1, 0.4, rng)
    assert np.mean([r.inside(term, 0.8) for r in fresh]) == pytest.approx(0.8, abs=0.05)
    assert term.sources == tuple(f"s{s}" for s in range(8))


def test_estimate_term_weighs_sources_equally():
    # One source with many runs a tiny error must not shrink the band that three others need.
    rng = np.random.default_rng(1)
    others = [r for s in range(3) for r in _synthetic(f"s{s}", 100, 0.0, 0.5, rng)]
    big = _synthetic("big", 400, 0.0, 0.01, rng)
    with_big = estimate_term(others + big, source="x")
    assert with_big.above > 0.3
    z = band.normal_draws(band.DRAWS, 1)[:, 0]
    rows = [Observed(point_s=1.0, measured_s=m, log_draws=np.zeros(band.DRAWS), term_draws=z, source="a", group="g")
            for m in (1.0, 1.1, 1.2, 1.3)]
    assert estimate_term(rows, source="x").within == pytest.approx(float(np.std(np.log([1, 1.1, 1.2, 1.3]),
                                                                                       ddof=1)))


class OutOfDomain(Widths):
    """A real Residuals implementation whose GEMMs all lie outside its domain: their interval is
    ``OUT_OF_DOMAIN_WIDEN`` times as wide and flagged, as ``llmp.residuals.store`` does."""

    def correct(self, items, spec):
        from llmp.residuals.store import OUT_OF_DOMAIN_WIDEN

        gemm = np.array([isinstance(k, Kernel) and k.family is Family.GEMM for k in items])
        q = np.array([self.q.get(k.family, 0.0) if isinstance(k, Kernel) else 0.0 for k in items])
        q = np.where(gemm, OUT_OF_DOMAIN_WIDEN * q, q)
        return Correction(factor=np.ones(len(items)), low=np.exp(-q), high=np.exp(q),
                          covered=np.ones(len(items), bool), out_of_domain=gemm, level=self.level)


def test_the_parts_say_how_much_of_the_width_is_out_of_domain_widening():
    spec = make_spec(llama(layers=4, hidden=2048, heads=16, kv_heads=8, ffn=5632, vocab=32000, seq_len=2048))
    term = CompositionTerm(below=0.05, above=0.2, within=0.05, source="test")
    _, b = zero_shot(spec, OutOfDomain({Family.GEMM: 0.1, Family.NORM: 0.1}), term)
    parts = b.parts
    assert sum(parts.values()) == pytest.approx(1.0)
    gemm = next(t for t in b.terms if t.name == "gemm")
    # every GEMM is out of domain, twice as wide: three quarters of its variance is the widening
    assert gemm.out_of_domain == pytest.approx(0.75)
    assert parts["out_of_domain"] == pytest.approx(0.75 * gemm.share)
    assert parts["composition"] == pytest.approx(next(t.share for t in b.terms if t.name == "composition"))
    _, inside = zero_shot(spec, Widths({Family.GEMM: 0.1, Family.NORM: 0.1}), term)
    assert "out_of_domain" not in inside.parts
    detail = json.loads(json.dumps(b.to_dict()))
    assert detail["parts"] == pytest.approx(parts) and all("out_of_domain" in t for t in detail["terms"])
