"""One error hierarchy for llmp.

Every class pairs with a builtin (as Lark pairs ``ConfigurationError(LarkError, ValueError)``) so
callers can catch either. Diagnostics that point into a spec carry a :class:`Span`; ``str(err)``
renders them as a compiler diagnostic::

    spec.llmp:4:11: error: unknown field: 'hiden' (did you mean 'hidden'?)
        hiden = 4096
        ^^^^^
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Span:
    """Where a piece of a spec came from: 1-based line and column, end exclusive."""

    file: str
    line: int
    column: int
    end_line: int
    end_column: int


MESSAGE = 2000
"""Characters of a message or hint shown: more than any diagnostic llmp writes itself, so only echoed
user text is ever cut."""
SOURCE_LINE = 160
"""Characters of a quoted source line shown around the caret."""


def shorten(text: str, most: int) -> str:
    """``text``, or its two ends with the length of what was left out between them."""
    if len(text) <= most:
        return text
    keep = (most - 40) // 2
    return f"{text[:keep]} ... ({len(text) - 2 * keep:,} characters left out) ... {text[-keep:]}"


class LlmpError(Exception):
    """Base of every error llmp raises on purpose. The CLI prints it and exits 1."""

    def __init__(self, message: str, span: Span | None = None, *, label: str = "error",
                 hint: str | None = None, source_line: str | None = None, file: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.span = span
        self.file = file
        """The file the error is about when no span places it in it (``path: error: ...``)."""
        self.label = label
        self.hint = hint
        self.source_line = source_line

    def __str__(self) -> str:
        return self.render()

    def render(self) -> str:
        """Compiler-style text: ``path:line:col: error: label: message``, source line, caret, hint.

        User text inside it is cut to a readable length (:func:`shorten`): a 20,000-term line or a
        5,000-digit flag value is shown by its ends, never echoed whole."""
        head = shorten(f"{self.label}: {self.message}" if self.label != "error" else self.message, MESSAGE)
        if self.span is None:
            text = f"{self.file}: error: {head}" if self.file else f"error: {head}"
        else:
            s = self.span
            text = f"{s.file}:{s.line}:{s.column}: error: {head}"
            if self.source_line is not None:
                line, column = self.source_line, s.column
                width = (s.end_column - column) if s.end_line == s.line else len(line) - column + 1
                if len(line) > SOURCE_LINE:  # a window around the caret
                    start = max(0, min(column - 1 - SOURCE_LINE // 2, len(line) - SOURCE_LINE))
                    line = ("..." if start else "") + line[start:start + SOURCE_LINE] + "..."
                    column -= start - (3 if start else 0)
                    width = min(width, SOURCE_LINE)
                text += f"\n    {line}\n    {' ' * (column - 1)}{'^' * max(1, width)}"
        if self.hint:
            text += f"\n  hint: {shorten(self.hint, MESSAGE)}"
        return text


class LlmpSyntaxError(LlmpError, SyntaxError):
    """The text does not follow the grammar; ``label`` names the mistake (from ``match_examples``)."""


class SpecError(LlmpError, ValueError):
    """A well-formed spec that means something invalid: unknown name, unit mismatch, divisibility."""


class InfeasibleError(LlmpError):
    """A valid spec whose layout cannot run (e.g. out of memory). Sweeps skip such points."""


class NotFittedError(LlmpError, AttributeError):
    """A residual model was used before ``fit``."""


class ResidualSchemaError(LlmpError, ValueError):
    """A residual model store or sample file does not match what this llmp expects."""


class InputError(LlmpError, ValueError):
    """Bad input that is not a spec: a CSV, a sample file, a CLI value, an unreadable file."""
