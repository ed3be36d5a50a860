"""The grammar, fuzzed: generated files, --set overrides and randomly edited specs parse and
resolve, or fail cleanly (an LlmpError, never a traceback)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.lark import from_lark

from llmp.dsl import loads
from llmp.dsl.transform import parse
from llmp.errors import LlmpError, LlmpSyntaxError, SpecError
from llmp.grammar import parser
from llmp.spec import schema
from llmp.units import UNITS

FIXTURES = Path(__file__).parents[2] / "unit" / "dsl" / "fixtures"


_WORDS = sorted({*schema.paths(), *(p.split(".")[-1] for p in schema.paths()),
                 *schema.SECTIONS, "llama", "gpt", "bf16", "fp8", "selective", "fsdp", "toy_gpu",
                 "toy_node", "toy_nvlink", "interleaved", "gpipe"})
_EXPLICIT = {
    "UNIT": st.sampled_from(sorted(UNITS)),
    "ONE_F_ONE_B": st.just("1f1b"),
    "NAME": st.one_of(st.sampled_from(_WORDS), st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True)),
    # names of catalog entries and of nothing: never a random path on this machine
    "STRING": st.sampled_from(['"dgx_h100"', '"h100_sxm5_80gb"', '"links"', '"nope"', '""',
                               '"Toy \\"GPU\\""']),
    "NUMBER": st.one_of(st.integers(0, 10**6).map(str), st.sampled_from(
        ["1_000", "3.35", "1e-3", "2.5E+9", "0.0", "1e61", "7e300"])),
}


# Grammar-driven generation draws long texts slowly (~0.2 s each, measured): that is its job,
# not a health problem; the example budget is capped so the suite stays fast under `ci` too.
@settings(max_examples=min(settings.default.max_examples, 60),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(from_lark(parser(), start="start", explicit=_EXPLICIT))
def test_generated_files_parse_or_fail_cleanly(text: str) -> None:
    try:
        parse(text, filename="fuzz.llmp")
    except LlmpSyntaxError as err:
        assert err.span is not None
        return
    try:
        loads(text, filename="fuzz.llmp")
    except (LlmpSyntaxError, SpecError) as err:
        assert "Traceback" not in err.render()


DEBUG = (FIXTURES / "debug.llmp").read_text()

# --set values: a bounded recursive strategy (from_lark on set_value draws unboundedly deep
# expressions), mixing well-formed values with stray punctuation.
_ATOMS = st.one_of(
    _EXPLICIT["NUMBER"],
    st.tuples(_EXPLICIT["NUMBER"], _EXPLICIT["UNIT"]).map(" ".join),
    _EXPLICIT["NAME"], st.sampled_from(sorted(schema.paths())), _EXPLICIT["STRING"],
    st.sampled_from(["true", "false", "1f1b"]))
_EXPRS = st.recursive(_ATOMS, lambda inner: st.one_of(
    st.tuples(inner, st.sampled_from(["+", "-", "*", "/"]), inner).map(" ".join),
    inner.map(lambda e: f"-{e}"), inner.map(lambda e: f"({e})")), max_leaves=6)
_VALUES = st.one_of(
    _EXPRS, st.lists(_EXPRS, min_size=1, max_size=4).map(lambda xs: f"[{', '.join(xs)}]"),
    st.just("symbol"), st.just("link { bandwidth = 1 GB/s  latency = 1 us }"),
    st.tuples(_EXPRS, st.text("[]{}=,()+-*/. ", max_size=3)).map("".join))


@given(st.sampled_from(sorted(schema.paths())), _VALUES)
def test_generated_overrides_resolve_or_fail_cleanly(path: str, value: str) -> None:
    try:
        loads(DEBUG, filename=str(FIXTURES / "debug.llmp"), overrides=[f"{path}={value}"])
    except (LlmpSyntaxError, SpecError) as err:
        assert err.span is not None


_EDIT_ALPHABET = st.sampled_from(list("{}[]=,.()+-*/#\"\\ \n0123456789abcxyzGiBTFLOPs_"))


@given(st.lists(st.tuples(st.integers(0, len(DEBUG)), st.integers(0, 4),
                          st.text(_EDIT_ALPHABET, max_size=4)), min_size=1, max_size=3))
def test_randomly_edited_specs_resolve_or_fail_cleanly(
        edits: list[tuple[int, int, str]]) -> None:
    text = DEBUG
    for position, cut, insert in edits:
        position = min(position, len(text))
        text = text[:position] + insert + text[position + cut:]
    try:
        loads(text, filename="edited.llmp")
    except LlmpError as err:
        rendered = err.render()
        assert err.span is None or rendered.startswith(f"edited.llmp:{err.span.line}:")
