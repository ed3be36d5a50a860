"""The sample -> fit -> measure commands end to end, through ``llmp.cli.main`` (exit codes, files)."""

from __future__ import annotations

import csv
import json

import pytest

from llmp.cli import main
from llmp.residuals import store

TINY_SPEC = """
use "cpu_host"
cluster local { node = cpu_host  nodes = 1 }
model tiny_llama { arch = llama  layers = 1  hidden = 64  heads = 4  kv_heads = 2  ffn_hidden = 176
                   vocab = 512  seq_len = 32 }
train { precision = fp32  global_batch = 2  micro_batch = 1 }
"""


def test_sample_fit_measure(tmp_path, capsys):
    samples, models = tmp_path / "samples", tmp_path / "models"
    argv = ["sample", "--out", str(samples), "--families", "copy,norm", "--budget", "8", "--quiet",
            "--scale", "0.01", "--repeat-seconds", "0.005"]
    assert main(argv) == 0
    assert "sampled 16 kernels" in capsys.readouterr().out
    assert main(argv) == 0  # resumed: nothing left to do
    out = capsys.readouterr().out
    assert "sampled 0 kernels" in out and "16 already there" in out
    assert main(["fit", str(samples), "-o", str(models), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert {g["group"]["family"] for g in report["groups"]} == {"copy", "norm"}
    assert store.load(models).manifest["hardware"][0]["id"] == "cpu"

    spec = tmp_path / "tiny.llmp"
    spec.write_text(TINY_SPEC)
    out = tmp_path / "measured.csv"
    assert main(["measure", str(spec), "--steps", "2", "--warmup", "1", "--csv", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 1 and rows[0]["metric_name"] == "iteration_time_s" and float(rows[0]["metric_value"]) > 0
    cfg = tmp_path / "cfg.json"
    assert main(["measure", str(spec), "--export", str(cfg)]) == 0
    assert json.loads(cfg.read_text())["model"]["name"] == "tiny_llama"


def test_user_errors_exit_1_with_a_message(tmp_path, capsys):
    assert main(["sample", "--out", str(tmp_path), "--families", "gemm,bogus"]) == 1
    assert "unknown families ['bogus']" in capsys.readouterr().err
    assert main(["fit", str(tmp_path / "empty"), "-o", str(tmp_path / "m")]) == 1
    assert "no such sample file or directory" in capsys.readouterr().err
    spec = tmp_path / "tiny.llmp"
    spec.write_text(TINY_SPEC)
    assert main(["measure", str(spec), "--nproc", "2"]) == 1
    err = capsys.readouterr().err
    assert "parallel.dp = 1 but --nproc 2" in err and "Traceback" not in err
    assert main(["fit", str(tmp_path), "-o", str(tmp_path / "m")]) == 1
    assert "no sample files" in capsys.readouterr().err


@pytest.mark.slow  # torchrun workers, then an XGBoost fit
def test_collectives_through_torchrun_and_fit(tmp_path):
    """``llmp sample --families collectives`` starts torchrun (2 gloo ranks); the rows fit."""
    from llmp.measure import collectives
    from llmp.residuals import dataset, samplefile
    from llmp.residuals.model import ResidualModel

    samples = tmp_path / "coll"
    assert main(["sample", "--out", str(samples), "--families", "collectives", "--nproc", "2", "--budget", "2"]) == 0
    table = samplefile.read(samples / "collectives.csv")
    assert {r["key"] for r in table.rows} == {c.key for c in collectives.plan(2, 1, "cpu", 2, 0)}
    assert {r["kind"] for r in table.rows} == set(collectives.KINDS)
    assert table.meta["backend"] == "gloo" and table.meta["node_id"] == "cpu_host"
    assert all(r["tier"] == "intra" and int(r["group"]) == int(r["ranks_per_node"]) == 2 for r in table.rows)
    data = dataset.load([samples])
    model = ResidualModel(min_samples=2, cv_folds=2, xgb_params={"n_estimators": 5}).fit(list(data.observations))
    assert {dict(k)["family"] for k in model.models_} == set(collectives.KINDS)
