"""The symbol registry: one symbol per numeric spec path, named and assumed as documented."""

from __future__ import annotations

import dataclasses

import pytest
import sympy as sp

from llmp.errors import SpecError
from llmp.hardware.spec import Device, Link
from llmp.spec import schema
from llmp.spec.model import MlaSpec, ModelSpec, MoeSpec
from llmp.spec.spec import FinetuneSpec, ParallelSpec, TrainSpec
from llmp.spec.symbols import path_for, registry, symbol_for, symbol_name, symbols


@pytest.mark.parametrize("path,name", [
    ("model.hidden", "hidden"), ("model.moe.top_k", "top_k"), ("train.micro_batch", "micro_batch"),
    ("parallel.tp", "tp"), ("gpu.mem_bandwidth", "gpu_mem_bandwidth"),
    ("gpu.flops.bf16", "gpu_flops_bf16"), ("node.intra.bandwidth", "node_intra_bandwidth"),
    ("cluster.inter.bandwidth", "cluster_inter_bandwidth"), ("cluster.nodes", "cluster_nodes"),
    ("node.gpus_per_node", "node_gpus_per_node"),
])
def test_names(path: str, name: str) -> None:
    assert symbol_name(path) == name
    assert symbol_for(path).name == name
    assert path_for(name) == path


def test_assumptions() -> None:
    assert symbol_for("model.hidden") == sp.Symbol("hidden", integer=True, positive=True)
    assert symbol_for("gpu.mem_bandwidth") == sp.Symbol("gpu_mem_bandwidth", real=True,
                                                        positive=True)
    assert symbol_for("model.moe.shared_experts").is_nonnegative
    assert symbol_for("model.moe.shared_experts").is_positive is None
    assert symbol_for("node.intra.latency").is_nonnegative
    assert symbol_for("parallel.tp").is_integer and symbol_for("parallel.tp").is_positive


def test_every_numeric_path_has_one_symbol() -> None:
    numeric = [p for p, f in schema.paths().items() if f.numeric]
    assert sorted(path for path, _ in registry().values()) == sorted(numeric)
    assert len(set(symbols().values())) == len(numeric)
    assert all(symbol_for(p) is symbol_for(p) for p in numeric)


@pytest.mark.parametrize("bad", ["model.hiden", "model.arch", "gpu.name", "nothing"])
def test_unknown_or_non_numeric_paths(bad: str) -> None:
    with pytest.raises(SpecError):
        symbol_for(bad)


def test_unknown_symbol_name_suggests() -> None:
    with pytest.raises(SpecError) as err:
        path_for("hiden")
    assert err.value.hint == "did you mean 'hidden'?"


@pytest.mark.parametrize("section,cls,extra", [
    ("model", ModelSpec, {"name", "moe", "mla"}), ("moe", MoeSpec, set()), ("mla", MlaSpec, set()),
    ("train", TrainSpec, {"finetune"}), ("finetune", FinetuneSpec, set()), ("parallel", ParallelSpec, set()),
    ("link", Link, {"id"}), ("gpu", Device, {"id", "peak_flops", "achievable", "flash_attention", "derivation"}),
])
def test_schema_fields_are_the_dataclass_fields(section: str, cls: type, extra: set[str]) -> None:
    names = {f.name for f in dataclasses.fields(cls)}
    assert set(schema.SECTIONS[section].fields) | extra == names
