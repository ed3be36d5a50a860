"""Re-measure the numbers that ``llmp/hardware/catalog/cpu.llmp`` and the ``gloo_loopback`` link
quote for this machine. Not a test (pytest does not collect it): run it by hand and compare.

    python benchmarks/probe_cpu_host.py

What it measures, and why that way:
  * memory bandwidth: ``Tensor.copy_`` of a 1 GiB float64 tensor with all cores (torch threads =
    logical CPUs), counted as read + write = 2 x bytes per copy; median of 10. A single-threaded
    numpy copy reaches only about half of it, so it would understate what torch ops get.
  * launch overhead: ``torch.add`` on two 1-element tensors, median of 10,000 calls after 1,000
    warm-up calls: the fixed per-op cost of PyTorch eager dispatch on this CPU.
  * achieved GEMM rate per dtype (2048^3 ``matmul``, median of 10), to check the datasheet-style
    peak (cores x clock x 2 FMA units x lanes x 2) against reality and to show bf16 is emulated.
  * gloo between two processes on this machine: median 4-byte send/recv round trip (latency =
    half of it) and all_reduce bus bandwidth of 64 MiB (2 ranks: busbw = algbw).
"""

from __future__ import annotations

import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _median_s(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def copy_bandwidth() -> float:
    """Bytes/s moved by a large tensor copy (read + write)."""
    src = torch.ones(2**27, dtype=torch.float64)
    dst = torch.empty_like(src)
    dst.copy_(src)
    return 2 * src.numel() * src.element_size() / _median_s(lambda: dst.copy_(src), 10)


def dispatch_overhead() -> float:
    """Seconds per tiny eager op."""
    a, b = torch.ones(1), torch.ones(1)
    for _ in range(1000):
        torch.add(a, b)
    return _median_s(lambda: torch.add(a, b), 10_000)


def gemm_rate(dtype: torch.dtype, n: int = 2048) -> float:
    """Achieved FLOP/s of an n x n x n matmul."""
    x, y = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    for _ in range(3):
        x @ y
    return 2 * n**3 / _median_s(lambda: x @ y, 10)


def _gloo_rank(rank: int, world: int, port: int) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    one = torch.ones(1)
    round_trips = []
    for _ in range(2000):
        dist.barrier()
        start = time.perf_counter()
        if rank == 0:
            dist.send(one, 1)
            dist.recv(one, 1)
        else:
            dist.recv(one, 0)
            dist.send(one, 0)
        round_trips.append(time.perf_counter() - start)
    big = torch.ones(64 * 2**20 // 4)
    for _ in range(3):
        dist.all_reduce(big)
    reduce_times = []
    for _ in range(20):
        dist.barrier()
        start = time.perf_counter()
        dist.all_reduce(big)
        reduce_times.append(time.perf_counter() - start)
    if rank == 0:
        busbw = big.numel() * 4 / statistics.median(reduce_times) * 2 * (world - 1) / world
        print(f"gloo send/recv latency (half round trip): {statistics.median(round_trips) / 2 * 1e6:.0f} us")
        print(f"gloo all_reduce 64 MiB busbw: {busbw / 1e9:.2f} GB/s")
    dist.destroy_process_group()


def main() -> None:
    torch.set_num_threads(os.cpu_count() or 1)
    print(f"threads: {torch.get_num_threads()}, torch {torch.__version__}, date {time.strftime('%Y-%m-%d')}")
    print(f"copy bandwidth: {copy_bandwidth() / 1e9:.1f} GB/s")
    print(f"eager dispatch overhead (torch.add, 1 element): {dispatch_overhead() * 1e6:.2f} us")
    for dtype in (torch.float64, torch.float32, torch.bfloat16):
        print(f"gemm 2048^3 {str(dtype).removeprefix('torch.')}: {gemm_rate(dtype) / 1e9:.1f} GFLOP/s")
    mp.spawn(_gloo_rank, args=(2, 29533), nprocs=2)


if __name__ == "__main__":
    main()
