"""The catalog resolver: every entry resolves alone, to exactly what a spec using it gets."""

from __future__ import annotations

import pytest

import llmp.dsl
from llmp.dsl import catalog
from llmp.errors import SpecError
from llmp.hardware.catalog import ALIASES, catalog_ids

IDS = catalog_ids()
MODEL = "model m { arch = gpt  layers = 2  hidden = 128  heads = 4  vocab = 1024  seq_len = 128 }\n"
TRAIN = "train { precision = fp32  global_batch = 4 * cluster.nodes * node.gpus_per_node }\n"


@pytest.mark.parametrize("node_id", IDS["node"])
def test_node_is_what_a_spec_gets(node_id):
    spec = llmp.dsl.loads(f'use "{node_id}"\n{MODEL}cluster c {{ node = {node_id} }}\n{TRAIN}')
    assert catalog.node(node_id) == spec.cluster.node
    assert catalog.gpu(spec.cluster.gpu.id) == spec.cluster.gpu


@pytest.mark.parametrize("cluster_id", IDS["cluster"])
def test_cluster_is_what_a_spec_gets(cluster_id):
    spec = llmp.dsl.loads(f'use "{cluster_id}"\n{MODEL}{TRAIN}')
    assert catalog.cluster(cluster_id) == spec.cluster


def test_every_gpu_and_link_resolves_alone():
    gpus = catalog.gpus()
    assert sorted(gpus) == IDS["gpu"] and all(gpus[i].id == i and gpus[i].peak_flops for i in gpus)
    for link_id in IDS["link"]:
        spec = llmp.dsl.loads(f'use "dgx_h100"\nuse "links"\n{MODEL}'
                              f"cluster c {{ node = dgx_h100  inter = {link_id} }}\n{TRAIN}")
        assert catalog.link(link_id) == spec.cluster.inter


@pytest.mark.parametrize(("alias", "target"), sorted(ALIASES.items()))
def test_an_alias_names_its_entry(alias, target):
    assert catalog.gpu(alias) == catalog.gpu(target)
    assert catalog.nodes_with(alias) == catalog.nodes_with(target) != ()


def test_nodes_with_a_gpu():
    nodes = catalog.nodes_with("a100_sxm4_80gb")
    assert "dgx_a100" in {n.id for n in nodes} and all(n.gpu.id == "a100_sxm4_80gb" for n in nodes)
    assert catalog.nodes_with("no_such_gpu") == ()


@pytest.mark.parametrize(("get", "ident", "match"), [
    (catalog.node, "eos", "'eos' is a catalog cluster, not a node"),
    (catalog.gpu, "dgx_h100", "'dgx_h100' is a catalog node, not a gpu"),
    (catalog.link, "h100_sxm5_80gbb", "not a catalog link"),
    (catalog.gpu, "h100_sxm5_80gbb", "did you mean 'h100_sxm5_80gb'"),
])
def test_a_wrong_id_names_the_fix(get, ident, match):
    with pytest.raises(SpecError, match=match) as err:
        get(ident)
    assert err.value.hint
