"""Collecting the blocks of a program: hardware by id, the active model/cluster/train/parallel.

Hardware blocks (gpu/device, node, link) from any file are referenceable by id; an id defined
twice is an error showing both places. The model, cluster, train and parallel in effect are
the ones in the root file; if the root file has none and exactly one exists among the included
files, that one; otherwise an error that lists them. Every block's body is checked here against
the schema (unknown or duplicate fields, misplaced sub-blocks), and every derived gpu's chain of
bases (``derive.py``), used or not, so a typo in a catalog file is caught the first time any
spec includes it.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from llmp.dsl import ast, derive
from llmp.dsl.includes import Program, describe
from llmp.errors import Span, SpecError
from llmp.spec.schema import KIND_SECTION, NAMED_KINDS, SECTIONS, Kind, Section


@dataclass(frozen=True, slots=True)
class Located:
    """A block and whether it sits in the root file."""

    block: ast.Block
    in_root: bool


@dataclass(slots=True)
class Definitions:
    """Every block of a program, sorted by section."""

    hardware: dict[str, dict[str, ast.Block]] = field(
        default_factory=lambda: {"gpu": {}, "node": {}, "link": {}})
    blocks: dict[str, list[Located]] = field(
        default_factory=lambda: {"model": [], "cluster": [], "train": [], "parallel": []})

    def ids(self, section: str) -> list[str]:
        return sorted(self.hardware[section])


def collect(program: Program) -> Definitions:
    """Sort the blocks of ``program`` by section and check each body against the schema."""
    defs = Definitions()
    for file in program.files:
        for item in file.document.items:
            if isinstance(item, ast.Block):
                _add(defs, item, file.is_root)
    derive.check_all(defs.hardware)
    return defs


def _add(defs: Definitions, block: ast.Block, in_root: bool) -> None:
    kind = block.kind.text
    section = KIND_SECTION[kind]
    if kind in NAMED_KINDS and block.name is None:
        raise SpecError(f"a {kind} block needs an id: {kind} NAME {{ ... }}", block.kind.span,
                        label="missing id")
    if kind not in NAMED_KINDS and block.name is not None:
        raise SpecError(f"a {kind} block takes no id", block.name.span, label="unexpected id",
                        hint=f"write {kind} {{ ... }}")
    if block.base is not None and section != "gpu":
        raise SpecError(f"a {kind} block cannot be derived from another", block.base.span,
                        label="unexpected base",
                        hint=f"only gpu blocks take 'from BASE'; write the {kind} out in full")
    where = f"{kind} {block.name.text}" if block.name is not None else kind
    check_body(block.body, SECTIONS[section], where)
    if section in defs.hardware:
        assert block.name is not None
        table = defs.hardware[section]
        first = table.get(block.name.text)
        if first is not None:
            raise SpecError(f"duplicate {section} id '{block.name.text}' (first defined at "
                            f"{describe(first.name.span if first.name else first.span)})",
                            block.name.span, label="duplicate id",
                            hint="ids of gpus, nodes and links must be unique across all files")
        table[block.name.text] = block
    else:
        defs.blocks[section].append(Located(block, in_root))


RENAMED: dict[tuple[str, str], str] = {
    ("train", "flash_attention"): "flash_attention is now attention = flash2 | flash3 | cudnn | sdpa | unfused | "
                                  "unfused_fused_softmax (true was flash2, false unfused)",
}
"""Fields that were renamed: (section, old name) → the hint that says what to write instead."""


def check_body(body: ast.Body, section: Section, where: str) -> None:
    """Unknown, duplicate or misplaced entries of a block body (and its sub-blocks)."""
    seen: dict[str, Span] = {}
    for entry in body.entries:
        name = entry.name.text
        if name in seen:
            raise SpecError(f"'{name}' is given twice in {where} (first at {describe(seen[name])})",
                            entry.name.span, label="duplicate field",
                            hint="remove one of them; use a list [a, b] for a sweep")
        seen[name] = entry.name.span
        if isinstance(entry, ast.Field):
            if name in section.subs:
                raise SpecError(f"'{name}' is a block in {where}, not a field", entry.name.span,
                                label="misplaced block", hint=f"write {name} {{ ... }}")
            if name not in section.fields:
                raise _unknown(name, section, where, entry.name.span, "field")
            if isinstance(entry.value, ast.InlineLink):
                if section.fields[name].kind is not Kind.LINK:
                    raise SpecError(f"'{name}' in {where} is not a link", entry.value.span,
                                    label="misplaced block",
                                    hint="inline link { ... } values go in node.intra, "
                                         "node.inter and cluster.inter")
                check_body(entry.value.body, SECTIONS["link"], f"{where} {name}")
        else:
            if name in section.fields:
                raise SpecError(f"'{name}' is a field in {where}, not a block", entry.name.span,
                                label="misplaced block", hint=f"write {name} = value")
            if name not in section.subs:
                raise _unknown(name, section, where, entry.name.span, "block")
            check_body(entry.body, SECTIONS[section.subs[name]], f"{where} {name}")


def _unknown(name: str, section: Section, where: str, span: Span, what: str) -> SpecError:
    known = [*section.fields, *section.subs]
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    hint = f"did you mean '{close[0]}'?" if close else f"{where.split()[0]} has: {', '.join(known)}"
    if (section.name, name) in RENAMED:
        hint = RENAMED[(section.name, name)]
    return SpecError(f"'{name}' in {where}", span, label=f"unknown {what}",
                     hint=hint)


def active(defs: Definitions, section: str, root_name: str) -> ast.Block | None:
    """The block of ``section`` in effect (see module docstring); None if there is none."""
    located = defs.blocks[section]
    in_root = [loc.block for loc in located if loc.in_root]
    chosen = in_root if in_root else [loc.block for loc in located]
    if len(chosen) > 1:
        where = (f"in {root_name}" if in_root
                 else f"among the included files and none in {root_name}")
        places = ", ".join(describe(b.span) for b in chosen)
        raise SpecError(f"{len(chosen)} {section} blocks {where} ({places}); exactly one must "
                        f"be in effect", chosen[1].span, label=f"several {section}s",
                        hint=f"keep one {section} block in the root file")
    return chosen[0] if chosen else None
