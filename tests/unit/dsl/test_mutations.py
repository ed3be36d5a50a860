"""Mutation suite: malformed variants of the debug spec, each with its exact diagnostic.

Every mutant must raise an LlmpError whose span is the expected line and column, and
``llmp check`` on it must exit 1 with ``file:line:col: error: label:`` on stderr, the offending
line quoted, and no traceback. Mutations keep the line count, so positions refer to
tests/unit/dsl/fixtures/debug.llmp.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from llmp.cli import main
from llmp.dsl import load
from llmp.errors import LlmpError

BASE = (Path(__file__).parent / "fixtures" / "debug.llmp").read_text()

# (id, [(old, new), ...], label, line, column)
MUTANTS: list[tuple[str, list[tuple[str, str]], str, int, int]] = [
    ("missing-equals", [("  layers = 8", "  layers 8")], "missing '='", 35, 10),
    ("unclosed-brace", [("    pp = 2\n  }\n}", "    pp = 2\n  }\n")], "unclosed brace", 42, 7),
    ("missing-value", [("  hidden = 512", "  hidden =")], "missing value", 37, 9),
    ("unit-without-number", [("  memory = 24 GiB", "  memory = GiB")], "unit without number",
     10, 12),
    ("bad-list", [("    tp = 2", "    tp = [1, 2,, 4]")], "bad list", 47, 16),
    ("two-values", [("  heads = 8", "  heads = 8 8")], "two values", 37, 13),
    ("unclosed-string", [('  name = "Toy GPU"', '  name = "Toy GPU')], "unclosed string", 4, 10),
    ("unknown-block", [("model debug {", "modle debug {")], "unknown block", 33, 1),
    ("missing-id", [("model debug {", "model {")], "missing id", 33, 1),
    ("unknown-field", [("  hidden = 512", "  hiden = 512")], "unknown field", 36, 3),
    ("duplicate-field", [("  heads = 8", "  heads = 8  heads = 16")], "duplicate field", 37, 14),
    ("wrong-unit", [("  mem_bandwidth = 1.5 TB/s", "  mem_bandwidth = 80 GiB")], "wrong unit",
     11, 19),
    ("unit-missing", [("  tdp = 400 W", "  tdp = 400")], "wrong unit", 15, 9),
    ("negative-size", [("  memory = 24 GiB", "  memory = -24 GiB")], "bad value", 10, 12),
    ("zero-count", [("  sms = 80", "  sms = 0")], "bad value", 12, 9),
    ("not-whole", [("  hidden = 512", "  hidden = 511.5")], "not a whole number", 36, 12),
    ("bytes-plus-seconds", [("  launch_overhead = 5 us", "  launch_overhead = 5 us + 1 GB")],
     "unit mismatch", 16, 21),
    ("division-by-zero", [("  vocab = 32_000", "  vocab = 32_000 / (2 - 2)")],
     "bad expression", 38, 11),
    ("gpu-without-bandwidth", [("  mem_bandwidth = 1.5 TB/s", "")], "missing field", 3, 1),
    ("model-without-layers", [("  layers = 8", "")], "missing field", 33, 1),
    ("unknown-reference", [("  node = toy_node", "  node = toy_nod")], "unknown reference",
     29, 10),
    ("enum-typo", [("  precision = bf16", "  precision = bf61")], "unknown value", 43, 15),
    ("symbol-enum", [("  arch = gpt", "  arch = symbol")], "bad symbol", 34, 10),
    ("unknown-section", [("  vocab = 32_000", "  vocab = modle.hidden * 62")], "unknown name",
     38, 11),
    ("defined-later", [("  hidden = 512", "  hidden = heads * 64")], "defined later", 36, 12),
    ("unset-field", [("    bf16 = 4 * fp32", "    bf16 = 4 * fp64")], "unset field", 8, 16),
    ("include-not-found", [("# A tiny, self-contained", 'use "no_such_file" # ')],
     "include not found", 1, 5),
    ("world-size", [("    pp = 2", "    pp = 2  dp = 4")], "layout mismatch", 48, 18),
    ("stage-layers", [("    pp = 2", "    pp = 2  stage_layers = [3, 4]")], "pipeline split", 48, 28),
    ("heads-tp", [("  heads = 8", "  heads = 1  head_dim = 512")], "not divisible", 47, 10),
    ("interleaved-vp", [("    pp = 2", "    pp = 2  schedule = interleaved")], "bad schedule",
     48, 24),
    ("global-batch", [("  global_batch = 32", "  global_batch = 30")], "not divisible", 44, 18),
]


def mutate(replacements: list[tuple[str, str]]) -> str:
    text = BASE
    for old, new in replacements:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


@pytest.mark.parametrize("name,replacements,label,line,column", MUTANTS,
                         ids=[m[0] for m in MUTANTS])
def test_mutant_diagnostic(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str,
                           replacements: list[tuple[str, str]], label: str, line: int,
                           column: int) -> None:
    text = mutate(replacements)
    path = tmp_path / f"{name}.llmp"
    path.write_text(text)
    with pytest.raises(LlmpError) as err:
        load(path)
    e = err.value
    assert (e.label, e.span.file, e.span.line, e.span.column) == (label, str(path), line, column)
    assert e.source_line == text.splitlines()[line - 1]

    assert main(["check", str(path)]) == 1
    out, stderr = capsys.readouterr()
    assert out == ""
    first, quoted, caret, *_ = stderr.splitlines()
    assert first.startswith(f"{path}:{line}:{column}: error: {label}: ")
    assert quoted == "    " + text.splitlines()[line - 1]
    assert caret.index("^") == 4 + column - 1
    assert "Traceback" not in stderr


def test_the_base_is_valid() -> None:
    assert mutate([]) == BASE
    assert len({m[0] for m in MUTANTS}) == len(MUTANTS)
