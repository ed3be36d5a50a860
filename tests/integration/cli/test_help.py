"""``--help`` speaks to users: no developer docstrings (reST markup, module roles) on any page."""

from __future__ import annotations

import re

import pytest

from llmp.cli import COMMANDS, main

DEVELOPER = re.compile(r"``|:(mod|func|class|data|meth):|Nothing else lives here|Library:")


@pytest.mark.parametrize("argv", [["--help"], *([name, "--help"] for name, _, _ in COMMANDS)], ids=" ".join)
def test_help_is_for_users(argv, capsys):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    out = capsys.readouterr().out
    assert stop.value.code == 0 and out.startswith("usage: llmp")
    assert not DEVELOPER.search(out), DEVELOPER.search(out)
