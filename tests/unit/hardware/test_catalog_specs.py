"""Every catalog entry resolved through the real DSL: physical sanity and datasheet spot checks.

A node is checked by resolving a minimal spec that uses it, so the GPU, both links and the
node pass through the same parser, unit conversion and schema checks as a user's spec.
"""

from __future__ import annotations

import pytest

import llmp.dsl
from llmp.dsl.catalog import gpus as catalog_devices
from llmp.hardware import catalog
from llmp.hardware.spec import Device, Dtype, Link
from llmp.spec.spec import Spec

GiB = 2**30
MINIMAL = """use "{entry}"
model m {{ arch = gpt  layers = 2  hidden = 128  heads = 4  vocab = 1024  seq_len = 128 }}
{cluster}
train {{ precision = fp32  global_batch = 4 * cluster.nodes * node.gpus_per_node }}
"""


def resolve_node(node: str) -> Spec:
    return llmp.dsl.loads(MINIMAL.format(entry=node, cluster=f"cluster c {{ node = {node} }}"))


def resolve_cluster(cluster: str) -> Spec:
    return llmp.dsl.loads(MINIMAL.format(entry=cluster, cluster=""))


def resolve_link(link: str) -> Link:
    """A catalog link as a spec gets it: the intra link of a probe node."""
    probe = ("gpu g { memory = 1 GiB  mem_bandwidth = 1 TB/s  sms = 1  clock = 1 GHz  l2_cache = 1 MiB  tdp = 1 W\n"
             "        launch_overhead = 1 us  flops { fp32 = 1 TFLOP/s } }\n"
             f"node n {{ gpu = g  gpus_per_node = 2  intra = {link}  inter = {link} }}\ncluster c {{ node = n }}")
    return llmp.dsl.loads(MINIMAL.format(entry="links", cluster=probe)).cluster.node.intra


NODES = catalog.catalog_ids()["node"]
CLUSTERS = catalog.catalog_ids()["cluster"]
GPUS = catalog.catalog_ids()["gpu"]
LINKS = catalog.catalog_ids()["link"]


@pytest.fixture(scope="module")
def node_specs() -> dict[str, Spec]:
    return {node: resolve_node(node) for node in NODES}


@pytest.mark.parametrize("gpu_id", GPUS)
def test_device_numbers_are_physical(gpu_id: str) -> None:
    gpu: Device = catalog_devices()[gpu_id]
    assert gpu.peak_flops and all(rate > 0 for rate in gpu.peak_flops.values())
    assert gpu.memory >= 1 * GiB and gpu.mem_bandwidth > 1e9 and gpu.l2_cache >= 2**20
    assert gpu.sms >= 1 and 1e9 <= gpu.clock <= 5e9 and gpu.tdp > 0
    assert 0 < gpu.launch_overhead < 1e-4
    assert 0 <= gpu.scaleup_bandwidth < gpu.mem_bandwidth
    flops = gpu.peak_flops
    for low in (Dtype.FP64, Dtype.FP32):
        for high in (Dtype.TF32, Dtype.BF16, Dtype.FP16, Dtype.FP8):
            if low in flops and high in flops:
                assert flops[high] >= flops[low], (low, high)
    if Dtype.FP8 in flops:
        assert flops[Dtype.FP8] >= flops[Dtype.BF16]
    if Dtype.FP64 in flops:
        assert flops[Dtype.FP64] <= flops[Dtype.FP32]


@pytest.mark.parametrize("link_id", LINKS)
def test_link_numbers_are_physical(link_id: str) -> None:
    link = resolve_link(link_id)
    # latency: what the link adds per step beyond NCCL's own (0 where nothing is measured)
    assert link.id == link_id and link.bandwidth > 0 and 0 <= link.latency < 1e-3
    assert 0 < link.efficiency <= 1
    assert link.peer_bandwidth is None or 0 < link.peer_bandwidth <= link.bandwidth
    assert link.nvls_efficiency is None or (link.nvls and 0 < link.nvls_efficiency <= 1)
    assert not (link.nvls and link.peer_bandwidth is not None), "NVLS needs a switch, not a mesh"


def test_every_gpu_is_in_a_node_unless_no_public_system_describes_one(node_specs: dict[str, Spec]) -> None:
    """Nodes exist where the public data describe a system; these GPUs have none yet."""
    without_node = set(GPUS) - {s.cluster.gpu.id for s in node_specs.values()}
    assert without_node == {"a40", "a100_pcie_80gb", "gh200_144gb", "mi350x"}


