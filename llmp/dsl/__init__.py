"""The .llmp language: text → :class:`~llmp.spec.spec.Spec`. The entry points every command uses.

    spec = llmp.dsl.load("examples/llama3_8b.llmp", overrides=["parallel.tp=4"])
    spec = llmp.dsl.loads(text, filename="inline.llmp")

Pipeline (each stage its own module): ``grammar.parse`` (Lark tree) → ``transform`` (AST with
spans) → ``includes`` (``use`` files, cycles) → ``blocks`` (ids, active sections, schema names;
``derive``: the bases of ``gpu NEW from BASE``) → ``resolve`` (units, expressions, defaults,
symbols, sweeps, ``--set``) → ``build`` (typed Spec) → ``checks`` (cross-field rules). Every
failure is an :class:`~llmp.errors.LlmpError` with a span and the offending source line filled in.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from llmp.dsl.blocks import collect
from llmp.dsl.build import build
from llmp.dsl.includes import attach_source_line, load_program, read_file
from llmp.dsl.overrides import SET_FILE, add_set_argument, parse_overrides, source_text
from llmp.dsl.resolve import Resolver
from llmp.dsl.transform import parse
from llmp.errors import LlmpError, Span
from llmp.spec.spec import Spec

__all__ = ["add_set_argument", "load", "load_args", "loads", "parse"]


def loads(text: str, *, filename: str = "<string>", overrides: Sequence[str] = ()) -> Spec:
    """Resolve spec ``text``; ``use`` paths are relative to ``filename``'s directory (or the
    working directory for ``<string>``); ``overrides`` are ``section.field=value`` strings."""
    sources = {filename: text}
    if overrides:
        sources[SET_FILE] = source_text(overrides)
    try:
        program = load_program(text, filename)
        sources.update(program.sources())
        resolver = Resolver(collect(program), filename, parse_overrides(overrides))
        return build(resolver, filename)
    except LlmpError as err:
        _place(err, filename, text)
        attach_source_line(err, sources)
        raise


def _place(err: LlmpError, filename: str, text: str) -> None:
    """Give an error without a span its file: a missing block is missing at the end of the root file
    (where a truncated spec stops); any other names the file it was resolving."""
    if err.span is not None:
        return
    if err.label == "missing block":
        lines = text.splitlines() or [""]
        end = len(lines[-1]) + 1
        err.span = Span(filename, len(lines), end, len(lines), end)
    elif err.file is None:
        err.file = filename


def load(path: str | os.PathLike[str], overrides: Sequence[str] = ()) -> Spec:
    """Read and resolve the spec file at ``path`` (see :func:`loads`)."""
    return loads(read_file(path), filename=str(path), overrides=overrides)


def load_args(args: argparse.Namespace, *, path_attr: str = "spec") -> Spec:
    """The spec a command was given: ``args.<path_attr>`` with its ``--set`` overrides
    (``add_set_argument`` stores them as ``args.set``)."""
    return load(getattr(args, path_attr), getattr(args, "set", None) or ())
