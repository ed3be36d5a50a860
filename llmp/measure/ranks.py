"""Which rank of which torchrun world this process is, and the checks that the world is one llmp can use.

``llmp sample`` runs as one process per device under ``torchrun`` (``python -m
torch.distributed.run``), on one node or across nodes (Slurm: one ``torchrun`` per node through
``srun``). torchrun tells each worker where it sits through environment variables (``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``; torch's "torchrun"
documentation, section "Environment Variables"), which is also what ``init_process_group``'s
``env://`` method reads. This module reads them once into a :class:`World`, starts the process
group, and checks what the samples depend on: that the ranks of one node are consecutive and that
every node runs as many ranks as the first (torchrun numbers the workers of each agent
consecutively; a node with another ``--nproc-per-node`` would make the group shapes of
:mod:`~llmp.measure.collectives` wrong).

A user error seen by one rank is seen by all: :func:`agree` turns "some rank failed" into the same
:class:`~llmp.errors.InputError` on every rank, so no rank is left waiting in a collective for one
that has already exited. Torch and the standard library only.
"""

from __future__ import annotations

import datetime
import os
import socket
from dataclasses import dataclass
from typing import Any

from llmp.errors import InputError, LlmpError

ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")
"""The variables torchrun sets for every worker (all four, or none outside torchrun)."""

TIMEOUT = datetime.timedelta(minutes=10)
"""How long a collective waits for a missing rank before failing: long enough for the slowest
kernel case another rank is finishing (seconds) and for NCCL's lazy communicator set-up on
thousands of ranks, short enough that a lost node does not hold the others for torch's default 30
minutes (10 for NCCL)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class World:
    """This process's place in the torchrun world."""

    rank: int
    size: int
    """``WORLD_SIZE``: processes in the run (one per device)."""
    local_rank: int
    """Index of this process on its node (the CUDA device it drives)."""
    local_size: int
    """``LOCAL_WORLD_SIZE``: processes on each node (torchrun's ``--nproc-per-node``)."""

    @property
    def node(self) -> int:
        """The node this rank runs on (ranks of a node are consecutive: :func:`check_layout`)."""
        return self.rank // self.local_size

    @property
    def nodes(self) -> int:
        return self.size // self.local_size


def from_env(env: dict[str, str] | None = None) -> World | None:
    """The torchrun world this process was started in, or ``None`` when it was not started by torchrun."""
    env = dict(os.environ if env is None else env)
    present = [name for name in ENV if name in env]
    if not present:
        return None
    fix = "start llmp under torchrun (python -m torch.distributed.run ... -m llmp sample ...), which sets all four"
    if len(present) < len(ENV):
        missing = [name for name in ENV if name not in env]
        raise InputError(f"the environment sets {', '.join(present)} but not {', '.join(missing)}: "
                         "a partial torchrun environment", hint=fix)
    try:
        rank, size, local_rank, local_size = (int(env[name]) for name in ENV)
    except ValueError:
        raise InputError(f"torchrun variables must be whole numbers: "
                         f"{', '.join(f'{n}={env[n]!r}' for n in ENV)}", hint=fix) from None
    if not (0 <= rank < size and 0 <= local_rank < local_size <= size):
        raise InputError(f"RANK={rank}, WORLD_SIZE={size}, LOCAL_RANK={local_rank}, LOCAL_WORLD_SIZE={local_size} "
                         "do not describe a rank of a world (0 <= RANK < WORLD_SIZE, "
                         "0 <= LOCAL_RANK < LOCAL_WORLD_SIZE <= WORLD_SIZE)", hint=fix)
    if size % local_size:
        raise InputError(f"WORLD_SIZE={size} is not a whole number of nodes of LOCAL_WORLD_SIZE={local_size} ranks",
                         hint="start the same --nproc-per-node on every node")
    return World(rank=rank, size=size, local_rank=local_rank, local_size=local_size)


def init(world: World, device_kind: str) -> None:
    """Join the process group: NCCL between GPUs, gloo between CPU processes."""
    import torch.distributed as dist

    if device_kind == "cuda":
        import torch

        if torch.cuda.device_count() == 0:
            raise InputError("--device cuda: torch sees no CUDA device on this machine",
                             hint=f"torch {torch.__version__} (CUDA build: {torch.version.cuda}); use --device cpu")
        if world.local_rank >= torch.cuda.device_count():
            raise InputError(f"local rank {world.local_rank} has no GPU: torchrun started {world.local_size} "
                             f"processes on this node, torch sees {torch.cuda.device_count()} GPUs",
                             hint=f"run torchrun --nproc-per-node {torch.cuda.device_count()} (one process per GPU)")
        torch.cuda.set_device(world.local_rank)
    dist.init_process_group("nccl" if device_kind == "cuda" else "gloo", timeout=TIMEOUT)


class Reported(InputError):
    """An error rank 0 reports for the whole world (:func:`agree`): the other ranks exit quietly
    with status 1 instead of printing the same message once per rank."""


def agree(error: LlmpError | None) -> None:
    """Raise on every rank if any rank has an error: on rank 0 the first failing rank's error, on the
    others :class:`Reported`. Every rank calls it at the same point (it is a collective)."""
    import torch.distributed as dist

    rank = dist.get_rank()
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, None if error is None else (error.message, error.hint))
    failed = [(r, e) for r, e in enumerate(gathered) if e is not None]
    if not failed:
        return
    if rank != 0:
        raise Reported("reported by rank 0")
    first, reported = failed[0]
    if first == 0 and error is not None:
        raise error
    message, hint = reported
    raise InputError(f"rank {first}: {message}", hint=hint)


def check_layout(world: World) -> None:
    """Every node holds ``local_size`` consecutive ranks (what the group shapes assume)."""
    import torch.distributed as dist

    mine = (world.rank, world.local_rank, world.local_size, socket.gethostname())
    entries: list[Any] = [None] * world.size
    dist.all_gather_object(entries, mine)
    sizes = sorted({e[2] for e in entries})
    if len(sizes) > 1:
        raise InputError(f"the nodes run different numbers of ranks (LOCAL_WORLD_SIZE {sizes})",
                         hint="start torchrun with the same --nproc-per-node on every node")
    for rank, local_rank, local_size, host in entries:
        expected = rank % local_size
        if local_rank != expected:
            raise InputError(f"rank {rank} (on {host}) is local rank {local_rank}, not {expected}: "
                             "the ranks of a node are not consecutive",
                             hint="let torchrun number the ranks (no --role or custom RANK), one torchrun per node")
