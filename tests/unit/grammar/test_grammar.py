"""The grammar: strict build, terminals, layout freedom and error labels (its fuzzing:
``tests/property/grammar/``)."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

import llmp.grammar
from llmp.dsl.transform import parse
from llmp.errors import LlmpSyntaxError
from llmp.grammar import parse as parse_tree
from llmp.grammar import parser
from llmp.grammar.error_examples import EXAMPLES, HINTS
from llmp.units import UNITS


def test_grammar_builds_in_strict_mode() -> None:
    # strict=True turns shift/reduce conflicts and terminal collisions into errors
    strict = parser(strict=True)
    assert strict.parse("model m { layers = 1 }", start="start") is not None


def test_parser_is_built_once() -> None:
    assert parser() is parser()


def test_building_writes_nothing_into_the_package() -> None:
    grammar_dir = Path(llmp.grammar.__file__).parent
    before = {p.name for p in grammar_dir.iterdir()}
    parser.cache_clear()
    parser()
    after = {p.name for p in grammar_dir.iterdir()}
    assert after == before
    assert before - {"__pycache__"} == {"__init__.py", "llmp.lark", "error_examples.py"}


def test_unit_terminal_is_exactly_the_unit_table() -> None:
    pattern = re.compile(parser().get_terminal("UNIT").pattern.to_regexp())
    prefixes = ["", "K", "k", "M", "m", "G", "T", "P", "u", "\u00b5", "\u03bc", "n", "Ki", "Mi", "Gi", "Ti", "Pi"]
    bases = ["B", "b", "B/s", "b/s", "iB/s", "FLOP/s", "FLOP", "s", "W", "Hz", "Flop/s"]
    candidates = {p + b for p, b in itertools.product(prefixes, bases)}
    assert set(UNITS) <= candidates
    assert {c for c in candidates if pattern.fullmatch(c)} == set(UNITS)


def test_keywords_are_whole_words() -> None:
    # "training" is not "train" + an id "ing"; "gpus" is a field name, not the keyword gpu
    with pytest.raises(LlmpSyntaxError) as err:
        parse_tree("training { global_batch = 8 }")
    assert err.value.label == "unknown block"
    assert err.value.hint == "did you mean 'train'?"
    parse_tree("node n { gpu = g  gpus_per_node = 8 }")


@pytest.mark.parametrize("text", [
    "model m { layers = 1 }",                       # no final newline
    "model m {\n  layers = 1\n}\n\n\n",             # several
    "model m { layers = 1 } # trailing comment",    # comment at the very end, no newline
    "# only a comment",
    "",
    "model m {  # comment after the brace\n layers = 1  # and after a field\n}",
    "model m { a = 1 b = 2\tc = 3 }",               # fields separated by blanks only
    "model m {\r\n layers = 1\r\n}",                # Windows line ends
])
def test_layout_is_free(text: str) -> None:
    parse_tree(text)


def test_values_parse_to_ast() -> None:
    second = ('parallel { tp = [1, 2, 4,]  schedule = 1f1b  h = symbol  bw = 8 * 400 Gb/s  '
              'd = -(model.hidden + 1) / 2  txt = "a \\"q\\" b"  b = true }')
    doc = parse('use "x"\n' + second, filename="f.llmp")
    use, block = doc.items
    assert use.path.value == "x"
    fields = {e.name.text: e.value for e in block.body.entries}
    assert [n.text for n in fields["tp"].items] == ["1", "2", "4"]
    assert fields["schedule"].dotted == "1f1b"
    assert type(fields["h"]).__name__ == "Symbol"
    assert fields["bw"].right.unit.text == "Gb/s"
    assert fields["txt"].value == 'a "q" b'
    assert fields["b"].value is True
    d = fields["d"].span
    assert (d.file, d.line, d.column, d.end_column) == ("f.llmp", 2, second.index("-(") + 1,
                                                        second.index(" txt"))


@pytest.mark.parametrize("label,snippet",
                         [(label, s) for label, snippets in EXAMPLES.items() for s in snippets])
def test_error_examples_get_their_label(label: str, snippet: str) -> None:
    with pytest.raises(LlmpSyntaxError) as err:
        parse_tree(snippet, filename="x.llmp")
    assert err.value.label == label
    assert err.value.hint == HINTS[label] or err.value.hint.startswith("did you mean")


def test_every_label_has_three_to_five_examples_and_a_hint() -> None:
    assert all(3 <= len(s) <= 5 for s in EXAMPLES.values())
    assert set(HINTS) == set(EXAMPLES)


@pytest.mark.parametrize("text,label,line,column", [
    ("model m {\n  layers 32\n}", "missing '='", 2, 10),
    ("model m {\n  layers = 32\n", "unclosed brace", 1, 9),
    ("gpu g {\n  memory = GiB\n}", "unit without number", 2, 12),
    ("parallel {\n  tp = [1, 2,, 4]\n}", "bad list", 2, 14),
    ("model m {\n  hidden = 4096 4096\n}", "two values", 2, 17),
    ('model m {\n  name = "abc\n}', "unclosed string", 2, 10),
    ("model m {\n  hidden = (4096\n}", "bad expression", 3, 1),
    ("model m { } }", "unmatched '}'", 1, 13),
])
def test_syntax_error_position_and_rendering(text: str, label: str, line: int, column: int) -> None:
    with pytest.raises(LlmpSyntaxError) as err:
        parse_tree(text, filename="spec.llmp")
    e = err.value
    assert (e.label, e.span.line, e.span.column) == (label, line, column)
    rendered = e.render().splitlines()
    assert rendered[0].startswith(f"spec.llmp:{line}:{column}: error: {label}: ")
    assert rendered[1] == "    " + text.splitlines()[line - 1]
    assert rendered[2].index("^") == 4 + column - 1
