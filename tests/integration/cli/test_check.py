"""``llmp check``: the table, ``--json``, ``--set``, and clean failures (exit 1, no traceback)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from llmp.cli import main

ROOT = Path(__file__).parents[3]
DEBUG = ROOT / "tests" / "unit" / "dsl" / "fixtures" / "debug.llmp"
MOE = ROOT / "tests" / "unit" / "dsl" / "fixtures" / "moe.llmp"
SWEEP = ROOT / "tests" / "unit" / "dsl" / "fixtures" / "llama_sweep.llmp"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_table_groups_sections_and_formats_units(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "check", str(DEBUG))
    assert (code, err) == (0, "")
    lines = out.splitlines()
    for heading in ("model debug", "train", "parallel", "gpu toy_gpu", "derived"):
        assert heading in lines
    assert "cluster toy_cluster: 2 x node toy_node = 8 devices" in lines
    row = {line.split()[0]: line.split(None, 1)[1] for line in lines
           if line.startswith("  ") and len(line.split()) > 1}
    assert row["memory"] == "24 GiB"
    assert row["mem_bandwidth"] == "1.5 TB/s"
    assert row["flops.bf16"] == "80 TFLOP/s"
    assert row["launch_overhead"] == "5 us"
    assert row["node.inter"] == "toy_node.inter: 50 GB/s, latency 5 us"
    assert row["world_size"] == "8"
    assert row["microbatches"] == "8"
    assert row["tokens_per_step"] == "32.8 k (32768)"
    assert row["layers_per_stage"] == "4"


def test_json_has_spec_and_derived(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "check", str(MOE), "--json")
    data = json.loads(out)
    assert code == 0
    assert data["model"]["moe"] == {"experts": 8, "top_k": 2, "expert_ffn_hidden": 3584,
                                    "shared_experts": 0, "capacity_factor": None, "imbalance": 1.0,
                                    "router": "softmax", "expert_bias": False, "aux_loss": False,
                                    "first_dense_layers": 0, "every": 1}
    assert data["cluster"]["inter"] == {"id": "two.inter", "bandwidth": 200e9, "latency": 1e-05, "efficiency": 1.0,
                                        "peer_bandwidth": None, "transport": None, "nvls": False,
                                        "nvls_efficiency": None, "in_network_reduction": False}
    assert data["cluster"]["node"]["gpu"]["peak_flops"]["bf16"] == 989e12
    derived = data["derived"]
    assert derived["world_size"] == 16 and derived["microbatches"] == 8
    assert derived["active_params"] < derived["params"]
    assert derived["cluster_peak_flops"] == 16 * 989e12


def test_sweeps_and_symbols_are_listed(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "check", str(SWEEP), "--set", "model.hidden=symbol",
                       "--set", "model.ffn_hidden=4 * hidden")
    assert code == 0
    tail = out[out.index("sweeps"):].splitlines()
    assert tail[1].split() == ["train.micro_batch", "[1,", "2]"]
    assert tail[2].split() == ["parallel.tp", "[2,", "4,", "8]"]
    assert tail[-1].split() == ["model.hidden", "hidden"]
    code, out, _ = run(capsys, "check", str(SWEEP), "--json", "--set", "model.hidden=symbol",
                       "--set", "model.ffn_hidden=4 * hidden")
    data = json.loads(out)
    assert data["symbols"] == ["model.hidden"]
    assert data["model"]["ffn_hidden"] == "4*hidden"
    assert data["sweeps"][1] == {"path": "parallel.tp", "values": [2, 4, 8]}


def test_set_changes_the_output(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "check", str(DEBUG), "--json", "--set", "parallel.tp=4",
                    "--set", "parallel.pp=1")
    assert json.loads(out)["parallel"]["dp"] == 2


@pytest.mark.parametrize("argv,start", [
    (["check", "no/such/file.llmp"], "error: no such file: no/such/file.llmp"),
    (["check", str(ROOT / "tests")], f"error: {ROOT / 'tests'} is a directory"),
    (["check", str(DEBUG), "--set", "parallel.tpp=2"], "--set:1:1: error: unknown path: "),
    (["check", str(DEBUG), "--set", "parallel.tp=2 us"], "--set:1:13: error: wrong unit: "),
])
def test_errors_exit_1_without_traceback(capsys: pytest.CaptureFixture[str], argv: list[str],
                                         start: str) -> None:
    code, out, err = run(capsys, *argv)
    assert (code, out) == (1, "")
    assert err.startswith(start)
    assert "Traceback" not in err


def test_bad_utf8_and_empty_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bad.llmp").write_bytes(b"model \xff {}")
    (tmp_path / "empty.llmp").write_text("")
    for name, fragment in (("bad.llmp", "is not UTF-8 text"), ("empty.llmp", "is empty")):
        code, _, err = run(capsys, "check", str(tmp_path / name))
        assert code == 1 and fragment in err and "Traceback" not in err


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["check"])
    assert exit_.value.code == 2


def test_subprocess_diagnostic(tmp_path: Path) -> None:
    spec = tmp_path / "typo.llmp"
    spec.write_text(DEBUG.read_text().replace("  hidden = 512", "  hiden = 512"))
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-m", "llmp.cli", "check", str(spec)], cwd=tmp_path,
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"{spec}:36:3: error: unknown field: 'hiden' in model debug",
        "      hiden = 512",
        "      ^^^^^",
        "  hint: did you mean 'hidden'?",
    ]
    ok = subprocess.run([sys.executable, "-m", "llmp.cli", "check", str(DEBUG), "--json"],
                        capture_output=True, text=True, env=env, timeout=120)
    assert ok.returncode == 0 and json.loads(ok.stdout)["model"]["name"] == "debug"
