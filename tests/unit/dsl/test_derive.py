"""Derived devices: ``gpu NEW from BASE { ... }`` inherits every field it does not write.

Parsing, inheritance (fields, whole sub-blocks, late binding, chains), overrides (in the file and
by ``--set``), errors (unknown base, wrong kind, loops, units) and what ``llmp check`` shows.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from dsl_helpers import DERIVE_REST as REST
from dsl_helpers import derived_device as device
from dsl_helpers import derived_spec as spec
from strategies import GiB

from llmp.cli import main
from llmp.dsl.transform import parse
from llmp.errors import SpecError
from llmp.hardware.spec import Device, Dtype


def error(devices: str, gpu: str = "h100_96", **kw: object) -> SpecError:
    with pytest.raises(SpecError) as info:
        spec(devices, gpu, **kw)  # type: ignore[arg-type]
    return info.value


@pytest.fixture(scope="module")
def h100() -> Device:
    return device("", "h100_sxm5_80gb")


# ---- parsing ------------------------------------------------------------------------------

def test_from_names_the_base_of_a_block() -> None:
    block = parse("gpu h100_96 from h100_sxm5_80gb { memory = 96 GiB }").items[0]
    assert (block.name.text, block.base.text) == ("h100_96", "h100_sxm5_80gb")
    assert parse("gpu g { memory = 1 GiB }").items[0].base is None


def test_from_is_a_keyword_only_after_a_block_id() -> None:
    """A field may still be called `from`; the schema then reports it as unknown, not the parser."""
    block = parse("model m { from = 3 }").items[0]
    assert block.body.entries[0].name.text == "from"


def test_only_gpu_blocks_are_derived() -> None:
    err = error("node n2 from n { gpus_per_node = 4 }\ngpu h100_96 from h100_sxm5_80gb { }")
    assert err.label == "unexpected base" and "node block cannot be derived" in err.message


# ---- inheritance --------------------------------------------------------------------------

def test_an_empty_derived_block_is_its_base_under_a_new_id(h100: Device) -> None:
    derived = device("gpu h100_96 from h100_sxm5_80gb { }")
    assert derived.derivation is not None and derived.derivation.chain == ("h100_sxm5_80gb",)
    assert (derived.id, derived.name) == ("h100_96", "h100_96")  # the base's product name is not inherited
    assert dataclasses.replace(derived, id=h100.id, name=h100.name, derivation=None) == h100


def test_written_fields_override_and_the_rest_is_inherited(h100: Device) -> None:
    derived = device("gpu h100_96 from h100_sxm5_80gb { memory = 96 GiB  tdp = 500 W  name = \"H100 96GB\" }")
    assert (derived.memory, derived.tdp, derived.name) == (96 * GiB, 500.0, "H100 96GB")
    assert dataclasses.replace(derived, memory=h100.memory, tdp=h100.tdp, id=h100.id, name=h100.name,
                               derivation=None) == h100
    origin = derived.derivation.origin
    assert origin["memory"] == origin["tdp"] == origin["name"] == "h100_96"
    assert origin["mem_bandwidth"] == origin["flops"] == origin["achievable"] == "h100_sxm5_80gb"
    assert "scaleup_bandwidth" in origin and "nonexistent" not in origin


def test_a_written_sub_block_replaces_the_bases_whole(h100: Device) -> None:
    derived = device("gpu h100_96 from h100_sxm5_80gb { flops { bf16 = 900 TFLOP/s  fp16 = bf16  fp8 = 2 * bf16 } }")
    # No fp64/fp32/tf32 mixed in.
    assert derived.peak_flops == {Dtype.BF16: 900e12, Dtype.FP16: 900e12, Dtype.FP8: 1800e12}
    assert derived.achievable == h100.achievable  # the sub-blocks it does not write stay the base's


def test_an_empty_measured_block_drops_the_bases_ceilings() -> None:
    derived = device("gpu h100_96 from h100_sxm5_80gb { tdp = 500 W  achievable { }  flash_attention { } }")
    assert derived.achievable is None and derived.flash_attention is None


def test_inherited_expressions_see_the_derived_values() -> None:
    devices = """
