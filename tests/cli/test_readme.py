"""Every command README.md shows runs and succeeds: each ```bash block is run in order, in a
scratch folder that sees the repository's examples/, validation/ and llmp/, through the same CLI
entry point as the `llmp` console script.

The set-up block (pip installs) is not re-run here: CI runs the test command, and its first
command's `llmp predict` is run. Blocks that sample this machine for minutes, read the shared
public data folder (absent in CI), or run the sensitivity, search and plan walk-throughs are marked
slow and run in CI's slow step.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data"


def _blocks() -> list[list[str]]:
    """The llmp commands of each bash block of README.md, continuation lines joined, comments cut."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = []
    for body in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        joined = re.sub(r"\\\n\s*", " ", body)
        commands = []
        for line in joined.splitlines():
            for part in line.split("&&"):
                words = shlex.split(part, comments=True)
                if words and words[0] == "llmp":
                    commands.append(words[1:])
        blocks.append(commands)
    return [b for b in blocks if b]


BLOCKS = _blocks()


def _slow(block: list[list[str]]) -> bool:
    """Sampling, measuring and the shared data; and the sensitivity, search and plan walk-throughs
    (10-25 s each, and their library functions are checked against the commands in
    ``test_api_cli_pairs.py``)."""
    return any(c[0] in ("sample", "measure", "sensitivity", "search", "plan") or any("../shared" in w for w in c)
               for c in block)


def _scratch(tmp_path: Path) -> Path:
    tmp_path.mkdir(parents=True)
    for name in ("examples", "validation", "llmp"):
        (tmp_path / name).symlink_to(ROOT / name)
    if SHARED.exists():  # `../shared/data` as seen from the repository root
        (tmp_path.parent / "shared").mkdir(exist_ok=True)
        link = tmp_path.parent / "shared" / "data"
        if not link.exists():
            link.symlink_to(SHARED)
    return tmp_path


def _expand(args: list[str], cwd: Path) -> list[str]:
    """Shell globbing, as the README's shell would do it (``validation/*.csv``)."""
    out: list[str] = []
    for a in args:
        matches = sorted(str(p.relative_to(cwd)) for p in cwd.glob(a)) if any(ch in a for ch in "*?[") else []
        out.extend(matches or [a])
    return out


def _serve(args: list[str], cwd: Path, env: dict[str, str]) -> None:
    """``llmp serve`` runs until stopped: start it on a free port (the README's ``--port`` replaced),
    wait for the address it prints, fetch the page from it, and stop it."""
    import socket
    import time
    import urllib.error
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    args = [port if i > 0 and args[i - 1] == "--port" else a for i, a in enumerate(args)]
    proc = subprocess.Popen([sys.executable, "-m", "llmp.cli", *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert f"http://127.0.0.1:{port}/" in line, f"llmp {' '.join(args)} printed {line!r}"
        for _ in range(100):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as page:
                    assert page.status == 200 and b"llmp" in page.read()
                break
            except (urllib.error.URLError, ConnectionError):  # not listening yet
                time.sleep(0.1)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _run(block: list[list[str]], cwd: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    for args in (_expand(a, cwd) for a in block):
        if args[0] == "serve":
            pytest.importorskip("uvicorn", reason="llmp serve needs the [serve] extra")
            _serve(args, cwd, env)
            continue
        done = subprocess.run([sys.executable, "-m", "llmp.cli", *args], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=900)
        assert done.returncode == 0, f"llmp {' '.join(args)} exited {done.returncode}:\n{done.stderr[-2000:]}"
        assert "Traceback" not in done.stderr


def test_the_readme_shows_commands():
    assert len(BLOCKS) >= 5 and all(BLOCKS)
    assert BLOCKS[0][0] == ["predict", "examples/llama3_70b_dgx_h100.llmp"]


@pytest.mark.parametrize("index", [i for i, b in enumerate(BLOCKS) if not _slow(b)])
def test_readme_block_runs(index, tmp_path):
    _run(BLOCKS[index], _scratch(tmp_path / "repo"))


@pytest.mark.slow
@pytest.mark.parametrize("index", [i for i, b in enumerate(BLOCKS) if _slow(b)])
def test_slow_readme_block_runs(index, tmp_path):
    block = BLOCKS[index]
    if any("../shared" in w for c in block for w in c) and not SHARED.exists():
        pytest.skip("the shared public data folder is not on this machine")
    if any(c[0] in ("sample", "measure") for c in block):
        pytest.importorskip("torch")
    _run(block, _scratch(tmp_path / "repo"))
