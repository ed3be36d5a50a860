"""search(): the vectorised path equals predict() point by point; reasons, Pareto front, objectives."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmp import dsl
from llmp.compose import predict as _predict
from llmp.search import Objective, load, search
from llmp.search.report import Candidate, SearchResult


def predict(spec, residuals=None):
    """The analytic composition (these tests are about it, not about a shipped residual store)."""
    return _predict(spec, residuals)

def run(path, vary=(), **kwargs):
    """``llmp search PATH --vary ...``: the CLI's load, then the library's search."""
    spec, resolve = load(path, vary=vary)
    return search(spec, resolve=resolve, **{"residuals": None, **kwargs})  # the roofline engine's own order

ROOT = Path(__file__).parents[3]
SWEEP = ROOT / "examples" / "sweep_llama3_8b.llmp"
DERIVED = ROOT / "tests" / "unit" / "dsl" / "fixtures" / "llama_sweep.llmp"
SMALL = ROOT / "tests" / "fixtures" / "small.llmp"


def _predicted(path: Path, overrides: list[str]) -> float:
    return predict(dsl.load(path, overrides)).step_time_s


@pytest.fixture(scope="module")
def tiny():
    return run(SWEEP, vary=["train.recompute=none,full"], top=None)


def test_every_feasible_point_equals_predict(tiny):
    assert tiny.size == 24 and tiny.feasible == len(tiny.ranked) > 0
    for c in tiny.ranked:
        direct = predict(dsl.load(SWEEP, c.overrides()))
        assert c.step_time_s == pytest.approx(direct.step_time_s, rel=1e-9)
        assert c.memory_per_gpu_bytes == pytest.approx(direct.memory_per_gpu_bytes, rel=1e-9)
        assert c.tokens_per_s == pytest.approx(direct.tokens_per_s, rel=1e-9)


def test_finds_the_known_best_of_the_grid(tiny):
    best = None
    for mb in (1, 2, 4):
        for tp in (1, 2, 4, 8):
            for rc in ("none", "full"):
                p = predict(dsl.load(SWEEP, [f"train.micro_batch={mb}", f"parallel.tp={tp}", f"train.recompute={rc}"]))
                if not p.memory.oom and (best is None or p.step_time_s < best[0]):
                    best = (p.step_time_s, mb, tp, rc)
    top = tiny.ranked[0]
    assert (top.config["train.micro_batch"], top.config["parallel.tp"], top.config["train.recompute"]) == best[1:]
    assert top.step_time_s == pytest.approx(best[0], rel=1e-9)
    assert [c.step_time_s for c in tiny.ranked] == sorted(c.step_time_s for c in tiny.ranked)


def test_counts_add_up_and_out_of_memory_matches_predict(tiny):
    assert tiny.feasible + sum(tiny.infeasible.values()) == tiny.size
    oom = sum(predict(dsl.load(SWEEP, [f"train.micro_batch={mb}", f"parallel.tp={tp}",
                                       f"train.recompute={rc}"])).memory.oom
              for mb in (1, 2, 4) for tp in (1, 2, 4, 8) for rc in ("none", "full"))
    assert tiny.infeasible == {"out of memory: more than 80 GiB per GPU": oom}


def test_lower_memory_limit_drops_more():
    loose = run(SWEEP, top=None)
    tight = run(SWEEP, max_memory=40 * 2**30, top=None)
    assert tight.feasible < loose.feasible
    assert all(c.memory_per_gpu_bytes <= 40 * 2**30 for c in tight.ranked)
    assert tight.infeasible["out of memory: more than 40 GiB per GPU"] == loose.size - tight.feasible


def test_infeasible_layouts_are_counted_per_reason():
    result = run(SMALL, vary=["parallel.tp=1,2,3,4", "train.micro_batch=1,2,3"], top=None)
    assert result.size == 12
    assert sum(result.infeasible.values()) + result.feasible == 12
    # tp = 3 divides neither the heads nor the 8 GPUs; micro_batch 3 does not split global_batch 32 over dp.
    assert any(r.startswith("layout mismatch") or "not divisible" in r or "whole" in r for r in result.infeasible)
    assert all(c.config["parallel.tp"] != 3 and c.config["train.micro_batch"] != 3 for c in result.ranked)
    for c in result.ranked:
        assert c.step_time_s == pytest.approx(_predicted(SMALL, c.overrides()), rel=1e-9)


def test_derived_fields_follow_the_varied_ones():
    # llama_sweep derives dp = 32 / (tp * pp * cp) and global_batch = 16 * dp.
    result = run(DERIVED, top=None)
    for c in result.ranked:
        dp = 32 / (c.config["parallel.tp"] * 2)
        assert c.config["parallel.dp"] == dp and c.config["train.global_batch"] == 16 * dp
        varied = [f"parallel.tp={c.config['parallel.tp']}", f"train.micro_batch={c.config['train.micro_batch']}"]
        assert c.step_time_s == pytest.approx(_predicted(DERIVED, varied), rel=1e-9)


def test_layouts_on_a_gpu_count():
    # --vary narrows two layout axes (recompute, ZeRO) to keep the test fast; the rest is enumerated.
    result = run(SMALL, gpus=[2, 4], vary=["train.recompute=selective", "parallel.zero=none,1"], top=None)
    assert {a for a, _ in result.axes} >= {"parallel.tp", "parallel.pp", "parallel.vp", "train.micro_batch",
                                          "parallel.sequence_parallel", "parallel.zero", "train.recompute"}
    assert {c.gpus for c in result.ranked} == {2, 4}
    assert "layout: tp x pp x cp does not divide the GPU count" in result.infeasible
    assert "duplicate: sequence parallelism without tp is the same layout" in result.infeasible
    for c in result.ranked[:: max(1, len(result.ranked) // 12)]:
        assert c.step_time_s == pytest.approx(_predicted(SMALL, c.overrides()), rel=1e-9)
    assert result.pareto_axes == ("gpus", "step_time_s")
    _assert_front(result)


def _assert_front(result):
    points = [(c.gpus if result.pareto_axes[0] == "gpus" else c.cost, c.step_time_s) for c in result.ranked]
    for f in result.pareto:
        fx = f.gpus if result.pareto_axes[0] == "gpus" else f.cost
        assert not any((x <= fx and y <= f.step_time_s) and (x < fx or y < f.step_time_s) for x, y in points)


def test_objectives_order_the_same_points_their_own_way(tiny):
    by_tokens = run(SWEEP, vary=["train.recompute=none,full"], objective=Objective.TOKENS_PER_S, top=None)
    assert [c.tokens_per_s for c in by_tokens.ranked] == sorted((c.tokens_per_s for c in by_tokens.ranked),
                                                                reverse=True)
    by_cost = run(SWEEP, vary=["train.recompute=none,full"], objective="cost", gpu_hour_price=2.0, top=3)
    c = by_cost.ranked[0]
    assert c.cost == pytest.approx(c.gpus * 1e9 / c.tokens_per_s / 3600 * 2.0, rel=1e-12)
    assert len(by_cost.ranked) == 3


def test_memory_limit_follows_each_configurations_gpu():
    result = run(SWEEP, vary=["gpu.memory=40GiB,80GiB"], top=None)
    assert all(c.memory_per_gpu_bytes <= c.config["gpu.memory"] for c in result.ranked)
    assert {c.config["gpu.memory"] for c in result.ranked} == {40 * 2**30, 80 * 2**30}
    assert set(result.infeasible) == {"out of memory: more than 40 GiB per GPU",
                                      "out of memory: more than 80 GiB per GPU"}


def test_hardware_values_are_checked_per_value():
    # A measured ceiling above the datasheet peak (989 TFLOP/s for the H100) is not a machine.
    result = run(SMALL, vary=["gpu.achievable.bf16=500TFLOP/s,1200TFLOP/s"], top=None)
    assert result.size == 2 and result.feasible == 1
    (why,) = result.infeasible
    assert "gpu.achievable.bf16" in why and "gpu.flops.bf16" in why
    assert result.ranked[0].config["gpu.achievable.bf16"] == 500e12


def test_layouts_include_tensor_parallelism_across_nodes_and_equal_predict():
    # The seed's Vista layout: one GPU per node, so tp 2 crosses InfiniBand; search enumerates it.
    vista = ROOT / "examples" / "vista_llemma_7b.llmp"
    result = run(vista, gpus=[16], vary=["train.recompute=full", "parallel.zero=none",
                                            "parallel.sequence_parallel=false", "train.micro_batch=4",
                                            "parallel.vp=1", "parallel.pp=4"], top=None)
    tps = {int(c.config["parallel.tp"]) for c in result.ranked}
    assert tps == {1, 2, 4}
    for c in result.ranked:
        assert c.step_time_s == pytest.approx(_predicted(vista, c.overrides()), rel=1e-9)


def test_layouts_keep_a_varied_schedule_and_drop_the_layouts_it_cannot_run():
    # A varied schedule is taken as given (not swapped for 1F1B/interleaved); layouts it cannot
    # run are dropped with its own reason.
    result = run(SMALL, gpus=[4], vary=["parallel.schedule=zb_h1,zb_v,dualpipe", "train.recompute=selective",
                                           "parallel.zero=1", "parallel.sequence_parallel=true",
                                           "train.micro_batch=2"], top=None)
    schedules = {c.config["parallel.schedule"] for c in result.ranked}
    assert schedules == {"zb_h1", "zb_v", "dualpipe"}
    assert any("schedule = zb_v needs vp = N" in reason for reason in result.infeasible)   # numbers read N
    assert any("schedule = dualpipe needs an even pp" in reason for reason in result.infeasible)
    for c in result.ranked:
        assert c.step_time_s == pytest.approx(_predicted(SMALL, c.overrides()), rel=1e-9)


def test_the_cyclic_collector_is_paused_only_while_searching():
    import gc

    seen = []
    assert gc.isenabled()
    run(SWEEP, top=1, progress=lambda done, total: seen.append(gc.isenabled()))
    assert seen and not any(seen) and gc.isenabled()
    gc.disable()
    try:
        run(SWEEP, top=1)
        assert not gc.isenabled()  # a caller's own choice stays
    finally:
        gc.enable()


def test_the_shown_configurations_are_ordered_by_what_predict_predicts():
    # search prices every layout by the roofline composition; the ones it shows are predicted as
    # llmp predict predicts them (residual store applied) and ordered by that, so a row's step is
    # what its reproduce command prints (issue 27: 2.10 s listed, 2.32 s reproduced).
    spec = dsl.load(ROOT / "examples" / "llama3_8b_dgx_h100.llmp")
    result = search(spec, gpus=[8], top=4)
    assert result.ranked_by and "residuals" in result.ranking()
    shown = [c.predicted_step_time_s for c in result.ranked]
    assert all(t is not None for t in shown) and shown == sorted(shown)
    best = result.ranked[0]
    again = _predict(dsl.load(ROOT / "examples" / "llama3_8b_dgx_h100.llmp", best.overrides()))
    assert again.step_time_s == pytest.approx(best.predicted_step_time_s, rel=1e-9)
    # ... with the band predict gives it, and the verdict on the best two reads those bands
    assert again.band == pytest.approx(best.band_s, rel=1e-9)
    a, b = (c.interval(result.objective) for c in result.ranked[:2])
    assert a[0] <= a[1] <= a[2] and b[0] <= b[1] <= b[2] and a[1] <= b[1]
    assert result.top_two() == (b[1] <= a[2] or a[1] >= b[0])
    verdict = "indistinguishable at 80%" if result.top_two() else "ahead of #2 beyond the 80% band"
    assert verdict in result.to_table()
    assert result.to_dict()["top_two_indistinguishable"] is result.top_two()
    assert result.to_dict()["results"][0]["band_s"] == list(best.band_s)


def test_the_verdict_on_the_best_two_follows_their_bands():
    def shown(point: float, low: float, high: float) -> Candidate:
        return Candidate(config={}, step_time_s=point, tokens_per_s=1e6 / point, mfu=0.5, memory_per_gpu_bytes=1.0,
                         gpus=8, cost=8 * point, predicted_step_time_s=point, band_s=(low, high))

    def verdict(a: Candidate, b: Candidate, objective: Objective = Objective.STEP_TIME) -> bool | None:
        return SearchResult(source="s", objective=objective, axes=(), columns=(), size=2, feasible=2, groups=1,
                            infeasible={}, pruned=0, ranked=(a, b), pareto=(), pareto_axes=("gpus", "step_time_s"),
                            seconds=0.1, memory_limit_bytes=None, gpu_hour_price=1.0, notes=()).top_two()

    assert verdict(shown(1.0, 0.9, 1.2), shown(1.1, 1.0, 1.3)) is True  # #2's point inside #1's band
    assert verdict(shown(1.0, 0.9, 1.05), shown(1.1, 1.08, 1.3)) is False  # apart beyond both bands
    assert verdict(shown(1.0, 0.9, 1.05), shown(1.1, 0.95, 1.3), Objective.COST) is True  # #1 inside #2's
    assert verdict(shown(1.0, 0.9, 1.05), shown(1.1, 1.08, 1.3), Objective.TOKENS_PER_S) is False
