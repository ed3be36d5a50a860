"""The UBJSON reader on generated documents: it decodes plain documents, and a truncated document is
an error, never a crash."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmp.residuals.forest import read_ubj


def _ubj(value) -> bytes:
    """A plain UBJSON encoder (test only): every length as int64, numbers as int64 or float64."""
    if value is None:
        return b"Z"
    if value is True:
        return b"T"
    if value is False:
        return b"F"
    if isinstance(value, int):
        return b"L" + struct.pack(">q", value)
    if isinstance(value, float):
        return b"D" + struct.pack(">d", value)
    if isinstance(value, str):
        data = value.encode()
        return b"S" + b"L" + struct.pack(">q", len(data)) + data
    if isinstance(value, list):
        return b"[" + b"".join(_ubj(v) for v in value) + b"]"
    body = b"".join(b"L" + struct.pack(">q", len(k.encode())) + k.encode() + _ubj(v) for k, v in value.items())
    return b"{" + body + b"}"


json_like = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20)


@settings(max_examples=100)
@given(json_like)
def test_ubj_reader_decodes_plain_documents(value):
    assert read_ubj(_ubj(value)) == value


@settings(max_examples=60)
@given(json_like, st.data())
def test_a_truncated_document_is_an_error_never_a_crash(value, data):
    raw = _ubj(value)
    cut = data.draw(st.integers(0, len(raw) - 1))
    with pytest.raises(ValueError):
        read_ubj(raw[:cut])
