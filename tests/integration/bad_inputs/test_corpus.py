"""The bad-input corpus: every file under ``tests/integration/bad_inputs/<area>/`` is one case.

Each case runs ``llmp.cli.main`` in-process (the same code the console script runs) on input built
from the case file, under the case's time limit (a timer) and memory limit (``RLIMIT_AS``: the
address space may grow by at most that much during the case), and must end within them with the
exit status and a stderr matching the patterns its header names, never with a traceback or an
exception other than the CLI's own exit. The case format is documented in
``tests/integration/bad_inputs/README.md``.
"""

from __future__ import annotations

import contextlib
import json
import re
import resource
import shlex
import shutil
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from llmp.cli import main

HERE = Path(__file__).parent
REPO = HERE.parents[2]
AREAS = ("specs", "flags", "stores", "samples", "validation", "hf")
TIME_S = 60.0
"""Default time limit of a case: the slowest clean refusal takes a few seconds on a shared 2-core VM."""
MEMORY = 2 << 30
"""Default memory limit of a case (bytes of address space it may add): the issue's 2 GB."""
UNITS = {"MB": 1 << 20, "GB": 1 << 30}


@dataclass
class Case:
    """One parsed case file: what to write, what to run, what must come out."""

    path: Path
    run: list[str] | None = None
    exit: int = 1
    stderr: list[str] = field(default_factory=list)
    stdout: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    copies: list[tuple[str, str]] = field(default_factory=list)
    edits: list[tuple[str, list[str]]] = field(default_factory=list)
    time_s: float = TIME_S
    memory: int = MEMORY
    repeat: str = ""
    """What ``{repeat}`` stands for in the case's files and arguments (a big input kept small here)."""

    @property
    def main_name(self) -> str:
        return self.path.name


def parse_case(path: Path) -> Case:
    """Header lines start with ``#!``; ``#! file: NAME`` starts another file's text."""
    case = Case(path)
    current = case.main_name
    chunks: dict[str, list[str]] = {current: []}
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
        if not line.startswith("#!"):
            chunks[current].append(line)
            continue
        key, _, value = line[2:].strip().partition(":")
        key, value = key.strip(), value.strip()
        if key == "run":
            case.run = shlex.split(value)
        elif key == "exit":
            case.exit = int(value)
        elif key == "stderr":
            case.stderr.append(value)
        elif key == "stdout":
            case.stdout.append(value)
        elif key == "file":
            current = value
            chunks.setdefault(current, [])
        elif key == "copy":
            src, dest = value.split()
            case.copies.append((src, dest))
        elif key == "time":
            case.time_s = float(value.removesuffix("s"))
        elif key == "memory":
            number, unit = value.split()
            case.memory = int(float(number) * UNITS[unit])
        elif key == "repeat":
            count, text = value.split(None, 1)
            text = text.encode().decode("unicode_escape")
            case.repeat = "".join(text.replace("{i}", str(i)) for i in range(1, int(count) + 1))
        elif key in ("delete", "truncate", "set-json", "del-json", "bytes"):
            case.edits.append((key, value.split(None, 2)))
        else:
            raise ValueError(f"{path}: unknown header key {key!r}")
    case.files = {name: "".join(lines) for name, lines in chunks.items()}
    if case.run is None:
        raise ValueError(f"{path}: no '#! run:' line")
    if not (case.stderr or case.stdout) and case.exit != 0:
        raise ValueError(f"{path}: no '#! stderr:' pattern")
    return case


def _json_path(doc: object, dotted: str) -> tuple[object, str | int]:
    """The container holding the last step of ``a.0.b`` and that step (an int for lists)."""
    steps: list[str | int] = [int(s) if s.isdigit() else s for s in dotted.split(".")]
    for step in steps[:-1]:
        doc = doc[step]  # type: ignore[index]
    return doc, steps[-1]


