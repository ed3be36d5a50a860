"""gpu_id → catalog node: aliases, node size, the interconnect cell's meaning, and clear skips."""

from __future__ import annotations

import published_rows as P
import pytest

from llmp.dsl import catalog
from llmp.validate.hardware import read_network
from llmp.validate.mapping import Mapped
from llmp.validate.skips import SkipReason


def _mapped(result) -> Mapped:
    assert isinstance(result, Mapped), f"skipped: {result.reason}: {result.detail}"
    return result


def _row(snippet: str, **cells: str) -> str:
    for column, value in cells.items():
        snippet = P.edit(snippet, column, value)
    return snippet


@pytest.mark.parametrize("cell, tech, gbps", [
    ("1600 Gbps node-node RoCE (per section title)", "RoCE", 1600),
    ("Omni-Path Architecture (4 OPA links per node)", "Omni-Path", 400),
    ("backend RDMA network, 400 Gb/s per GPU", None, 3200),
    ("8x 400Gb/s NDR InfiniBand", "InfiniBand NDR", 3200),
    ("4 x HDR 200 Gb/s", "InfiniBand HDR", 800),
    ("RoCE v2, 400 Gbps per GPU", "RoCE", 3200),
    ("200 Gbps InfiniBand", "InfiniBand", None),
    ("NVLink (fully connected)", None, None),
])
def test_interconnect_cells(cell, tech, gbps):
    net = read_network(cell, 8)
    assert (net.tech.name if net.tech else None, net.node_gbps) == (tech, gbps)


def test_gpu_ids_resolve_through_the_catalog_aliases(map_snippet):
    m = _mapped(map_snippet(_row(P.SC21_1P7B, gpu_id="gh200", gpus_per_node="4")))
    assert m.spec.cluster.node.gpu.id == "gh200_96gb" and m.spec.cluster.node.gpus_per_node == 4
    assert any("'gh200' is the catalog's 'gh200_96gb'" in a for a in m.assumptions)


@pytest.mark.parametrize("gpus, gpn, node, nodes, domain", [
    ("8", "4", "gb200_nvl72_tray", 2, 72), ("144", "", "gb200_nvl72_tray", 36, 72),
    ("128", "", "gb200_nvl72_tray_64gpu_domain", 32, 64), ("512", "4", "gb200_nvl72_tray_64gpu_domain", 128, 64),
    ("72", "72", "gb200_nvl72", 1, 72),
])
def test_gb200_trays_and_racks(map_snippet, gpus, gpn, node, nodes, domain):
    # a tray is the node, the NVL72 rack its NVLink domain; a job of 128+ GPUs gets 16 trays of each
    # rack (Slurm --segment=16), so its domain is 64 GPUs
    row = _row(P.README2020_8B_1024, gpu_id="gb200", num_gpus=gpus, gpus_per_node=gpn, tp="4",
               dp=str(int(gpus) // 4), global_batch=str(int(gpus) // 4 * 2), dtype="bf16")
    m = _mapped(map_snippet(row))
    assert (m.spec.cluster.node.id, m.spec.cluster.nodes) == (node, nodes)
    assert m.spec.cluster.node.domain == domain
    assert (domain == 64) == any("--segment=16" in a for a in m.assumptions)


@pytest.mark.parametrize("gpu", ["gb200", "gb300"])
def test_a_rack_scale_row_with_four_gpus_per_node_spans_trays_on_nvlink(map_snippet, gpu):
    row = _row(P.README2020_8B_1024, gpu_id=gpu, num_gpus="16", gpus_per_node="4", tp="8", dp="2",
               global_batch="4", dtype="bf16")
    m = _mapped(map_snippet(row))
    assert m.spec.cluster.node.id == f"{gpu}_nvl72_tray" and m.spec.cluster.node.domain == 72
    from llmp.analytic.kernels import Tier
    from llmp.analytic.structure import structure_of
    assert structure_of(m.spec).tier("tp") is Tier.INTRA  # 2 trays, one NVLink domain


@pytest.mark.parametrize("cell, outcome", [("GB200 NVL36x2", "gb200_nvl72_tray"), ("NVL72", "gb200_nvl72_tray"),
                                           ("NVL8", "no catalog node")])
def test_a_stated_nvlink_domain_must_match_the_node(map_snippet, cell, outcome):
    row = _row(P.README2020_8B_1024, gpu_id="gb200", num_gpus="8", gpus_per_node="4", tp="4", dp="2",
               global_batch="4", dtype="bf16", interconnect_intra=cell)
    result = map_snippet(row)
    if outcome.startswith("no"):
        assert result.reason is SkipReason.UNKNOWN_GPU and "8-GPU NVLink domain" in result.detail
    else:
        assert _mapped(result).spec.cluster.node.id == outcome


def test_the_seeds_measured_perlmutter_is_never_picked_for_a_published_row(map_snippet):
    m = _mapped(map_snippet(_row(P.SC21_1P7B, gpus_per_node="4")))
    assert m.spec.cluster.node.id == "perlmutter_gpu_80gb"


def test_a_network_the_node_has_picks_that_node(map_snippet):
    m = _mapped(map_snippet(P.MPT_7B_A100_40GB))
    assert m.spec.cluster.node.id == "mosaicml_a100_40gb"  # its RoCE link, not the DGX's InfiniBand


def test_a_network_no_node_has_becomes_a_catalog_link_override(map_snippet):
    m = _mapped(map_snippet(_row(P.NEMO_LLAMA2_70B, interconnect_inter="RoCE v2, 400 Gbps per GPU")))
    assert m.spec.cluster.node.id == "dgx_h100" and m.spec.cluster.inter.id == "roce_400g_x8"
    m = _mapped(map_snippet(_row(P.README2020_8B_1024, interconnect_inter="4 x HDR 200 Gb/s")))
    assert m.spec.cluster.inter.id == "hdr_ib_x4"
    assert catalog.link("hdr_ib_x4").bandwidth == pytest.approx(4 * 200e9 / 8)


def test_a_network_the_catalog_lacks_becomes_an_inline_link(map_snippet):
    m = _mapped(map_snippet(_row(P.README2020_8B_1024,
                                 interconnect_inter="Omni-Path Architecture (4 OPA links per node)")))
    assert float(m.spec.cluster.inter.bandwidth) == pytest.approx(400e9 / 8)
    assert "inter = link {" in m.text


def test_an_unscoped_bandwidth_keeps_the_node_and_says_so(map_snippet):
    m = _mapped(map_snippet(_row(P.NEMO_LLAMA2_70B, interconnect_inter="200 Gbps RoCE")))
    assert m.spec.cluster.inter.id == "ndr_ib_x8"
    assert any("bandwidth scope" in a and "kept" in a for a in m.assumptions)


@pytest.mark.parametrize("cells, detail", [
    ({"gpu_id": "tpu_v5p"}, "no catalog node has gpu_id 'tpu_v5p'"),
    ({"gpus_per_node": "16"}, "no catalog node has 16 x a100_sxm4_80gb"),
    ({"gpu_id": ""}, "gpu_id blank"),
    ({"gpu_id": "gb200", "gpus_per_node": "", "num_gpus": "74"}, "not a whole number of any catalog node"),
])
def test_hardware_the_catalog_lacks_is_a_clear_skip(map_snippet, cells, detail):
    result = map_snippet(_row(P.README2020_8B_1024, **cells))
    assert result.reason is SkipReason.UNKNOWN_GPU and detail in result.detail
