"""Groups across nodes and NVLink domains: exact placement, link tier and hierarchical pricing."""

from __future__ import annotations

import pytest

from llmp.analytic import layout
from llmp.analytic.kernels import Tier
from llmp.analytic.structure import structure_of
from llmp.dsl import loads


def test_tp_16_on_72_gpu_domains_straddles_a_boundary_and_is_priced_by_its_thin_side():
    # ranks 64..79 sit 8 + 8 across the first two domains; ranks 0..63 stay inside
    placed = layout.placement((16, 1, 1, 1, 9), (16, 1), 72)
    assert placed["tp"] == (16, 8, Tier.INTER)


TRAY = """
use "gb200_nvl72"
node gb200_tray { gpu = gb200  gpus_per_node = 4  nvlink_domain = 72  intra = nvlink5
                  inter = link { bandwidth = 4 * 400 Gb/s  latency = 5 us } }
model m { arch = llama  layers = 8  hidden = 9216  heads = 72  kv_heads = 8  ffn_hidden = 36864
          vocab = 128256  seq_len = 9216 }
cluster c { node = HARDWARE  nodes = COUNT }
train { global_batch = 72  parallel { tp = TP  pp = 1  sequence_parallel = true } }
"""


@pytest.mark.parametrize("tp", [8, 24, 72])
def test_a_tray_in_an_nvl72_domain_prices_tp_like_the_catalogs_whole_rack_node(tp):
    # gb200_nvl72 (one 72-GPU node) and 4-GPU trays in a 72-GPU NVLink domain are the same hardware
    # for groups that fit a rack: same tier, same members, same NIC share per GPU, same time.
    def tp_ops(node: str, nodes: int) -> dict[str, float]:
        from llmp.compose import predict
        spec = loads(TRAY.replace("HARDWARE", node).replace("COUNT", str(nodes)).replace("TP", str(tp)))
        return {r.name: r.roofline_s for r in predict(spec).ops if r.category == "tp"}

    tray, rack = tp_ops("gb200_tray", 18), tp_ops("gb200_nvl72", 1)
    assert tray and tray == pytest.approx(rack, rel=1e-12)


def test_beyond_the_domain_groups_use_the_nics():
    from llmp.compose import predict
    spec = loads(TRAY.replace("HARDWARE", "gb200_tray").replace("COUNT", "36").replace("TP", "72"),
                 overrides=["node.nvlink_domain=8"])
    st_ = structure_of(spec)
    assert st_.tier("tp") is Tier.INTER and st_.ranks_per_node("tp") == 8
    inside = loads(TRAY.replace("HARDWARE", "gb200_tray").replace("COUNT", "36").replace("TP", "72"))
    assert predict(spec).breakdown["tp"] > predict(inside).breakdown["tp"]
