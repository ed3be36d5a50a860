"""Issue 22 item 6 in the mapping: memory rows joined to their step, one-GPU nodes, the stack from notes,
and a network cell without one meaning skipped with the cell quoted."""

from __future__ import annotations

import published_rows as P

from llmp.spec.spec import Stack
from llmp.validate.mapping import Mapped, map_measurement
from llmp.validate.score import read_measurements
from llmp.validate.skips import SkipReason


def _one(path):
    measurements, _ = read_measurements([str(path)])
    assert len(measurements) == 1
    return map_measurement(measurements[0])


def test_a_memory_row_of_the_same_configuration_joins_its_step(csv_file):
    step = P.edit(P.SC21_1P7B, "source_ref", "Table 1, throughput column")
    memory = P.edit(P.edit(P.edit(P.edit(P.SC21_1P7B, "source_ref", "Table 1, memory column"), "metric_name",
                                  "mem_max_allocated_gib"), "metric_unit", "GiB"), "metric_value", "20")
    memory = P.edit(memory, "global_batch", "")  # a memory row may leave a cell blank
    text = step.rstrip("\n") + "\n" + memory.strip().splitlines()[-1] + "\n"
    m = _one(csv_file(text))
    assert isinstance(m, Mapped), m
    assert any(r.text == "mem_max_allocated_gib = 20 GiB" for r in m.memory)
    assert any("joined" in a for a in m.assumptions)


def test_a_memory_row_with_no_step_stays_a_skip_that_says_so(csv_file):
    memory = P.edit(P.edit(P.edit(P.SC21_1P7B, "metric_name", "mem_max_allocated_gib"), "metric_unit", "GiB"),
                    "metric_value", "20")
    m = _one(csv_file(memory))
    assert m.reason is SkipReason.NO_TIME_METRIC


def test_a_one_gpu_row_maps_to_a_one_gpu_node(csv_file):
    row = P.README2020_8B_1024
    for column, value in {"gpu_id": "h100_sxm5_80gb", "num_gpus": "1", "gpus_per_node": "1", "tp": "1", "pp": "1",
                          "dp": "1", "global_batch": "8", "micro_batch": "1", "layers": "4", "dtype": "bf16"}.items():
        row = P.edit(row, column, value)
    m = _one(csv_file(row))
    assert isinstance(m, Mapped), m
    assert m.spec.cluster.node.id == "h100_sxm5_1gpu" and m.spec.cluster.node.gpus_per_node == 1


def test_the_stack_is_read_from_notes(csv_file):
    row = P.edit(P.edit(P.README2020_8B_1024, "source", "some-lab"), "source_ref", "a table")
    row = P.edit(row, "notes", "measured with Megatron-DeepSpeed (data/README.md)")
    m = _one(csv_file(row))
    assert isinstance(m, Mapped), m
    assert m.spec.train.stack is Stack.MEGATRON_DEEPSPEED


def test_a_network_cell_with_two_compute_fabrics_is_a_skip_quoting_the_cell(csv_file):
    cell = "8x Slingshot 200Gb NIC; 8x InfiniBand NDR 400Gb Adapter"
    m = _one(csv_file(P.edit(P.README2020_8B_1024, "interconnect_inter", cell)))
    assert m.reason is SkipReason.CELL and cell[:20] in m.detail


def test_negated_swiglu_in_notes_is_not_read(csv_file):
    m = _one(csv_file(P.edit(P.README2020_8B_1024, "notes", "activation gelu (not SwiGLU)")))
    assert isinstance(m, Mapped), m
    assert m.spec.model.activation.value == "gelu"
    assert any("notes deny 'SwiGLU'" in a for a in m.assumptions)
