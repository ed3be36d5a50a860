"""What one checkpoint costs a run: its bytes, the time it blocks training, and a restart.

A checkpoint holds every parameter once with its optimizer state
(:func:`llmp.compose.memory.checkpoint_bytes_per_param`: the weight as stored plus moments and
master copy). Every rank writes its own shard at once (Megatron-Core's distributed checkpoint and
PyTorch DCP both save each shard once, in parallel), so the write takes the checkpoint's bytes over
the storage system's aggregate bandwidth, or over what the job's nodes can send through their
network links if that is less, and a restart reads it back at the same rate.

Synchronous save: training waits for the whole write. Asynchronous save (NeMo's default, an
option elsewhere): training waits only while each GPU copies its own state (its weights and
optimizer shard, the prediction's memory report) to host memory over the GPU's host link, and the
write proceeds in the background; a failure during the write loses the checkpoint in flight, so a
restart also redoes that much work.

Storage bandwidth defaults to the sustained rate of Meta's Tectonic file system under Llama 3's
16k-GPU run, 2 TB/s (Llama Team, "The Llama 3 Herd of Models", 2024, §3.3.1: 240 PB, 2 TB/s
sustained, 7 TB/s peak): a stated input, set it with ``--storage-bandwidth``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from llmp.analytic import params
from llmp.compose.memory import checkpoint_bytes_per_param
from llmp.compose.prediction import Prediction
from llmp.errors import InputError
from llmp.spec.spec import Spec, Stack
from llmp.units import format_bytes

STORAGE_BANDWIDTH = 2e12
"""Bytes/s: Tectonic's sustained throughput under Llama 3's training (Llama 3 paper, §3.3.1)."""


class Mode(StrEnum):
    AUTO = "auto"
    """As the spec's training stack saves by default (:data:`STACK_ASYNC`)."""
    SYNC = "sync"
    ASYNC = "async"


STACK_ASYNC: dict[Stack, tuple[bool, str]] = {
    Stack.NEMO: (True, "NeMo 2.0 MegatronStrategy(ckpt_async_save=True) by default "
                       "(nemo/lightning/pytorch/strategies/megatron_strategy.py)"),
    Stack.MEGATRON_LM: (False, "Megatron-LM saves synchronously unless --async-save is given "
                               "(megatron/training/arguments.py, a store_true flag)"),
    Stack.MEGATRON_CORE: (False, "Megatron-Core's training script saves synchronously unless --async-save "
                                 "(megatron/training/arguments.py)"),
    Stack.TORCHTITAN: (False, "torchtitan [checkpoint] async_mode = \"disabled\" by default "
                              "(torchtitan/config/job_config.py)"),
    Stack.MEGATRON_DEEPSPEED: (False, "DeepSpeed's engine.save_checkpoint writes synchronously with its default "
                                      "torch checkpoint engine"),
    Stack.GPT_NEOX: (False, "GPT-NeoX saves through DeepSpeed's engine.save_checkpoint, synchronously"),
}
"""Whether each stack saves asynchronously by default, with where it says so. A stack not listed
(``generic``, ``composer``, ``nemo_automodel``) is taken as synchronous: no asynchronous default
was found for it; ``--checkpoint async`` says otherwise."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Checkpointing:
    """One checkpoint of a layout: its size, what it blocks, and what a restart costs."""

    bytes: float
    """Every parameter once with its optimizer state."""
    write_s: float
    """The whole write at the storage bandwidth."""
    blocking_s: float
    """Training blocked per checkpoint: the write (sync) or the copy to host memory (async)."""
    asynchronous: bool
    restart_s: float
    """Per failure: relaunch, reading the checkpoint back, and (async) the write a failure discards."""
    storage_bandwidth: float
    """The rate of the write and the read: the storage's, or the job's nodes' network if slower."""
    relaunch_s: float
    how: str
    """Why sync or async (the stack's default and its source, or the flag)."""

    def describe(self) -> str:
        kind = "asynchronous" if self.asynchronous else "synchronous"
        return (f"{kind} checkpoints of {format_bytes(self.bytes)} at {self.storage_bandwidth / 1e12:.3g} TB/s: "
                f"{self.blocking_s:.3g} s blocked each, restart {self.restart_s / 60:.3g} min ({self.how})")


def checkpointing(spec: Spec, pred: Prediction, *, mode: Mode | str = Mode.AUTO,
                  storage_bandwidth: float = STORAGE_BANDWIDTH, relaunch_s: float = 0.0) -> Checkpointing:
    """The checkpoint cost of ``spec``'s layout, whose step ``pred`` predicts."""
    try:
        mode = Mode(mode)
    except ValueError:
        raise InputError(f"unknown checkpoint mode {mode!r}",
                         hint=f"use one of: {', '.join(m.value for m in Mode)}") from None
    if not storage_bandwidth > 0 or storage_bandwidth == float("inf"):
        raise InputError(f"the storage bandwidth must be a positive rate, got {storage_bandwidth!r}",
                         hint="e.g. --storage-bandwidth 2TB/s")
    if not 0 <= relaunch_s < float("inf"):
        raise InputError(f"the relaunch time must be zero or more, got {relaunch_s!r}", hint="e.g. --restart 10min")
    total = float(params.count(spec.model)) * checkpoint_bytes_per_param(spec)
    cl = spec.cluster
    rate = min(storage_bandwidth, float(cl.nodes) * float(cl.node.inter.bandwidth))
    write = total / rate
    if mode is Mode.AUTO:
        asynchronous, how = STACK_ASYNC.get(spec.train.stack, (False, f"stack {spec.train.stack.value}: no "
                                                                     "asynchronous default found, taken as sync"))
    else:
        asynchronous, how = mode is Mode.ASYNC, f"--checkpoint {mode.value}"
    host = float(spec.cluster.gpu.host_bandwidth)
    if asynchronous and host <= 0:
        asynchronous = False
        how += f"; {spec.cluster.gpu.id} has no host_bandwidth in the catalog, so the save is priced as synchronous"
    m = pred.memory
    blocking = (float(m.weights) + float(m.optimizer)) / host if asynchronous else write
    restart = relaunch_s + write + (write if asynchronous else 0.0)
    return Checkpointing(bytes=total, write_s=write, blocking_s=blocking, asynchronous=asynchronous,
                         restart_s=restart, storage_bandwidth=rate, relaunch_s=relaunch_s, how=how)
