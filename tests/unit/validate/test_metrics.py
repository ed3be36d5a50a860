"""Published metric (name and unit) ↔ step time: each conversion is the source's definition, inverted."""

from __future__ import annotations

import pytest

from llmp.validate import metrics
from llmp.validate.metrics import (
    Dim,
    Quantity,
    StepContext,
    UnitError,
    megatron_sc21_flops,
    metric_value,
    parse_unit,
    read,
    step_time,
)

UNITS = {
    # every unit of validation/*.csv
    "s": (Dim.TIME, 1.0, False), "ms": (Dim.TIME, 1e-3, False), "days": (Dim.TIME, 86400.0, False),
    "tokens/s": (Dim.TOKEN_RATE, 1.0, False), "tokens/s/GPU": (Dim.TOKEN_RATE, 1.0, True),
    "samples/s": (Dim.SAMPLE_RATE, 1.0, False), "TFLOP/s/GPU": (Dim.FLOP_RATE, 1e12, True),
    "PFLOP/s": (Dim.FLOP_RATE, 1e15, False), "%": (Dim.PERCENT, 1.0, False), "GiB": (Dim.BYTES, 2.0**30, False),
    # other hands
    "sec": (Dim.TIME, 1.0, False), "msec": (Dim.TIME, 1e-3, False), "seconds": (Dim.TIME, 1.0, False),
    "tok/s": (Dim.TOKEN_RATE, 1.0, False), "tokens/sec/gpu": (Dim.TOKEN_RATE, 1.0, True),
    "tokens per second per GPU": (Dim.TOKEN_RATE, 1.0, True), "ktokens/s": (Dim.TOKEN_RATE, 1e3, False),
    "seqs/s": (Dim.SAMPLE_RATE, 1.0, False), "samples/s/GPU": (Dim.SAMPLE_RATE, 1.0, True),
    "TFLOPS/GPU": (Dim.FLOP_RATE, 1e12, True), "TFLOPS": (Dim.FLOP_RATE, 1e12, False),
    "GB": (Dim.BYTES, 1e9, False), "MiB": (Dim.BYTES, 2.0**20, False), "min": (Dim.TIME, 60.0, False),
}


@pytest.mark.parametrize("text, expected", UNITS.items(), ids=list(UNITS))
def test_units(text, expected):
    unit = parse_unit(text)
    assert (unit.dim, unit.scale, unit.per_gpu) == expected


@pytest.mark.parametrize("text", ["furlongs", "tokens", "GPU", "", "s/s", "tokens/GPU", "TFLOP/furlong"])
def test_unknown_units_are_refused(text):
    with pytest.raises(UnitError):
        parse_unit(text)


@pytest.mark.parametrize("name, unit, quantity", [
    ("iteration_time_s", "s", Quantity.STEP_TIME), ("iteration_time_ms", "ms", Quantity.STEP_TIME),
    ("step_time", "msec", Quantity.STEP_TIME), ("tokens_per_sec_per_gpu", "tokens/s/GPU", Quantity.TOKEN_RATE),
    ("tokens_per_sec", "tokens/s", Quantity.TOKEN_RATE), ("samples_per_sec", "samples/s", Quantity.SAMPLE_RATE),
    ("throughput", "samples/s", Quantity.SAMPLE_RATE), ("throughput", "tok/s/GPU", Quantity.TOKEN_RATE),
    ("achieved_tflops_per_gpu", "TFLOP/s/GPU", Quantity.FLOP_RATE),
    ("model_tflops_per_gpu", "TFLOP/s/GPU", Quantity.MODEL_FLOP_RATE),
    ("aggregate_pflops", "PFLOP/s", Quantity.AGGREGATE), ("mfu_pct", "%", Quantity.PERCENT),
    ("scaling_efficiency_pct", "%", Quantity.PERCENT),
    ("training_days_300B_tokens", "days", Quantity.TRAINING_DAYS),
    ("mem_max_allocated_gib", "GiB", Quantity.MEMORY), ("peak_memory", "GB", Quantity.MEMORY),
])
def test_metric_names_and_units(name, unit, quantity):
    assert read(name, 1.0, unit).quantity is quantity


@pytest.mark.parametrize("name, unit", [("iteration_time_s", "tokens/s"), ("tokens_per_sec", "s"),
                                        ("mfu_pct", "TFLOP/s"), ("mem_max_allocated_gib", "%")])
