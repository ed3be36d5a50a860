"""The unseen-GPU workflow on the command line: fit a store, adapt it to another device with a
budget per (operator, pass), score it, predict with it; the API and the CLI choose the same store;
bad input exits 1 without a traceback."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from residual_helpers import TINY_STORE, write_samples  # the residual tests' synthetic samples and store

import llmp
from llmp.cli import main
from llmp.residuals import store

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
TINY_CPU = str(EXAMPLES / "tiny_cpu.llmp")
A100_SPEC = """
use "dgx_a100"
cluster one { node = dgx_a100  nodes = 1 }
model tiny { arch = gpt  layers = 2  hidden = 256  heads = 4  vocab = 1024  seq_len = 128 }
train { precision = fp32  global_batch = 8  micro_batch = 1  parallel { tp = 1  pp = 1 } }
"""


def _run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def workflow(tmp_path_factory):
    """Samples on the CPU (to fit a cross-GPU store on, and to score) and on an A100 whose norm
    backward runs 3x slower than the CPU-fitted trees predict (the device to adapt to). The base
    store is the committed tiny CPU store (``llmp fit`` of CPU samples is the cross-GPU test's
    and test_sample_fit_measure.py's subject, not this fixture's)."""
    root = tmp_path_factory.mktemp("workflow")
    write_samples(root / "cpu", "cpu", ("norm", "copy"), 40)
    write_samples(root / "a100", "a100_sxm4_80gb", ("norm", "copy"), 30, seed=5,
                  shift=lambda k: 1.1 if str(k.pass_) == "bwd" else 0.0)
    spec = root / "a100.llmp"
    spec.write_text(A100_SPEC)
    return root


def test_fit_adapt_score_predict(workflow, capsys):
    root = workflow
    code, out, _ = _run(capsys, "fit", str(root / "a100"), "--base", str(TINY_STORE), "--budget", "4",
                        "-o", str(root / "adapted"), "--json")
    assert code == 0
    summary = json.loads(out)
    strata = {(s["family"], s["pass"]): (s["chosen"], s["available"]) for s in summary["adaptation"]["strata"]}
    assert all(chosen == min(4, available) for chosen, available in strata.values())
    assert summary["serves"] == ["a100_sxm4_80gb"] and summary["scope"] == "per-device"
    after, before = summary["held_out"]["after"]["overall"], summary["held_out"]["before"]["overall"]
    assert after["n"] == summary["adaptation"]["unused"] > 0
    assert after["mape"] < 0.75 * before["mape"]  # the unused samples say the adaptation helped

    code, out, _ = _run(capsys, "fit", str(root / "a100"), "--base", str(TINY_STORE), "--budget", "4",
                        "-o", str(root / "adapted2"))
    assert code == 0 and "left unused" in out and "on the" in out and "norm bwd" in out

    code, out, _ = _run(capsys, "score", str(root / "a100"), "--residuals", str(root / "adapted"), "--json")
    assert code == 0
    scores = json.loads(out)
    assert {r["name"] for r in scores["pass"]} == {"fwd", "bwd"}
    assert scores["overall"]["n"] == 60 and scores["overall"]["mape"] < scores["overall"]["roofline_mape"]
    code, out, _ = _run(capsys, "score", str(root / "a100"), "--residuals", str(root / "adapted"))
    assert code == 0 and "per operator" in out and "roofline MAPE" in out

    spec = str(root / "a100.llmp")
    code, out, _ = _run(capsys, "predict", spec, "--residuals", str(root / "adapted"), "--json")
    assert code == 0
    prov = json.loads(out)["provenance"]
    assert prov["residual_store"]["scope"] == "per-device" and "norm" in prov["residual_store"]["covered"]
    assert prov["residuals_note"].startswith("given")
    code, _, err = _run(capsys, "predict", spec, "--residuals", str(TINY_STORE))
    assert code == 1 and "does not serve" in err and "Traceback" not in err
    code, _, err = _run(capsys, "score", str(root / "a100"), "--residuals", str(TINY_STORE))
    assert code == 1 and "not for 'a100_sxm4_80gb'" in err


def test_a_cross_gpu_store_predicts_any_device(workflow, capsys):
    root = workflow
    assert main(["fit", str(root / "cpu"), "-o", str(root / "cross"), "--serves", "any"]) == 0
    capsys.readouterr()
    code, out, _ = _run(capsys, "predict", str(root / "a100.llmp"), "--residuals", str(root / "cross"))
    assert code == 0 and "cross-GPU store at" in out


def test_the_api_default_is_the_cli_default(capsys):
    """`llmp.predict(spec)` and `llmp predict` apply the same store and give the same number."""
    for path in (TINY_CPU, str(EXAMPLES / "llama3_8b_dgx_h100.llmp")):
        api = llmp.predict(llmp.load(path))
        code, out, _ = _run(capsys, "predict", path, "--json")
        cli = json.loads(out)
        assert code == 0 and cli["step_time_s"] == api.step_time_s
        assert cli["provenance"]["residuals"] == api.provenance.residuals
        assert cli["provenance"]["residuals_note"] == api.provenance.residuals_note
    tiny = llmp.predict(llmp.load(TINY_CPU))
    assert tiny.provenance.residual_store.scope.startswith("per-device")  # the CPU ships a store
    assert llmp.predict(llmp.load(TINY_CPU), residuals=None).step_time_s != tiny.step_time_s
    assert llmp.predict(llmp.load(TINY_CPU), residuals="none").provenance.residual_store is None
    shipped = llmp.predict(llmp.load(TINY_CPU), residuals=store.default_path("cpu"))
    assert shipped.step_time_s == tiny.step_time_s


def test_out_of_domain_ops_are_named_in_the_provenance(capsys):
    """The shipped CPU store was sampled on small shapes; a 4096-wide model lies outside them."""
    big = EXAMPLES / "tiny_cpu.llmp"
    code, out, _ = _run(capsys, "predict", str(big), "--set", "model.hidden=4096", "--set", "model.heads=32",
                        "--json")
    assert code == 0
    use = json.loads(out)["provenance"]["residual_store"]
    assert use["out_of_domain_count"] == len(use["out_of_domain"]) > 0
    assert any(name.startswith("layer.") for name in use["out_of_domain"])
    code, out, _ = _run(capsys, "predict", str(big), "--set", "model.hidden=4096", "--set", "model.heads=32")
    assert "outside the fitted shapes" in out


BAD_INPUT = [
    (["fit", "{a100}", "--budget", "3", "-o", "{tmp}/x"], 1, "needs --base"),
    (["fit", "{a100}", "--base", "{base}", "--budget", "0", "-o", "{tmp}/x"], 2, "positive"),
    (["fit", "{a100}", "--base", "{base}", "--budget", "many", "-o", "{tmp}/x"], 2, "whole number"),
    (["fit", "{a100}", "--base", "{tmp}/nowhere", "-o", "{tmp}/x"], 1, "no such directory"),
    (["fit", "{a100}", "--base", "{base}", "--serves", "any", "-o", "{tmp}/x"], 1, "not to --base"),
    (["fit", "{cpu}", "--serves", "h100_sxm5_80gb", "-o", "{tmp}/x"], 1, "only devices it has samples of"),
    (["fit", "{cpu}", "{a100}", "--base", "{base}", "-o", "{tmp}/x"], 1, "one device"),
    (["score", "{tmp}/nothing"], 1, "no such sample file"),
    (["score", "{a100}", "--residuals", "{tmp}"], 1, "manifest.json is missing"),
    (["score"], 2, "required"),
]


@pytest.mark.parametrize(("argv", "code", "needle"), BAD_INPUT, ids=[" ".join(c[0][:3]) for c in BAD_INPUT])
def test_bad_flags_and_paths_exit_with_a_message(workflow, tmp_path, capsys, argv, code, needle):
    names = {"a100": workflow / "a100", "cpu": workflow / "cpu", "base": TINY_STORE, "tmp": tmp_path}
    argv = [a.format(**names) for a in argv]
    if (argv[0] == "score" and len(argv) == 1) or code == 2:
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == code
        assert needle in capsys.readouterr().err
        return
    got, _, err = _run(capsys, *argv)
    assert got == code and needle in err and "Traceback" not in err


@pytest.mark.parametrize("damage", ["manifest", "group", "fingerprint"])
def test_a_damaged_store_exits_1(workflow, tmp_path, capsys, damage):
    path = tmp_path / "store"
    shutil.copytree(TINY_STORE, path)
    manifest = json.loads((path / "manifest.json").read_text())
    if damage == "manifest":
        (path / "manifest.json").write_text(json.dumps(manifest)[:200])
    elif damage == "group":
        norm = next(g for g in manifest["groups"] if g["key"]["family"] == "norm")  # read on first use
        file = path / norm["file"]
        file.write_bytes(file.read_bytes()[:100])
    else:
        manifest["hardware"][0]["l2_cache"] *= 2
        (path / "manifest.json").write_text(json.dumps(manifest))
    for argv in (["predict", TINY_CPU, "--residuals", str(path)],
                 ["score", str(workflow / "cpu"), "--residuals", str(path)]):
        code, _, err = _run(capsys, *argv)
        assert code == 1 and "residual store" in err and "Traceback" not in err
