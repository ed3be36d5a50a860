"""``llmp predict`` and ``llmp ops`` end to end: real parsing, real model, real output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmp.cli import main

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
LLAMA = str(EXAMPLES / "llama3_8b_dgx_h100.llmp")
GPT3 = str(EXAMPLES / "gpt3_175b_dgx_a100.llmp")


def _run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_predict_prints_a_readable_report(capsys):
    code, out, err = _run(capsys, "predict", LLAMA)
    assert code == 0, err
    for text in ("step time", "tokens/s", "MFU", "where the time goes", "memory per GPU", "residuals:"):
        assert text in out
    code, out, err = _run(capsys, "predict", LLAMA, "--no-residuals")
    assert code == 0 and "residuals: roofline only" in out


def test_predict_json_follows_the_cli_contract(capsys):
    code, out, _ = _run(capsys, "predict", GPT3, "--json")
    assert code == 0
    d = json.loads(out)
    for key in ("step_time_s", "tokens_per_s", "mfu", "memory_per_gpu_bytes", "breakdown", "band", "provenance"):
        assert key in d
    assert sum(d["breakdown"].values()) == pytest.approx(d["step_time_s"], rel=1e-9)
    assert d["band"][0] <= d["step_time_s"] <= d["band"][1]
    assert d["provenance"]["source"].endswith("gpt3_175b_dgx_a100.llmp")
    assert d["breakdown"]["recompute"] > 0 and d["breakdown"]["bubble"] > 0


def test_set_overrides_reach_the_prediction(capsys):
    _, out1, _ = _run(capsys, "predict", LLAMA, "--json")
    _, out2, _ = _run(capsys, "predict", LLAMA, "--json", "--set", "train.global_batch=256")
    one, two = json.loads(out1), json.loads(out2)
    assert two["derived"]["tokens_per_step"] == 2 * one["derived"]["tokens_per_step"]
    assert two["step_time_s"] > one["step_time_s"]


def test_trace_is_chrome_trace_json(capsys, tmp_path):
    path = tmp_path / "step.json"
    code, _, err = _run(capsys, "predict", GPT3, "--trace", str(path))
    assert code == 0, err
    data = json.loads(path.read_text())
    events = [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert len({e["pid"] for e in events}) == 12      # one track per pipeline stage
    assert all(e["dur"] > 0 for e in events)


@pytest.mark.parametrize("argv,needle", [
    (["--set", "parallel.tp=3"], "error"),
    (["--set", "parallel.pp=5", "--set", "parallel.dp=4"], "error"),
    (["--residuals", "/nonexistent/store"], "error"),
])
def test_bad_input_exits_1_without_a_traceback(capsys, argv, needle):
    code, _, err = _run(capsys, "predict", GPT3, *argv)
    assert code == 1
    assert needle in err and "Traceback" not in err


def test_ops_lists_operators_with_costs(capsys):
    code, out, _ = _run(capsys, "ops", LLAMA)
    assert code == 0
    assert "layer.attn.qkv" in out and "compute" in out and "memory" in out
    code, out, _ = _run(capsys, "ops", LLAMA, "--json")
    rows = json.loads(out)
    qkv = next(r for r in rows if r["name"] == "layer.attn.qkv")
    assert qkv["flops"] > 0 and qkv["intensity"] == pytest.approx(qkv["flops"] / qkv["bytes"])
    assert {r["bound"] for r in rows} >= {"compute", "memory", "network"}


def test_ops_columns_never_run_into_each_other(capsys):
    """Every row's scope and phase start under their headings, after a space (``rank:middle``
    beside ``comm``, not ``rank:middlecomm``)."""
    _, out, _ = _run(capsys, "ops", GPT3)
    head, _, *rows = out.splitlines()
    scope, phase = head.index("scope"), head.index("phase")
    pipeline_ranks = [r for r in rows if r[scope:].startswith("rank:")]
    assert pipeline_ranks
    for row in rows:
        assert row[scope - 1] == " " and row[phase - 1] == " " and row[phase] != " ", row


TINY = str(EXAMPLES / "tiny_cpu.llmp")


def test_predict_applies_the_shipped_store_of_the_device_unless_told_not_to(capsys):
    # The catalog `cpu` device ships residual models (llmp/hardware/defaults/cpu); H100 ships none.
    _, out, _ = _run(capsys, "predict", TINY, "--json")
    corrected = json.loads(out)
    _, out, _ = _run(capsys, "predict", TINY, "--json", "--no-residuals")
    bare = json.loads(out)
    assert not corrected["provenance"]["residuals"].startswith("roofline only")
    assert bare["provenance"]["residuals"].startswith("roofline only")
    low, high = corrected["band"]
    assert low <= corrected["step_time_s"] <= high and low < high
    assert corrected["step_time_s"] != bare["step_time_s"]