def _edit(root: Path, op: str, args: list[str]) -> None:
    target = root / args[0]
    if op == "delete":
        shutil.rmtree(target) if target.is_dir() else target.unlink()
    elif op == "truncate":
        target.write_bytes(target.read_bytes()[: int(args[1])])
    elif op == "bytes":  # write raw bytes given as hex
        target.write_bytes(bytes.fromhex(args[1]))
    else:
        doc = json.loads(target.read_text(encoding="utf-8"))
        parent, step = _json_path(doc, args[1])
        if op == "set-json":
            parent[step] = json.loads(args[2])  # type: ignore[index]
        else:
            del parent[step]  # type: ignore[arg-type]
        target.write_text(json.dumps(doc), encoding="utf-8")


def materialise(case: Case, root: Path) -> list[str]:
    """Write the case's files under ``root`` and return its argv with placeholders filled."""
    for src, dest in case.copies:
        source = REPO / src
        if source.is_dir():
            shutil.copytree(source, root / dest)
        else:
            (root / dest).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, root / dest)
    for name, text in case.files.items():
        if name == case.main_name and not text.strip() and len(case.files) > 1:
            continue
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text.replace("{repeat}", case.repeat), encoding="utf-8")
    for op, args in case.edits:
        _edit(root, op, args)
    values = {"case": str(root / case.main_name), "dir": str(root), "repo": str(REPO), "repeat": case.repeat}
    argv = []
    for arg in case.run or []:
        for key, value in values.items():
            arg = arg.replace("{" + key + "}", value)
        argv.append(arg)
    return argv


def _cases() -> list[Path]:
    return sorted(p for area in AREAS for p in (HERE / area).glob("*") if p.is_file())


class OverTime(BaseException):
    """Raised by the case's timer; a BaseException, so no ``except Exception`` in llmp swallows it."""


def _address_space() -> int:
    """Bytes of address space this process holds now (``VmSize``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmSize in /proc/self/status")


@contextlib.contextmanager
def limits(case: Case) -> Iterator[None]:
    """Run the body with at most ``case.memory`` more address space (allocations beyond it fail with
    MemoryError) and at most ``case.time_s`` seconds (then :class:`OverTime`); both lifted after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = _address_space() + case.memory
    resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))

    def over(signum: int, frame: object) -> None:
        raise OverTime(f"still running after {case.time_s:g} s")

    previous = signal.signal(signal.SIGALRM, over)
    signal.setitimer(signal.ITIMER_REAL, case.time_s)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@pytest.mark.parametrize("path", _cases(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_bad_input(path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                   monkeypatch: pytest.MonkeyPatch) -> None:
    case = parse_case(path)
    argv = materialise(case, tmp_path)
    monkeypatch.chdir(tmp_path)
    shown = shlex.join(argv)[:300]
    start = time.perf_counter()
    try:
        with limits(case):
            status = main(argv)
    except SystemExit as stop:  # argparse: usage errors and --help
        status = stop.code if isinstance(stop.code, int) else 1
    except (Exception, OverTime) as err:  # the corpus exists to catch exactly this (MemoryError, OverTime)
        pytest.fail(f"llmp {shown} raised {type(err).__name__}: {str(err)[:2000]}")
    assert time.perf_counter() - start <= case.time_s
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert status == case.exit, f"exit {status}, expected {case.exit}; stderr:\n{err}\nstdout:\n{out[:2000]}"
    for pattern in case.stderr:
        assert re.search(pattern, err, re.DOTALL), f"stderr does not match {pattern!r}:\n{err}"
    for pattern in case.stdout:
        assert re.search(pattern, out, re.DOTALL), f"stdout does not match {pattern!r}:\n{out[:2000]}"


def test_limits_stop_a_case_that_grows_or_runs_too_long() -> None:
    """The limits bite: an allocation past the case's memory fails, and a loop past its time stops."""
    case = Case(Path("limits"), time_s=0.5, memory=256 << 20)
    with pytest.raises(MemoryError), limits(case):
        bytearray(512 << 20)
    with pytest.raises(OverTime), limits(case):
        while True:
            time.sleep(0.01)
    bytearray(512 << 20)  # lifted after the case


def test_corpus_is_large_and_covers_every_area() -> None:
    counts = {area: sum(1 for p in (HERE / area).glob("*") if p.is_file()) for area in AREAS}
    assert all(counts.values()), counts
    assert sum(counts.values()) >= 300, counts
