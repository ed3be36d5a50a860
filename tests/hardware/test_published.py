"""The shipped micro-benchmark facts and the catalog ceilings derived from them stay in step."""

from __future__ import annotations

import pytest

from llmp.hardware import published
from llmp.hardware.published import Ceilings, catalog_devices, derive
from llmp.hardware.spec import Dtype

TERA = 1e12


@pytest.fixture(scope="module")
def derived() -> dict[str, Ceilings]:
    return derive(catalog_devices())


def test_fact_files_ship_as_package_data():
    assert len(published.rows(published.MAMF_FILE)) == 21
    assert len(published.rows(published.FLASH_FILE)) == 348


@pytest.mark.parametrize("gpu", sorted(catalog_devices()))
def test_the_catalog_holds_exactly_the_derived_ceilings(gpu: str, derived: dict[str, Ceilings]):
    device = catalog_devices()[gpu]
    for block in ("achievable", "flash_attention"):
        want = {d: f.rate for d, f in getattr(derived[gpu], block).items()}
        have = getattr(device, block)
        if not want:
            assert have is None, f"{gpu}: {block} block without a published fact"
            continue
        assert have is not None, f"{gpu}: derived {block} {want} missing from the catalog"
        assert have.rates == pytest.approx(want), gpu
        assert have.source and "llmp/hardware/published/" in have.source


def test_measured_rates_are_below_the_datasheet_peak(derived: dict[str, Ceilings]):
    devices = catalog_devices()
    for gpu, c in derived.items():
        for table in (c.achievable, c.flash_attention):
            for dtype, fact in table.items():
                assert 0 < fact.rate < devices[gpu].peak_flops[dtype], (gpu, dtype)


def test_known_values_and_transfers(derived: dict[str, Ceilings]):
    h100, h200, a40, a80 = (derived[g] for g in ("h100_sxm5_80gb", "h200_sxm_141gb", "a100_sxm4_40gb",
                                                "a100_sxm4_80gb"))
    assert h100.achievable[Dtype.BF16].rate == pytest.approx(794.5 * TERA)
    assert h100.achievable[Dtype.FP8].rate == pytest.approx(1402.6 * TERA)
    assert h200.achievable[Dtype.BF16].rate == h100.achievable[Dtype.BF16].rate  # same part: transferred
    assert h200.achievable[Dtype.FP8].rate == pytest.approx(1453.4 * TERA)  # its own row wins
    assert {d: f.rate for d, f in a40.achievable.items()} == {d: f.rate for d, f in a80.achievable.items()}
    assert "measured on a100_sxm4_80gb" in a40.achievable[Dtype.BF16].how
    assert a80.flash_attention[Dtype.FP16].rate == pytest.approx(203 * TERA)  # FA2 fwd+bwd, d128, 16k
    assert h100.flash_attention[Dtype.BF16].rate == pytest.approx(338 * TERA)
    assert "FlashAttention-2" in h100.flash_attention[Dtype.FP16].how  # FA3's forward-only figure sets no ceiling
    # fp16 takes the bf16 rate only at equal datasheet peaks
    assert h100.achievable[Dtype.FP16].rate == h100.achievable[Dtype.BF16].rate
    assert "equal datasheet peaks" in h100.achievable[Dtype.FP16].how


def test_parts_that_were_not_measured_keep_the_datasheet(derived: dict[str, Ceilings]):
    for gpu in ("gh200", "v100_sxm3_32gb", "cpu"):  # GH200: MAMF measured another memory/power version
        assert not derived[gpu].achievable and not derived[gpu].flash_attention
    assert not derived["b200"].flash_attention and Dtype.TF32 not in derived["h100_sxm5_80gb"].achievable
