"""The GPU name resolver on generated spellings: a driver name without spaces is the same GPU."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from llmp.hardware import names


@given(st.sampled_from(sorted(names.CUDA)))
def test_a_driver_name_without_spaces_is_the_same_gpu(name):
    assert names.from_cuda("".join(name.split())) == names.CUDA[name]
