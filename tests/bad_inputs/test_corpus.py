"""The bad-input corpus: every file under ``tests/bad_inputs/<area>/`` is one case.

Each case runs ``llmp.cli.main`` in-process (the same code the console script runs) on input
built from the case file, and must end with the exit status and a stderr matching the patterns
its header names, and never with a traceback or an exception other than the CLI's own exit.
The case format is documented in ``tests/bad_inputs/README.md``.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from llmp.cli import main

HERE = Path(__file__).parent
REPO = HERE.parents[1]
AREAS = ("specs", "flags", "stores", "samples", "validation", "hf")


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
        target.write_text(text, encoding="utf-8")
    for op, args in case.edits:
        _edit(root, op, args)
    values = {"case": str(root / case.main_name), "dir": str(root), "repo": str(REPO)}
    argv = []
    for arg in case.run or []:
        for key, value in values.items():
            arg = arg.replace("{" + key + "}", value)
        argv.append(arg)
    return argv


def _cases() -> list[Path]:
    return sorted(p for area in AREAS for p in (HERE / area).glob("*") if p.is_file())


@pytest.mark.parametrize("path", _cases(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_bad_input(path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                   monkeypatch: pytest.MonkeyPatch) -> None:
    case = parse_case(path)
    argv = materialise(case, tmp_path)
    monkeypatch.chdir(tmp_path)
    try:
        status = main(argv)
    except SystemExit as stop:  # argparse: usage errors and --help
        status = stop.code if isinstance(stop.code, int) else 1
    except Exception as err:  # the corpus exists to catch exactly this
        pytest.fail(f"llmp {shlex.join(argv)} raised {type(err).__name__}: {err}")
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert status == case.exit, f"exit {status}, expected {case.exit}; stderr:\n{err}\nstdout:\n{out[:2000]}"
    for pattern in case.stderr:
        assert re.search(pattern, err, re.DOTALL), f"stderr does not match {pattern!r}:\n{err}"
    for pattern in case.stdout:
        assert re.search(pattern, out, re.DOTALL), f"stdout does not match {pattern!r}:\n{out[:2000]}"


def test_corpus_is_large_and_covers_every_area() -> None:
    counts = {area: sum(1 for p in (HERE / area).glob("*") if p.is_file()) for area in AREAS}
    assert all(counts.values()), counts
    assert sum(counts.values()) >= 300, counts
