"""Every command README.md and docs/*.md show runs and succeeds on a fresh clone with nothing
beside it: each ```bash block's llmp commands and each ```python block are run in order, in a copy
of the repository's tracked files (no shared data folder anywhere above it), through the same CLI
entry point as the `llmp` console script, importing the copy's own llmp. What they write must be
covered by .gitignore, so the tour leaves a clean checkout. A sample output shown as ``$ llmp ...``
followed by its lines is checked against the real command's output (``...`` elides lines).

The set-up block (pip installs) is not re-run here: CI runs the test command, and its first
command's `llmp predict` is run. Blocks that sample this machine for minutes, or run the
sensitivity, search and plan walk-throughs, are marked slow and run in CI's slow step.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))


@dataclass(frozen=True)
class Block:
    """One fenced block of a page: its llmp commands (argument lists), or Python source."""

    page: str
    index: int
    commands: tuple[tuple[str, ...], ...] = ()
    python: str = ""

    def __str__(self) -> str:
        return f"{self.page}#{self.index}"


def _blocks(page: Path) -> list[Block]:
    """The ```bash blocks' llmp commands (continuation lines joined, comments cut) and the
    ```python blocks of ``page``, in order."""
    text = page.read_text(encoding="utf-8")
    out = []
    for i, (lang, body) in enumerate(re.findall(r"```(bash|python)\n(.*?)```", text, flags=re.S)):
        if lang == "python":
            out.append(Block(page.name, i, python=body))
            continue
        commands = []
        for line in re.sub(r"\\\n\s*", " ", body).splitlines():
            for part in line.split("&&"):
                words = shlex.split(part, comments=True)
                if words and words[0] == "llmp":
                    commands.append(tuple(words[1:]))
        if commands:
            out.append(Block(page.name, i, commands=tuple(commands)))
    return out


BLOCKS = [b for page in PAGES for b in _blocks(page)]
SAMPLES = [(page.name, m.group(1), m.group(2)) for page in PAGES
           for m in re.finditer(r"```\n\$ llmp (.*?)\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S)]
TRACKED = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.split("\0")


QUICK = frozenset({"predict", "check", "ops", "import-hf"})
"""Commands that answer in a second or two: a block of at most two of them runs in the default suite."""


def _slow(block: Block) -> bool:
    """Walk-throughs that sample, fit, calibrate, search, plan, differentiate or serve, Python
    walk-throughs of the library, and blocks chaining more than two commands (2-25 s each; CI runs
    them in its slow step, and each command's library function is checked against the command in
    ``test_api_cli_pairs.py``)."""
    return bool(block.python) or len(block.commands) > 2 or any(c[0] not in QUICK for c in block.commands)


def _clone(tmp_path: Path) -> Path:
    """The tracked files as they are in the working tree: what a fresh clone holds."""
    root = tmp_path / "repo"
    for name in filter(None, TRACKED):
        source = ROOT / name
        if source.is_file():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, root / name)
    return root


def _env(clone: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(clone), "MPLBACKEND": "Agg"}


def _expand(args: tuple[str, ...], cwd: Path) -> list[str]:
    """Shell globbing, as the page's shell would do it (``validation/*.csv``)."""
    out: list[str] = []
    for a in args:
        matches = sorted(str(p.relative_to(cwd)) for p in cwd.glob(a)) if any(ch in a for ch in "*?[") else []
        out.extend(matches or [a])
    return out


def _serve(args: list[str], cwd: Path, env: dict[str, str]) -> None:
    """``llmp serve`` runs until stopped: start it on a free port (the page's ``--port`` replaced),
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


def _llmp(args: list[str], cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run([sys.executable, "-m", "llmp.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, f"llmp {' '.join(args)} exited {done.returncode}:\n{done.stderr[-2000:]}"
    assert "Traceback" not in done.stderr
    return done.stdout


def _run(block: Block, clone: Path) -> None:
    env = _env(clone)
    if block.python:
        done = subprocess.run([sys.executable, "-c", block.python], cwd=clone, env=env, capture_output=True,
                              text=True, timeout=900)
        assert done.returncode == 0, f"{block} failed:\n{done.stderr[-2000:]}"
    for args in (_expand(a, clone) for a in block.commands):
        if args[0] == "serve":
            pytest.importorskip("uvicorn", reason="llmp serve needs the [serve] extra")
            _serve(args, clone, env)
        else:
            _llmp(args, clone, env)
    _left_ignored(clone)


def _left_ignored(clone: Path) -> None:
    """Every file the commands wrote into the clone is one .gitignore covers."""
    tracked = set(filter(None, TRACKED))
    written = sorted(str(p.relative_to(clone)) for p in clone.rglob("*")
                     if p.is_file() and str(p.relative_to(clone)) not in tracked and "__pycache__" not in p.parts)
    if not written:
        return
    ignored = subprocess.run(["git", "check-ignore", "--no-index", "--stdin"], cwd=ROOT, input="\n".join(written),
                             capture_output=True, text=True).stdout.split()
    assert sorted(set(written) - set(ignored)) == [], "written by the tour and not in .gitignore"


def test_the_pages_show_commands():
    readme = [b for b in BLOCKS if b.page == "README.md"]
    assert len(readme) >= 5 and readme[0].commands[0] == ("predict", "examples/llama3_70b_dgx_h100.llmp")
    assert {b.page for b in BLOCKS} >= {"README.md", "language.md", "plan.md", "bands.md", "serve.md"}


@pytest.mark.parametrize("block", [b for b in BLOCKS if not _slow(b)], ids=str)
def test_block_runs(block, tmp_path):
    _run(block, _clone(tmp_path))


@pytest.mark.slow
@pytest.mark.parametrize("block", [b for b in BLOCKS if _slow(b)], ids=str)
def test_slow_block_runs(block, tmp_path):
    pytest.importorskip("torch")
    _run(block, _clone(tmp_path))


@pytest.mark.parametrize("page,command,shown", [
    s if shlex.split(s[1])[0] in QUICK else pytest.param(*s, marks=pytest.mark.slow) for s in SAMPLES],
    ids=lambda v: v if "\n" not in v else "")
def test_sample_output_is_what_the_command_prints(page, command, shown, tmp_path):
    clone = _clone(tmp_path)
    out = _llmp(shlex.split(command), clone, _env(clone))
    for line in shown.splitlines():
        if line.strip() != "...":
            assert line in out.splitlines(), f"{page}: {line!r} is not in the output of llmp {command}"


@pytest.mark.parametrize("example", ["llama3_8b_dgx_h100", "gpt3_175b_dgx_a100"])
def test_the_language_page_shows_the_example_files_as_they_are(example):
    """A spec the page names as ``# examples/NAME.llmp`` is that file from its ``use`` line on."""
    text = (ROOT / "docs" / "language.md").read_text(encoding="utf-8")
    shown = re.search(rf"```llmp\n# examples/{example}\.llmp[^\n]*\n(.*?)```", text, flags=re.S)
    assert shown is not None
    source = (ROOT / "examples" / f"{example}.llmp").read_text(encoding="utf-8")
    assert source[source.index("use "):] == shown.group(1)