@pytest.mark.parametrize("node", NODES)
def test_node_links_are_consistent_with_the_gpu(node: str, node_specs: dict[str, Spec]) -> None:
    cluster = node_specs[node].cluster
    gpu, intra, inter = cluster.gpu, cluster.node.intra, cluster.node.inter
    assert intra.bandwidth > 0 and inter.bandwidth > 0
    assert 0 <= intra.latency < 1e-3 and 0 <= inter.latency < 1e-3
    if gpu.scaleup_bandwidth > 0:  # the intra link is the GPU's own scale-up port
        assert intra.bandwidth == gpu.scaleup_bandwidth
        # scale-out per GPU never beats NVLink / Infinity Fabric
        assert inter.bandwidth / cluster.node.gpus_per_node < intra.bandwidth


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_every_cluster_resolves(cluster: str) -> None:
    spec = resolve_cluster(cluster)
    assert spec.cluster.id == cluster
    assert spec.world_size == spec.cluster.world_size >= 576


@pytest.mark.parametrize(("node", "path", "expected"), [
    # (node, attribute path, value in SI) - each the datasheet figure the catalog file cites
    ("dgx_h100", "gpu.peak_flops.bf16", 989e12),
    ("dgx_h100", "gpu.memory", 80 * GiB),
    ("dgx_h100", "gpu.mem_bandwidth", 3.35e12),
    ("dgx_h100", "node.intra.bandwidth", 450e9),  # NVLink4, per direction
    ("dgx_h100", "node.inter.bandwidth", 400e9),  # 8 x 400 Gb/s
    ("dgx_a100", "gpu.peak_flops.fp16", 312e12),
    ("dgx_a100", "node.inter.bandwidth", 200e9),  # 8 x 200 Gb/s
    ("perlmutter_gpu", "gpu.memory", 40 * GiB),
    ("perlmutter_gpu", "node.inter.bandwidth", 100e9),  # 4 x 200 Gb/s Slingshot
    ("vista_gh200", "node.inter.bandwidth", 50e9),  # 1 x NDR 400 Gb/s
    ("vista_gh200", "gpu.mem_bandwidth", 4.0e12),
    ("dgx2_v100", "gpu.peak_flops.fp16", 125e12),
    ("dgx2_v100", "node.inter.bandwidth", 100e9),  # 8 x EDR 100 Gb/s
    ("gb200_nvl72", "node.gpus_per_node", 72),
    ("dgx_b200", "node.intra.bandwidth", 900e9),
    ("hgx_h200", "gpu.memory", 141 * GiB),
    ("cpu_host", "gpu.peak_flops.fp32", 320e9),  # 2 cores x 2.5 GHz x 2 FMA x 16 lanes x 2
    ("dgx_b300", "gpu.peak_flops.bf16", 2250e12),
    ("dgx_b300", "node.inter.bandwidth", 800e9),  # 8 x 800 Gb/s XDR
    ("gb300_nvl72_tray", "node.gpus_per_node", 4),
    ("gb300_nvl72", "gpu.tdp", 1400.0),
    ("gb200_nvl72_tray", "node.inter.bandwidth", 200e9),  # 4 x 400 Gb/s
    ("hgx_h800", "node.intra.bandwidth", 200e9),  # 400 GB/s bidirectional NVLink
    ("hgx_h800", "gpu.peak_flops.fp64", 1e12),
    ("grand_teton_h100_96gb", "gpu.memory", 96 * GiB),
    ("grand_teton_h100_96gb", "gpu.mem_bandwidth", 2.4e12),
    ("grand_teton_h100_96gb", "gpu.tdp", 500.0),
    ("azure_ndv4", "node.inter.bandwidth", 200e9),  # 8 x 200 Gb/s HDR
    ("alps_gh200", "node.intra.peer_bandwidth", 150e9),
    ("mi325x_platform", "gpu.memory", 256 * GiB),
    ("mi355x_platform", "gpu.peak_flops.bf16", 2516.6e12),
    ("mi355x_platform", "gpu.l2_cache", 256 * 2**20),  # the Infinity Cache, AMD's last-level cache
])
def test_datasheet_spot_checks(node: str, path: str, expected: float) -> None:
    cluster = resolve_node(node).cluster
    value: object = {"gpu": cluster.gpu, "node": cluster.node}[path.split(".")[0]]
    for part in path.split(".")[1:]:
        value = value[Dtype(part)] if isinstance(value, dict) else getattr(value, part)
    assert value == pytest.approx(expected, rel=1e-9)


def test_the_cpu_device_has_no_half_precision_peak() -> None:
    """Without avx512_bf16 the CPU has no native bf16; the catalog must not invent a peak."""
    assert set(resolve_node("cpu_host").cluster.gpu.peak_flops) == {Dtype.FP32, Dtype.FP64}


def test_volta_lacks_bf16_tf32_and_fp8() -> None:
    assert set(resolve_node("dgx2_v100").cluster.gpu.peak_flops) == {Dtype.FP64, Dtype.FP32, Dtype.FP16}
