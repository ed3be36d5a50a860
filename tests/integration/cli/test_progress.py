"""Progress bars: drawn on stderr while long work runs on a terminal, never with ``--quiet`` and
never when stderr is a pipe or a file (what programs and CI read stays clean).

Each command runs as the console script does, in a subprocess whose stderr is a pseudo-terminal
(or a pipe), so the check is the one a user sees.
"""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from llmp.cli import main
from llmp.progress import bar

ROOT = Path(__file__).resolve().parents[3]


def _stderr(args: list[str], *, tty: bool, cwd: Path) -> tuple[int, bytes]:
    """Exit status and everything written to stderr, a pseudo-terminal when ``tty``."""
    command = [sys.executable, "-m", "llmp.cli", *args]
    if not tty:
        done = subprocess.run(command, cwd=cwd, capture_output=True, timeout=300)
        return done.returncode, done.stderr
    main, other = pty.openpty()
    proc = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=other)
    os.close(other)
    seen = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the other end closed
            break
        if not chunk:
            break
        seen += chunk
    os.close(main)
    return proc.wait(timeout=300), seen


COMMANDS = {
    "sensitivity": ["sensitivity", "examples/tiny_cpu.llmp"],
    "validating": ["validate", "validation/megatron_sc21.csv", "--summary", "--residuals", "none"],
    "planning": ["plan", "examples/llama3_8b_dgx_h100.llmp", "--tokens", "1T", "--deadline", "30d"],
    "searching": ["search", "examples/llama3_8b_dgx_h100.llmp", "--gpus", "64", "--top", "3"],
    "calibrating": ["calibrate", "examples/calibration/sc21_three_runs.csv", "-o", "{tmp}/stack.json"],
    "fitting": ["fit", "{tmp}/samples", "-o", "{tmp}/store"],
    "scoring": ["score", "{tmp}/samples", "--residuals", "none"],
}


def _args(name: str, tmp_path: Path) -> list[str]:
    return [a.replace("{tmp}", str(tmp_path)) for a in COMMANDS[name]]


@pytest.mark.slow  # runs three commands end to end in a pseudo-terminal
def test_a_terminal_sees_the_bar_and_quiet_or_a_pipe_sees_nothing(tmp_path: Path) -> None:
    args = _args("sensitivity", tmp_path)
    status, drawn = _stderr(args, tty=True, cwd=ROOT)
    assert status == 0 and b"sensitivity" in drawn
    assert _stderr([*args, "--quiet"], tty=True, cwd=ROOT) == (0, b"")
    assert _stderr(args, tty=False, cwd=ROOT) == (0, b"")


@pytest.mark.slow
@pytest.mark.parametrize("label", [k for k in COMMANDS if k != "sensitivity"])
def test_every_long_command_draws_its_bar_only_on_a_terminal(label: str, tmp_path: Path) -> None:
    if label in ("fitting", "scoring"):  # on the seed samples the README imports
        assert main(["import-samples", "--format", "seed", str(ROOT / "examples/samples/seed_perlmutter_a100"),
                     "--device", "a100_sxm4_80gb", "-o", str(tmp_path / "samples")]) == 0
    args = _args(label, tmp_path)
    if label == "fitting":  # each run writes its own store
        args[3] = str(tmp_path / "drawn")
        status, drawn = _stderr(args, tty=True, cwd=ROOT)
        assert status == 0 and label.encode() in drawn
        args[3] = str(tmp_path / "quiet")
        assert _stderr([*args, "--quiet"], tty=True, cwd=ROOT)[1] == b""
        args[3] = str(tmp_path / "piped")
        assert _stderr(args, tty=False, cwd=ROOT)[1] == b""
        return
    status, drawn = _stderr(args, tty=True, cwd=ROOT)
    assert status == 0 and label.encode() in drawn
    assert _stderr([*args, "--quiet"], tty=True, cwd=ROOT)[1] == b""
    assert _stderr(args, tty=False, cwd=ROOT)[1] == b""


def test_no_bar_means_no_callback() -> None:
    """Off the terminal the library is handed None, so it never pays for drawing."""
    with bar("x") as advance:  # pytest's stderr is captured, not a terminal
        assert advance is None
    with bar("x", quiet=True) as advance:
        assert advance is None
