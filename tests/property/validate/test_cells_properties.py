"""Free-text cells on synthetic variants (case, separators, spacing and remarks do not change a
meaning): every spelling of a ZeRO stage, an FSDP degree, a recompute mode, a boolean and a precision
reads to its meaning, and an FSDP degree of zero is plain data parallelism."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from llmp.spec.spec import Recompute, ZeroStage
from llmp.validate import cells
from llmp.validate.cells import Dtype


def _respell(draw: st.DrawFn, words: list[str]) -> str:
    sep = draw(st.sampled_from([" ", "  ", "-", "_"]))
    text = sep.join(w.upper() if draw(st.booleans()) else w for w in words)
    if draw(st.booleans()):
        text += " (" + draw(st.sampled_from(["as published", "per README", "see notes", "recipe default"])) + ")"
    return text


@st.composite
def zero_cells(draw: st.DrawFn) -> tuple[str, ZeroStage]:
    stage = draw(st.sampled_from(["1", "2", "3"]))
    form = draw(st.sampled_from(["zero{s}", "zero-{s}", "zero {s}", "ZeRO stage {s}", "DeepSpeed ZeRO-{s}"]))
    text = form.format(s=stage)
    if draw(st.booleans()):
        text += " (" + draw(st.sampled_from(["optimizer states sharded", "as published", "bf16"])) + ")"
    return (text.upper() if draw(st.booleans()) else text), ZeroStage(stage)


@given(zero_cells())
def test_zero_stage_spellings(case):
    text, stage = case
    assert cells.sharding(text).stage is stage


@given(st.integers(1, 4096), st.sampled_from(["FSDP2 (FSDP={n})", "fsdp = {n}", "FSDP (shard size={n})"]))
def test_fsdp_degrees(n, form):
    read = cells.sharding(form.format(n=n))
    assert read.stage is ZeroStage.FSDP and read.degree == n


@given(st.sampled_from(["DDP (FSDP=0)", "ddp (fsdp = 0)", "FSDP2 (FSDP=0)"]))
def test_an_fsdp_degree_of_zero_is_plain_data_parallel(text):
    assert cells.sharding(text).stage is ZeroStage.NONE


@given(st.data())
def test_recompute_spellings(data):
    kind = data.draw(st.sampled_from(list(Recompute)))
    text = _respell(data.draw, [kind.value])
    assert cells.recompute(text).recompute is kind


@given(st.data())
def test_boolean_spellings(data):
    value = data.draw(st.booleans())
    word = data.draw(st.sampled_from(["yes", "true", "on", "enabled"] if value else ["no", "false", "off", "disabled"]))
    assert cells.boolean(_respell(data.draw, [word])) is value


@given(st.data())
def test_precision_spellings(data):
    dtype = data.draw(st.sampled_from([Dtype.BF16, Dtype.FP16, Dtype.FP8]))
    words = [data.draw(st.sampled_from([dtype.value, f"amp_{dtype.value}"])),
             *data.draw(st.lists(st.sampled_from(["mixed", "precision", "training"]), max_size=2))]
    assert cells.compute_dtype(_respell(data.draw, words)) is dtype
