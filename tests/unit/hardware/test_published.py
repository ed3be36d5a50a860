"""The shipped micro-benchmark facts and the catalog ceilings derived from them stay in step."""

from __future__ import annotations

import pytest

from llmp.dsl.catalog import gpus as catalog_devices
from llmp.hardware import published
from llmp.hardware.published import Ceilings, derive
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
    # gh200_96gb: MAMF measured the 144 GB HBM3e 900 W version; mi350x: the 1400 W MI355X; gb300, a40:
    # nothing published.
    for gpu in ("gh200_96gb", "v100_sxm3_32gb", "cpu", "mi350x", "gb300", "a40"):
        assert not derived[gpu].achievable and not derived[gpu].flash_attention, gpu
    assert not derived["b200"].flash_attention and Dtype.TF32 not in derived["h100_sxm5_80gb"].achievable


@pytest.mark.parametrize(("gpu", "bf16", "fp8"), [
    ("gh200_144gb", 828.6, 1535.0),  # the row's "900W 141GiB HBM3e version"
    ("b300", 1769.0, 3353.3),
    ("mi325x", 784.9, None),
    ("mi355x", 1565.0, None),
    ("a100_pcie_80gb", 252.9, None),
])
def test_newly_catalogued_measured_parts_take_their_own_rows(gpu: str, bf16: float, fp8: float | None,
                                                             derived: dict[str, Ceilings]):
    table = derived[gpu].achievable
    assert table[Dtype.BF16].rate == pytest.approx(bf16 * TERA) and "measured on" not in table[Dtype.BF16].how
    assert (Dtype.FP8 in table) == (fp8 is not None)
    if fp8 is not None:
        assert table[Dtype.FP8].rate == pytest.approx(fp8 * TERA)
    # the FlashAttention figures are A100/H100 SXM only: the 300 W A100 PCIe takes the 400 W SXM4's as a bound
    assert not derived[gpu].flash_attention or "upper bound" in derived[gpu].flash_attention[Dtype.FP16].how


def test_the_same_silicon_held_to_less_power_takes_the_measured_rate_as_an_upper_bound(derived: dict[str, Ceilings]):
    capped, full = derived["h100_sxm_96gb_hbm2e_500w"], derived["h100_sxm5_80gb"]
    for table, measured in ((capped.achievable, full.achievable), (capped.flash_attention, full.flash_attention)):
        assert {d: f.rate for d, f in table.items()} == {d: f.rate for d, f in measured.items()}
        assert all("an upper bound: measured on h100_sxm5_80gb at 700 W" in f.how for f in table.values())
    pcie = derived["a100_pcie_80gb"]
    assert pcie.flash_attention[Dtype.FP16].rate == derived["a100_sxm4_80gb"].flash_attention[Dtype.FP16].rate
    # a part at more power never takes a lower-power part's rate, and a measured part keeps its own
    assert "measured on" not in derived["h100_sxm5_80gb"].achievable[Dtype.BF16].how
    assert "measured on" not in pcie.achievable[Dtype.BF16].how


def test_h800_takes_the_h100_ceilings_as_the_same_silicon(derived: dict[str, Ceilings]):
    h800, h100 = derived["h800_sxm5_80gb"], derived["h100_sxm5_80gb"]
    assert {d: f.rate for d, f in h800.achievable.items()} == {d: f.rate for d, f in h100.achievable.items()}
    assert "measured on h100_sxm5_80gb" in h800.achievable[Dtype.BF16].how
    assert h800.flash_attention[Dtype.BF16].rate == h100.flash_attention[Dtype.BF16].rate