def test_a_unit_that_contradicts_the_name_is_refused(name, unit):
    with pytest.raises(UnitError, match=name):
        read(name, 1.0, unit)


def test_the_unit_decides_the_scale_not_the_name():
    # A step time in ms under a name that says seconds used to be read as 1150 s (-99.9%).
    ctx = StepContext(num_gpus=8, global_batch=8, seq_len=8192)
    assert step_time(read("iteration_time_s", 1150.13, "ms"), ctx) == pytest.approx(1.15013)
    assert step_time(read("iteration_time_ms", 1.15013, "s"), ctx) == pytest.approx(1.15013)


def test_tokens_per_gpu_is_global_tokens_over_gpu_throughput():
    # llm-foundry MPT-70b on 512 H100: 1007 tokens/s/GPU, global batch 4096 x 2048 tokens.
    ctx = StepContext(num_gpus=512, global_batch=4096, seq_len=2048)
    assert step_time(read("tokens_per_sec_per_gpu", 1007, "tokens/s/GPU"), ctx) == pytest.approx(
        4096 * 2048 / (1007 * 512))
    # The same run's tokens/s (515636) gives the same step within the table's rounding.
    assert step_time(read("tokens_per_sec", 515636, "tokens/s"), ctx) == pytest.approx(16.27, rel=1e-3)
    # Per GPU by the unit alone, or by the name alone.
    assert step_time(read("throughput", 1007, "tokens/s/GPU"), ctx) == pytest.approx(16.27, rel=1e-3)
    assert step_time(read("tokens_per_sec_per_gpu", 1.007, "ktokens/s"), ctx) == pytest.approx(16.27, rel=1e-3)


def test_samples_per_sec_agrees_with_the_logged_iteration_time():
    # BLOOM-176B log line: 104.70 s per iteration, 19.561 samples/s, global batch 2048.
    ctx = StepContext(num_gpus=384, global_batch=2048, seq_len=2048)
    assert step_time(read("samples_per_sec", 19.561, "samples/s"), ctx) == pytest.approx(104.70, rel=2e-4)


def test_sc21_flop_formula_matches_the_paper_aggregate():
    # Table 1, 1.7B: 137 TFLOP/s per GPU on 32 GPUs is reported as 4.4 PFLOP/s in aggregate.
    flops = megatron_sc21_flops(global_batch=512, seq_len=2048, layers=24, hidden=2304, vocab=51200)
    expected = 96 * 512 * 2048 * 24 * 2304**2 * (1 + 2048 / (6 * 2304) + 51200 / (16 * 24 * 2304))
    assert flops == pytest.approx(expected, rel=1e-12)
    ctx = StepContext(num_gpus=32, flops_per_step=flops)
    reading = read("achieved_tflops_per_gpu", 137, "TFLOP/s/GPU")
    seconds = step_time(reading, ctx)
    assert flops / seconds / 1e15 == pytest.approx(4.4, abs=0.05)
    assert metric_value(reading, seconds, ctx) == pytest.approx(137)


def test_training_days_use_300b_tokens():
    ctx = StepContext(num_gpus=384, global_batch=1536, seq_len=2048)
    seconds = step_time(read("training_days_300B_tokens", 90, "days"), ctx)
    assert seconds * 300e9 / (1536 * 2048) / 86400 == pytest.approx(90)


def test_missing_context_is_an_error_not_a_guess():
    with pytest.raises(ValueError, match="global_batch and seq_len"):
        step_time(read("tokens_per_sec", 1e5, "tokens/s"), StepContext(num_gpus=8))
    with pytest.raises(ValueError, match="FLOP count"):
        step_time(read("achieved_tflops_per_gpu", 100, "TFLOP/s/GPU"), StepContext(num_gpus=8, global_batch=8,
                                                                                    seq_len=8))
    with pytest.raises(ValueError, match="not time-like"):
        step_time(read("mfu_pct", 40, "%"), StepContext(num_gpus=8, global_batch=8, seq_len=8))


def test_preference_puts_direct_times_first():
    assert metrics.PREFERENCE[0] is Quantity.STEP_TIME
    assert metrics.PREFERENCE.index(Quantity.FLOP_RATE) > metrics.PREFERENCE.index(Quantity.SAMPLE_RATE)
