"""`llmp check` shows a link's measured efficiency and mesh, and a GPU's measured ceilings."""

from __future__ import annotations

from pathlib import Path

from llmp.cli import main

EXAMPLES = Path(__file__).parents[3] / "examples"


def test_check_lists_measured_link_and_gpu_numbers(capsys) -> None:
    assert main(["check", str(EXAMPLES / "perlmutter_gpt.llmp")]) == 0
    out = capsys.readouterr().out
    assert "nvlink3_mesh4: 300 GB/s, latency 2.2 us, efficiency 0.78, 100 GB/s per pair" in out
    assert "achievable.bf16         271 TFLOP/s (measured)" in out
    assert "flash_attention.fp16    203 TFLOP/s (measured)" in out
    assert "slingshot11_x4: 100 GB/s, latency 0 s\n" in out  # no measurement: line rate, nothing added
