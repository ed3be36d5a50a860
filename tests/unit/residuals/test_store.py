"""The store: round trip, strict read-only loading of damaged stores, serving only the devices it
was fitted for, lazy group files, the correction contract, the default choice, shipped stores."""

from __future__ import annotations

import dataclasses
import json
import shutil

import numpy as np
import pytest
from residual_helpers import FAST_XGB, TINY_FAMILIES, synthetic
from tiny_specs import TINY_GPT

from llmp import dsl
from llmp.analytic.graph import decompose
from llmp.errors import InputError, ResidualSchemaError
from llmp.residuals import dataset, saving, store
from llmp.residuals.model import ResidualModel

FAMILIES = TINY_FAMILIES


@pytest.fixture(scope="module")
def cross(cpu, fitted, tmp_path_factory):
    """The same trees saved as a cross-GPU store (serves any device)."""
    path = tmp_path_factory.mktemp("cross")
    saving.save(fitted[0], path, devices=[cpu], serves="any")
    return path


def _copy(path, tmp_path):
    dst = tmp_path / "copy"
    shutil.copytree(path, dst)
    return dst


def _h100_spec():
    return dsl.loads(TINY_GPT.replace('use "cpu_host"', 'use "dgx_h100"').replace("cpu_host", "dgx_h100")
                     .replace("fp32", "bf16").replace("global_batch = 4", "global_batch = 16"))


def test_round_trip_predicts_the_same(fitted, cpu, tmp_path):
    """A loaded store saved again loads to the same trees: the same group bytes, the same
    predictions (a freshly fitted model's round trip is the rebuild test's)."""
    model, path = fitted
    saving.save(model, tmp_path / "again", devices=[cpu], samples=["synthetic"])
    loaded, again = store.load(path), store.load(tmp_path / "again")
    items = [o.item for o in synthetic(cpu, FAMILIES, 5, seed=11)]
    a, b = loaded.predict(items, cpu, spread=True), again.predict(items, cpu, spread=True)
    np.testing.assert_array_equal(a.log_factor, b.log_factor)
    np.testing.assert_array_equal(a.spread, b.spread)
    for f in path.joinpath("groups").iterdir():
        assert (tmp_path / "again" / "groups" / f.name).read_bytes() == f.read_bytes(), f.name
    manifest = loaded.manifest
    assert manifest["hardware"][0]["id"] == "cpu" and manifest["serves"] == ["cpu"] and manifest["seed"] == 0
    assert loaded.scope == "per-device" and loaded.serves == ("cpu",)
    assert {g["key"]["family"] for g in manifest["groups"]} == set(FAMILIES)
    for rel in ["manifest.json", *(g["file"] for g in manifest["groups"])]:
        assert (path / rel).is_file()


def _set(path, value):
    """A manifest mutation: set the field at ``path`` (a tuple of keys and indices) to ``value``."""
    def apply(m):
        *head, last = path
        for p in head:
            m = m[p]
        m[last] = value
    return apply


def _delete(path):
    def apply(m):
        *head, last = path
        for p in head:
            m = m[p]
        del m[last]
    return apply


