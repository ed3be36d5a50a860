"""Notes on synthetic variants: squared-ReLU spellings read to the activation."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from llmp.spec.model import Activation
from llmp.validate import notes


@given(st.sampled_from(["squared relu", "Squared-ReLU", "squared_relu", "ReLU^2", "relu²"]),
       st.sampled_from(["", "MLP: ", "activation "]), st.sampled_from(["", " (Nemotron-4)", "; no gate"]))
def test_squared_relu_spellings(word, before, after):
    read = notes.read(before + word + after)
    assert {f.path: f.value for f in read.facts} == {"model.activation": Activation.SQUARED_RELU}
