"""The cross-GPU model: it transfers what the GPUs agree on, and falls back to the roofline where
they disagree, so a GPU nobody measured is never made worse than its bare roofline."""

from __future__ import annotations

import math

import numpy as np
import pytest
from residual_helpers import synthetic

from llmp.errors import NotFittedError
from llmp.residuals import dataset, features
from llmp.residuals.model import Observation
from llmp.residuals.transfer import SINGLE_GPU_SHRINK, CrossGpuModel, operator_of

GPUS = ("a100_sxm4_80gb", "h100_sxm5_80gb", "b200", "mi300x")


@pytest.fixture(scope="module")
def devices():
    return {g: dataset.catalog_device(g) for g in GPUS}


def _shifted(obs: list[Observation], shift: float) -> list[Observation]:
    return [Observation(item=o.item, device=o.device, seconds=o.seconds * math.exp(shift)) for o in obs]


def _mape(model, obs: list[Observation]) -> tuple[float, float]:
    device = obs[0].device
    items = [o.item for o in obs]
    pred = model.predict(items, device)
    roof = np.asarray([features.roofline_seconds(it, device)[1] for it in items])
    sec = np.asarray([o.seconds for o in obs])
    return (float(np.mean(np.abs(roof * np.exp(pred.log_factor) / sec - 1))),
            float(np.mean(np.abs(roof / sec - 1))))


def test_what_every_gpu_agrees_on_transfers_to_a_gpu_never_measured(devices):
    data = {g: synthetic(d, ("norm",), 40, seed=i) for i, (g, d) in enumerate(devices.items())}
    model = CrossGpuModel().fit([o for g in GPUS[:3] for o in data[g]])
    fit = model.families_["norm/fp32"]
    assert fit.candidate.kind != "roofline"
    err, roof = _mape(model, data["mi300x"])
    assert err < 0.5 * roof


def test_where_gpus_disagree_in_sign_the_roofline_is_kept(devices):
    # Each GPU's factors are shifted so their operator medians disagree in sign: nothing transfers.
    shifts = {"a100_sxm4_80gb": -2.5, "h100_sxm5_80gb": 1.5, "b200": -1.8, "mi300x": 0.0}
    data = {g: _shifted(synthetic(d, ("elementwise",), 40, seed=i), shifts[g])
            for i, (g, d) in enumerate(devices.items())}
    model = CrossGpuModel().fit([o for g in GPUS[:3] for o in data[g]])
    fit = model.families_["elementwise/fp32"]
    assert fit.candidate.kind == "roofline"
    for held in fit.logo.values():
        assert held["mape"] == pytest.approx(held["roofline_mape"])
    pred = model.predict([o.item for o in data["mi300x"]], devices["mi300x"])
    assert np.all(pred.log_factor == 0) and np.all(pred.has_model)


def test_a_family_measured_on_one_gpu_transfers_at_half_strength_out_of_domain(devices):
    # Issue 24: one GPU's factor made embedding and LayerNorm backward worse than the roofline on
    # a GPU nobody measured, unflagged. One GPU is no evidence that a factor transfers: flagged.
    obs = synthetic(devices["a100_sxm4_80gb"], ("softmax",), 30)
    model = CrossGpuModel().fit(obs)
    fit = model.families_["softmax/fp32"]
    assert fit.candidate.lam == SINGLE_GPU_SHRINK and fit.logo == {}
    op = operator_of(obs[0].item)
    assert op in fit.lone
    pred = model.predict([obs[0].item], devices["h100_sxm5_80gb"])
    assert pred.log_factor[0] == pytest.approx(SINGLE_GPU_SHRINK * fit.offsets[op])
    assert pred.has_model[0] and not pred.in_domain[0] and fit.q > 0


def test_an_operator_one_gpu_measured_is_flagged_where_others_transfer(devices):
    data = [o for i, (g, d) in enumerate(devices.items()) if g != "mi300x" for o in synthetic(d, ("norm",), 40, seed=i)]
    ops = sorted({operator_of(o.item) for o in data})
    lone = ops[0]  # keep this operator's rows on one GPU only
    data = [o for o in data if operator_of(o.item) != lone or o.device.id == "b200"]
    model = CrossGpuModel().fit(data)
    fit = model.families_["norm/fp32"]
    assert fit.lone == (lone,) and fit.candidate.kind != "roofline"
    items = [o.item for o in data if o.device.id == "b200"]
    pred = model.predict(items, devices["mi300x"])
    is_lone = np.asarray([operator_of(it) == lone for it in items])
    assert is_lone.any() and not pred.in_domain[is_lone].any() and pred.in_domain[~is_lone].any()


