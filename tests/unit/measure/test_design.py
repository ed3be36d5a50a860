"""The sampling design: realistic, deterministic, within its caps, in the kernels' own dims."""

from __future__ import annotations

import numpy as np
import pytest

from llmp.analytic import kernels
from llmp.measure import design


def test_dims_match_the_kernel_contract():
    assert set(design.FAMILIES) == {f.value for f in kernels.Family}
    for family in kernels.Family:
        assert design.DIMS[family.value] == kernels.DIMS[family]


@pytest.mark.parametrize("family", design.FAMILIES)
def test_design_is_deterministic_and_distinct(family):
    first = design.design((family,), design.RANGES["cpu"], ("fp32",), 3, 25)
    again = design.design((family,), design.RANGES["cpu"], ("fp32",), 3, 25)
    other = design.design((family,), design.RANGES["cpu"], ("fp32",), 4, 25)
    assert [c.key for c in first] == [c.key for c in again]
    assert len({c.key for c in first}) == 25
    assert [c.key for c in first] != [c.key for c in other]


@pytest.mark.parametrize("family", design.FAMILIES)
def test_cases_respect_the_work_caps(family):
    r = design.RANGES["cpu"]
    for case in design.design((family,), r, ("fp32", "bf16"), 0, 40):
        assert all(v > 0 for name, v in case.dims if name not in ("causal", "flash", "rms"))
        if family == "gemm":
            m, n, k = case.dim("m"), case.dim("n"), case.dim("k")
            assert 2 * m * n * k <= 1.01 * r.max_flops
            assert case.variant in ("fwd", "dgrad", "wgrad")
        if family == "attention":
            assert case.dim("heads") % case.dim("kv_heads") == 0
        if family in ("elementwise", "copy"):
            assert case.dim("elements") % case.width == 0


def test_gemm_shapes_are_llm_shaped_and_aligned():
    cases = design.design(("gemm",), design.RANGES["cuda"], ("bf16",), 0, 60)
    dims = np.array([[c.dim("m"), c.dim("n"), c.dim("k")] for c in cases])
    assert (dims % 64 == 0).mean() > 0.9  # widths are multiples of 64/128 as in real models
    roles = {c.variant for c in cases}
    assert roles == {"fwd", "dgrad", "wgrad"}


def test_halton_prefix_is_space_filling():
    pts = design.halton(64, 2, 0)
    assert pts.min() >= 0 and pts.max() < 1
    counts = np.histogram2d(pts[:, 0], pts[:, 1], bins=4, range=[[0, 1], [0, 1]])[0]
    assert counts.min() >= 2  # every cell of a 4x4 grid gets points (i.i.d. draws often leave holes)


def test_round_robin_interleaves_families():
    plan = design.design(("gemm", "norm"), design.RANGES["cpu"], ("fp32",), 0, 3)
    assert [c.family for c in plan] == ["gemm", "norm"] * 3


def test_device_table_points_at_catalog_entries():
    from llmp.hardware import names
    from llmp.hardware.catalog import catalog_ids
    from llmp.measure import devices

    gpus = set(catalog_ids()["gpu"])
    assert set(names.CUDA.values()) <= gpus and devices.CPU_ID in gpus
    assert devices.catalog_id("cuda", "NVIDIA H100 80GB HBM3") == "h100_sxm5_80gb"
    assert devices.catalog_id("cuda", "NVIDIA H100 PCIe") is None  # not in the catalog: --device-id


def test_a_narrow_design_ends_instead_of_searching_forever():
    # One dtype and a tiny copy cap hold few distinct snapped sizes: the design must stop at
    # what exists (a --minutes run asks for 400 per family), not loop over duplicates.
    import dataclasses

    narrow = dataclasses.replace(design.RANGES["cpu"], max_bytes=64 * 1024)
    got = design.design(("copy",), narrow, ("fp32",), 0, 400)
    assert 0 < len(got) < 400
    assert len({c.key for c in got}) == len(got)


def test_halton_blocks_continue_the_same_sequence():
    whole = design.halton(300, 3, 7)
    assert np.array_equal(design.halton(44, 3, 7, start=256), whole[256:])
