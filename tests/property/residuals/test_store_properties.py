"""The store on generated shapes: the factor is positive and the band contains the point."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from llmp import dsl
from llmp.analytic.graph import decompose
from llmp.residuals import store


@settings(max_examples=15, deadline=None)
@given(hidden=st.sampled_from([64, 128, 192, 256]), layers=st.integers(1, 4), seq=st.sampled_from([32, 64, 128]),
       micro=st.integers(1, 4))
def test_factor_positive_and_band_contains_point(fitted, hidden, layers, seq, micro):
    text = ('use "cpu_host"\ncluster c { node = cpu_host  nodes = 1 }\n'
            f"model m {{ arch = gpt  layers = {layers}  hidden = {hidden}  heads = 4  vocab = 512  seq_len = {seq} }}\n"
            f"train {{ precision = fp32  global_batch = {micro}  micro_batch = {micro} }}\n")
    spec = dsl.loads(text)
    corr = store.load(fitted[1]).correct([op.work for op in decompose(spec).ops], spec)
    assert np.all(corr.factor > 0)
    assert np.all(corr.low <= corr.factor) and np.all(corr.factor <= corr.high)