def test_an_operator_no_gpu_measured_serves_the_roofline_out_of_domain(devices):
    data = [o for i, (g, d) in enumerate(devices.items()) for o in synthetic(d, ("norm",), 40, seed=i)]
    model = CrossGpuModel().fit([o for o in data if o.item.pass_.value == "fwd"])
    bwd = [o.item for o in data if o.item.pass_.value == "bwd"][:5]
    assert bwd and all(operator_of(it) not in model.families_["norm/fp32"].offsets for it in bwd)
    pred = model.predict(bwd, devices["b200"])
    assert np.all(pred.log_factor == 0) and pred.has_model.all() and not pred.in_domain.any()


def test_the_band_comes_from_held_out_gpus_and_covers_them(devices):
    data = {g: synthetic(d, ("norm",), 40, seed=i, noise=0.1) for i, (g, d) in enumerate(devices.items())}
    model = CrossGpuModel(alpha=0.2).fit([o for g in GPUS for o in data[g]])
    fit = model.families_["norm/fp32"]
    assert set(fit.logo) == set(GPUS)
    assert fit.q > 0


def test_unknown_families_stay_uncovered(devices):
    obs = synthetic(devices["a100_sxm4_80gb"], ("norm",), 20) + synthetic(devices["b200"], ("norm",), 20, seed=3)
    model = CrossGpuModel().fit(obs)
    other = synthetic(devices["h100_sxm5_80gb"], ("gemm",), 3)
    pred = model.predict([o.item for o in other], devices["h100_sxm5_80gb"])
    assert not pred.has_model.any() and not pred.in_domain.any()
    norm = model.predict([o.item for o in obs[:3]], devices["h100_sxm5_80gb"])
    assert norm.has_model.all() and norm.in_domain.all()  # its band already is the held-out-GPU error


def test_unfitted_model_says_so(devices):
    with pytest.raises(NotFittedError):
        CrossGpuModel().predict([], devices["b200"])


def test_a_saved_model_predicts_the_same_and_a_tampered_one_is_refused(devices, tmp_path):
    import json

    from llmp.errors import ResidualSchemaError
    from llmp.residuals.transfer import from_manifest, to_manifest

    data = [o for i, (g, d) in enumerate(devices.items()) for o in synthetic(d, ("norm", "gemm"), 30, seed=i)]
    model = CrossGpuModel().fit(data)
    entries = json.loads(json.dumps(to_manifest(model, tmp_path)))
    again = from_manifest(entries, tmp_path, alpha=model.alpha, seed=0)
    items = [o.item for o in data[:20]]
    a, b = model.predict(items, devices["b200"]), again.predict(items, devices["b200"])
    assert np.allclose(a.log_factor, b.log_factor) and np.allclose(a.q, b.q)
    bad = [dict(e, q=float("nan")) for e in entries]
    with pytest.raises(ResidualSchemaError, match="malformed"):
        from_manifest(bad, tmp_path, alpha=0.1, seed=0)
    bad = [dict(e, candidate={"kind": "magic", "lam": 1}) for e in entries]
    with pytest.raises(ResidualSchemaError, match="malformed"):
        from_manifest(bad, tmp_path, alpha=0.1, seed=0)


def test_collectives_transfer_across_machines_by_tier(devices):
    from llmp.analytic.collectives import Links
    from llmp.analytic.kernels import Collective, CollectiveKind, Tier

    rng = np.random.default_rng(0)
    machines = {g: Links(gpus_per_node=8, intra_bandwidth=bw, intra_latency=3e-6, inter_bandwidth=bw / 4,
                         inter_latency=5e-6) for g, bw in zip(GPUS, (240e9, 360e9, 720e9, 400e9))}
    obs = []
    for g, links in machines.items():
        for _ in range(30):
            c = Collective(kind=CollectiveKind.ALL_REDUCE, bytes=int(2 ** rng.uniform(16, 30)), group=8,
                           ranks_per_node=8, tier=Tier.INTRA)
            _, base = features.collective_row(c, links)
            obs.append(Observation(item=c, device=devices[g], seconds=base * math.exp(0.4 + rng.normal(0, 0.02)),
                                   links=links))
    model = CrossGpuModel().fit([o for o in obs if o.device.id != "mi300x"])
    fit = model.families_["all_reduce"]
    assert fit.candidate.kind != "roofline" and set(fit.offsets) == {"intra"}
    test = [o for o in obs if o.device.id == "mi300x"]
    pred = model.predict([o.item for o in test], devices["mi300x"], links=machines["mi300x"])
    assert np.allclose(pred.log_factor, 0.4 * fit.candidate.lam, atol=0.1)


