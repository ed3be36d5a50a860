"""docs/language.md stays true: its llmp blocks resolve and it documents every field and id."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from llmp.dsl import loads
from llmp.dsl.transform import parse
from llmp.grammar.error_examples import EXAMPLES
from llmp.hardware import catalog
from llmp.spec import schema

DOC = (Path(__file__).parents[3] / "docs" / "language.md").read_text()
BLOCKS = re.findall(r"```llmp\n(.*?)```", DOC, flags=re.DOTALL)


def test_the_page_has_llmp_blocks() -> None:
    assert len(BLOCKS) >= 5


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_llmp_block_parses_and_resolves(index: int) -> None:
    text = BLOCKS[index]
    parse(text, filename=f"language.md block {index}")
    if re.search(r"^train\b", text, flags=re.MULTILINE):  # a whole spec, not a fragment
        spec = loads(text, filename=f"language.md block {index}")
        assert spec.cluster.world_size == spec.world_size


@pytest.mark.parametrize("section", sorted(schema.SECTIONS))
def test_every_field_is_in_its_table(section: str) -> None:
    rows = set(re.findall(r"^\| `([a-z0-9_]+)` \|", DOC, flags=re.MULTILINE))
    missing = set(schema.SECTIONS[section].fields) - rows
    assert not missing, f"docs/language.md has no table row for {section}: {sorted(missing)}"


def test_every_catalog_id_is_listed() -> None:
    ids = {i for kind in catalog.catalog_ids().values() for i in kind}
    missing = sorted(i for i in ids if f"`{i}`" not in DOC)
    assert not missing, f"catalog ids missing from docs/language.md: {missing}"


def test_every_syntax_error_label_is_listed() -> None:
    assert all(f"`{label}`" in DOC for label in EXAMPLES)


def test_worked_example_numbers() -> None:
    worked = BLOCKS[-1]
    spec = loads(worked)
    assert (spec.world_size, spec.parallel.dp, spec.microbatches, spec.tokens_per_step) == (
        384, 4, 384, 3_145_728)
    assert spec.model.layers // (spec.parallel.pp) == 8
    assert loads(worked, overrides=["parallel.tp=4", "parallel.dp=8"]).microbatches == 192
    with pytest.raises(ValueError, match=r"model.layers\(96\) % \(pp\(12\) \* vp\(5\)\) = 36"):
        loads(worked, overrides=["parallel.schedule=interleaved", "parallel.vp=5"])
    with pytest.raises(ValueError, match=r"dp\(4\) \* tp\(4\) \* pp\(12\) \* cp\(1\) = 192 != 384 GPUs"):
        loads(worked, overrides=["parallel.tp=4"])
