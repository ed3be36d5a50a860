"""Sample files -> observations: catalog nodes of any size, variants carried, bad files refused."""

from __future__ import annotations

import pytest

from llmp.analytic.kernels import Family
from llmp.errors import InputError, LlmpError
from llmp.measure import sampling
from llmp.residuals import dataset, samplefile

COLLECTIVE_COLUMNS = ("key", "kind", "bytes", "group", "ranks_per_node", "tier", "dtype", "backend", "time_s",
                      "p10_s", "p90_s", "repeats", "error")  # as llmp.measure.collectives writes them


@pytest.mark.parametrize(("device", "node", "gpus"), [
    ("a100_sxm4_80gb", "dgx_a100", 8), ("a100_sxm4_40gb", "perlmutter_gpu", 4),
    ("a100_sxm4_80gb", "perlmutter_gpu_80gb", 4), ("h100_sxm5_80gb", "dgx_h100", 8), ("cpu", "cpu_host", 1),
])
def test_catalog_node_resolves_nodes_of_any_size(device, node, gpus):
    resolved = dataset.catalog_node(device, node)
    assert resolved.id == node and resolved.gpu.id == device and resolved.gpus_per_node == gpus
    links = dataset.node_links(resolved)
    assert links.gpus_per_node == gpus and links.intra_bandwidth > 0


@pytest.mark.parametrize(("device", "node", "match"), [
    ("a100_sxm4_40gb", "perlmutter", "is a cluster"),
    ("a100_sxm4_80gb", "perlmutter_gpu", "holds device 'a100_sxm4_40gb'"),
    ("a100_sxm4_80gb", "no_such_node", "not a catalog node"),
    ("no_such_gpu", "dgx_a100", "not a catalog device"),
])
def test_catalog_node_errors_name_the_fix(device, node, match):
    with pytest.raises(InputError, match=match):
        dataset.catalog_node(device, node)


def test_catalog_device_errors_name_the_fix():
    with pytest.raises(InputError, match="not a catalog device"):
        dataset.catalog_device("no_such_gpu")
    assert dataset.catalog_device("gh200").id == "gh200_96gb"  # a retired id names its entry


def _collectives(path, node_id, rows):
    meta = {"device_id": "a100_sxm4_80gb", "node_id": node_id, "timing": "synthetic"}
    with samplefile.Appender(path, COLLECTIVE_COLUMNS, meta) as out:
        for i, (kind, group, tier) in enumerate(rows):
            out.append({"key": f"{kind}/{i}", "kind": kind, "bytes": 2**20 * (i + 1), "group": group,
                        "ranks_per_node": min(group, 8), "tier": tier, "dtype": "bf16", "backend": "nccl",
                        "time_s": 1e-4 * (i + 1), "p10_s": 1e-4, "p90_s": 1e-4, "repeats": 5, "error": ""})


def test_collective_samples_of_a_dgx_node_load(tmp_path):
    """The bug this guards: the probe spec had global_batch = 1, so any node with more than one
    GPU failed and `llmp fit` could not read collectives sampled on a DGX."""
    _collectives(tmp_path / "collectives.csv", "dgx_a100", [("all_reduce", 8, "intra"), ("all_gather", 16, "inter")])
    data = dataset.load([tmp_path])
    assert len(data.observations) == 2 and data.devices[0].id == "a100_sxm4_80gb"
    assert all(o.links.gpus_per_node == 8 for o in data.observations)


def test_kernel_of_carries_the_variant_of_every_family_but_the_gemm_role():
    norm = dataset.kernel_of({"family": "norm", "pass": "fwd", "variant": "unfused", "dtype": "bf16",
                              "tokens": "64", "hidden": "128", "rms": "1"})
    assert norm.family is Family.NORM and norm.variant == "unfused"
    gemm = dataset.kernel_of({"family": "gemm", "pass": "bwd", "variant": "dgrad", "dtype": "bf16",
                              "m": "8", "n": "8", "k": "8", "batch": "1"})
    assert gemm.variant == ""


def _kernel_file(path, rows, meta=None, columns=None):
    columns = columns or sampling.columns("norm")
    with samplefile.Appender(path, columns, meta or {"device_id": "cpu"}) as out:
        for row in rows:
            out.append({c: row.get(c, "") for c in columns})


GOOD = {"key": "k0", "family": "norm", "pass": "fwd", "variant": "", "dtype": "fp32", "tokens": "64",
        "hidden": "128", "rms": "1", "width": "128", "time_s": "1e-5", "p10_s": "1e-5", "p90_s": "1e-5",
        "repeats": "3", "error": ""}

BAD_ROWS = [
    ("family", {"family": "teleport"}, "family 'teleport' is not one of"),
    ("dtype", {"dtype": "fp7"}, "dtype 'fp7'"),
    ("pass", {"pass": "sideways"}, "pass 'sideways'"),
    ("dim text", {"tokens": "many"}, "tokens 'many' is not a whole number"),
    ("dim zero", {"hidden": "0"}, "hidden 0 must be at least 1"),
    ("dim empty", {"tokens": ""}, "tokens '' is not a whole number"),
]


@pytest.mark.parametrize(("change", "match"), [c[1:] for c in BAD_ROWS], ids=[c[0] for c in BAD_ROWS])
def test_a_row_with_bad_values_is_refused_naming_file_and_row(tmp_path, change, match):
    _kernel_file(tmp_path / "norm.csv", [GOOD, {**GOOD, "key": "bad", **change}])
    with pytest.raises(InputError, match=match) as err:
        dataset.load([tmp_path])
    assert "norm.csv" in err.value.message and "'bad'" in err.value.message


@pytest.mark.parametrize("time_s", ["nan", "inf", "-1e-5", "0", "fast", ""])
def test_rows_without_a_usable_time_are_skipped_and_counted(tmp_path, time_s):
    _kernel_file(tmp_path / "norm.csv", [GOOD, {**GOOD, "key": "k1", "time_s": time_s}])
    data = dataset.load([tmp_path])
    assert len(data.observations) == 1 and data.skipped == {"failed or empty rows": 1}


BAD_FILES = [
    ("not a sample file", lambda p: p.write_text("key,family\nk,norm\n"), "not an llmp sample file"),
    ("header not json", lambda p: p.write_text("# llmp-samples 1\n# {oops\nkey\n"), "JSON header"),
    ("header a list", lambda p: p.write_text('# llmp-samples 1\n# [1]\nkey,time_s\nk,1\n'), "JSON object"),
    ("no device", lambda p: _kernel_file(p, [GOOD], meta={"device_name": "mystery"}),
     "does not name its catalog device"),
    ("unknown device", lambda p: _kernel_file(p, [GOOD], meta={"device_id": "quantum9000"}), "not a catalog device"),
    ("missing column", lambda p: _kernel_file(p, [GOOD], columns=("key", "family", "pass", "dtype", "time_s")),
     "column 'tokens' is missing"),
    ("missing time", lambda p: _kernel_file(p, [GOOD], columns=("key", "family", "pass", "variant", "dtype")),
     "no column time_s"),
    ("collectives without a node", lambda p: _collectives(p, None, [("all_reduce", 8, "intra")]),
     "need the catalog node"),
]


@pytest.mark.parametrize(("write", "match"), [c[1:] for c in BAD_FILES], ids=[c[0] for c in BAD_FILES])
def test_a_bad_sample_file_is_refused(tmp_path, write, match):
    write(tmp_path / "samples.csv")
    with pytest.raises(LlmpError, match=match):
        dataset.load([tmp_path])
