"""Cells on generated spellings: a per-node rate is count times rate whatever the spelling, a per-
GPU rate is multiplied by the node's GPUs, and any text is read or refused, never a traceback."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from llmp.validate import cells, network_cell, notes
from llmp.validate.cells import CellError

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
