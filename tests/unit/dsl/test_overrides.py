"""``--set section.field=value``: same syntax and checks as the file, diagnostics into the flag."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from test_resolve import DEBUG_PATH, debug

from llmp.dsl import add_set_argument, load, load_args
from llmp.errors import LlmpSyntaxError, SpecError
from llmp.spec.spec import Precision, Sweep


def test_overrides_replace_fields() -> None:
    spec = debug(overrides=("parallel.tp=4", "train.precision=fp32", "gpu.memory=48 GiB",
                            "node.intra.bandwidth=600 GB/s", "cluster.nodes=4", "model.layers=16"))
    assert (spec.parallel.tp, spec.parallel.dp) == (4, 2)  # dp re-derived: 16 / (4 * 2)
    assert spec.train.precision is Precision.FP32
    assert spec.cluster.gpu.memory == 48 * 2**30
    assert spec.cluster.node.intra.bandwidth == 600e9
    assert spec.model.layers == 16


def test_overrides_are_expressions_with_references() -> None:
    spec = debug(overrides=("train.global_batch=8 * parallel.dp * train.micro_batch",
                            "parallel.pp = 1", "parallel.dp=8 / tp"))
    assert (spec.parallel.dp, spec.train.global_batch) == (4, 64)


def test_an_override_may_add_a_field_the_file_omits() -> None:
    spec = debug(overrides=("model.kv_heads=2", "model.moe.experts=4", "model.moe.top_k=1",
                            "parallel.sequence_parallel=true"))
    assert spec.model.kv_heads == 2
    assert spec.model.moe is not None and spec.model.moe.experts == 4


def test_cluster_inter_override_leaves_the_node_link_alone() -> None:
    spec = debug(overrides=("cluster.inter.bandwidth=25 GB/s",))
    assert spec.cluster.inter.bandwidth == 25e9
    assert spec.cluster.node.inter.bandwidth == 50e9


def test_later_overrides_win_and_train_parallel_is_an_alias() -> None:
    assert debug(overrides=("parallel.tp=1", "train.parallel.tp=4", "parallel.pp=1")).parallel.tp == 4


def test_sweeps_and_symbols_through_set() -> None:
    spec = debug(overrides=("parallel.tp=[1, 2, 4]", "gpu.mem_bandwidth=symbol"))
    assert spec.sweeps == (Sweep(path="parallel.tp", values=(1, 2, 4)),)
    assert spec.symbols == ("gpu.mem_bandwidth",)


def test_setting_a_swept_field_removes_the_sweep() -> None:
    spec = debug(("    tp = 2", "    tp = [2, 4]"), overrides=("parallel.tp=1",))
    assert spec.sweeps == () and spec.parallel.tp == 1


@pytest.mark.parametrize("overrides,label,column,fragment", [
    (("model.hiden=1024",), "unknown path", 1, "did you mean 'model.hidden'?"),
    (("gpu.mem_bandwith=2 TB/s",), "unknown path", 1, "did you mean 'gpu.mem_bandwidth'?"),
    (("parallel.tp=4 GiB",), "wrong unit", 13, "drop the unit"),
    (("gpu.memory=80",), "wrong unit", 12, "add a unit, e.g. 80 GiB"),
    (("parallel.tp",), "bad override", 1, "e.g. --set parallel.tp=8"),
    (("parallel.tp=",), "bad override", 1, "e.g. --set parallel.tp=8"),
    (("train.precision=bf61",), "unknown value", 17, "did you mean 'bf16'?"),
    (("parallel.tp=3",), "layout mismatch", 13, None),
    (("parallel.dp=4",), "layout mismatch", 13, None),
])
def test_bad_overrides(overrides: tuple[str, ...], label: str, column: int,
                       fragment: str | None) -> None:
    with pytest.raises(SpecError) as err:
        debug(overrides=overrides)
    e = err.value
    assert (e.label, e.span.file, e.span.line, e.span.column) == (label, "--set", 1, column)
    assert e.source_line == overrides[0]
    assert fragment is None or fragment in (e.hint or "")


def test_syntax_errors_in_an_override_point_into_it() -> None:
    with pytest.raises(LlmpSyntaxError) as err:
        debug(overrides=("parallel.pp=1", "parallel.tp=[4, 8"))
    e = err.value
    assert (e.span.file, e.span.line, e.span.column) == ("--set", 2, 18)
    assert e.source_line == "parallel.tp=[4, 8"
    assert e.render().splitlines()[0].startswith("--set:2:18: error:")


def test_argparse_helper() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("spec")
    add_set_argument(parser)
    args = parser.parse_args([str(DEBUG_PATH), "--set", "parallel.tp=4", "--set", "parallel.pp=1"])
    assert args.set == ["parallel.tp=4", "parallel.pp=1"]
    assert load_args(args).parallel.tp == 4
    assert load_args(parser.parse_args([str(DEBUG_PATH)])).parallel.tp == 2


def test_load_takes_overrides(tmp_path: Path) -> None:
    assert load(DEBUG_PATH, ["model.hidden=1024"]).model.hidden == 1024


def test_node_inter_override_reaches_a_cluster_without_its_own_link() -> None:
    # The debug cluster names no inter link, so it runs on the node's: moving the node's NICs
    # must move the cluster's too (sensitivity once saw a zero derivative here).
    spec = debug(overrides=("node.inter.bandwidth=1 GB/s",))
    assert spec.cluster.node.inter.bandwidth == 1e9
    assert spec.cluster.inter.bandwidth == 1e9
