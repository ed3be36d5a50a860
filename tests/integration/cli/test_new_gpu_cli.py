"""The new-GPU workflow through ``llmp.cli.main`` (issue 24): import-samples by file prefix and
--gpu alias, split, fit --budget with --seed or --picks, score --by operator,pass --json --rows;
exit codes and messages for bad flags."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from llmp.cli import main

FIXTURE = Path(__file__).resolve().parents[2] / "data" / "seed_gh200"
CROSS = str(Path(__file__).resolve().parents[3] / "llmp" / "hardware" / "defaults" / "cross_gpu")


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture()
def halves(tmp_path, capsys):
    assert _run(capsys, "import-samples", "--format", "seed", FIXTURE, "--gpu", "gh200", "-o",
                tmp_path / "s")[0] == 0
    code, out, _ = _run(capsys, "split", tmp_path / "s", "--by", "shape", "--test", "0.5", "--seed", "0",
                        "-o", tmp_path / "split")
    assert code == 0 and "train:" in out and "test:" in out
    return tmp_path / "split"


def test_score_by_operator_and_pass_as_json_with_rows(halves, tmp_path, capsys):
    code, out, _ = _run(capsys, "score", halves / "test", "--residuals", CROSS, "--by", "operator,pass", "--json",
                        "--rows", tmp_path / "rows.csv")
    assert code == 0
    by = json.loads(out)["by"]
    assert by["fields"] == ["operator", "pass"]
    for g in by["groups"]:
        assert {"name", "n", "mape", "median", "p90", "bias", "roofline_mape"} <= set(g)
    with (tmp_path / "rows.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == sum(g["n"] for g in by["groups"])
    code, out, _ = _run(capsys, "score", halves / "test", "--residuals", CROSS, "--by", "operator,pass")
    assert code == 0 and "per operator,pass" in out and "bias" in out


def test_fit_random_active_and_picked(halves, tmp_path, capsys):
    train = halves / "train"
    runs = {}
    for name, extra in (("active", []), ("random", ["--seed", "1"]), ("random2", ["--seed", "1"])):
        code, out, _ = _run(capsys, "fit", train, "--base", CROSS, "--budget", "3", *extra, "-o", tmp_path / name,
                            "--json")
        assert code == 0
        runs[name] = json.loads(out)
    assert runs["random"]["adjustments"] == runs["random2"]["adjustments"]  # seeded
    manifest = json.loads((tmp_path / "random" / "manifest.json").read_text())
    assert manifest["adaptation"]["choice"] == "random" and manifest["adaptation"]["seed"] == 1
    keys = [row[0] for row in csv.reader((train / "gemm.csv").read_text().splitlines()[3:6])]
    (tmp_path / "picks.txt").write_text("# three GEMM rows\n" + "\n".join(keys) + "\n")
    code, out, _ = _run(capsys, "fit", train, "--base", CROSS, "--picks", tmp_path / "picks.txt", "-o",
                        tmp_path / "picked", "--json")
    assert code == 0 and json.loads(out)["adaptation"]["chosen"] == 3


@pytest.mark.parametrize("argv, needle", [
    (["score", "{test}", "--residuals", CROSS, "--by", "colour"], "cannot group scores by 'colour'"),
    (["fit", "{train}", "--base", CROSS, "--seed", "1", "-o", "{tmp}/x"], "give --budget K"),
    (["fit", "{train}", "--base", CROSS, "--picks", "{tmp}/none.txt", "-o", "{tmp}/x"], "cannot read the picks file"),
    (["fit", "{train}", "--picks", "{tmp}/none.txt", "-o", "{tmp}/x"], "each needs --base"),
    (["split", "{train}", "-o", "{train}"], "not an earlier split"),
    (["import-samples", "--format", "seed", str(FIXTURE), "--gpu", "h100", "-o", "{tmp}/x"], "names no catalog GPU"),
])
def test_bad_flags_exit_1_with_a_message(halves, tmp_path, capsys, argv, needle):
    names = {"test": halves / "test", "train": halves / "train", "tmp": tmp_path}
    code, _, err = _run(capsys, *(a.format(**names) for a in argv))
    assert code == 1 and needle in err and "Traceback" not in err


def test_split_usage_errors_exit_2(halves, capsys):
    for extra in (["--by", "row"], ["--test", "1.5"]):
        with pytest.raises(SystemExit) as exc:
            main(["split", str(halves / "train"), "-o", str(halves / "again"), *extra])
        assert exc.value.code == 2
