"""The cell corpus: real spellings from public sources (``cells_corpus.json``, each with where it was
seen), each read to its meaning or refused with the cell quoted, never read against its meaning.

Kinds: ``network`` (interconnect cells: fabric and per-node Gb/s), ``precision`` (with the row's
``dtype`` beside it), ``sharding``, ``recompute``, ``boolean``, ``notes`` (the spec fields a note
states, and the terms it denies) and ``stack`` (the stack notes say ran the row).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmp.validate import cells, network_cell, notes
from llmp.validate.cells import CellError
from llmp.validate.frameworks import note_stack

CORPUS = json.loads((Path(__file__).with_name("cells_corpus.json")).read_text(encoding="utf-8"))


def _enum(value):
    return getattr(value, "value", value)


def _read(entry):
    cell, kind = entry["cell"], entry["kind"]
    if kind == "network":
        n = network_cell.network(cell, entry["gpus_per_node"])
        return {"fabric": _enum(n.fabric), "node_gbps": n.node_gbps}
    if kind == "precision":
        return _enum(cells.training_dtype(entry["dtype"], cell))
    if kind == "sharding":
        s = cells.sharding(cell)
        return {"stage": s.stage.value, "degree": s.degree}
    if kind == "recompute":
        return cells.recompute(cell).recompute.value
    if kind == "boolean":
        return cells.boolean(cell)
    if kind == "notes":
        n = notes.read(cell)
        return {"facts": {f.path: _enum(f.value) for f in n.facts}, "denied": [t for t, _ in n.denied]}
    found = note_stack(cell)
    return None if found is None else found[0].value


def test_the_corpus_is_large_and_sourced():
    assert len(CORPUS) >= 300
    assert all(e["seen"] and ("meaning" in e) != ("refuse" in e) for e in CORPUS)


@pytest.mark.parametrize("entry", [e for e in CORPUS if "meaning" in e],
                         ids=[f"{e['kind']}:{e['cell'][:60]}" for e in CORPUS if "meaning" in e])
def test_each_spelling_reads_to_its_meaning(entry):
    assert _read(entry) == entry["meaning"]


@pytest.mark.parametrize("entry", [e for e in CORPUS if "refuse" in e],
                         ids=[f"{e['kind']}:{e['cell'][:60]}" for e in CORPUS if "refuse" in e])
def test_cells_without_one_meaning_are_refused_quoting_the_cell(entry):
    with pytest.raises(CellError) as err:
        _read(entry)
    assert entry["refuse"] in str(err.value)
    if entry["kind"] in ("network", "precision"):  # the other kinds are quoted by the mapping (test_mapping)
        assert entry["cell"][:40] in str(err.value)


RATE_SPELLINGS = (
    "{n}x {r}Gb/s", "{n} x {r} Gbps", "{n}x{r} Gb/s compute links per node", "{n} NICs x {r} Gb/s per node",
    "InfiniBand, {n}x {r}Gb/s", "Compute: {n}x ConnectX-7 {r}Gb/Sec", "{n} x {r} Gb / Sec", "{n}x {r}G RoCE",
    "Storage: 1x 100Gb/s, Compute: {n}x {r}Gb/s", "{n}x {r}GbE", "{n} HCAs, {r} Gbit/s each",
    "1x Ethernet 25Gb/s, {n}x IB {r}Gb/s",
)
"""Spellings of n NICs of r Gb/s, in the orders and words of the corpus's sources."""


@given(st.integers(1, 16), st.sampled_from((100, 200, 400, 800)), st.sampled_from(RATE_SPELLINGS),
       st.sampled_from((1, 2, 4, 8)))
def test_per_node_is_count_times_rate_whatever_the_spelling(n, rate, spelling, gpus_per_node):
    read = network_cell.network(spelling.format(n=n, r=rate), gpus_per_node)
    assert read.node_gbps == n * rate


@given(st.sampled_from((100, 200, 400, 800)), st.sampled_from((1, 2, 4, 8)))
def test_a_rate_per_gpu_is_multiplied_by_the_gpus_of_the_node(rate, gpus_per_node):
    assert network_cell.network(f"RoCE v2, {rate} Gbps per GPU", gpus_per_node).node_gbps == rate * gpus_per_node


@given(st.text(max_size=80))
def test_any_text_is_read_or_refused_never_a_traceback(text):
    for read in (lambda: network_cell.network(text, 8), lambda: cells.training_dtype("", text),
                 lambda: cells.sharding(text), lambda: cells.recompute(text), lambda: notes.read(text)):
        try:
            read()
        except CellError:
            pass
