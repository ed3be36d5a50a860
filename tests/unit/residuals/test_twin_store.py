"""A part with no store of its own takes the shipped store of its die with other memory."""

from __future__ import annotations

import llmp
from llmp import dsl
from llmp.dsl import catalog
from llmp.residuals import fingerprint, store

A100_40GB = """
use "mosaicml_a100_40gb"
model m { arch = gpt  layers = 2  hidden = 1024  heads = 16  ffn_hidden = 4 * hidden  vocab = 50368  seq_len = 2048 }
cluster c { node = mosaicml_a100_40gb  nodes = 1 }
train {
  precision = bf16  global_batch = 16  micro_batch = 2
  parallel { dp = 8 }
}
"""


def test_the_a100_40gb_takes_the_80gb_parts_store():
    device = catalog.gpu("a100_sxm4_40gb")
    assert store.shipped("a100_sxm4_40gb") is None
    twin = store.twin(device)
    assert twin is not None and twin.serves == ("a100_sxm4_80gb",) and twin.twin_for == "a100_sxm4_40gb"
    assert twin.refusal(device) is None
    assert twin.refusal(catalog.gpu("h100_sxm5_80gb")) is not None  # it serves no third part
    choice = store.default_for(device)
    assert choice.residuals.primary is twin and "same die" in choice.note
    assert store.shipped("a100_sxm4_80gb").refusal(device) is not None  # the store itself is unchanged


def test_only_the_memory_may_differ():
    a, b = (fingerprint.numbers(catalog.gpu(g)) for g in ("a100_sxm4_40gb", "a100_sxm4_80gb"))
    assert fingerprint.same_silicon(b, a) and a != b
    assert not fingerprint.same_silicon(b, {**a, "sms": 100.0})
    assert not fingerprint.same_silicon(b, {**a, "achievable": {"bf16": 200e12}})


def test_a_part_held_to_less_power_is_not_a_twin():
    # torchtitan's H100 96 GB at 500 W: the H100 SXM5's numbers but for memory, another operating point.
    assert store.twin(catalog.gpu("h100_sxm_96gb_hbm2e_500w")) is None


def test_changed_numbers_end_the_twin(tmp_path):
    spec = dsl.loads(A100_40GB, overrides=["gpu.sms=100"])
    assert store.twin(spec.cluster.gpu) is None
    assert store.default_for(spec.cluster.gpu).note.endswith("the shipped cross-GPU store")
    assert store.twin(catalog.gpu("a100_sxm4_40gb"), root=tmp_path / "nowhere") is None


def test_predictions_name_the_store_they_use():
    pred = llmp.predict(dsl.loads(A100_40GB))
    assert pred.provenance.residuals.startswith("a100_sxm4_80gb@")
    assert "same die as a100_sxm4_40gb" in pred.provenance.residuals_note
