"""The .llmp grammar: building the parser once, and turning Lark errors into diagnostics.

``parser()`` loads ``llmp.lark`` from the package (never writing a cache next to it) and builds
an LALR(1) parser with a contextual lexer. ``parse()`` returns a ``lark.Tree`` or raises
:class:`~llmp.errors.LlmpSyntaxError` with a span, the offending line, a label learned from
``error_examples.py`` through ``match_examples``, and a hint.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import re
from collections.abc import Iterator

import lark.lexer
from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken
from lark.lexer import PatternStr

from llmp.errors import LlmpSyntaxError, Span
from llmp.grammar.error_examples import EXAMPLES, HINTS
from llmp.units import UNITS, suggest_units, unknown_unit_message

START_RULES = ("start", "set_value")
"""``start``: a whole file. ``set_value``: the right-hand side of ``--set section.field=value``."""

BLOCK_KINDS = ("gpu", "device", "link", "node", "cluster", "model", "train", "parallel")

_FRIENDLY = {"NAME": "a name", "NUMBER": "a number", "STRING": "a string", "UNIT": "a unit",
             "ONE_F_ONE_B": "1f1b", "$END": "the end of the file"}


class _AlwaysLexWords:
    """Post-lexer that makes the contextual lexer try ``UNIT`` and ``NAME`` in every state.

    ``UNIT``: a unit where the grammar wants a name (``memory = GiB``) becomes a syntax error
    ("unit without number") instead of a reference to a field called ``GiB``.
    ``NAME``: keywords are then matched as whole words everywhere, so ``training {`` is an
    unknown block rather than ``train`` followed by a block id ``ing``.
    """

    always_accept = ("UNIT", "NAME")

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        return stream


@functools.cache
def parser(*, strict: bool = False) -> Lark:
    """The LALR parser for .llmp files (built once per process; ``strict`` for the CI test).

    Outside strict mode Lark still runs its terminal-collision analysis whenever the optional
    ``interegular`` package is importable, only to log warnings, and that costs ~0.5 s of every
    cold start. Collisions are the strict test's job (tests/grammar), so ordinary builds
    switch the analysis off for the duration of the build.
    """
    with _collision_analysis(enabled=strict):
        return Lark.open_from_package(
            "llmp.grammar", "llmp.lark", parser="lalr", lexer="contextual",
            propagate_positions=True, maybe_placeholders=True, start=list(START_RULES),
            postlex=_AlwaysLexWords(), strict=strict)


@contextlib.contextmanager
def _collision_analysis(*, enabled: bool) -> Iterator[None]:
    saved = lark.lexer.has_interegular
    lark.lexer.has_interegular = saved and enabled
    try:
        yield
    finally:
        lark.lexer.has_interegular = saved


MAX_DEPTH = 200
"""Deepest nesting of operators a value may have (``1 + 1 + ... + 1`` with 200 terms). Every
later stage walks expressions recursively; far deeper than any real spec, far below Python's
recursion limit."""


def parse(text: str, *, filename: str = "<string>", start: str = "start") -> Tree:
    """Parse ``text`` into a ``lark.Tree``; raise :class:`LlmpSyntaxError` on malformed input."""
    try:
        tree = parser().parse(text, start=start)
    except UnexpectedInput as err:
        raise syntax_error(err, text, filename, start) from None
    _check_depth(tree, text, filename)
    return tree


def _check_depth(tree: Tree, text: str, filename: str) -> None:
    """Refuse expressions nested deeper than :data:`MAX_DEPTH` (walked without recursion)."""
    stack: list[tuple[Tree, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            meta = node.meta
            line = getattr(meta, "line", 1)
            column = getattr(meta, "column", 1)
            lines = text.splitlines()
            raise LlmpSyntaxError(
                f"more than {MAX_DEPTH} operators in one value (a sum of that many terms, or operators "
                "nested that deep)",
                Span(filename, line, column, line, column + 1), label="expression too long",
                hint=f"split it over named fields, or write the value it computes; the limit is {MAX_DEPTH}",
                source_line=lines[line - 1] if 0 < line <= len(lines) else None)
        for child in node.children:
            if isinstance(child, Tree):
                grows = child.data in _OPERATORS
                stack.append((child, depth + 1 if grows else depth))


_OPERATORS = frozenset({"add", "sub", "mul", "div", "neg"})

_NUMBER_THEN_WORD = re.compile(
    r"(?<![A-Za-z0-9_.])[0-9](?:_?[0-9])*(?:\.[0-9](?:_?[0-9])*)?(?:[eE][+-]?[0-9]+)?[ \t]*"
    r"([A-Za-z\u00b5\u03bc][A-Za-z0-9_/\u00b5\u03bc]*)")


def unit_typo(text: str, offset: int, filename: str) -> LlmpSyntaxError | None:
    """An "unknown unit" diagnostic when the parse failed at, or just after, a word written
    after a number that is not a unit but resembles one (``80 GiBB``, ``989 TFLOPS``,
    ``2 TiB/s``); None when the failure is something else.

    A misspelt unit lexes as a name, so the parser reports the *next* token ("missing '='"):
    the number-then-word pair just before ``offset`` is the real mistake.
    """
    found = None
    for match in _NUMBER_THEN_WORD.finditer(text, 0, min(len(text), offset + 64)):
        start, end = match.span(1)
        if start > offset:
            break
        if start <= offset <= end or _blank(text[end:offset]):
            found = match
    if found is None:
        return None
    word = found.group(1)
    start, end = found.span(1)
    following = text[end:].lstrip(" \t\r\n")
    if word in UNITS or following.startswith(("=", "{")) or not (suggest_units(word) or "/" in word):
        return None
    line = text.count("\n", 0, start) + 1
    column = start - (text.rfind("\n", 0, start) + 1) + 1
    lines = text.splitlines()
    return LlmpSyntaxError(unknown_unit_message(word), Span(filename, line, column, line, column + len(word)),
                           hint=f"units are {', '.join(u for u in UNITS if u.isascii())}",
                           source_line=lines[line - 1] if 0 < line <= len(lines) else None)


def _blank(gap: str) -> bool:
    """Only whitespace and comments between two points of the text."""
    return not re.sub(r"#[^\n]*", "", gap).strip()


_CHARACTERS: dict[str, tuple[str, str, str]] = {
    "^": ("bad expression", "'^' is not an operator", "expressions have + - * / and parentheses; write a power "
          "out (2 ^ 12 is 4096) or as a product"),
    "%": ("bad expression", "'%' is not an operator", "expressions have + - * / and parentheses; write the value"),
    ";": ("stray ';'", "fields end without ';'", "separate fields with spaces or new lines, and drop the ';'"),
    ":": ("missing '='", "fields are written with '=', not ':'", "write 'name = value'"),
}
"""Characters that are no token of the language but are common in other ones: label, message, hint."""


def _character(err: UnexpectedInput, text: str, filename: str) -> LlmpSyntaxError | None:
    """A diagnostic for a character the language has no token for (``2 ^ 12``, ``8192 % 4096``,
    ``32;``), saying what the character is not, instead of what the parser state happened to be."""
    if not isinstance(err, UnexpectedCharacters):
        return None
    char = getattr(err, "char", "")
    line, column = getattr(err, "line", 1) or 1, getattr(err, "column", 1) or 1
    if char not in _CHARACTERS:
        return None
    label, message, hint = _CHARACTERS[char]
    lines = text.splitlines()
    return LlmpSyntaxError(message, Span(filename, line, column, line, column + 1), label=label, hint=hint,
                           source_line=lines[line - 1] if 0 < line <= len(lines) else None)


def glued_number(err: UnexpectedInput, text: str, filename: str) -> LlmpSyntaxError | None:
    """A "bad number" diagnostic for a number with letters or underscores glued to it (``0x1000``,
    ``1e``, ``128__256``, ``1F1B``, ``4k``), which lexes as a number and then a name, so the parser
    stops at the *next* token ("missing '='" on the following field). None for other failures."""
    stack = getattr(getattr(err, "state", None), "value_stack", None) or []
    last = stack[-1] if stack else None
    if not (isinstance(last, Token) and last.type == "NAME" and last.start_pos):
        return None
    start, end = last.start_pos, last.end_pos or last.start_pos + len(last)
    if not text[start - 1].isdigit() and text[start - 1] != "_":
        return None
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] in "._"):
        start -= 1
    word = text[start:end]
    if not word[:1].isdigit():
        return None
    if re.fullmatch(r"0[xXoObB][0-9A-Fa-f_]*", word):
        message, hint = f"{word!r} is not a number llmp reads", "write it in decimal (0x1000 is 4096)"
    elif word.lower() == "1f1b":
        message, hint = f"{word!r} is not a word of the language", "did you mean '1f1b'? (lower case)"
    elif re.fullmatch(r"[0-9._]+[eE]", word):
        message, hint = f"{word!r}: an exponent needs digits", "write e.g. 1e3 or 2.5e-6"
    elif "__" in word or word.endswith("_"):
        message, hint = f"{word!r} is not a number", "an underscore goes between two digits: 1_000_000"
    else:
        tail = re.sub(r"^[0-9._]+", "", word)
        if suggest_units(tail):
            return None  # a misspelt unit (80GiBB): unit_typo names it
        message = f"{word!r}: a number with {tail!r} glued to it"
        hint = "write a unit after the number (80 GiB, 400 Gb/s) or spell the number out (4k is 4000)"
    line = text.count("\n", 0, start) + 1
    column = start - (text.rfind("\n", 0, start) + 1) + 1
    lines = text.splitlines()
    return LlmpSyntaxError(message, Span(filename, line, column, line, column + len(word)), label="bad number",
                           hint=hint, source_line=lines[line - 1] if 0 < line <= len(lines) else None)


def syntax_error(err: UnexpectedInput, text: str, filename: str, start: str) -> LlmpSyntaxError:
    """A compiler-style diagnostic for a Lark parse error."""
    offset = _offset(err, text)
    for special in (_character(err, text, filename), glued_number(err, text, filename),
                    unit_typo(text, offset, filename)):
        if special is not None:
            return special
    lines = text.splitlines()
    label = _label(err, start)
    if isinstance(err, UnexpectedToken):
        token = err.token
        what = _describe_token(token)
        message = f"unexpected {what}; expected {_expected(err.accepts or err.expected)}"
        if token.type == "$END":
            span = _end_span(text, filename)
            brace = _unclosed_brace(text)
            if brace is not None:
                label = "unclosed brace"
                span = Span(filename, brace[0], brace[1], brace[0], brace[1] + 1)
                message = "this '{' is never closed (the file ends first)"
        else:
            span = Span(filename, token.line or 1, token.column or 1,
                        token.end_line or token.line or 1,
                        token.end_column or (token.column or 1) + max(1, len(token)))
    else:
        line = getattr(err, "line", 1) or 1
        column = getattr(err, "column", 1) or 1
        char = getattr(err, "char", "")
        span = Span(filename, line, column, line, column + 1)
        message = f"unexpected character {char!r}" if char else "unexpected input"
        if isinstance(err, UnexpectedCharacters) and char == '"':
            label, message = "unclosed string", "this string is never closed on its line"
    hint = _hint(label, err)
    source_line = lines[span.line - 1] if 0 < span.line <= len(lines) else None
    return LlmpSyntaxError(message, span, label=label, hint=hint, source_line=source_line)


def _offset(err: UnexpectedInput, text: str) -> int:
    """Character offset where the parse failed (the end of the text for an early end)."""
    token = getattr(err, "token", None)
    if token is not None:
        return len(text) if token.type == "$END" else (token.start_pos or 0)
    return getattr(err, "pos_in_stream", None) or 0


def _label(err: UnexpectedInput, start: str) -> str:
    """The error-example label for ``err``.

    Lark's ``match_examples`` compares parser states *including the stack depth*, so the same
    mistake one block deeper (or after more fields) would go unlabelled; and one LALR state can
    serve both a field value and a list item. So, in order: an open ``[`` means a bad list; a
    unit where a value should start means a unit without a number; then the label of an
    example that failed in the same LALR state on the same kind of token; then
    ``match_examples`` (same state and depth, any token); else a plain "syntax error".
    """
    if getattr(err, "state", None) is None:
        return "syntax error"
    token = getattr(err, "token", None)
    if any(isinstance(v, Token) and v.type == "LSQB" for v in err.state.value_stack):
        return "bad list"
    if token is not None and token.type == "UNIT":
        return "unit without number"
    found = _labels_by_state(parser()).get(_state_key(err))
    if found is None:
        # use_accepts=False: the parser state already fixes what is acceptable, and lark
        # 1.3's debug message for differing accepts fails to format (a ParserState for '%d').
        found = err.match_examples(functools.partial(parser().parse, start="start"), EXAMPLES,
                                   token_type_match_fallback=True, use_accepts=False)
    return found or "syntax error"


def _state_key(err: UnexpectedInput) -> tuple[int, str]:
    token = getattr(err, "token", None)
    return err.state.position, token.type if token is not None else ""


@functools.cache
def _labels_by_state(lark: Lark) -> dict[tuple[int, str], str]:
    """(LALR state, token type) of each error example's failure → its label (lists aside).

    Keyed by the parser instance: LALR state numbers differ between builds.
    """
    table: dict[tuple[int, str], str] = {}
    for label, snippets in EXAMPLES.items():
        if label == "bad list":
            continue
        for snippet in snippets:
            try:
                lark.parse(snippet, start="start")
            except UnexpectedInput as err:
                if getattr(err, "state", None) is not None:
                    table.setdefault(_state_key(err), label)
    return table


def _describe_token(token: Token) -> str:
    if token.type == "$END":
        return "end of file"
    if token.type == "UNIT":
        return f"unit {str(token)!r}"
    return repr(str(token))


def _expected(names: set[str] | frozenset[str] | list[str]) -> str:
    shown: list[str] = []
    for name in sorted(names):
        if name in _FRIENDLY:
            shown.append(_FRIENDLY[name])
            continue
        try:
            pattern = parser().get_terminal(name).pattern
        except KeyError:
            continue
        if isinstance(pattern, PatternStr):
            shown.append(repr(pattern.value))
    if not shown:
        return "something else"
    return ", ".join(sorted(set(shown))) if len(shown) > 1 else shown[0]


def _hint(label: str, err: UnexpectedInput) -> str | None:
    token = getattr(err, "token", None)
    if label == "unknown block" and token is not None and token.type == "NAME":
        close = difflib.get_close_matches(str(token), BLOCK_KINDS, n=1)
        if close:
            return f"did you mean '{close[0]}'?"
    return HINTS.get(label)


def _end_span(text: str, filename: str) -> Span:
    lines = text.splitlines() or [""]
    line = len(lines)
    column = len(lines[-1]) + 1
    return Span(filename, line, column, line, column + 1)


def _unclosed_brace(text: str) -> tuple[int, int] | None:
    """(line, column) of the innermost '{' left open at the end of ``text``, skipping strings
    and comments; None if every brace is closed."""
    stack: list[tuple[int, int]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        in_string = False
        escaped = False
        for column, char in enumerate(line, start=1):
            if in_string:
                if escaped:
                    escaped = False
                elif char == "\\":
                    escaped = True
                elif char == '"':
                    in_string = False
                continue
            if char == "#":
                break
            if char == '"':
                in_string = True
            elif char == "{":
                stack.append((number, column))
            elif char == "}" and stack:
                stack.pop()
    return stack[-1] if stack else None
