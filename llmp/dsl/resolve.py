"""Evaluating the active blocks: names, units, defaults, symbols, sweeps → field values.

A :class:`~llmp.dsl.frames.Frame` is one block instance at a spec path (``model``, ``gpu.flops``,
``node.intra``; ``frames.py`` builds it). Fields are evaluated lazily and memoised, so a field may
refer to any other section (``global_batch = 8 * parallel.dp``) in any order, while a bare name
must be an earlier field of the same block (or of the enclosing block, from a sub-block). A
reference loop is reported with the loop. Defaults are .llmp expressions from the schema
evaluated in the same frame; ``--set`` overrides replace a field's expression before anything is
evaluated, so they go through exactly the same checks as the file.

``build.py`` turns the evaluated frames into the typed :class:`~llmp.spec.spec.Spec`.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Mapping
from typing import Any

from llmp.dsl import ast
from llmp.dsl.blocks import Definitions, active
from llmp.dsl.frames import Frame, LinkTarget, block_frame, body_frame, derived_frame
from llmp.dsl.transform import parse_value
from llmp.errors import Span, SpecError
from llmp.hardware import catalog
from llmp.spec.schema import BLOCK_ID, SECTIONS, STACK, TOP_LEVEL, Bound, FieldDef, Kind
from llmp.spec.spec import Sweep, replica_size
from llmp.spec.symbols import symbol_for
from llmp.spec.values import (
    Flag,
    Num,
    Text,
    Val,
    Word,
    arith,
    negate,
    number,
    to_bool,
    to_count,
    to_enum,
    to_real,
    to_string,
)
from llmp.stacks import profile
from llmp.units import COUNT, UNITS

DEFAULT_FILE = "<default>"


@functools.cache
def _default_ast(text: str) -> ast.Value:
    return parse_value(text, filename=DEFAULT_FILE, line=1, column=1)


class Resolver:
    """Evaluates the active sections of a program (see module docstring)."""

    def __init__(self, defs: Definitions, root_name: str,
                 overrides: Mapping[str, ast.Field], pinned: Mapping[str, str] | None = None) -> None:
        self.defs = defs
        self.root_name = root_name
        self.overrides = dict(overrides)
        # Section -> the id of the block to resolve there (``{"node": "dgx_h100"}``) instead of the
        # one a spec puts in effect: how :mod:`llmp.dsl.catalog` resolves one catalog entry.
        self.pinned = dict(pinned or {})
        self.frames: dict[str, Frame | None] = {}
        self.sweeps: list[Sweep] = []
        self.symbols: list[str] = []
        self._stack: list[str] = []

    # ---- frames ----------------------------------------------------------------------

    def frame(self, path: str, span: Span | None = None) -> Frame:
        """The frame at ``path``; an error (at ``span``) if the spec has no such block."""
        if path not in self.frames:
            self.frames[path] = self._make_frame(path)
        found = self.frames[path]
        if found is None:
            raise SpecError(f"the spec has no {path} block", span, label="missing block",
                            hint=_missing_block_hint(path))
        return found

    def has_frame(self, path: str) -> bool:
        if path not in self.frames:
            self.frames[path] = self._make_frame(path)
        return self.frames[path] is not None

    def _make_frame(self, path: str) -> Frame | None:
        if path == "cluster" and path in self.pinned:
            return block_frame(path, next(loc.block for loc in self.defs.blocks["cluster"]
                                          if loc.block.name is not None
                                          and loc.block.name.text == self.pinned[path]), self.overrides)
        if path in ("model", "cluster", "train"):
            block = active(self.defs, path, self.root_name)
            if block is None:
                return None
            return block_frame(path, block, self.overrides)
        if path == "parallel":
            return self._parallel_frame()
        if path == "link" and path in self.pinned:
            return block_frame(path, self.defs.hardware["link"][self.pinned[path]], self.overrides)
        if path in ("node", "gpu"):
            owner, name = ("cluster", "node") if path == "node" else ("node", "gpu")
            block_id = self.pinned.get(path) or self.get(self.frame(owner), name)
            block = self.defs.hardware[path][block_id]
            if block.base is not None:
                return derived_frame(path, block, self.defs.hardware, self.overrides)
            return block_frame(path, block, self.overrides)
        parent_path, _, name = path.rpartition(".")
        parent = self.frame(parent_path)
        if name in parent.section.fields:  # a link field: node.intra, cluster.inter
            target: LinkTarget = self.get(parent, name)
            return body_frame(path, SECTIONS["link"], target.id, target.span, target.body, None, self.overrides)
        if name not in parent.section.subs:
            return None
        body = parent.subs.get(name)
        if body is None and not any(p.rpartition(".")[0] == path for p in self.overrides):
            return None
        span = body.span if body is not None else parent.span
        return body_frame(path, SECTIONS[parent.section.subs[name]], parent.block_id, span,
                          body, parent, self.overrides)

    def _parallel_frame(self) -> Frame | None:
        top = active(self.defs, "parallel", self.root_name)
        train = self.frame("train") if self.has_frame("train") else None
        nested = train.subs.get("parallel") if train is not None else None
        if top is not None and nested is not None:
            raise SpecError("parallel is given twice: as a top-level block and inside train",
                            nested.span, label="duplicate block",
                            hint="keep one of the two parallel blocks")
        if top is not None:
            return block_frame("parallel", top, self.overrides)
        span = nested.span if nested is not None else (train.span if train else None)
        if span is None:
            return None
        return body_frame("parallel", SECTIONS["parallel"], "parallel", span, nested, None, self.overrides)

    # ---- fields ----------------------------------------------------------------------

    def get(self, frame: Frame, name: str, span: Span | None = None) -> Any:
        """The typed value of a field (int, float, SymPy expr, enum, bool, str, link, None)."""
        self.val(frame, name, span)
        return frame.values[name]

    def val(self, frame: Frame, name: str, span: Span | None = None) -> Val | None:
        """The exact value of a field, for use in expressions (None for an absent optional)."""
        if name in frame.vals:
            return frame.vals[name]
        key = f"{frame.path}.{name}"
        if key in self._stack:
            loop = " -> ".join([*self._stack[self._stack.index(key):], key])
            written = frame.fields.get(name)
            where = span or (written.value.span if written is not None else frame.span)
            raise SpecError(loop, where, label="circular definition",
                            hint="a field cannot depend on itself, directly or not")
        self._stack.append(key)
        try:
            fdef = frame.section.fields[name]
            written = frame.fields.get(name)
            if written is not None:
                val, value = self._field(frame, fdef, written.value, key, written.name.span)
            else:
                val, value = self._default(frame, fdef, key)
        finally:
            self._stack.pop()
        frame.vals[name] = val
        frame.values[name] = value
        return val

    def span_of(self, path: str) -> Span | None:
        """Where the value of ``path`` is written, else its block; for check diagnostics."""
        parent_path, _, name = path.rpartition(".")
        try:
            frame = self.frame(parent_path)
        except SpecError:
            return None
        written = frame.fields.get(name)
        return written.value.span if written is not None else frame.span

    def _default(self, frame: Frame, fdef: FieldDef, key: str) -> tuple[Val | None, Any]:
        default = fdef.default
        if isinstance(default, Mapping):
            arch = self.get(self.frame("model"), "arch")
            text = default.get(arch.value)
            if text is None:
                raise SpecError(f"{frame.section.name} '{frame.block_id}' (arch = {arch.value}) "
                                f"needs {fdef.name}: it has no default for this arch",
                                frame.span, label="missing field",
                                hint=f"add {fdef.name} = ... to the {frame.section.name} block")
        elif default == BLOCK_ID:
            return Text(frame.block_id), frame.block_id
        elif default == STACK:
            text = self.stack_profile().default_text(fdef.name)
        elif default is None:
            if fdef.required:
                raise SpecError(f"{_where(frame)} is missing the required field '{fdef.name}'",
                                frame.span, label="missing field",
                                hint=f"add {fdef.name} = {_example(fdef)}")
            return None, None
        else:
            text = default
        if key == "parallel.dp":
            self._check_dp_derivable(frame)
        try:
            return self._field(frame, fdef, _default_ast(text), key, frame.span)
        except SpecError as err:
            if err.span is None or err.span.file == DEFAULT_FILE:
                raise SpecError(f"{err.message} (from the default {fdef.name} = {text})",
                                frame.span, label=err.label,
                                hint=err.hint or f"set {fdef.name} explicitly") from None
            raise

    def stack_profile(self) -> Any:
        """The profile of the spec's ``train.stack`` (:mod:`llmp.stacks`), whose items are the
        defaults of the fields marked ``STACK`` in the schema."""
        return profile(self.get(self.frame("train"), "stack"))

    def written(self, path: str) -> bool:
        """Whether ``path`` was given in the spec or by ``--set`` (not defaulted)."""
        parent, _, name = path.rpartition(".")
        return self.has_frame(parent) and name in self.frame(parent).fields

    def _check_dp_derivable(self, frame: Frame) -> None:
        """dp = world / (tp * pp * cp) must be whole; say so with the numbers filled in."""
        nodes = self.get(self.frame("cluster"), "nodes")
        per_node = self.get(self.frame("node"), "gpus_per_node")
        tp, pp, cp = (self.get(frame, n) for n in ("tp", "pp", "cp"))
        values = (nodes, per_node, tp, pp, cp)
        if all(isinstance(v, int) for v in values) and (nodes * per_node) % replica_size(tp, pp, cp):
            written = [frame.fields[n].value.span for n in ("tp", "pp", "cp") if n in frame.fields]
            raise SpecError(
                f"dp is not given and cannot be derived: {nodes * per_node} GPUs "
                f"(cluster.nodes({nodes}) * node.gpus_per_node({per_node})) is not divisible by "
                f"tp({tp}) * pp({pp}) * cp({cp}) = {replica_size(tp, pp, cp)}",
                written[0] if written else frame.span, label="layout mismatch",
                hint="change tp, pp or cp, or the cluster size")

    def _field(self, frame: Frame, fdef: FieldDef, value: ast.Value, path: str,
               name_span: Span) -> tuple[Val | None, Any]:
        if isinstance(value, ast.Symbol):
            if not fdef.numeric:
                raise SpecError(f"{path} cannot be a symbol: only numeric fields can be left "
                                "free", value.span, label="bad symbol")
            sym = symbol_for(path)
            if path not in self.symbols:
                self.symbols.append(path)
            return Num(sym, fdef.dim if fdef.kind is Kind.REAL else COUNT), sym
        if fdef.kind is Kind.COUNTS:
            return self._counts(frame, fdef, value, path)
        if isinstance(value, ast.Sweep):
            if fdef.kind is Kind.LINK:
                raise SpecError(f"{path} cannot be swept", value.span, label="bad sweep",
                                hint="sweep the link's bandwidth or latency instead")
            results = [self._scalar(frame, fdef, item, path) for item in value.items]
            self.sweeps = [s for s in self.sweeps if s.path != path]
            self.sweeps.append(Sweep(path=path, values=tuple(r[1] for r in results)))
            return results[0]
        if isinstance(value, ast.InlineLink):
            if fdef.kind is not Kind.LINK:
                raise SpecError(f"{path} is not a link", value.span, label="wrong type")
            link_id = f"{frame.block_id}.{fdef.name}"
            return None, LinkTarget(link_id, value.body, value.span)
        return self._scalar(frame, fdef, value, path)

    def _counts(self, frame: Frame, fdef: FieldDef, value: ast.Value, path: str) -> tuple[None, tuple[int, ...]]:
        """A list of whole numbers (``[9, 12, 12, 11]``): here the brackets are the value itself."""
        if not isinstance(value, ast.Sweep):
            raise SpecError(f"{path} expects a list of whole numbers in brackets, e.g. [9, 12, 12, 11]",
                            value.span, label="wrong type", hint="write the list even for one entry: [12]")
        item = FieldDef(name=fdef.name, kind=Kind.COUNT, doc=fdef.doc, bound=Bound.NONNEGATIVE)
        out = []
        for expr in value.items:
            count = to_count(self.eval(expr, frame, fdef.name), item, path, expr.span)
            if not isinstance(count, int):
                raise SpecError(f"{path} entries must be numbers, got {count}", expr.span, label="bad value")
            out.append(count)
        return None, tuple(out)

    def _scalar(self, frame: Frame, fdef: FieldDef, expr: ast.Expr,
                path: str) -> tuple[Val | None, Any]:
        span = expr.span
        word = expr.parts[0].text if isinstance(expr, ast.Ref) and len(expr.parts) == 1 else None
        if fdef.kind is Kind.LINK:
            return None, self._link(frame, fdef, expr, path)
        val: Val
        if fdef.kind is Kind.REF:
            val = Word(word) if word is not None else self.eval(expr, frame, fdef.name)
            return val, self._ref(fdef, val, path, span)
        if fdef.kind is Kind.ENUM and word is not None:
            val = Word(word)
        elif fdef.kind is Kind.BOOL and word is not None:
            try:
                val = self.eval(expr, frame, fdef.name)
            except SpecError as err:  # ``yes``, ``True``: a boolean in another language's spelling
                if err.label != "unknown name":
                    raise
                raise SpecError(f"{path} expects true or false, got '{word}'", span, label="wrong type",
                                hint="booleans are written true or false, in lower case") from None
        else:
            val = self.eval(expr, frame, fdef.name)
        convert = {Kind.COUNT: to_count, Kind.REAL: to_real, Kind.ENUM: to_enum,
                   Kind.BOOL: to_bool, Kind.STRING: to_string}[fdef.kind]
        return val, convert(val, fdef, path, span)

    def _ref(self, fdef: FieldDef, val: Val, path: str, span: Span) -> str:
        """The id a REF field names: as written, or its canonical catalog id when it is a
        catalog alias (``gpu = gh200`` means ``gh200_96gb``)."""
        table = self.defs.hardware[fdef.target]
        if not isinstance(val, Word):
            raise SpecError(f"{path} expects the id of a {fdef.target} block, got "
                            f"{val.describe()}", span, label="wrong type")
        if val.text in table:
            return val.text
        if catalog.canonical(val.text) in table:
            return catalog.canonical(val.text)
        close = difflib.get_close_matches(val.text, list(table), n=1, cutoff=0.6)
        known = ", ".join(sorted(table)) or "none"
        found = catalog.entry(val.text)
        raise SpecError(f"{path} = '{val.text}': no {fdef.target} has this id", span,
                        label="unknown reference",
                        hint=f"did you mean '{close[0]}'?" if close else
                        f'it is in the catalog: add use "{found[1].stem}"'
                        if found is not None and found[0] == fdef.target else
                        f"{fdef.target} ids defined: {known} (use a catalog file to get more)")

    def _link(self, frame: Frame, fdef: FieldDef, expr: ast.Expr, path: str) -> LinkTarget:
        if isinstance(expr, ast.Ref) and len(expr.parts) == 1:
            link_id = self._ref(FieldDef(name=fdef.name, kind=Kind.REF, doc="", target="link"),
                                Word(expr.parts[0].text), path, expr.span)
            block = self.defs.hardware["link"][link_id]
            return LinkTarget(link_id, block.body, block.span)
        if isinstance(expr, ast.Ref):
            owner = self._walk(expr.parts[:-1], expr.span)
            last = expr.parts[-1].text
            target = owner.section.fields.get(last)
            if target is not None and target.kind is Kind.LINK:
                result: LinkTarget = self.get(owner, last, expr.span)
                return result
        raise SpecError(f"{path} expects a link: the id of a link block or "
                        "link { bandwidth = ...  latency = ... }", expr.span, label="wrong type")

    # ---- expressions -----------------------------------------------------------------

    def eval(self, expr: ast.Expr, frame: Frame, current: str) -> Val:
        """The exact value of an expression written in ``frame`` for field ``current``."""
        if isinstance(expr, ast.Number):
            return Num(number(expr.text, expr.span), COUNT)
        if isinstance(expr, ast.Quantity):
            unit = UNITS[expr.unit.text]
            return Num(number(expr.number.text, expr.number.span) * unit.factor, unit.dim)
        if isinstance(expr, ast.Boolean):
            return Flag(expr.value)
        if isinstance(expr, ast.String):
            return Text(expr.value)
        if isinstance(expr, ast.Neg):
            return negate(self.eval(expr.operand, frame, current), expr.span)
        if isinstance(expr, ast.Ref):
            return self._reference(expr, frame, current)
        op = {ast.Add: "+", ast.Sub: "-", ast.Mul: "*", ast.Div: "/"}[type(expr)]
        left = self.eval(expr.left, frame, current)  # type: ignore[union-attr]
        right = self.eval(expr.right, frame, current)  # type: ignore[union-attr]
        return arith(op, left, right, expr.span)

    def _reference(self, ref: ast.Ref, frame: Frame, current: str) -> Val:
        if len(ref.parts) == 1:
            owner, name = self._bare(ref.parts[0], frame, current), ref.parts[0].text
        else:
            owner, name = self._walk(ref.parts[:-1], ref.span), ref.parts[-1].text
            if name not in owner.section.fields:
                raise _no_such(name, owner, ref.parts[-1].span)
        fdef = owner.section.fields[name]
        if fdef.kind is Kind.LINK:
            raise SpecError(f"{owner.path}.{name} is a link, not a value", ref.span,
                            label="wrong type",
                            hint=f"refer to {owner.path}.{name}.bandwidth or .latency")
        if fdef.kind is Kind.COUNTS:
            raise SpecError(f"{owner.path}.{name} is a list, not a value", ref.span, label="wrong type")
        val = self.val(owner, name, ref.span)
        if val is None:
            raise SpecError(f"{owner.path}.{name} is not set, so it cannot be used here",
                            ref.span, label="unset field")
        return val

    def _bare(self, ident: ast.Ident, frame: Frame, current: str) -> Frame:
        """The frame whose field a bare name means: this block, else the enclosing one."""
        name = ident.text
        scope: Frame | None = frame
        while scope is not None:
            if name in scope.section.fields:
                if scope is frame and name == current:
                    raise SpecError(f"{name} refers to itself", ident.span,
                                    label="circular definition")
                if scope is frame and _written_after(frame, name, current):
                    line = frame.fields[name].span.line
                    raise SpecError(f"'{name}' is defined later in this block (line {line})",
                                    ident.span, label="defined later",
                                    hint="a bare name refers to an earlier field; move the "
                                    f"line up or write {frame.path}.{name}")
                return scope
            scope = scope.parent
        raise _no_such(name, frame, ident.span)

    def _walk(self, parts: tuple[ast.Ident, ...], span: Span) -> Frame:
        """The frame a dotted prefix names: ``model``, ``model.moe``, ``node.intra``."""
        head = parts[0].text
        if head == "train" and len(parts) > 1 and parts[1].text == "parallel":
            parts = parts[1:]
            head = "parallel"
        if head not in TOP_LEVEL or head == "link":
            close = difflib.get_close_matches(head, [t for t in TOP_LEVEL if t != "link"], n=1)
            raise SpecError(f"'{head}' is not a section", parts[0].span, label="unknown name",
                            hint=f"did you mean '{close[0]}'?" if close else
                            "sections are model, train, parallel, cluster, node and gpu")
        frame = self.frame(head, parts[0].span)
        for part in parts[1:]:
            fdef = frame.section.fields.get(part.text)
            if part.text not in frame.section.subs and (fdef is None or fdef.kind is not Kind.LINK):
                raise _no_such(part.text, frame, part.span)
            frame = self.frame(f"{frame.path}.{part.text}", part.span)
        return frame


def _written_after(frame: Frame, name: str, current: str) -> bool:
    """Both fields are written in the same file and ``name`` comes after ``current``."""
    mine, other = frame.fields.get(current), frame.fields.get(name)
    if mine is None or other is None or mine.span.file != other.span.file:
        return False
    return (other.span.line, other.span.column) > (mine.span.line, mine.span.column)


def _no_such(name: str, frame: Frame, span: Span) -> SpecError:
    known = [*frame.section.fields, *frame.section.subs]
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    hint = f"did you mean '{close[0]}'?" if close else (
        "bare names refer to fields of the same block; write section.field for others")
    return SpecError(f"'{name}' is not a field of {frame.path}", span, label="unknown name",
                     hint=hint)


def _where(frame: Frame) -> str:
    if frame.path in ("train", "parallel"):
        return f"the {frame.path} block"
    if "." in frame.path:
        return f"{frame.path} ({frame.block_id})"
    return f"{frame.section.name} '{frame.block_id}'"


def _example(fdef: FieldDef) -> str:
    if fdef.kind is Kind.REAL and fdef.dim != COUNT:
        return fdef.dim.example()
    return {Kind.COUNT: "<number>", Kind.REF: f"<{fdef.target} id>", Kind.STRING: '"..."',
            Kind.LINK: "<link id>", Kind.BOOL: "true", Kind.ENUM: "|".join(
                m.value for m in fdef.enum) if fdef.enum else "..."}.get(fdef.kind, "...")


def _missing_block_hint(path: str) -> str:
    if path in ("model", "cluster", "train"):
        return f"add a {path} block (or use a file that has one)"
    if path == "model.moe":
        return "add moe { experts = ...  top_k = ... } to the model"
    return f"add a {path.rpartition('.')[2]} block"
