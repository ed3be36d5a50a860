"""``llmp sample --plan``: the design priced on the catalog roofline, and ``--per-operator K``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tiny_ranges import TINY

from llmp.cli import main
from llmp.measure import collectives, design, estimate, sampling
from llmp.residuals import dataset, features
from llmp.residuals.model import stratum_of

H100 = dataset.catalog_device("h100_sxm5_80gb")


def _row(case: design.Case) -> dict[str, str]:
    return {"family": case.family, "pass": case.pass_, "variant": case.variant, "dtype": case.dtype,
            **{n: str(v) for n, v in case.dims}}


@pytest.mark.parametrize("family", design.FAMILIES)
def test_a_case_is_priced_as_the_fit_reads_its_row(family: str) -> None:
    """The plan's kernel and roofline are the ones llmp fit derives from the case's sample row."""
    for case in design.per_stratum_prefix(family, design.RANGES["cuda"], ("bf16", "fp32"), 0, 1):
        kernel = dataset.kernel_of(_row(case))
        assert estimate.kernel(case) == kernel and stratum_of(kernel) == case.stratum
        call, _ = estimate.call_s(case, H100)
        assert call == pytest.approx(features.roofline_seconds(kernel, H100)[1])


def test_a_case_costs_its_repeats_at_the_roofline() -> None:
    case = next(design.cases("gemm", design.RANGES["cuda"], ("bf16",), 0))
    kernel = dataset.kernel_of(_row(case))
    _, call = features.roofline_seconds(kernel, H100)
    seconds = estimate.kernel_case_s(case, H100, target_s=0.15, memory_cap=2**30)
    repeats = min(30, max(5, 0.15 / call))
    assert seconds >= estimate.CASE_OVERHEAD_S + (3 + repeats) * call
    assert seconds < estimate.CASE_OVERHEAD_S + (3 + repeats) * call + 8 * 2**30 / float(H100.mem_bandwidth)


def _config(**changes: object) -> sampling.SampleConfig:
    return sampling.SampleConfig(out=Path("."), device="cuda", per_family=10, **changes)  # type: ignore[arg-type]


def test_more_samples_take_longer_and_more_ranks_less_wall_time() -> None:
    small = estimate.estimate(_config(per_stratum=1), device_id="h100_sxm5_80gb", collectives_too=False,
                              per_stratum=1, node_id=None, nodes=1, ranks_per_node=8)
    large = estimate.estimate(_config(per_stratum=4), device_id="h100_sxm5_80gb", collectives_too=False,
                              per_stratum=4, node_id=None, nodes=1, ranks_per_node=8)
    assert large.gpu_minutes > small.gpu_minutes > 0
    assert all(a.cases <= b.cases for a, b in zip(small.families, large.families))
    wide = estimate.estimate(_config(per_stratum=4), device_id="h100_sxm5_80gb", collectives_too=False,
                             per_stratum=4, node_id=None, nodes=2, ranks_per_node=8)
    assert wide.gpu_minutes == pytest.approx(large.gpu_minutes) and wide.wall_minutes < large.wall_minutes


def test_collectives_occupy_every_gpu_of_the_plan() -> None:
    plan = estimate.estimate(_config(families=("copy",)), device_id="h100_sxm5_80gb", collectives_too=True,
                             per_stratum=3, node_id="dgx_h100", nodes=2, ranks_per_node=None)
    coll = plan.families[0]
    assert coll.family == "collectives" and plan.ranks == 16
    assert coll.cases == len(collectives.plan(8, 2, "cuda", 3, 0))
    assert coll.gpu_s == pytest.approx(coll.wall_s * 16) and coll.strata == 10


def test_the_cli_prints_the_library_plan(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["sample", "--plan", "--json", "--device", "cuda", "--device-id", "h100_sxm5_80gb", "--per-operator", "2",
            "--families", "gemm,norm,collectives", "--node-id", "dgx_h100", "--nodes", "2"]
    assert main(argv) == 0
    shown = json.loads(capsys.readouterr().out)
    plan = estimate.estimate(_config(per_stratum=2, families=("gemm", "norm"), progress=True,
                                     ranges=design.RANGES["cuda"].scaled(1.0)),
                             device_id="h100_sxm5_80gb", collectives_too=True, per_stratum=2, node_id="dgx_h100",
                             nodes=2, ranks_per_node=None)
    assert shown == json.loads(json.dumps(plan.to_dict()))
    assert shown["per_operator"] == 2 and [f["family"] for f in shown["families"]] == ["collectives", "gemm", "norm"]
    assert main(argv[:2] + argv[3:]) == 0
    table = capsys.readouterr().out
    assert "GPU-min" in table and "nothing was measured" in table


def test_the_plan_prices_the_cases_a_run_measures(tmp_path: Path) -> None:
    """The plan's cases are the run's: --per-operator measures exactly the plan's count."""
    config = sampling.SampleConfig(out=tmp_path, families=("copy", "norm"), ranges=TINY, per_stratum=2,
                                   target_s=0.002, progress=False)
    report = sampling.run(config)
    plan = estimate.estimate(config, device_id=None, collectives_too=False, per_stratum=2, node_id=None, nodes=1,
                             ranks_per_node=None)
    assert report.measured == sum(f.cases for f in plan.families)
    assert plan.device_id == "cpu"