MANIFEST_DAMAGE = [
    ("format_version", _set(("format_version",), 99), "format_version"),
    ("schema", _set(("schema_version",), 0), "schema_version"),
    ("target", _set(("target",), "raw"), "target"),
    ("format", _delete(("format",)), "format"),
    ("group_by", _set(("group_by",), ["colour"]), "group_by"),
    ("alpha", _set(("alpha",), 2.0), "alpha"),
    ("alpha type", _set(("alpha",), "0.1"), "alpha must be a number"),
    ("seed", _delete(("seed",)), "seed is missing"),
    ("features", _set(("features", "gemm"), ["log_m"]), "feature schema of 'gemm'"),
    ("hardware gone", _delete(("hardware",)), "hardware is missing"),
    ("hardware empty", _set(("hardware",), []), "hardware is empty"),
    ("hardware edited", _set(("hardware", 0, "mem_bandwidth"), 4e10), "does not match its numbers"),
    ("hardware field gone", _delete(("hardware", 0, "sms")), "sms is missing"),
    ("hardware rates", _set(("hardware", 0, "peak_flops"), {"fp32": "fast"}), "must be a number"),
    ("fingerprint gone", _delete(("hardware", 0, "sha256")), "sha256 is missing"),
    ("serves gone", _delete(("serves",)), "serves is missing"),
    ("serves other", _set(("serves",), ["h100_sxm5_80gb"]), "serves"),
    ("serves empty", _set(("serves",), []), "serves"),
    ("serves type", _set(("serves",), 3), "serves must be a list"),
    ("groups gone", _delete(("groups",)), "groups is missing"),
    ("groups empty", _set(("groups",), []), "no fitted groups"),
    ("group q", _set(("groups", 0, "conformal_q"), "wide"), "conformal_q must be a number"),
    ("group q negative", _set(("groups", 0, "conformal_q"), -1.0), "conformal_q"),
    ("group n", _set(("groups", 0, "n_samples"), 0), "n_samples"),
    ("group key", _set(("groups", 0, "key"), {}), "key has fields"),
    ("group family", _set(("groups", 0, "key", "family"), "teleport"), "teleport"),
    ("group file escapes", _set(("groups", 0, "file"), "../../manifest.json"), "not a path inside the store"),
    ("group file absolute", _set(("groups", 0, "file"), "/etc/hostname"), "not a path inside the store"),
    ("group file gone", _set(("groups", 0, "file"), "groups/99.ubj"), "groups/99.ubj is missing"),
    ("domain", _set(("groups", 0, "domain", "log_flops"), [5.0]), "domain.log_flops"),
    ("domain order", _set(("groups", 0, "domain", "log_flops"), [5.0, 1.0]), "domain.log_flops"),
    ("duplicate group", lambda m: m["groups"].append(dict(m["groups"][0])), "appears twice"),
    ("adjustment", _set(("adjustments",), [{"family": "gemm", "variant": "", "pass": "fwd", "dtype": "bf16",
                                            "offset": 0.1,
                                            "slope": 0.0, "feature": "log_nothing", "center": 0.0, "n": 3,
                                            "q": None}]), "log_nothing"),
    ("adjustment field", _set(("adjustments",), [{"family": "gemm"}]), "variant is missing"),
]


@pytest.mark.parametrize(("mutate", "match"), [case[1:] for case in MANIFEST_DAMAGE],
                         ids=[case[0] for case in MANIFEST_DAMAGE])
def test_a_damaged_manifest_is_refused(fitted, tmp_path, mutate, match):
    path = _copy(fitted[1], tmp_path)
    manifest = json.loads((path / "manifest.json").read_text())
    mutate(manifest)
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ResidualSchemaError, match=match):
        store.load(path)


