"""A prediction says which ceilings its analytic times used: measured (with the source) or datasheet."""

from __future__ import annotations

import dataclasses
import json

from strategies_analytic import h100, make_spec

from llmp.compose import predict
from llmp.dsl import loads
from llmp.hardware.spec import Attainable, Dtype

SOURCE = "MAMF, stas00/ml-engineering@744d01e"


def test_measured_ceilings_are_listed_with_their_source():
    device = h100(achievable=Attainable(rates={Dtype.BF16: 794.5e12}, source=SOURCE))
    notes = predict(make_spec(device=device)).provenance.calibration
    gemm = next(n for n in notes if n.startswith("gemm bf16"))
    assert "gpu.achievable.bf16 = 794.5 TFLOP/s" in gemm and "80%" in gemm and SOURCE in gemm
    attention = next(n for n in notes if n.startswith("attention bf16"))
    assert "gpu.achievable.bf16" in attention  # no flash_attention rate: the GEMM ceiling bounds it


def test_a_gpu_without_facts_says_it_runs_at_the_datasheet_peak():
    p = predict(make_spec())
    assert any(n.startswith("gemm bf16: datasheet peak 989 TFLOP/s") and "no published" in n
               for n in p.provenance.calibration)
    assert any(n.startswith("node.intra nvlink4: line rate") for n in p.provenance.calibration)
    data = json.loads(json.dumps(p.to_dict()))
    assert data["provenance"]["calibration"] == list(p.provenance.calibration)
    assert "analytic ceilings:" in p.to_table()


def test_link_notes_name_the_efficiency_and_the_mesh():
    spec = make_spec(nodes=2, global_batch=16)
    c = spec.cluster
    intra = dataclasses.replace(c.node.intra, efficiency=0.78, peer_bandwidth=100e9)
    spec = dataclasses.replace(spec, cluster=dataclasses.replace(c, node=dataclasses.replace(c.node, intra=intra)))
    notes = predict(spec).provenance.calibration
    assert any("efficiency 0.78 of the 450 GB/s line rate" in n and "100 GB/s each" in n for n in notes)
    assert any(n.startswith("cluster.inter ndr: line rate") for n in notes)


def test_the_shipped_catalog_calibrates_h100_and_keeps_gh200_at_datasheet():
    text = """use "{node}"
model m {{ arch = llama  layers = 2  hidden = 1024  heads = 8  ffn_hidden = 2816  vocab = 32000  seq_len = 2048 }}
cluster c {{ node = {node} }}
train {{ global_batch = 8 }}
"""
    h100_notes = predict(loads(text.format(node="dgx_h100"))).provenance.calibration
    assert any(n.startswith("gemm bf16: gpu.achievable.bf16 = 794.5 TFLOP/s") and "mamf_bf16_fp8.csv" in n
               for n in h100_notes)
    assert any(n.startswith("attention bf16: gpu.flash_attention.bf16 = 338 TFLOP/s") for n in h100_notes)
    assert any("nvlink4: efficiency 0.81" in n for n in h100_notes)
    gh200_notes = predict(loads(text.format(node="vista_gh200"))).provenance.calibration
    assert any(n.startswith("gemm bf16: datasheet peak") for n in gh200_notes)
