"""Token counts and durations: the accepted spellings, and a clear error for everything else."""

from __future__ import annotations

import pytest

from llmp.errors import InputError
from llmp.planning.inputs import parse_duration, parse_tokens


@pytest.mark.parametrize(("text", "tokens"), [
    ("15T", 15e12), ("15 T", 15e12), ("300B", 300e9), ("300G", 300e9), ("1.5e12", 1.5e12), ("2_000M", 2e9),
    ("750k", 750e3), ("1P", 1e15), ("42", 42.0), (".5T", 0.5e12), (1e9, 1e9), (7, 7.0)])
def test_token_spellings(text, tokens):
    assert parse_tokens(text) == pytest.approx(tokens)


@pytest.mark.parametrize("bad", ["15TB", "15 tokens", "T", "", "abc", "1.5t", "300b", "-5T", "0", "0T", -1, 0,
                                 float("inf"), float("nan"), "1e400", True, None, "0.5", "1.0005K", 2.5, "1e30",
                                 "2000P"])
def test_bad_token_counts_are_input_errors(bad):
    with pytest.raises(InputError):
        parse_tokens(bad)


@pytest.mark.parametrize(("text", "seconds"), [
    ("30d", 30 * 86400), ("30 d", 30 * 86400), ("36h", 36 * 3600), ("2w", 14 * 86400), ("1.5d", 1.5 * 86400),
    (3600, 3600.0), (1.5, 1.5)])
def test_duration_spellings(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("bad", ["30 days", "30days", "30", "d", "30D", "1m", "-3d", "0d", "0h", "", "thirty d", 0, -2,
                                 float("nan"), None, "1e-9s", 0.5, "1e12d", "11000d", "1e30h"])
def test_bad_durations_are_input_errors(bad):
    with pytest.raises(InputError) as info:
        parse_duration(bad)
    assert "30d" in (info.value.hint or "") + info.value.message or "deadline" in info.value.message
