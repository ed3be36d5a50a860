"""The shipped examples resolve against the catalog and match the sources they cite.

They live here because each one is first of all a use of catalog hardware; parameter counts
are checked against the published sizes so a mistyped architecture field cannot hide.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import llmp.dsl
from llmp.analytic import params
from llmp.hardware.spec import Dtype

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
ALL = sorted(EXAMPLES.glob("*.llmp"))


def test_the_examples_are_there() -> None:
    assert {p.stem for p in ALL} >= {
        "gpt3_175b_dgx_a100", "llama3_8b_dgx_h100", "llama3_70b_dgx_h100", "mixtral_8x7b_dgx_h100",
        "perlmutter_gpt", "vista_llemma_7b", "tiny_cpu", "sweep_llama3_8b", "symbolic_hidden"}


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.stem)
def test_example_resolves_to_a_consistent_layout(path: Path) -> None:
    spec = llmp.dsl.load(path)
    assert spec.world_size == spec.cluster.world_size
    assert spec.train.precision.compute_dtype in spec.cluster.gpu.peak_flops


@pytest.mark.parametrize(("stem", "billions", "source"), [
    ("gpt3_175b_dgx_a100", 174.6, "Narayanan et al. 2021 Table 2 (174.6B)"),
    ("llama3_8b_dgx_h100", 8.03, "Meta Llama 3 8B model card (8.03B)"),
    ("llama3_70b_dgx_h100", 70.55, "Meta Llama 3 70B model card (70.55B)"),
    ("mixtral_8x7b_dgx_h100", 46.7, "Jiang et al. 2024: 47B total parameters"),
    ("vista_llemma_7b", 6.74, "Code Llama 7B (6.74B)"),
])
def test_parameter_count_matches_the_published_size(stem: str, billions: float, source: str) -> None:
    spec = llmp.dsl.load(EXAMPLES / f"{stem}.llmp")
    assert params.count(spec.model) / 1e9 == pytest.approx(billions, rel=0.01), source


def test_mixtral_activates_about_13b_parameters_per_token() -> None:
    spec = llmp.dsl.load(EXAMPLES / "mixtral_8x7b_dgx_h100.llmp")
    assert params.active(spec.model) / 1e9 == pytest.approx(12.9, rel=0.01)  # Jiang et al. 2024: 13B active


def test_gpt3_layout_is_the_papers() -> None:
    spec = llmp.dsl.load(EXAMPLES / "gpt3_175b_dgx_a100.llmp")
    p = spec.parallel
    assert (p.tp, p.pp, p.dp, spec.train.micro_batch, spec.train.global_batch) == (8, 12, 4, 1, 1536)
    assert spec.world_size == 384 and spec.cluster.gpu.id == "a100_sxm4_80gb"


def test_the_sweep_example_declares_two_sweeps() -> None:
    spec = llmp.dsl.load(EXAMPLES / "sweep_llama3_8b.llmp")
    sweeps = {s.path: s.values for s in spec.sweeps}
    assert sweeps == {"parallel.tp": (1, 2, 4, 8), "train.micro_batch": (1, 2, 4)}
    assert spec.parallel.tp == 1 and spec.parallel.dp == 64


def test_the_symbolic_example_leaves_hidden_free() -> None:
    spec = llmp.dsl.load(EXAMPLES / "symbolic_hidden.llmp")
    assert spec.symbols == ("model.hidden",)
    assert not isinstance(spec.model.hidden, int)
    assert {str(s) for s in spec.model.ffn_hidden.free_symbols} == {"hidden"}


def test_the_cpu_example_is_tiny_and_fp32_on_the_cpu_device() -> None:
    spec = llmp.dsl.load(EXAMPLES / "tiny_cpu.llmp")
    assert spec.cluster.gpu.id == "cpu" and spec.world_size == 1
    assert spec.train.precision.compute_dtype is Dtype.FP32
    assert params.count(spec.model) < 2_000_000
