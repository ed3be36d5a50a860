"""predict(): totals, breakdown, band, residual corrections, closed form and provenance."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import sympy as sp
from compose_helpers import predict
from strategies_analytic import gpt, h100, llama, make_spec

from llmp.analytic import compile as compile_exprs
from llmp.analytic import cost
from llmp.analytic.correction import Correction
from llmp.analytic.kernels import Family, Kernel
from llmp.compose.closed_form import step_time_expr
from llmp.compose.predictor import ROOFLINE_ONLY, model_flops_per_token
from llmp.compose.trace import trace
from llmp.errors import InfeasibleError, ResidualSchemaError
from llmp.spec.spec import Schedule


def test_uniform_pipeline_bubble_matches_1f1b():
    # A tiny vocabulary makes embedding and head negligible; no TP/DP and fast links leave the
    # pipeline sends negligible: the bubble is then (pp - 1) / (m + pp - 1) of the pipeline.
    model = llama(layers=16, hidden=2048, heads=16, kv_heads=16, ffn=8192, vocab=64, seq_len=2048)
    pp, m = 4, 12
    spec = make_spec(model, gpus_per_node=4, global_batch=m, pp=pp, device=h100(launch_overhead=0.0),
                     cluster_kw=dict(intra_bw=1e18, intra_lat=0.0))
    p = predict(spec)
    pipeline = p.step_time_s - p.optimizer_s
    assert p.bubble_s / pipeline == pytest.approx((pp - 1) / (m + pp - 1), rel=0.02)


def test_uneven_last_stage_sets_the_pace():
    # A large vocabulary puts a heavy head on the last stage: the other stages wait on it.
    even = predict(make_spec(llama(layers=4, hidden=1024, heads=8, kv_heads=8, ffn=4096, vocab=64, seq_len=2048),
                             gpus_per_node=2, pp=2, global_batch=8))
    heavy = predict(make_spec(llama(layers=4, hidden=1024, heads=8, kv_heads=8, ffn=4096, vocab=256000,
                                    seq_len=2048), gpus_per_node=2, pp=2, global_batch=8))
    assert heavy.bubble_s / heavy.step_time_s > 2 * even.bubble_s / even.step_time_s


class ConstantResiduals:
    """A residual model of one constant factor per family (a real Residuals implementation)."""

    id = "constant-test"

    def __init__(self, factor: float, low: float, high: float, families=(Family.GEMM,)):
        self.f, self.lo, self.hi, self.families = factor, low, high, families

    def correct(self, items, spec):
        hit = np.array([isinstance(k, Kernel) and k.family in self.families for k in items])
        ones = np.ones(len(items))
        return Correction(factor=np.where(hit, self.f, ones), low=np.where(hit, self.lo, ones),
                          high=np.where(hit, self.hi, ones), covered=hit)


def test_a_uniform_factor_scales_the_whole_step_and_the_band_runs_through_the_schedule():
    spec = make_spec(gpt(layers=4), tp=2, pp=2, sequence_parallel=True, global_batch=16)
    every = tuple(Family)
    base = predict(spec)
    p = predict(spec, ConstantResiduals(2.0, 1.5, 3.0, families=every))
    # every kernel slowed: collectives are not, so the step is slower but less than 2x
    assert base.step_time_s < p.step_time_s < 2 * base.step_time_s
    assert p.band[0] < p.step_time_s < p.band[1]
    assert p.provenance.residuals == "constant-test"
    assert "all_reduce" in p.provenance.uncorrected or "reduce_scatter" in p.provenance.uncorrected
    assert "gemm" not in p.provenance.uncorrected


def test_without_residuals_the_provenance_says_roofline_only():
    p = predict(make_spec())
    assert p.provenance.residuals == ROOFLINE_ONLY
    assert "gemm" in p.provenance.uncorrected


def test_a_malformed_correction_is_rejected():
    class Bad(ConstantResiduals):
        def correct(self, items, spec):
            c = super().correct(items, spec)
            return dataclasses.replace(c, low=c.factor * 2)

    with pytest.raises(ResidualSchemaError):
        predict(make_spec(), Bad(2.0, 1.0, 3.0))


def test_mfu_follows_the_palm_convention():
    spec = make_spec()
    p = predict(spec)
    m = spec.model
    peak = spec.cluster.gpu.peak_flops[spec.train.precision.compute_dtype]
    tokens = spec.train.global_batch * m.seq_len
    assert p.mfu == pytest.approx(tokens * float(model_flops_per_token(spec)) / (p.step_time_s * 8 * peak))
    assert 0 < p.hfu <= 1 and 0 < p.mfu <= 1.05
    assert p.tokens_per_s == pytest.approx(tokens / p.step_time_s)


def test_oom_is_reported_not_raised():
    big = llama(layers=80, hidden=8192, heads=64, kv_heads=8, ffn=28672)
    p = predict(make_spec(big, gpus_per_node=1, global_batch=1))
    assert p.memory.oom and p.memory.total > p.memory.capacity
    assert p.to_dict()["oom"] is True


def test_an_impossible_layout_raises_infeasible():
    with pytest.raises(InfeasibleError, match="not divisible"):
        predict(make_spec(llama(layers=6, hidden=1024, heads=8, kv_heads=8, ffn=4096, vocab=1000, seq_len=512),
                          pp=4, gpus_per_node=4, global_batch=8))


def test_free_symbols_need_values():
    from llmp.errors import SpecError
    spec = make_spec()
    spec = dataclasses.replace(spec, model=dataclasses.replace(spec.model, hidden=sp.Symbol("hidden", integer=True,
                                                                                               positive=True)))
    with pytest.raises(SpecError, match="hidden"):
        predict(spec)


@pytest.mark.parametrize("schedule", [Schedule.GPIPE, Schedule.ONE_F_ONE_B])
def test_closed_form_with_pipeline_and_no_data_parallelism(schedule):
    spec = make_spec(gpt(layers=8), gpus_per_node=4, pp=4, global_batch=8, schedule=schedule)
    value = float(compile_exprs([step_time_expr(spec)])(cost(spec).point)[0])
    assert value == pytest.approx(predict(spec).step_time_s, rel=1e-9)


def test_closed_form_is_differentiable_in_any_field():
    spec = make_spec(gpt(layers=2), tp=2)
    expr = step_time_expr(spec)
    point = cost(spec).point
    bw = next(s for s in expr.free_symbols if s.name == "gpu_mem_bandwidth")
    assert float(compile_exprs([sp.diff(expr, bw)])(point)[0]) < 0   # more bandwidth, less time


def test_to_dict_has_the_cli_contract_keys_and_is_json():
    p = predict(make_spec(tp=2, pp=2, global_batch=8))
    d = json.loads(json.dumps(p.to_dict()))
    for key in ("step_time_s", "tokens_per_s", "mfu", "memory_per_gpu_bytes", "breakdown", "band", "provenance"):
        assert key in d
    assert d["memory_per_gpu_bytes"] == p.memory.total
    assert "step time" in p.to_table()


def test_trace_has_a_track_per_stage_and_events_inside_the_step():
    p = predict(make_spec(pp=2, tp=2, global_batch=8))
    t = trace(p)
    events = [e for e in t["traceEvents"] if e["ph"] == "X"]
    assert {e["pid"] for e in events} == {0, 1}
    assert max(e["ts"] + e["dur"] for e in events) == pytest.approx(p.step_time_s * 1e6, rel=1e-9)
    assert {e["tid"] for e in events} <= {0, 1}


def test_require_fit_raises_infeasible_for_sweeps():
    big = llama(layers=80, hidden=8192, heads=64, kv_heads=8, ffn=28672)
    with pytest.raises(InfeasibleError, match="per GPU"):
        predict(make_spec(big, gpus_per_node=1, global_batch=1)).require_fit()
    small = predict(make_spec())
    assert small.require_fit() is small
