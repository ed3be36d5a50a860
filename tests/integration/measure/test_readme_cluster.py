"""README's "Sampling a cluster of your own": every command it shows works.

``tests/integration/cli/test_readme.py`` runs the page's ``llmp`` lines; the launcher lines (``torchrun``,
``python -m torch.distributed.run``, ``srun ... torchrun``) are checked here: each parses with
torchrun's own argument parser and with ``llmp sample``'s, the ``--plan`` lines print their plan,
and the CPU line runs for real (two gloo processes).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from torch.distributed.run import get_args_parser

from llmp.cli import main
from llmp.commands import sample
from llmp.residuals import samplefile

ROOT = Path(__file__).resolve().parents[3]
SECTION = (ROOT / "README.md").read_text(encoding="utf-8").split("**Sampling a cluster of your own**")[1]
SECTION = SECTION.split("\n**", 1)[0]
LINES = [line.split("  #")[0].strip() for block in re.findall(r"```bash\n(.*?)```", SECTION, flags=re.S)
         for line in re.sub(r"\\\n\s*", " ", block).splitlines() if line.strip()]
LAUNCHES = [line for line in LINES if "torchrun" in line or "torch.distributed.run" in line]
PLANS = [shlex.split(line)[1:] for line in LINES if line.startswith("llmp sample --plan")]


def _split(line: str) -> tuple[list[str], list[str]]:
    """(torchrun's arguments, llmp sample's) of a launcher line (``srun ...`` and ``python -m`` cut)."""
    words = shlex.split(line)
    start = words.index("torchrun") + 1 if "torchrun" in words else words.index("torch.distributed.run") + 1
    at = words.index("-m", start)
    assert words[at + 1:at + 3] == ["llmp", "sample"], line
    return words[start:at], words[at + 3:]


def test_the_section_shows_one_node_slurm_and_cpu_launches() -> None:
    assert len(LAUNCHES) == 3 and len(PLANS) == 2
    assert any(line.startswith("srun ") for line in LAUNCHES)
    assert any(line.startswith("python -m torch.distributed.run") for line in LAUNCHES)


@pytest.mark.parametrize("line", LAUNCHES)
def test_each_launch_parses_for_torchrun_and_llmp(line: str) -> None:
    launcher, llmp_args = _split(line)
    parsed = get_args_parser().parse_args([*launcher, "-m", "llmp", "sample", *llmp_args])
    assert parsed.module and parsed.training_script == "llmp" and parsed.training_script_args[0] == "sample"
    parser = argparse.ArgumentParser()
    sample.add_parser(parser)
    args = parser.parse_args(llmp_args)
    assert args.out is not None and not args.plan
    if "--nnodes" in launcher:
        assert parsed.rdzv_backend == "c10d" and parsed.nnodes == "4"


@pytest.mark.parametrize("argv", PLANS, ids=" ".join)
def test_each_plan_prints(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 0
    out = capsys.readouterr().out
    if "--json" in argv:
        assert json.loads(out)["gpu_minutes"] > 0
    else:
        assert "collectives" in out and "GPU-min" in out


@pytest.mark.slow  # two gloo processes sample every family once over (about 15 s)
def test_the_cpu_launch_runs(tmp_path: Path) -> None:
    (line,) = [x for x in LAUNCHES if x.startswith("python -m torch.distributed.run")]
    words = shlex.split(line)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, *words[1:]], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp_path / "samples_2ranks"
    assert "sampled 30 kernels on 2 ranks" in done.stdout
    assert samplefile.read(out / "collectives.csv").rows and samplefile.read(out / "gemm.rank1.csv").meta["world"] == 2
