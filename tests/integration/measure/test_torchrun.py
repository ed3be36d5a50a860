"""``llmp sample`` under a real torchrun: two gloo processes on this CPU, on one node and as two
nodes, and a run stopped by SIGTERM (Slurm's time limit) that a rerun completes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llmp.measure import collectives, design, sampling
from llmp.residuals import samplefile

ROOT = Path(__file__).resolve().parents[3]
QUICK = ["--scale", "0.01", "--repeat-seconds", "0.002", "--quiet"]


def _torchrun(*args: str, nproc: int = 2) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
            "-m", "llmp", "sample", *args]


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    return done


def _keys(out: Path, family: str) -> list[str]:
    """Every row's key of ``family`` in ``out``, over every rank's file (duplicates kept)."""
    keys = []
    for path in sorted(out.glob(f"{family}*.csv")):
        table = samplefile.read(path)
        assert table.dropped == 0 and path.read_bytes().endswith(b"\n")
        keys += [r["key"] for r in table.rows]
    return keys


def _expected(families: tuple[str, ...], budget: int) -> list[str]:
    ranges = design.RANGES["cpu"].scaled(0.01)
    return [c.key for c in design.design(families, ranges, ("fp32",), 0, budget)]


@pytest.mark.slow  # two torchrun launches (about 10 s)
def test_two_ranks_split_the_kernels_and_measure_collectives(tmp_path: Path) -> None:
    out = tmp_path / "s"
    families = ("copy", "norm")
    done = _run(_torchrun("--out", str(out), "--families", "copy,norm,collectives", "--budget", "3", *QUICK))
    assert "sampled 6 kernels on 2 ranks" in done.stdout
    assert "on 2 ranks (1 node x 2)" in done.stdout
    for family in families:
        assert sorted(p.name for p in out.glob(f"{family}*.csv")) == [f"{family}.rank0.csv", f"{family}.rank1.csv"]
        mine = [samplefile.read(out / f"{family}.rank{r}.csv") for r in (0, 1)]
        assert all(t.rows for t in mine) and [t.meta["rank"] for t in mine] == [0, 1]
    keys = _keys(out, "copy") + _keys(out, "norm")
    assert sorted(keys) == sorted(_expected(families, 3))
    table = samplefile.read(out / "collectives.csv")
    assert {r["key"] for r in table.rows} == {c.key for c in collectives.plan(2, 1, "cpu", 3, 0)}
    assert table.meta["world"] == 2 and table.meta["node_id"] == "cpu_host" and table.meta["backend"] == "gloo"
    # a single process resumes the two ranks' run: it measures only the new cases
    again = subprocess.run([sys.executable, "-m", "llmp", "sample", "--out", str(out), "--families", "copy,norm",
                            "--budget", "4", *QUICK], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert "sampled 2 kernels" in again.stdout and "6 already there" in again.stdout
    keys = _keys(out, "copy") + _keys(out, "norm")
    assert sorted(keys) == sorted(_expected(families, 4))


@pytest.mark.slow  # a torchrun stopped by SIGTERM, then rerun (about 15 s)
def test_sigterm_leaves_valid_files_and_a_rerun_completes(tmp_path: Path) -> None:
    out = tmp_path / "s"
    families = ("copy", "elementwise", "norm")
    args = ["--out", str(out), "--families", ",".join(families), "--budget", "40", "--scale", "0.01",
            "--repeat-seconds", "0.02", "--quiet"]
    proc = subprocess.Popen(_torchrun(*args), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if sum(len(samplefile.read(p).rows) for p in out.glob("*.rank*.csv")) >= 10:
            break
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGTERM)  # what Slurm sends at the time limit, to the whole step
    _, err = proc.communicate(timeout=120)
    assert "interrupted: every row measured so far" in err
    assert "[rank0]: Traceback" not in err and "[rank1]: Traceback" not in err  # torchrun's own report aside
    partial = [k for f in families for k in _keys(out, f)]
    assert 10 <= len(partial) < 120, err[-2000:]
    assert len(partial) == len(set(partial))
    _run(_torchrun(*args))
    keys = [k for f in families for k in _keys(out, f)]
    assert sorted(keys) == sorted(_expected(families, 40)) and set(partial) <= set(keys)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # two torchrun agents (about 10 s)
def test_two_nodes_measure_groups_across_nodes(tmp_path: Path) -> None:
    """Two torchrun agents of one rank each, as two nodes would run them (``--nnodes 2``, c10d
    rendezvous): the collectives are measured in the shape that spans nodes, one rank per node."""
    out = tmp_path / "s"
    port = _free_port()
    agents = [subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=1",
                                "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=llmp-test",
                                # one agent hosts the rendezvous store, so the other never races it for the port
                                f"--rdzv-conf=is_host={int(host)}",
                                "-m", "llmp", "sample", "--out", str(out), "--families", "collectives,copy",
                                "--budget", "2", *QUICK], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True) for host in (True, False)]
    for agent in agents:
        _, err = agent.communicate(timeout=300)
        assert agent.returncode == 0, err[-3000:]
    table = samplefile.read(out / "collectives.csv")
    assert {(r["group"], r["ranks_per_node"], r["tier"]) for r in table.rows} == {("2", "1", "inter")}
    assert table.meta["ranks_per_node"] == 1 and table.meta["world"] == 2
    assert sorted(_keys(out, "copy")) == sorted(_expected(("copy",), 2))


def test_rank_files_and_single_files_resume_each_other(tmp_path: Path) -> None:
    """The keys already measured are read from every rank's file and a single process's."""
    from tiny_ranges import TINY

    config = sampling.SampleConfig(out=tmp_path, families=("copy",), ranges=TINY, per_family=3, target_s=0.002,
                                   progress=False)
    sampling.run(config)
    (tmp_path / "copy.csv").rename(tmp_path / "copy.rank5.csv")  # as a rank of an earlier torchrun wrote it
    again = sampling.run(config)
    assert again.measured == 0 and again.existing == 3


def test_every_rank_gets_its_share_of_every_family() -> None:
    from tiny_ranges import TINY

    todo = design.design(("copy", "norm", "gemm"), TINY, ("fp32",), 0, 8)
    for size in (1, 2, 3, 4, 7):
        shares = [sampling.share(todo, rank, size) for rank in range(size)]
        assert sorted(c.key for s in shares for c in s) == sorted(c.key for c in todo)
        assert max(map(len, shares)) - min(map(len, shares)) <= 1
        if size <= 3:
            assert all({c.family for c in s} == {"copy", "norm", "gemm"} for s in shares)


@pytest.mark.slow  # one torchrun launch of two ranks (about 8 s)
def test_a_timed_run_launches_the_collectives_with_its_minutes(tmp_path: Path) -> None:
    """A single process asked for collectives starts torchrun itself; a timed run hands the ranks
    its --minutes, never --budget beside it (the two exclude each other)."""
    out = tmp_path / "s"
    _run([sys.executable, "-m", "llmp", "sample", "--device", "cpu", "--families", "collectives",
          "--minutes", "0.3", "--out", str(out), "--quiet"])
    assert any(samplefile.read(p).rows for p in out.glob("*.csv"))
