"""Writing ``--set`` overrides into the spec text, so the editor (and the exported ``.llmp``) holds
the layout a click or a control chose.

The text is parsed with the language's own parser; an override of a field the text writes
replaces that value at its span, one of a block the text has is added as a new line at the end of
the block, and anything else (a catalog node's field, a block the text does not write) stays an
override, listed to the user. Nothing here evaluates a value: the resolver checks the result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from llmp.dsl import ast
from llmp.dsl.transform import parse
from llmp.errors import Span

_SECTION_BLOCK = {"model": ("model", None), "train": ("train", None), "cluster": ("cluster", None),
                  "parallel": ("train", "parallel")}
"""Override section → (top-level block kind, sub-block inside it) where the field is written; a
top-level ``parallel { }`` block is looked for too."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Edited:
    text: str
    left: tuple[str, ...]
    """Overrides that could not be written into the text (still applied as ``--set``)."""


def _offset(lines: list[str], line: int, column: int) -> int:
    return sum(len(x) for x in lines[:line - 1]) + column - 1


def _body(doc: ast.Start, section: str) -> ast.Body | None:
    kind, sub = _SECTION_BLOCK.get(section, (section, None))
    for item in doc.items:
        if isinstance(item, ast.Block) and item.kind.text == section and sub is not None:
            return item.body  # a top-level ``parallel { }``
        if isinstance(item, ast.Block) and item.kind.text == kind:
            if sub is None:
                return item.body
            for entry in item.body.entries:
                if isinstance(entry, ast.SubBlock) and entry.name.text == sub:
                    return entry.body
    return None


def write_sets(text: str, sets: Sequence[str], filename: str = "<string>") -> Edited:
    """``text`` with each override written in (see the module docstring). Raises the parser's
    :class:`~llmp.errors.LlmpSyntaxError` when the text does not parse."""
    left: list[str] = []
    for item in sets:
        path, _, value = item.partition("=")
        section, _, name = path.strip().rpartition(".")
        value = value.strip()
        lines = text.splitlines(keepends=True)
        doc = parse(text, filename=filename)
        body = _body(doc, section) if section.count(".") == 0 else None
        if body is None:
            left.append(item)
            continue
        found = next((e for e in body.entries if isinstance(e, ast.Field) and e.name.text == name), None)
        if found is not None:
            span = _value_span(found)
            start = _offset(lines, span.line, span.column)
            end = _offset(lines, span.end_line, span.end_column)
            text = text[:start] + value + text[end:]
        else:
            text = _append(text, _offset(lines, body.span.end_line, body.span.end_column) - 1, body,
                           f"{name} = {value}")
    return Edited(text=text, left=tuple(left))


def _append(text: str, close: int, body: ast.Body, line: str) -> str:
    """``line`` added as the last entry of ``body``, whose closing brace is at ``close``: on a line
    of its own, indented as the block's first entry, or inline for a one-line block."""
    start = text.rfind("\n", 0, close) + 1
    if text[start:close].strip():
        return text[:close].rstrip() + f"  {line} " + text[close:]
    column = body.entries[0].span.column if body.entries else body.span.column + 2
    return text[:start] + " " * (column - 1) + line + "\n" + text[start:]


def _value_span(f: ast.Field) -> Span:
    return f.value.span  # type: ignore[union-attr]


def with_use(text: str, name: str, filename: str = "<string>") -> str:
    """``text`` with ``use "name"`` added at the top unless it already includes it (a catalog node
    chosen for the cluster must be included to be named)."""
    doc = parse(text, filename=filename)
    if any(isinstance(i, ast.Use) and i.path.value in (name, f"{name}.llmp") for i in doc.items):
        return text
    return f'use "{name}"\n' + text
