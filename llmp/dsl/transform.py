"""Parse tree → AST, through one rule→class table instead of a method per rule.

Each grammar rule maps to the dataclass of the same name in ``ast.py``; the class is called with
the rule's children inline plus a :class:`Span` from Lark's ``meta``. Rules whose children are a
variable-length list (a body, a sweep, a dotted path, a file) get them packed into one tuple.
Tokens become :class:`~llmp.dsl.ast.Ident`, :class:`~llmp.dsl.ast.Number`, ... the same way.
"""

from __future__ import annotations

from typing import Any

from lark import Token, Transformer, Tree
from lark.exceptions import VisitError
from lark.tree import Meta

from llmp.dsl import ast
from llmp.errors import LlmpError, LlmpSyntaxError, Span
from llmp.grammar import parse as parse_tree
from llmp.units import suggest_units, unknown_unit_message

# rule name -> (class, children packed into one tuple?)
_RULES: dict[str, tuple[type, bool]] = {
    "start": (ast.Start, True),
    "set_value": (ast.SetValue, False),
    "use": (ast.Use, False),
    "block": (ast.Block, False),
    "body": (ast.Body, True),
    "field": (ast.Field, False),
    "sub_block": (ast.SubBlock, False),
    "sweep": (ast.Sweep, True),
    "symbol": (ast.Symbol, False),
    "inline_link": (ast.InlineLink, False),
    "quantity": (ast.Quantity, False),
    "ref": (ast.Ref, True),
    "neg": (ast.Neg, False),
    "add": (ast.Add, False),
    "sub": (ast.Sub, False),
    "mul": (ast.Mul, False),
    "div": (ast.Div, False),
}

_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t"}


def _unescape(literal: str) -> str:
    out: list[str] = []
    chars = iter(literal[1:-1])
    for char in chars:
        out.append(_ESCAPES[next(chars)] if char == "\\" else char)
    return "".join(out)


class ToAst(Transformer):
    """Builds :mod:`llmp.dsl.ast` nodes for one file (``filename`` goes into every span).

    ``line_offset``/``column_offset`` shift positions, for values parsed out of a larger text
    (a ``--set`` argument is shown as line N of the pseudo-file ``--set``).
    """

    def __init__(self, filename: str, *, line_offset: int = 0, column_offset: int = 0) -> None:
        super().__init__(visit_tokens=True)
        self.filename = filename
        self.line_offset = line_offset
        self.column_offset = column_offset

    def _span(self, line: int, column: int, end_line: int, end_column: int) -> Span:
        return Span(self.filename, line + self.line_offset, column + self.column_offset,
                    end_line + self.line_offset, end_column + self.column_offset)

    def _meta_span(self, meta: Meta, children: list[Any]) -> Span:
        if not meta.empty:
            return self._span(meta.line, meta.column, meta.end_line, meta.end_column)
        spans = [c.span for c in children if hasattr(c, "span")]
        if spans:  # position-less rules (e.g. a body of only sub-nodes) borrow from children
            return Span(self.filename, spans[0].line, spans[0].column,
                        spans[-1].end_line, spans[-1].end_column)
        return self._span(1, 1, 1, 1)

    def _token_span(self, token: Token) -> Span:
        line = token.line or 1
        column = token.column or 1
        return self._span(line, column, token.end_line or line,
                          token.end_column or column + len(token))

    def __default__(self, data: str, children: list[Any], meta: Meta) -> Any:
        if data == "kind":  # `!kind` keeps the keyword token: the block kind is that word
            return children[0]
        if data == "div":
            _refuse_split_unit(*children)
        cls, packed = _RULES[data]
        args = (tuple(children),) if packed else tuple(children)
        return cls(*args, self._meta_span(meta, children))

    def __default_token__(self, token: Token) -> Any:
        return ast.Ident(str(token), self._token_span(token))

    def NUMBER(self, token: Token) -> ast.Number:
        return ast.Number(str(token), self._token_span(token))

    def STRING(self, token: Token) -> ast.String:
        return ast.String(_unescape(str(token)), self._token_span(token))

    def TRUE(self, token: Token) -> ast.Boolean:
        return ast.Boolean(True, self._token_span(token))

    def FALSE(self, token: Token) -> ast.Boolean:
        return ast.Boolean(False, self._token_span(token))


def _refuse_split_unit(left: Any, right: Any) -> None:
    """``2 TB/sec`` and ``2 TB/S`` parse as a size divided by a field called ``sec``: when the
    quantity, the ``/`` and a plain name touch and together resemble a unit, say so."""
    if not (isinstance(left, ast.Quantity) and isinstance(right, ast.Ref) and len(right.parts) == 1):
        return
    unit, name = left.unit.span, right.span
    if unit.end_line != name.line or name.column != unit.end_column + 1:
        return
    word = f"{left.unit.text}/{right.parts[0].text}"
    if suggest_units(word):
        raise LlmpSyntaxError(unknown_unit_message(word), Span(unit.file, unit.line, unit.column,
                                                               name.end_line, name.end_column),
                              hint="a rate's unit is one word, e.g. 400 GB/s")


def _transform(tree: Tree, transformer: ToAst) -> Any:
    try:
        return transformer.transform(tree)
    except VisitError as err:  # an LlmpError raised inside a callback is the real error
        if isinstance(err.orig_exc, LlmpError):
            raise err.orig_exc from None
        raise


def parse(text: str, *, filename: str = "<string>") -> ast.Document:
    """Parse a whole file's text into its :class:`~llmp.dsl.ast.Document`."""
    tree = parse_tree(text, filename=filename, start="start")
    document: ast.Document = _transform(tree, ToAst(filename))
    return document


def parse_value(text: str, *, filename: str, line: int, column: int) -> ast.Value:
    """Parse the right-hand side of ``--set path=value`` as a field value.

    Positions are reported as line ``line`` and column ``column`` onward of ``filename``, so a
    diagnostic points into the argument the user typed.
    """
    try:
        tree = parse_tree(text, filename=filename, start="set_value")
    except LlmpSyntaxError as err:
        if err.span is not None:
            s = err.span
            err.span = Span(s.file, line, s.column + column - 1, line, s.end_column + column - 1)
            err.source_line = None  # the caller knows the whole argument, not just the value
        raise
    node: ast.SetValue = _transform(tree, ToAst(filename, line_offset=line - 1,
                                                column_offset=column - 1))
    return node.value

