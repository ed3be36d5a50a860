"""``llmp search``: the JSON contract, the table, and clean failures for bad flags (exit 1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmp.cli import main
from llmp.errors import InputError
from llmp.search.space import parse_vary

ROOT = Path(__file__).parents[3]
SWEEP = ROOT / "examples" / "sweep_llama3_8b.llmp"
PLAIN = ROOT / "examples" / "llama3_8b_dgx_h100.llmp"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_contract(capsys):
    code, out, err = run(capsys, "search", SWEEP, "--vary", "gpu.mem_bandwidth=2TB/s,3.35TB/s", "--json",
                         "--top", "5", "--objective", "tokens_per_s")
    assert (code, err) == (0, "")
    data = json.loads(out)
    assert {"objective", "space", "feasible", "infeasible", "results", "pareto", "seconds", "configs_per_s",
            "cost_definition", "gpu_hour_price", "memory_limit_bytes"} <= set(data)
    assert data["space"]["size"] == 24
    assert {a["path"] for a in data["space"]["axes"]} == {"train.micro_batch", "parallel.tp", "gpu.mem_bandwidth"}
    assert [r["rank"] for r in data["results"]] == [1, 2, 3, 4, 5]
    first = data["results"][0]
    assert {"config", "step_time_s", "tokens_per_s", "mfu", "memory_per_gpu_bytes", "gpus", "cost", "set"} <= set(first)
    assert first["config"]["gpu.mem_bandwidth"] in (2e12, 3.35e12)
    assert data["feasible"] + sum(data["infeasible"].values()) == 24
    assert data["pareto"]["axes"] == ["cost", "step_time_s"] and data["pareto"]["points"]


def test_table_names_reasons_and_how_to_reproduce_the_best(capsys):
    code, out, _ = run(capsys, "search", SWEEP, "--top", "3", "--pareto")
    assert code == 0
    assert "dropped" in out and "out of memory" in out
    assert f"reproduce the best: llmp predict {SWEEP} --set" in out
    assert "Pareto front" in out


@pytest.mark.parametrize(("text", "needle"), [
    ("parallel.tp", "needs path=v1,v2"),
    ("parallel.tpp=1,2", "did you mean 'parallel.tp'?"),
    ("parallel.tp=1,,2", "empty value"),
    ("parallel.tp=", "empty value"),
    ("parallel.tp=2,2", "listed twice"),
    ("model.arch=gpt,llama", "cannot be varied"),
    ("node.gpu=a,b", "cannot be varied"),
])
def test_vary_syntax_errors(text, needle):
    with pytest.raises(InputError, match=needle.replace("?", r"\?")):
        parse_vary(text)


def test_vary_accepts_brackets_and_the_train_parallel_spelling():
    assert parse_vary("train.parallel.tp=[1, 2, 4]") == ("parallel.tp", ["1", "2", "4"])


@pytest.mark.parametrize(("argv", "needle"), [
    (["--vary", "gpu.mem_bandwidth=2TB,3TB/s"], "expects a bandwidth"),
    (["--vary", "train.recompute=nope"], "expected one of none, selective, full"),
    (["--vary", "parallel.tpp=1,2"], "did you mean 'parallel.tp'?"),
    (["--gpus", "12"], "does not fill whole nodes"),
    (["--gpus", "eight"], "whole numbers"),
    (["--max-memory", "3TB/s"], "needs a size"),
    (["--top", "0"], "positive"),
    (["--gpu-hour-price", "-1"], "must be positive"),
])
def test_bad_flags_exit_1_without_a_traceback(capsys, argv, needle):
    code, out, err = run(capsys, "search", SWEEP, *argv)
    assert code == 1 and out == ""
    assert needle in err and "Traceback" not in err


def test_nothing_to_search_says_how(capsys):
    code, _, err = run(capsys, "search", PLAIN)
    assert code == 1 and "--vary" in err and "--gpus" in err


def test_free_fields_must_be_varied_or_pinned(capsys):
    symbolic = ROOT / "examples" / "symbolic_hidden.llmp"
    code, _, err = run(capsys, "search", symbolic, "--vary", "parallel.tp=1,2")
    assert code == 1 and "leaves model.hidden" in err and "--set model.hidden=" in err
    code, out, _ = run(capsys, "search", symbolic, "--vary", "model.hidden=1024,2048", "--json")
    assert code == 0
    rows = json.loads(out)["results"]
    assert {r["config"]["model.ffn_hidden"] for r in rows} == {4 * r["config"]["model.hidden"] for r in rows}
