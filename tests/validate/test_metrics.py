"""Published metric ↔ step time: each conversion is the source's definition, inverted exactly."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmp.validate import metrics
from llmp.validate.metrics import Metric, StepContext, megatron_sc21_flops, metric_value, step_time


def test_tokens_per_gpu_is_global_tokens_over_gpu_throughput():
    # llm-foundry MPT-70b on 512 H100: 1007 tokens/s/GPU, global batch 4096 x 2048 tokens.
    ctx = StepContext(num_gpus=512, global_batch=4096, seq_len=2048)
    assert step_time(Metric.TOKENS_PER_SEC_PER_GPU, 1007, ctx) == pytest.approx(4096 * 2048 / (1007 * 512))
    # The same run's tokens/s (515636) gives the same step within the table's rounding.
    assert step_time(Metric.TOKENS_PER_SEC, 515636, ctx) == pytest.approx(16.27, rel=1e-3)


def test_samples_per_sec_agrees_with_the_logged_iteration_time():
    # BLOOM-176B log line: 104.70 s per iteration, 19.561 samples/s, global batch 2048.
    ctx = StepContext(num_gpus=384, global_batch=2048, seq_len=2048)
    assert step_time(Metric.SAMPLES_PER_SEC, 19.561, ctx) == pytest.approx(104.70, rel=2e-4)
    assert step_time(Metric.ITERATION_TIME_MS, 1121, ctx) == pytest.approx(1.121)


def test_sc21_flop_formula_matches_the_paper_aggregate():
    # Table 1, 1.7B: 137 TFLOP/s per GPU on 32 GPUs is reported as 4.4 PFLOP/s in aggregate.
    flops = megatron_sc21_flops(global_batch=512, seq_len=2048, layers=24, hidden=2304, vocab=51200)
    expected = 96 * 512 * 2048 * 24 * 2304**2 * (1 + 2048 / (6 * 2304) + 51200 / (16 * 24 * 2304))
    assert flops == pytest.approx(expected, rel=1e-12)
    ctx = StepContext(num_gpus=32, flops_per_step=flops)
    seconds = step_time(Metric.ACHIEVED_TFLOPS_PER_GPU, 137, ctx)
    assert flops / seconds / 1e15 == pytest.approx(4.4, abs=0.05)
    assert metric_value(Metric.ACHIEVED_TFLOPS_PER_GPU, seconds, ctx) == pytest.approx(137)


def test_training_days_use_300b_tokens():
    ctx = StepContext(num_gpus=384, global_batch=1536, seq_len=2048)
    seconds = step_time(Metric.TRAINING_DAYS_300B_TOKENS, 90, ctx)
    assert seconds * 300e9 / (1536 * 2048) / 86400 == pytest.approx(90)


def test_missing_context_is_an_error_not_a_guess():
    with pytest.raises(ValueError, match="global_batch and seq_len"):
        step_time(Metric.TOKENS_PER_SEC, 1e5, StepContext(num_gpus=8))
    with pytest.raises(ValueError, match="FLOP count"):
        step_time(Metric.ACHIEVED_TFLOPS_PER_GPU, 100, StepContext(num_gpus=8, global_batch=8, seq_len=8))


def test_preference_puts_direct_times_first():
    assert metrics.PREFERENCE[:2] == (Metric.ITERATION_TIME_S, Metric.ITERATION_TIME_MS)
    assert metrics.PREFERENCE.index(Metric.ACHIEVED_TFLOPS_PER_GPU) > metrics.PREFERENCE.index(
        Metric.SAMPLES_PER_SEC)


contexts = st.builds(
    StepContext,
    num_gpus=st.integers(1, 65536),
    global_batch=st.integers(1, 1 << 16),
    seq_len=st.integers(1, 1 << 17),
    flops_per_step=st.floats(1e9, 1e24),
)


@given(metric=st.sampled_from(list(Metric)), value=st.floats(1e-6, 1e9), ctx=contexts)
def test_conversions_invert_exactly(metric, value, ctx):
    seconds = step_time(metric, value, ctx)
    assert seconds > 0 and math.isfinite(seconds)
    assert metric_value(metric, seconds, ctx) == pytest.approx(value, rel=1e-12)


@given(metric=st.sampled_from(list(Metric)), value=st.floats(1e-3, 1e6), ctx=contexts)
def test_faster_runs_have_shorter_steps(metric, value, ctx):
    # Times and days grow with the step; throughputs and FLOP rates shrink with it.
    longer = metric in (Metric.ITERATION_TIME_S, Metric.ITERATION_TIME_MS, Metric.TRAINING_DAYS_300B_TOKENS)
    bigger = step_time(metric, value * 2, ctx)
    assert (bigger > step_time(metric, value, ctx)) == longer