@pytest.mark.parametrize(("text", "match"), [
    (lambda t: t[: len(t) // 2], "not valid JSON"),
    (lambda t: t.replace('"conformal_q": ', '"conformal_q": NaN, "x": ', 1), "NaN is not a number"),
    (lambda t: t.replace('"alpha": 0.1', '"alpha": Infinity'), "Infinity is not a number"),
    (lambda t: "[1, 2]", "not a JSON object"),
    (lambda t: "", "not valid JSON"),
])
def test_garbled_manifest_text_is_refused(fitted, tmp_path, text, match):
    path = _copy(fitted[1], tmp_path)
    (path / "manifest.json").write_text(text((path / "manifest.json").read_text()))
    with pytest.raises(ResidualSchemaError, match=match):
        store.load(path)


def test_a_manifest_that_is_not_text_is_refused(fitted, tmp_path):
    path = _copy(fitted[1], tmp_path)
    (path / "manifest.json").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ResidualSchemaError, match=r"manifest\.json"):
        store.load(path)


def test_missing_files_are_refused(fitted, tmp_path):
    path = _copy(fitted[1], tmp_path)
    (path / "groups" / "0.ubj").unlink()
    with pytest.raises(ResidualSchemaError, match=r"group file groups/0\.ubj is missing"):
        store.load(path)
    (path / "manifest.json").unlink()
    with pytest.raises(ResidualSchemaError, match=r"manifest\.json is missing"):
        store.load(path)
    with pytest.raises(ResidualSchemaError, match="no such directory"):
        store.load(tmp_path / "nowhere")


@pytest.mark.parametrize("damage", [
    lambda raw: raw[: len(raw) // 3],  # truncated
    lambda raw: b"",
    lambda raw: bytes(len(raw)),  # zeros
])
def test_a_damaged_group_file_is_refused_when_its_family_is_needed(fitted, tmp_path, cpu, damage):
    """Group files are read on first use: the damage shows when (and only when) a prediction
    needs that family, as a ResidualSchemaError naming the file."""
    path = _copy(fitted[1], tmp_path)
    manifest = json.loads((path / "manifest.json").read_text())
    gemm = next(g for g in manifest["groups"] if g["key"]["family"] == "gemm")
    file = path / gemm["file"]
    file.write_bytes(damage(file.read_bytes()))
    loaded = store.load(path)
    norms = [o.item for o in synthetic(cpu, ("norm",), 3)]
    assert loaded.predict(norms, cpu).has_model.all()
    with pytest.raises(ResidualSchemaError, match=gemm["file"]):
        loaded.predict([o.item for o in synthetic(cpu, ("gemm",), 3)], cpu)


def test_a_group_file_of_another_family_is_refused(fitted, tmp_path, cpu):
    path = _copy(fitted[1], tmp_path)
    manifest = json.loads((path / "manifest.json").read_text())
    files = {g["key"]["family"]: g["file"] for g in manifest["groups"]}
    shutil.copy(path / files["gemm"], path / files["norm"])  # 25+ gemm features where norm has fewer
    with pytest.raises(ResidualSchemaError, match="features"):
        store.load(path).predict([o.item for o in synthetic(cpu, ("norm",), 3)], cpu)


def test_loading_never_writes(fitted, tmp_path, cpu):
    path = _copy(fitted[1], tmp_path)
    before = {p: p.stat().st_mtime_ns for p in path.rglob("*")}
    store.load(path).predict([o.item for o in synthetic(cpu, FAMILIES, 3)], cpu)
    assert {p: p.stat().st_mtime_ns for p in path.rglob("*")} == before


def test_correct_follows_the_composer_contract(fitted, gpt_spec):
    res = store.load(fitted[1])
    ops = decompose(gpt_spec).ops
    corr = res.correct([op.work for op in ops], gpt_spec).check(len(ops))
    for op, covered, factor, low, high in zip(ops, corr.covered, corr.factor, corr.low, corr.high):
        assert covered == (op.family in FAMILIES)
        if not covered:  # families without a model: factor 1, flagged
            assert factor == low == high == 1.0
    assert corr.out_of_domain.shape == (len(ops),) and not (corr.out_of_domain & ~corr.covered).any()


# -- serving --------------------------------------------------------------------------------
def test_a_per_device_store_refuses_another_device(fitted):
    spec = _h100_spec()
    with pytest.raises(ResidualSchemaError, match="fitted for cpu, not for 'h100_sxm5_80gb'") as err:
        store.load(fitted[1]).correct([op.work for op in decompose(spec).ops], spec)
    assert "cross-GPU" in err.value.hint


def test_a_device_whose_numbers_changed_is_refused(fitted):
    spec = dsl.loads(TINY_GPT, overrides=["gpu.mem_bandwidth=40GB/s"])
    with pytest.raises(ResidualSchemaError, match=r"differ from those it was fitted with \(mem_bandwidth") as err:
        store.load(fitted[1]).correct([op.work for op in decompose(spec).ops], spec)
    assert "refit" in err.value.hint


def test_a_cross_gpu_store_serves_any_device(cross):
    res = store.load(cross)
    assert res.serves == "any" and res.scope == "cross-GPU"
    for spec in (_h100_spec(), dsl.loads(TINY_GPT, overrides=["gpu.mem_bandwidth=40GB/s"])):
        assert res.refusal(spec.cluster.gpu) is None
        corr = res.correct([op.work for op in decompose(spec).ops], spec)
        assert corr.covered.any()


def test_save_refuses_to_serve_devices_it_has_no_samples_of(fitted, cpu, tmp_path):
    with pytest.raises(InputError, match="only devices it has samples of"):
        saving.save(fitted[0], tmp_path, devices=[cpu], serves=["h100_sxm5_80gb"])
    with pytest.raises(InputError, match="record the devices"):
        saving.save(fitted[0], tmp_path, devices=[])


# -- the default choice ---------------------------------------------------------------------
def test_default_prefers_the_device_store_then_the_cross_gpu_store(fitted, cross, tmp_path):
    alone, both = tmp_path / "cpu_only", tmp_path / "with_cross_gpu"  # two folders of shipped stores
    shutil.copytree(fitted[1], alone / "cpu")
    shutil.copytree(fitted[1], both / "cpu")
    shutil.copytree(cross, both / store.CROSS_GPU)
    cpu_spec = dsl.loads(TINY_GPT)
    changed = dsl.loads(TINY_GPT, overrides=["gpu.mem_bandwidth=40GB/s"])
    h100 = _h100_spec()
    for root in (alone, both):
        mine = store.default_for(cpu_spec.cluster.gpu, root=root)
        assert mine.residuals.path == root / "cpu" and "shipped for cpu" in mine.note
    none = store.default_for(h100.cluster.gpu, root=alone)
    assert none.residuals is None and "no residual store ships for h100_sxm5_80gb" in none.note
    skipped = store.default_for(changed.cluster.gpu, root=alone)
    assert skipped.residuals is None and "does not apply" in skipped.note and "mem_bandwidth" in skipped.note
    for spec in (h100, changed):
        choice = store.default_for(spec.cluster.gpu, root=both)
        assert choice.residuals.scope == "cross-GPU" and "cross-GPU" in choice.note


def test_default_kept_per_device_object_follows_each_devices_numbers(fitted, tmp_path):
    root = tmp_path / "defaults"
    shutil.copytree(fitted[1], root / "cpu")
    same = dsl.loads(TINY_GPT).cluster.gpu
    changed = dsl.loads(TINY_GPT, overrides=["gpu.mem_bandwidth=40GB/s"]).cluster.gpu
    for _ in range(2):  # alternating: each device object keeps its own answer
        assert store.default_for(same, root=root).residuals.path == root / "cpu"
        assert store.default_for(changed, root=root).residuals is None
    assert store.default_for(same, root=root) is store.default_for(same, root=root)
    assert store.default_for(same, root=tmp_path / "elsewhere").residuals is None  # the root is part of the key


def test_a_misconfigured_cross_gpu_store_is_refused(fitted, tmp_path):
    root = tmp_path / "defaults"
    shutil.copytree(fitted[1], root / store.CROSS_GPU)  # per-device store in the cross-GPU place
    with pytest.raises(ResidualSchemaError, match="does not serve 'any'"):
        store.default_for(_h100_spec().cluster.gpu, root=root)


def test_choose_reads_paths_and_passes_stores_through(fitted, cpu):
    assert store.choose(None, cpu).residuals is None and store.choose("none", cpu).residuals is None
    given = store.choose(str(fitted[1]), cpu)
    assert given.residuals.path == fitted[1] and given.note.startswith("given")
    assert store.choose(given.residuals, cpu).residuals is given.residuals


# -- shipped stores -------------------------------------------------------------------------
SHIPPED = sorted(p.name for p in store.default_path("cpu").parent.iterdir() if (p / "manifest.json").is_file())


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_store_loads_and_matches_the_catalog(name):
    """Every shipped store is complete and readable, and a per-device store was fitted against
    today's catalog numbers of each device it serves (refit it when they change: the CPU store
    with ``python benchmarks/residuals_cpu.py --ship``)."""
    res = store.shipped(name)
    assert res is not None and res.families()
    if res.serves == "any":  # a cross-GPU store: every unit's tree reads the columns it names
        for fit in res.model.families_.values():
            assert fit.forest is None or fit.forest.n_features == len(fit.columns)
    else:
        for key in res.model.models_:  # every group file parses
            assert res.model.models_[key].n_features == len(res.model.feature_names_in_[dict(key)["family"]])
    if res.serves != "any":
        assert name in res.serves
        for device_id in res.serves:
            assert res.refusal(dataset.catalog_device(device_id)) is None
    size = sum(p.stat().st_size for p in store.default_path(name).rglob("*") if p.is_file())
    assert size < 4e6
    assert store.shipped_manifest(name) == res.manifest  # what the band reads without loading the models


def test_no_shipped_manifest_for_a_device_without_a_store():
    assert store.shipped_manifest("no_such_device") is None


def test_the_shipped_cpu_store_covers_every_kernel_family():
    from llmp.measure import design

    res = store.shipped("cpu")
    # The quantize family (low-precision recipes' casts) came after the CPU store was sampled;
    # it is priced on its roofline until `python benchmarks/residuals_cpu.py --ship` refits it.
    assert set(res.families()) == set(design.FAMILIES) - {"quantize"}
    assert store.default_path("h100_sxm5_80gb").parts[-2:] == ("defaults", "h100_sxm5_80gb")


def test_residuals_replace_keeps_the_model(fitted):
    res = store.load(fitted[1])
    assert dataclasses.replace(res, adjustments={}).model is res.model


def test_a_rebuild_writes_the_same_bytes_and_the_same_id(cpu, tmp_path):
    """Fitting again on the same samples with the same seed gives a byte-identical store, whose
    loaded trees predict what the fitted ones do; and noise in the last digits of its fitted
    numbers (summation order) changes neither the bytes of its manifest nor its id."""
    obs = synthetic(cpu, ("norm", "copy"), 20)
    first = ResidualModel(xgb_params=FAST_XGB, n_members=2).fit(obs)
    path = tmp_path / "first"
    saving.save(first, path, devices=[cpu], samples=["synthetic"])
    items = [o.item for o in synthetic(cpu, ("norm", "copy"), 5, seed=11)]
    a, b = first.predict(items, cpu, spread=True), store.load(path).predict(items, cpu, spread=True)
    np.testing.assert_array_equal(a.log_factor, b.log_factor)
    np.testing.assert_array_equal(a.spread, b.spread)
    again = ResidualModel(xgb_params=FAST_XGB, n_members=2).fit(obs)
    saving.save(again, tmp_path / "again", devices=[cpu], samples=["synthetic"])
    for f in sorted(p.relative_to(path) for p in path.rglob("*") if p.is_file()):
        assert (tmp_path / "again" / f).read_bytes() == (path / f).read_bytes(), f
    for key in again.cv_error_:
        again.cv_error_[key] = {k: float(np.nextafter(v, np.inf)) for k, v in again.cv_error_[key].items()}
        again.conformal_q_[key] = float(np.nextafter(again.conformal_q_[key], -np.inf))
    saving.save(again, tmp_path / "noisy", devices=[cpu], samples=["synthetic"])
    assert (tmp_path / "noisy" / "manifest.json").read_bytes() == (path / "manifest.json").read_bytes()
    assert store.load(tmp_path / "noisy").id.split("@")[1] == store.load(path).id.split("@")[1]
