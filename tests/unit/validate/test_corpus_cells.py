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