def test_a_saved_cross_gpu_store_loads_and_fills_what_a_device_store_lacks(devices, tmp_path):

    from llmp import dsl
    from llmp.analytic.graph import decompose
    from llmp.residuals import saving, store
    from llmp.residuals.model import ResidualModel

    data = [o for i, (g, d) in enumerate(devices.items())
            for o in synthetic(d, ("norm", "gemm", "elementwise"), 30, seed=i)]
    root = tmp_path / "defaults"
    saving.save_cross_gpu(CrossGpuModel().fit(data), root / store.CROSS_GPU, devices=list(devices.values()))
    cross = store.load(root / store.CROSS_GPU)
    assert cross.scope == "cross-GPU" and set(cross.families()) == {"norm", "gemm", "elementwise"}
    h100 = devices["h100_sxm5_80gb"]
    own = ResidualModel(xgb_params={"n_estimators": 20, "n_jobs": 1}).fit([o for o in data if o.device.id == h100.id
                                                                          and o.item.family.value == "gemm"])
    saving.save(own, root / h100.id, devices=[h100])
    spec = dsl.loads('use "dgx_h100"\ncluster c { node = dgx_h100  nodes = 1 }\n'
                     "model m { arch = llama  layers = 2  hidden = 1024  heads = 8  ffn_hidden = 2816  vocab = 32000  "
                     "seq_len = 1024 }\n"
                     "train { precision = fp32  global_batch = 8 }\n")
    choice = store.default_for(h100, root=root)
    assert isinstance(choice.residuals, store.Layered) and "families it has no model of" in choice.note
    items = [op.work for op in decompose(spec).ops]
    layered = choice.residuals.correct(items, spec)
    alone = store.load(root / h100.id).correct(items, spec)
    fallback = cross.correct(items, spec)
    gemm = np.asarray([getattr(it, "family", None) is not None and it.family.value == "gemm" for it in items])
    norm = np.asarray([getattr(it, "family", None) is not None and it.family.value == "norm" for it in items])
    assert np.allclose(layered.factor[gemm], alone.factor[gemm])
    assert np.allclose(layered.factor[norm], fallback.factor[norm]) and layered.covered[norm].all()
    assert not alone.covered[norm].any()


def test_a_cross_gpu_store_adapted_to_a_new_gpu_saves_serves_it_and_beats_k_0(devices, tmp_path):
    from llmp.residuals import adapt, saving, store

    data = [o for i, (g, d) in enumerate(devices.items()) if g != "mi300x"
            for o in synthetic(d, ("norm", "gemm"), 30, seed=i)]
    base_dir = tmp_path / "cross"
    saving.save_cross_gpu(CrossGpuModel().fit(data), base_dir, devices=[d for g, d in devices.items() if g != "mi300x"])
    base = store.load(base_dir)
    new = _shifted(synthetic(devices["mi300x"], ("norm", "gemm"), 80, seed=9), 0.7)
    result = adapt.adapt(base, new[:40], budget=10)
    out = tmp_path / "adapted"
    saving.save(base.model, out, devices=[devices["mi300x"], devices["b200"]], serves=["mi300x"],
               adjustments=result.adjustments)
    adapted = store.load(out)
    assert adapted.serves == ("mi300x",) and adapted.refusal(devices["b200"]) is not None
    test = new[40:]
    before, _ = _mape(base, test)
    after, _ = _mape(adapted, test)
    assert after < before


def test_a_dtype_nobody_measured_borrows_its_same_width_sibling(devices):
    import dataclasses as dc

    from llmp.hardware.spec import Dtype

    data = [o for i, (g, d) in enumerate(devices.items()) for o in synthetic(d, ("norm",), 30, seed=i)]
    fp16 = [Observation(item=dc.replace(o.item, dtype=Dtype.FP16), device=o.device, seconds=o.seconds) for o in data]
    model = CrossGpuModel().fit(fp16)
    assert set(model.families_) == {"norm/fp16"}
    item = fp16[0].item
    as_bf16 = dc.replace(item, dtype=Dtype.BF16)
    a = model.predict([item], devices["b200"])
    b = model.predict([as_bf16], devices["b200"])
    assert b.has_model[0] and b.log_factor[0] == pytest.approx(a.log_factor[0], abs=0.05)
    fp8 = dc.replace(item, dtype=Dtype.FP8)
    assert not model.predict([fp8], devices["b200"]).has_model[0]
