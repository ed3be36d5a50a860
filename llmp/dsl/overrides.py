"""``--set section.field=value``: the one override flag every command shares.

The value is parsed with the grammar's own value rule (``set_value``), so units, expressions,
sweep lists and ``symbol`` work exactly as in a file, and the override replaces the field's
expression before resolution, so it is validated exactly like the file. Diagnostics point into
the argument: the k-th ``--set`` is line k of a pseudo-file named ``--set``.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Sequence

from llmp.dsl import ast
from llmp.dsl.transform import parse_value
from llmp.errors import Span, SpecError
from llmp.spec import schema

SET_FILE = "--set"


def parse_overrides(texts: Sequence[str]) -> dict[str, ast.Field]:
    """``["parallel.tp=8", ...]`` → path → field AST (a later ``--set`` of a path wins)."""
    found: dict[str, ast.Field] = {}
    for line, text in enumerate(texts, start=1):
        path_text, eq, value_text = text.partition("=")
        path = path_text.strip()
        whole = Span(SET_FILE, line, 1, line, len(text) + 1)
        if not eq or not value_text.strip():
            raise SpecError(f"--set needs section.field=value, got {text!r}", whole,
                            label="bad override", hint="e.g. --set parallel.tp=8")
        path_span = Span(SET_FILE, line, 1, line, len(path_text) + 1)
        canonical = _canonical(path, path_span)
        value = parse_value(value_text, filename=SET_FILE, line=line,
                            column=len(path_text) + 2)
        name = ast.Ident(canonical.rpartition(".")[2], path_span)
        found[canonical] = ast.Field(name, value, whole)
    return found


def _canonical(path: str, span: Span) -> str:
    if path.startswith("train.parallel."):
        path = path.removeprefix("train.")
    if schema.field_at(path) is not None:
        return path
    close = difflib.get_close_matches(path, list(schema.paths()), n=1, cutoff=0.6)
    hint = f"did you mean '{close[0]}'?" if close else (
        "paths look like model.hidden, parallel.tp, gpu.mem_bandwidth, node.intra.bandwidth")
    raise SpecError(f"'{path}' is not a spec field", span, label="unknown path", hint=hint)


def source_text(texts: Sequence[str]) -> str:
    """The pseudo-file the ``--set`` diagnostics quote: one argument per line."""
    return "\n".join(texts)


def add_set_argument(parser: argparse.ArgumentParser) -> None:
    """Add the repeatable ``--set section.field=value`` flag (stored as ``args.set``)."""
    parser.add_argument(
        "--set", action="append", default=[], metavar="SECTION.FIELD=VALUE",
        help="override a spec field, e.g. --set parallel.tp=8 --set gpu.mem_bandwidth=4TB/s; "
             "values use the .llmp syntax (units, expressions, [sweeps], symbol); repeatable")
