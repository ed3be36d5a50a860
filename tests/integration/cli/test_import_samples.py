"""``llmp import-samples`` through ``llmp.cli.main``: what it prints, the files it writes, the
exit codes (0 ok, 1 bad input, 2 usage), byte-identical reruns, and ``llmp fit`` on its output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmp.cli import main
from llmp.residuals import samplefile

GPU = "NVIDIAA100-SXM4-80GB"


def _seed(root: Path) -> Path:
    """A small seed operator folder: linear layers (forward + composite backward) and a layernorm."""
    op = root / "operator"
    op.mkdir(parents=True)
    rows = [f"{mp}.0,{b}.0,{s}.0,{dim}.0,{40 * (100 + i)}.0,{40 * (210 + 2 * i)}.0"  # slower than the A100's peak
            for i, (mp, b, s, dim) in enumerate((mp, b, s, dim) for mp in (1, 2) for b in (2, 4) for s in (1024, 2048)
                                                for dim in (2048, 4096))]
    for name in ("linear3", "linear4"):
        (op / f"{GPU}_{name}_fp16.csv").write_text("mp,b,l,dim,F_dur(us),B_dur(us)\n" + "\n".join(rows) + "\n")
    (op / f"{GPU}_layernorm_fp16.csv").write_text("b,l,dim,F_dur(us),B_dur(us)\r\n2.0,1024.0,2048.0,22.0,65.6\r\n")
    (op / f"{GPU}_res_add_fp16.csv").write_text("b,l,dim,F_dur(us),B_dur(us)\n2.0,1024.0,2048.0,30.0,30.0\n")
    return root


def test_import_prints_what_it_wrote_and_skipped(tmp_path, capsys):
    out = tmp_path / "samples"
    argv = ["import-samples", "--format", "seed", str(_seed(tmp_path / "seed")), "--device", "a100_sxm4_80gb",
            "-o", str(out)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "imported 99 rows for a100_sxm4_80gb (seed)" in text
    assert "gemm/bwd" in text and "64" in text and "res_add B_dur" in text
    assert {p.name for p in out.iterdir()} == {"gemm.csv", "norm.csv", "elementwise.csv", "import.json"}
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    assert main(argv) == 0  # a rerun replaces the directory with the same bytes
    capsys.readouterr()
    assert first == {p.name: p.read_bytes() for p in out.iterdir()}
    assert main([*argv, "--json"]) == 0
    manifest = json.loads(capsys.readouterr().out)
    assert manifest == json.loads((out / "import.json").read_text())
    assert manifest["rows_written"]["gemm/fwd"] == 32 and samplefile.read(out / "gemm.csv").meta["source"]


@pytest.mark.slow  # an XGBoost fit of a whole import
def test_fit_reads_an_import(tmp_path, capsys):
    out, models = tmp_path / "samples", tmp_path / "models"
    assert main(["import-samples", "--format", "seed", str(_seed(tmp_path / "seed")), "--device", "a100_sxm4_80gb",
                 "-o", str(out)]) == 0
    assert main(["fit", str(out), "-o", str(models), "--families", "gemm", "--json"]) == 0
    capsys.readouterr()
    assert (models / "manifest.json").is_file()


@pytest.mark.parametrize("extra, message", [
    (["--device", "nvidia_x"], "'nvidia_x' names no catalog GPU"),
    (["--device", "b200"], "nothing to import for device 'b200'"),
    (["--gpu", "gh200"], "nothing to import for device 'gh200_96gb'"),  # the alias resolves; the files are A100's
    (["--gpu", "a100_sxm4_80gb", "--node", "dgx_a100"], None),
    (["--device", "a100_sxm4_80gb", "--gpu-id", "b200"], "--gpu-id"),
])
def test_bad_input_exits_1(tmp_path, capsys, extra, message):
    code = main(["import-samples", "--format", "seed", str(_seed(tmp_path / "seed")), "-o", str(tmp_path / "o"),
                 *extra])
    err = capsys.readouterr().err
    if message is None:  # a node of the right GPU is taken (the folder has no NCCL rows to use it)
        assert code == 0
        return
    assert code == 1 and message in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_bad_file_exits_1(tmp_path, capsys):
    bad = tmp_path / "kernels.csv"
    bad.write_text("source,op\nxla,gemm\n")
    assert main(["import-samples", "--format", "kernels", str(bad), "--device", "b200", "-o", str(tmp_path / "o")]) == 1
    assert "kernels.csv lacks the columns" in capsys.readouterr().err


def test_usage_errors_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["import-samples", str(tmp_path), "--device", "b200", "-o", str(tmp_path / "o")])  # no --format
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        main(["import-samples", "--format", "csv", str(tmp_path), "--device", "b200", "-o", str(tmp_path / "o")])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err
