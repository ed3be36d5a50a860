"""Megatron's interleaved schedule with a microbatch group (``--microbatch-group-size-per-virtual-
pipeline-stage``): the schedule table, the rules Megatron enforces, and a run that uses it."""

from __future__ import annotations

import re

import pytest

from llmp import dsl, predict
from llmp.analytic.gpipe_1f1b import _interleaved_table
from llmp.analytic.structure import structure_of
from llmp.errors import InfeasibleError


def test_the_table_is_megatrons_own_example():
    # NVIDIA/Megatron-LM megatron/core/pipeline_parallel/schedules.py, comment above get_schedule_table:
    # "the tunable schedule table for PP2 N3M5 with VP2": microbatch 0 1 2 0 1 2 3 4 3 4,
    # model chunk 0 0 0 1 1 1 0 0 1 1.
    table = _interleaved_table(5, 2, 3)
    assert [j for _, j in table] == [0, 1, 2, 0, 1, 2, 3, 4, 3, 4]
    assert [k for k, _ in table] == [0, 0, 0, 1, 1, 1, 0, 0, 1, 1]


def _spec(global_batch: int, group: int | None) -> str:
    extra = "" if group is None else f"  microbatch_group = {group}"
    return f"""
use "dgx_a100"
model m {{ arch = gpt  layers = 12  hidden = 512  heads = 8  vocab = 50304  seq_len = 1024 }}
cluster c {{ node = dgx_a100  nodes = 1 }}
train {{ global_batch = {global_batch}  micro_batch = 4
        parallel {{ tp = 1  pp = 4  vp = 3  schedule = interleaved{extra} }} }}
"""


@pytest.mark.parametrize("global_batch, group, fragment", [
    (40, None, "last group of microbatches(5) % microbatch_group(4) = 1 is shorter than pp(4)"),
    (80, 4, "last group of microbatches(10) % microbatch_group(4) = 2 is shorter than pp(4)"),
    (40, 3, "pp(4) <= microbatch_group(3)"),
    (40, 6, "microbatch_group(6) <= microbatches(5)"),
])
def test_megatrons_rules_are_checked(global_batch, group, fragment):
    with pytest.raises(InfeasibleError, match=re.escape(fragment)):
        structure_of(dsl.loads(_spec(global_batch, group)))


def test_the_ci_runs_tunable_schedule_predicts():
    # gpt3_mcore_te_tp1_pp4_vp1_tunable_overlap: GA 5 on pp 4 with a group of 5 microbatches.
    spec = dsl.loads(_spec(40, 5))
    st_ = structure_of(spec)
    assert (st_.microbatches, st_.microbatch_group) == (5, 5)
    assert predict(spec).step_time_s > 0
