"""A torchrun world llmp sample cannot use is refused with the problem and the fix, never a traceback."""

from __future__ import annotations

import pytest

from llmp.cli import main
from llmp.errors import InputError
from llmp.measure import ranks

WORLD = {"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}


def test_the_torchrun_environment_is_read() -> None:
    world = ranks.from_env(WORLD)
    assert world == ranks.World(rank=1, size=4, local_rank=1, local_size=2)
    assert (world.node, world.nodes) == (0, 2)
    assert ranks.from_env({"PATH": "/bin"}) is None
    assert ranks.from_env({**WORLD, "RANK": "3", "LOCAL_RANK": "1"}).node == 1  # type: ignore[union-attr]


@pytest.mark.parametrize("env, message", [
    ({"RANK": "0"}, "partial torchrun environment"),
    ({**WORLD, "RANK": "one"}, "whole numbers"),
    ({**WORLD, "RANK": "4"}, "do not describe a rank"),
    ({**WORLD, "LOCAL_RANK": "2"}, "do not describe a rank"),
    ({**WORLD, "WORLD_SIZE": "5"}, "not a whole number of nodes"),
])
def test_a_broken_world_is_named(env: dict[str, str], message: str) -> None:
    with pytest.raises(InputError, match=message) as raised:
        ranks.from_env(env)
    assert raised.value.hint


@pytest.mark.parametrize("env, argv, message", [
    ({"RANK": "0", "WORLD_SIZE": "2"}, [], "LOCAL_RANK, LOCAL_WORLD_SIZE"),
    ({**WORLD, "RANK": "0", "LOCAL_RANK": "0"}, ["--nproc", "4"], "--nproc 4 but torchrun started 2 ranks per node"),
    ({"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1"}, ["--families", "collectives"],
     "collectives need at least 2 ranks; torchrun started 1"),
])
def test_the_command_refuses_a_world_that_does_not_match(env: dict[str, str], argv: list[str], message: str,
                                                         tmp_path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    for name in ranks.ENV:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(["sample", "--out", str(tmp_path / "s"), *argv]) == 1
    err = capsys.readouterr().err
    assert message in err and "hint:" in err and "Traceback" not in err


def test_other_ranks_leave_the_message_to_rank_0(tmp_path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Every rank sees the same flags: rank 0 prints the error once, the others exit 1 quietly."""
    for name, value in WORLD.items():
        monkeypatch.setenv(name, value)
    assert main(["sample", "--out", str(tmp_path / "s"), "--nproc", "4"]) == 1
    assert capsys.readouterr().err == ""


def test_cuda_under_torchrun_without_a_gpu_is_named(tmp_path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    for name, value in {**WORLD, "RANK": "0", "LOCAL_RANK": "0"}.items():
        monkeypatch.setenv(name, value)
    assert main(["sample", "--out", str(tmp_path / "s"), "--device", "cuda"]) == 1
    err = capsys.readouterr().err
    assert "torch sees no CUDA device" in err and "--device cpu" in err
