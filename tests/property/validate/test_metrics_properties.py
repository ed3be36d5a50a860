"""Published metrics on generated values: conversions invert exactly, and faster runs have shorter
steps."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmp.validate.metrics import Quantity, StepContext, metric_value, read, step_time

TIME_LIKE = [("iteration_time_s", "s"), ("step_time", "ms"), ("tokens_per_sec", "tokens/s"),
             ("tokens_per_sec_per_gpu", "tokens/s/GPU"), ("samples_per_sec", "samples/s"),
             ("achieved_tflops_per_gpu", "TFLOP/s/GPU"), ("training_days_300B_tokens", "days")]
contexts = st.builds(StepContext, num_gpus=st.integers(1, 65536), global_batch=st.integers(1, 1 << 16),
                     seq_len=st.integers(1, 1 << 17), flops_per_step=st.floats(1e9, 1e24))


@given(metric=st.sampled_from(TIME_LIKE), value=st.floats(1e-6, 1e9), ctx=contexts)
def test_conversions_invert_exactly(metric, value, ctx):
    reading = read(metric[0], value, metric[1])
    seconds = step_time(reading, ctx)
    assert seconds > 0 and math.isfinite(seconds)
    assert metric_value(reading, seconds, ctx) == pytest.approx(value, rel=1e-12)


@given(metric=st.sampled_from(TIME_LIKE), value=st.floats(1e-3, 1e6), ctx=contexts)
def test_faster_runs_have_shorter_steps(metric, value, ctx):
    # Times and days grow with the step; throughputs and FLOP rates shrink with it.
    longer = read(metric[0], value, metric[1]).quantity in (Quantity.STEP_TIME, Quantity.TRAINING_DAYS)
    bigger = step_time(read(metric[0], value * 2, metric[1]), ctx)
    assert (bigger > step_time(read(metric[0], value, metric[1]), ctx)) == longer
