"""Timing one callable honestly, per DESIGN.md: warm-up, then the median of repeats.

CUDA: one pair of CUDA events around each call (device time, no host sync inside the timed
region). CPU: a fixed thread count set once per process and recorded in the sample file; with
one thread the clock is the thread's own CPU time (``time.thread_time``), which leaves out the
time the thread sat descheduled while other processes ran (on the shared dev VM wall time
inflated whole training steps up to 3x), with more threads ``time.perf_counter``. ``llmp
measure`` uses the same clock rule, so samples and steps are timed alike. The callable receives
the repeat index so it can rotate through several input buffers (defeating caches between calls).

Torch only.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import torch


@dataclass(frozen=True, kw_only=True, slots=True)
class Timing:
    median_s: float
    p10_s: float
    p90_s: float
    repeats: int


def _summary(times: list[float]) -> Timing:
    times = sorted(times)
    n = len(times)
    return Timing(median_s=statistics.median(times), p10_s=times[int(0.1 * (n - 1))],
                  p90_s=times[round(0.9 * (n - 1))], repeats=n)


def cpu_clock(threads: int) -> Callable[[], float]:
    """The CPU clock for ``threads`` intra-op threads (see the module docstring)."""
    return time.thread_time if threads == 1 else time.perf_counter


def clock_name(device: torch.device, threads: int) -> str:
    if device.type == "cuda":
        return "cuda events"
    return "thread CPU time (time.thread_time)" if threads == 1 else "wall time (time.perf_counter)"


STABLE_SPREAD = 1.5
"""A round whose p90/p10 exceeds this was disturbed (e.g. by another process on a shared CPU)."""


def time_calls(fn: Callable[[int], object], device: torch.device, *, warmup: int = 2, min_repeats: int = 5,
               max_repeats: int = 30, target_s: float = 0.15, rounds: int = 3) -> Timing:
    """Median time of ``fn(i)``: ``warmup`` untimed calls, then enough repeats to fill ``target_s``.

    On a CPU shared with other processes a whole round can be disturbed: an OpenMP team waits a
    full scheduler slice (~4 ms) for a preempted thread. A round with a wide spread is retried
    (up to ``rounds``) and the round with the lowest median is kept.
    """
    best: Timing | None = None
    for _ in range(rounds):
        t = _round(fn, device, warmup=warmup, min_repeats=min_repeats, max_repeats=max_repeats, target_s=target_s)
        if best is None or t.median_s < best.median_s:
            best = t
        if t.p90_s <= STABLE_SPREAD * t.p10_s or device.type == "cuda":
            break
        time.sleep(0.005)
    assert best is not None
    return best


def _round(fn: Callable[[int], object], device: torch.device, *, warmup: int, min_repeats: int, max_repeats: int,
           target_s: float) -> Timing:
    cuda = device.type == "cuda"
    clock = time.perf_counter if cuda else cpu_clock(torch.get_num_threads())
    for i in range(warmup):
        fn(i)
    if cuda:
        torch.cuda.synchronize(device)
    t0 = clock()
    fn(warmup)
    if cuda:
        torch.cuda.synchronize(device)
    first = max(clock() - t0, 1e-7)
    repeats = int(min(max_repeats, max(min_repeats, target_s / first)))
    if cuda:
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
        for i in range(repeats):
            starts[i].record()
            fn(i)
            ends[i].record()
        torch.cuda.synchronize(device)
        return _summary([s.elapsed_time(e) * 1e-3 for s, e in zip(starts, ends)])
    times = []
    for i in range(repeats):
        t0 = clock()
        fn(i)
        times.append(clock() - t0)
    return _summary(times)


def cache_bytes(device: torch.device) -> int:
    """Last-level cache the rotation has to defeat: L2 on a GPU, the CPU's largest cache level."""
    if device.type == "cuda":
        return int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 50 * 2**20))
    best = 0
    base = "/sys/devices/system/cpu/cpu0/cache"
    if os.path.isdir(base):
        for entry in os.listdir(base):
            try:
                with open(os.path.join(base, entry, "size")) as f:
                    text = f.read().strip()
            except OSError:
                continue
            scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
            digits = text[:-1] if text[-1:] in "KMG" else text
            if digits.isdigit():
                best = max(best, int(digits) * scale)
    return best or 32 * 2**20


def cpu_model() -> str:
    """The CPU's marketing name (``/proc/cpuinfo``), for the sample file's record."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment(device: torch.device, threads: int) -> dict[str, object]:
    """What a sample file or a measurement records about where and how it was timed."""
    cuda = device.type == "cuda"
    env: dict[str, object] = {
        "device_kind": device.type,
        "device_name": torch.cuda.get_device_name(device) if cuda else cpu_model(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda if cuda else None,
        "cudnn": torch.backends.cudnn.version() if cuda else None,
        "driver": _driver_version() if cuda else None,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "timing": f"{clock_name(device, threads)} around each call after warm-up; median of repeats",
        "threads": threads,
        "host": platform.node(),
        "python": platform.python_version(),
        "cache_bytes": cache_bytes(device),
    }
    if cuda:
        props = torch.cuda.get_device_properties(device)
        env["sms"] = props.multi_processor_count
        env["memory_bytes"] = props.total_memory
    return env


def _driver_version() -> str | None:
    """NVIDIA driver version from the kernel module (no nvidia-smi subprocess needed)."""
    try:
        with open("/proc/driver/nvidia/version") as f:
            first = f.readline()
    except OSError:
        return None
    for token in first.split():
        if token.count(".") >= 1 and token.replace(".", "").isdigit():
            return token
    return None
