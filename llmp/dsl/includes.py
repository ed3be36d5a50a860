"""Reading spec files and following ``use`` includes, with cycle detection.

``use "name"`` looks first for a file relative to the including file (``name``, then
``name.llmp``), then in the package catalog: ``llmp/hardware/catalog/<name>.llmp`` or the
catalog file that defines the id ``name`` (``llmp.hardware.catalog.find``, which reads the
package through ``importlib.resources``). A file included twice along
different routes is read once; a file that includes itself, directly or not, is an error that
shows the whole cycle.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from llmp import files
from llmp.dsl import ast
from llmp.dsl.transform import parse
from llmp.errors import InputError, LlmpError, Span, SpecError
from llmp.hardware import catalog

SUFFIX = ".llmp"


@dataclass(frozen=True, slots=True)
class SourceFile:
    """One parsed file of a spec."""

    name: str
    """The path as shown in diagnostics (the one every span of this file carries)."""
    text: str
    document: ast.Document
    is_root: bool


@dataclass(frozen=True, slots=True)
class Program:
    """The root file and everything it includes, root first, each file once."""

    files: tuple[SourceFile, ...]

    @property
    def root(self) -> SourceFile:
        return self.files[0]

    def sources(self) -> dict[str, str]:
        return {f.name: f.text for f in self.files}


def decode(data: bytes, name: str) -> str:
    """UTF-8 text of a spec file; an error naming the byte offset, or a binary file, otherwise."""
    text = files.decode(data, name, files.SPEC)
    if not text.strip():
        raise InputError(f"{name} is empty", hint="a spec needs at least a model, a cluster "
                         "and a train block (see docs/language.md)")
    return text


def read_file(path: str | os.PathLike[str]) -> str:
    """The text of a spec file, or :class:`InputError` saying why it cannot be read (missing, a
    directory or a device, binary, not UTF-8, larger than any spec: :mod:`llmp.files`)."""
    return decode(files.read_bytes(path, files.SPEC), str(path))


def load_program(text: str, filename: str) -> Program:
    """Parse ``text`` (the root file, shown as ``filename``) and every file it includes."""
    base = Path(filename).parent if _is_path(filename) else Path.cwd()
    root = SourceFile(filename, text, parse(text, filename=filename), True)
    files = [root]
    seen = {_key(filename)}
    _follow(root, base, [(_key(filename), filename)], seen, files)
    return Program(tuple(files))


def _is_path(filename: str) -> bool:
    return not (filename.startswith("<") and filename.endswith(">"))


def _key(name: str) -> str:
    return os.path.realpath(name) if _is_path(name) else name


def _follow(current: SourceFile, base: Path, stack: list[tuple[str, str]], seen: set[str],
            files: list[SourceFile]) -> None:
    for item in current.document.items:
        if not isinstance(item, ast.Use):
            continue
        name, text = _locate(item, base)
        key = _key(name)
        cycle = [shown for k, shown in stack]
        if key in (k for k, _ in stack):
            start = [k for k, _ in stack].index(key)
            chain = " -> ".join([*cycle[start:], name])
            raise SpecError(chain, item.span, label="include cycle",
                            hint="remove one of the use lines in the cycle")
        if key in seen:
            continue
        seen.add(key)
        try:
            document = parse(text, filename=name)
        except LlmpError as err:
            if err.source_line is None and err.span is not None:
                lines = text.splitlines()
                if 0 < err.span.line <= len(lines):
                    err.source_line = lines[err.span.line - 1]
            raise
        included = SourceFile(name, text, document, False)
        files.append(included)
        _follow(included, Path(name).parent, [*stack, (key, name)], seen, files)


def _locate(use: ast.Use, base: Path) -> tuple[str, str]:
    """(display name, text) of the file a ``use`` names: relative first, then the catalog."""
    wanted = use.path.value
    if not wanted.strip():
        raise SpecError("use needs a file or catalog name", use.path.span, label="bad use")
    names = [wanted] if wanted.endswith(SUFFIX) else [wanted, wanted + SUFFIX]
    for place in [base / n for n in names]:
        if _is_file(place):
            return str(place), _read_included(place, use)
    try:
        entry = catalog.find(wanted)
    except SpecError as err:
        raise SpecError(f"cannot find '{wanted}': no such file next to the spec ({base}) and "
                        "no catalog entry of that name", use.path.span,
                        label="include not found", hint=err.hint) from None
    except (OSError, ValueError):  # a name no file system accepts (too long, NUL byte)
        raise SpecError(f"cannot find '{wanted}'", use.path.span,
                        label="include not found") from None
    return str(entry), _read_included(entry, use)


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):  # a name too long, a NUL in the name
        return False


def _read_included(path: Path, use: ast.Use) -> str:
    try:
        return decode(files.read_bytes(path, files.SPEC), str(path))
    except InputError as err:
        raise SpecError(err.message, use.path.span, label="bad include", hint=err.hint) from None


def describe(span: Span) -> str:
    """``file:line:col`` of a span, for messages that point at a second place."""
    return f"{span.file}:{span.line}:{span.column}"


def attach_source_line(err: LlmpError, sources: dict[str, str]) -> None:
    """Fill in the quoted source line of a diagnostic that carries only a span."""
    if err.span is None or err.source_line is not None:
        return
    text = sources.get(err.span.file)
    if text is None:
        try:
            text = Path(err.span.file).read_text(encoding="utf-8")
        except (OSError, ValueError):
            return
    lines = text.splitlines()
    if 0 < err.span.line <= len(lines):
        err.source_line = lines[err.span.line - 1]
