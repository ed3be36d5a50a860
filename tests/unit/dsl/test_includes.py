"""``use`` includes (relative, catalog, cycles), hardware ids, active sections, file errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmp.dsl import load, loads
from llmp.errors import InputError, LlmpSyntaxError, SpecError

FIXTURES = Path(__file__).parent / "fixtures"
DEBUG = (FIXTURES / "debug.llmp").read_text()
HARDWARE, _, REST = DEBUG.partition("model debug {")
MODEL_AND_TRAIN = "model debug {" + REST
TINY = """model tiny { arch = gpt  layers = 2  hidden = 128  heads = 4  vocab = 1000  seq_len = 64 }
train { global_batch = 64 }
"""


def write(tmp_path: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)


def test_relative_include_with_and_without_suffix(tmp_path: Path) -> None:
    write(tmp_path, {"hw/toy.llmp": HARDWARE, "a.llmp": 'use "hw/toy"\n' + MODEL_AND_TRAIN,
                     "b.llmp": 'use "hw/toy.llmp"\n' + MODEL_AND_TRAIN})
    assert load(tmp_path / "a.llmp").cluster.gpu.id == "toy_gpu"
    assert load(tmp_path / "b.llmp").cluster.gpu.id == "toy_gpu"


def test_includes_are_relative_to_the_including_file(tmp_path: Path) -> None:
    gpu_part, links_and_node = HARDWARE.split("link toy_nvlink")
    write(tmp_path, {"hw/parts/gpu.llmp": gpu_part,
                     "hw/toy.llmp": 'use "parts/gpu"\nlink toy_nvlink' + links_and_node,
                     "spec.llmp": 'use "hw/toy"\n' + MODEL_AND_TRAIN})
    assert load(tmp_path / "spec.llmp").cluster.node.intra.id == "toy_nvlink"


def test_catalog_names_and_catalog_ids() -> None:
    spec = loads('use "dgx_h100"\ncluster c { node = dgx_h100  nodes = 1 }\n' + TINY)
    assert spec.cluster.gpu.id == "h100_sxm5_80gb"
    # an id defined inside a catalog file (links.llmp) is found too
    spec = loads('use "h100_sxm5_80gb"\nuse "nvlink4"\nuse "ndr_ib_x8"\n'
                 "node n { gpu = h100_sxm5_80gb  gpus_per_node = 8  intra = nvlink4  inter = ndr_ib_x8 }\n"
                 "cluster c { node = n }\n" + TINY)
    assert spec.cluster.node.intra.id == "nvlink4"


def test_a_catalog_cluster_is_used_when_the_root_has_none() -> None:
    spec = loads('use "eos"\n' + TINY.replace("global_batch = 64", "global_batch = 4608"))
    assert spec.cluster.id == "eos"


def test_include_not_found_suggests_a_name() -> None:
    with pytest.raises(SpecError) as err:
        loads('use "dgx_h1000"\n' + TINY, filename="spec.llmp")
    e = err.value
    assert (e.label, e.span.line, e.span.column) == ("include not found", 1, 5)
    assert e.hint == "did you mean 'dgx_h100'?"
    assert e.source_line == 'use "dgx_h1000"'


def test_include_cycle_shows_the_cycle(tmp_path: Path) -> None:
    write(tmp_path, {"a.llmp": 'use "b"\n' + TINY, "b.llmp": 'use "c"\n', "c.llmp": '\n\nuse "a"\n'})
    with pytest.raises(SpecError) as err:
        load(tmp_path / "a.llmp")
    e = err.value
    assert e.label == "include cycle"
    a, b, c = (str(tmp_path / f"{n}.llmp") for n in "abc")
    assert e.message == f"{a} -> {b} -> {c} -> {a}"
    assert (e.span.file, e.span.line) == (c, 3)
    assert e.source_line == 'use "a"'


def test_self_include_is_a_cycle(tmp_path: Path) -> None:
    write(tmp_path, {"a.llmp": 'use "a.llmp"\n' + TINY})
    with pytest.raises(SpecError, match=r"include cycle|a\.llmp -> "):
        load(tmp_path / "a.llmp")


def test_diamond_includes_are_read_once(tmp_path: Path) -> None:
    write(tmp_path, {"hw.llmp": HARDWARE, "left.llmp": 'use "hw"\n', "right.llmp": 'use "hw"\n',
                     "spec.llmp": 'use "left"\nuse "right"\n' + MODEL_AND_TRAIN})
    assert load(tmp_path / "spec.llmp").cluster.gpu.id == "toy_gpu"


def test_duplicate_ids_show_both_places(tmp_path: Path) -> None:
    write(tmp_path, {"hw.llmp": HARDWARE, "spec.llmp": 'use "hw"\n' + HARDWARE + MODEL_AND_TRAIN})
    with pytest.raises(SpecError) as err:
        load(tmp_path / "spec.llmp")
    e = err.value  # the root is read first, so the included copy is the duplicate
    assert (e.label, e.span.file, e.span.line, e.span.column) == (
        "duplicate id", str(tmp_path / "hw.llmp"), 3, 5)
    assert e.message == f"duplicate gpu id 'toy_gpu' (first defined at {tmp_path / 'spec.llmp'}:4:5)"


def test_root_blocks_win_over_included_ones(tmp_path: Path) -> None:
    other = TINY.replace("model tiny", "model other")
    write(tmp_path, {"hw.llmp": HARDWARE + other, "spec.llmp": 'use "hw"\n' + MODEL_AND_TRAIN})
    assert load(tmp_path / "spec.llmp").model.name == "debug"


def test_two_included_models_and_none_in_root_is_an_error(tmp_path: Path) -> None:
    write(tmp_path, {"m1.llmp": "model a { arch = gpt }", "m2.llmp": "model b { arch = gpt }",
                     "spec.llmp": 'use "m1"\nuse "m2"\n' + HARDWARE + "train { global_batch = 8 }"})
    with pytest.raises(SpecError) as err:
        load(tmp_path / "spec.llmp")
    assert err.value.label == "several models"
    assert "m1.llmp:1:1" in err.value.message and "m2.llmp:1:1" in err.value.message


def test_two_models_in_the_root_is_an_error() -> None:
    with pytest.raises(SpecError) as err:
        loads(HARDWARE + TINY + "model again { arch = gpt }", filename="spec.llmp")
    assert "2 model blocks in spec.llmp" in err.value.message


def test_parallel_may_not_be_given_twice() -> None:
    with pytest.raises(SpecError) as err:
        loads(DEBUG + "\nparallel { tp = 2 }", filename="spec.llmp")
    assert err.value.label == "duplicate block"


def test_top_level_parallel_block() -> None:
    text = DEBUG.replace("  parallel {\n    tp = 2\n    pp = 2\n  }\n", "") + "parallel { tp = 4 }"
    assert loads(text).parallel.tp == 4


def test_missing_sections() -> None:
    with pytest.raises(SpecError, match="no cluster block"):
        loads(TINY)
    with pytest.raises(SpecError, match="no train block"):
        loads(HARDWARE + "model debug {" + REST.split("train {")[0])


@pytest.mark.parametrize("content,fragment", [
    (b"\xff\xfe model", "is not UTF-8"), (b"   \n\n", "is empty"),
])
def test_unreadable_included_files(tmp_path: Path, content: bytes, fragment: str) -> None:
    (tmp_path / "bad.llmp").write_bytes(content)
    (tmp_path / "spec.llmp").write_text('use "bad"\n' + TINY)
    with pytest.raises(SpecError) as err:
        load(tmp_path / "spec.llmp")
    assert fragment in err.value.message and err.value.span.line == 1


def test_syntax_errors_in_included_files_point_into_them(tmp_path: Path) -> None:
    write(tmp_path, {"hw.llmp": "gpu g {\n  memory 80 GiB\n}", "spec.llmp": 'use "hw"\n' + TINY})
    with pytest.raises(LlmpSyntaxError) as err:
        load(tmp_path / "spec.llmp")
    e = err.value
    assert (e.span.file, e.span.line, e.label) == (str(tmp_path / "hw.llmp"), 2, "missing '='")
    assert e.source_line == "  memory 80 GiB"


@pytest.mark.parametrize("make,fragment", [
    (lambda p: p / "missing.llmp", "no such file"),
    (lambda p: p, "is a directory"),
    (lambda p: (p / "bad.llmp", (p / "bad.llmp").write_bytes(b"model \xc3\x28"))[0], "not UTF-8"),
    (lambda p: (p / "empty.llmp", (p / "empty.llmp").write_text("\n \n"))[0], "is empty"),
])
def test_root_file_problems_are_input_errors(tmp_path: Path, make, fragment: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError) as err:
        load(make(tmp_path))
    assert fragment in err.value.message