gpu base { memory = 1 GiB  mem_bandwidth = 1 TB/s  sms = 10  clock = 1 GHz  l2_cache = 1 MiB
           tdp = 100 W  launch_overhead = 5 us  flops { bf16 = 100 TFLOP/s  fp16 = bf16 } }
gpu fast from base { flops { bf16 = 200 TFLOP/s  fp16 = bf16 / 2 } }
gpu wide from base { mem_bandwidth = 2 TB/s }
"""
    assert device(devices, "fast").peak_flops == {Dtype.BF16: 200e12, Dtype.FP16: 100e12}
    assert device(devices, "wide").peak_flops == {Dtype.BF16: 100e12, Dtype.FP16: 100e12}


def test_a_chain_of_bases_resolves_nearest_first() -> None:
    devices = """
gpu h100_96 from h100_sxm5_80gb { memory = 96 GiB }
gpu h100_96_500w from h100_96 { tdp = 500 W }
"""
    derived = device(devices, "h100_96_500w")
    assert (derived.memory, derived.tdp, derived.mem_bandwidth) == (96 * GiB, 500.0, 3.35e12)
    assert derived.derivation.chain == ("h100_96", "h100_sxm5_80gb")
    assert derived.derivation.base == "h100_96"
    origin = derived.derivation.origin
    assert (origin["tdp"], origin["memory"], origin["sms"]) == ("h100_96_500w", "h100_96", "h100_sxm5_80gb")


def test_a_base_may_be_named_by_its_catalog_alias() -> None:
    derived = device("gpu mine from gh200 { memory = 90 GiB }", "mine", uses='use "gh200"\nuse "links"\n')
    assert derived.derivation.chain == ("gh200_96gb",) and derived.memory == 90 * GiB


# ---- overrides ----------------------------------------------------------------------------

def test_set_overrides_a_derived_device_and_says_so() -> None:
    derived = device("gpu h100_96 from h100_sxm5_80gb { memory = 96 GiB }",
                     overrides=("gpu.memory=100 GiB", "gpu.flops.bf16=1 PFLOP/s"))
    assert derived.memory == 100 * GiB and derived.peak_flops[Dtype.BF16] == 1e15
    assert derived.derivation.origin["memory"] == "--set"
    assert derived.derivation.origin["flops.bf16"] == "--set"


# ---- errors -------------------------------------------------------------------------------

def test_unknown_base_gets_a_did_you_mean() -> None:
    err = error("gpu h100_96 from h100_sxm5_80g { }")
    assert err.label == "unknown base" and err.hint == "did you mean 'h100_sxm5_80gb'?"
    assert err.span is not None and err.span.line == 3


def test_a_catalog_base_that_was_not_used_says_which_file_to_use() -> None:
    err = error("gpu mine from b200 { }", "mine")
    assert err.label == "unknown base" and err.hint == 'it is in the catalog: add use "b200"'


def test_a_reference_to_a_catalog_gpu_that_was_not_used_says_which_file_to_use() -> None:
    err = error("", "mi355x")
    assert err.label == "unknown reference" and err.hint == 'it is in the catalog: add use "mi355x"'


def test_a_node_may_name_its_gpu_by_a_catalog_alias() -> None:
    assert device("", "gh200", uses='use "gh200"\nuse "links"\n').id == "gh200_96gb"


def test_the_base_must_be_a_gpu() -> None:
    err = error("gpu h100_96 from nvlink4 { }")
    assert err.label == "wrong type" and "'nvlink4' is a link, not a gpu" in err.message


@pytest.mark.parametrize(("devices", "loop"), [
    ("gpu h100_96 from h100_96 { }", "gpu h100_96 from h100_96"),
    ("gpu h100_96 from b { }\ngpu b from h100_96 { }", "gpu h100_96 from b from h100_96"),
    ("gpu h100_96 from b { }\ngpu b from c { }\ngpu c from b { }", "gpu b from c from b"),
])
def test_derivation_loops_are_errors_that_show_the_loop(devices: str, loop: str) -> None:
    err = error(devices)
    assert err.label == "circular derivation" and err.message == loop


def test_an_unused_derived_gpu_is_checked_too() -> None:
    err = error("gpu h100_96 from h100_sxm5_80gb { }\ngpu spare from nothing_like_it { }")
    assert err.label == "unknown base" and "nothing_like_it" in err.message


@pytest.mark.parametrize(("field", "value", "expects"), [
    ("memory", "96 GB/s", "a size"), ("tdp", "500 GB", "a power"), ("sms", "132 W", "a plain number")])
def test_an_override_with_the_wrong_unit_is_reported_where_it_is_written(field: str, value: str,
                                                                        expects: str) -> None:
    err = error(f"gpu h100_96 from h100_sxm5_80gb {{ {field} = {value} }}")
    assert err.label == "wrong unit" and expects in err.message
    assert err.span is not None and (err.span.file, err.span.line) == ("<derive>", 3)


def test_an_override_that_breaks_a_check_is_still_caught() -> None:
    # The inherited achievable.fp16/fp8 are orphaned.
    err = error("gpu h100_96 from h100_sxm5_80gb { flops { bf16 = 900 TFLOP/s } }")
    assert err.label == "no peak" and "has no fp" in err.message


# ---- llmp check ---------------------------------------------------------------------------

DERIVED_SPEC = """use "h100_sxm5_80gb"
use "links"
gpu h100_96 from h100_sxm5_80gb {
  memory = 96 GiB
  tdp = 500 W
}
""" + REST.format(gpu="h100_96")


def test_check_shows_which_values_were_inherited_and_which_overridden(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "derived.llmp"
    path.write_text(DERIVED_SPEC)
    assert main(["check", str(path), "--set", "gpu.clock=1.7 GHz"]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.startswith("  ")}
    assert lines["memory"].endswith("(overridden)") and "96 GiB" in lines["memory"]
    assert lines["tdp"].endswith("(overridden)")
    assert lines["mem_bandwidth"].endswith("(from h100_sxm5_80gb)")
    assert lines["clock"].endswith("(--set)") and "1.7 GHz" in lines["clock"]
    assert lines["name"].endswith("(default)")
    assert lines["flops.bf16"].endswith("(from h100_sxm5_80gb)")
    assert lines["achievable.bf16"].endswith("(from h100_sxm5_80gb)")


def test_check_json_carries_the_derivation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "derived.llmp"
    path.write_text(DERIVED_SPEC)
    assert main(["check", str(path), "--json"]) == 0
    gpu = json.loads(capsys.readouterr().out)["cluster"]["node"]["gpu"]
    assert gpu["id"] == "h100_96" and gpu["memory"] == 96 * GiB
    assert gpu["derivation"]["chain"] == ["h100_sxm5_80gb"]
    assert gpu["derivation"]["origin"]["tdp"] == "h100_96"


def test_check_title_names_the_chain(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "derived.llmp"
    path.write_text(DERIVED_SPEC)
    assert main(["check", str(path)]) == 0
    assert "gpu h100_96 from h100_sxm5_80gb" in capsys.readouterr().out.splitlines()


def test_a_device_written_in_full_shows_no_origins(capsys: pytest.CaptureFixture[str]) -> None:
    example = Path(__file__).resolve().parents[3] / "examples" / "llama3_8b_dgx_h100.llmp"
    assert main(["check", str(example)]) == 0
    out = capsys.readouterr().out
    assert "(from " not in out and "(overridden)" not in out
