"""The shipped catalog as files: ids, file layout, lookup, did-you-mean, and source comments.

These tests read the catalog without the DSL parser (catalog.py must not depend on it);
``test_catalog_specs.py`` resolves every entry through the parser.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from llmp.errors import LlmpError, SpecError
from llmp.hardware import catalog

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

# gpu_id values of data/published (README "Two normalised columns") and of data/kernels (README
# "gpu_id values and the catalog") that name one part: each must be a catalog GPU of that id.
PUBLISHED_GPU_IDS = {"v100_sxm3_32gb", "a100_sxm4_40gb", "a100_sxm4_80gb", "h100_sxm5_80gb",
                     "h100_sxm_96gb_hbm2e_500w", "h200_sxm_141gb", "b200", "b300", "gb200", "gb300"}
KERNELS_GPU_IDS = {"h100_sxm5_80gb", "h200_sxm_141gb", "b200", "gb200", "gb300", "mi300x", "mi355x",
                   "a100_sxm4_40gb", "a100_pcie_80gb", "h800_sxm5_80gb"}
OTHER_GPU_IDS = {"gh200_96gb", "gh200_144gb", "mi325x", "mi350x", "a40", "cpu"}
NODE_IDS = {"dgx_a100", "dgx_a100_40gb", "dgx_h100", "dgx_b200", "dgx_b300", "gb200_nvl72", "gb200_nvl72_tray",
            "gb300_nvl72", "gb300_nvl72_tray", "perlmutter_gpu", "perlmutter_gpu_80gb", "vista_gh200",
            "alps_gh200", "dgx2_v100", "hgx_h200", "hgx_h800", "azure_ndv4", "grand_teton_h100_96gb",
            "mi300x_platform", "mi325x_platform", "mi355x_platform", "cpu_host"}
HEADER = re.compile(r"^\s*(gpu|device|node|cluster|link)\s+(\w+)(?:\s+from\s+\w+)?\s*\{", re.MULTILINE)


def test_catalog_dir_holds_llmp_files() -> None:
    files = list(catalog.catalog_dir().glob("*.llmp"))
    assert catalog.catalog_dir().is_dir()
    assert len(files) >= len(NODE_IDS)


def test_ids_by_kind_cover_the_required_hardware() -> None:
    ids = catalog.catalog_ids()
    assert set(ids) == {"gpu", "link", "node", "cluster"}
    assert PUBLISHED_GPU_IDS | KERNELS_GPU_IDS | OTHER_GPU_IDS <= set(ids["gpu"])
    assert NODE_IDS <= set(ids["node"])
    assert {"nvlink2", "nvlink3", "nvlink4", "nvlink5", "hdr_ib", "ndr_ib", "slingshot11",
            "roce_1600g"} <= set(ids["link"])
    assert {"perlmutter", "vista", "alps"} <= set(ids["cluster"])


def test_ids_are_unique_across_kinds_and_files() -> None:
    names = [name for ids in catalog.catalog_ids().values() for name in ids]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("kind", ["gpu", "node", "cluster"])
def test_each_gpu_node_and_cluster_has_a_file_of_its_own_name(kind: str) -> None:
    """`use "<id>"` finds a file by name, so every such id must be a file that defines it alone."""
    for ident in catalog.catalog_ids()[kind]:
        path = catalog.catalog_dir() / f"{ident}.llmp"
        assert path.is_file(), ident
        assert HEADER.findall(path.read_text()) == [(kind, ident)], path.name


def test_find_by_file_name_with_or_without_suffix() -> None:
    assert catalog.find("dgx_h100") == catalog.catalog_dir() / "dgx_h100.llmp"
    assert catalog.find("dgx_h100.llmp") == catalog.find("dgx_h100")


def test_find_by_an_id_defined_inside_a_file() -> None:
    assert catalog.find("nvlink4").name == "links.llmp"


@pytest.mark.parametrize(("typo", "meant"), [("dgx_h10", "dgx_h100"), ("perlmuter_gpu", "perlmutter_gpu"),
                                             ("nvlnk4", "nvlink4"), ("a100_sxm4_80g", "a100_sxm4_80gb")])
def test_find_suggests_the_closest_name(typo: str, meant: str) -> None:
    with pytest.raises(SpecError) as info:
        catalog.find(typo)
    assert info.value.hint == f"did you mean '{meant}'?"
    assert typo in str(info.value) and "Traceback" not in str(info.value)


def test_find_without_a_close_name_lists_the_catalog() -> None:
    with pytest.raises(LlmpError) as info:
        catalog.find("zzzz_qqqq")
    assert info.value.hint is not None and "dgx_a100" in info.value.hint


def test_find_rejects_paths() -> None:
    with pytest.raises(SpecError):
        catalog.find("../catalog/dgx_h100")


def _numeric_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, text) of every `field = <number...>` line; strings and ids with digits do not count."""
    found = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        code = line.split("#", 1)[0]
        if "=" not in code:
            continue
        value = re.sub(r'"[^"]*"', "", code.split("=", 1)[1])
        if re.search(r"(?<![\w.])\d", value):
            found.append((number, line))
    return found


def _uncited(path: Path) -> list[str]:
    """Numeric lines of ``path`` without a source comment on the same line."""
    return [f"{path.name}:{n}: {text}" for n, text in _numeric_lines(path)
            if "#" not in text or len(text.split("#", 1)[1].strip()) < 3]


@pytest.mark.parametrize("path", sorted(catalog.catalog_dir().glob("*.llmp")), ids=lambda p: p.name)
def test_every_number_cites_its_source_on_the_same_line(path: Path) -> None:
    assert _numeric_lines(path), f"{path.name} has no numbers"
    assert not _uncited(path), "\n".join(_uncited(path))


def test_the_source_check_flags_an_uncited_number(tmp_path: Path) -> None:
    spec = tmp_path / "x.llmp"
    spec.write_text('gpu x {\n  name = "X 80GB"  # ok\n  memory = 80 GiB\n  sms = 2  # lscpu\n'
                    '  tdp = 700 W  #\n}\nnode n { gpu = a100_sxm4_80gb }\n')
    assert [line.split(":")[1] for line in _uncited(spec)] == ["3", "5"]


def test_no_example_is_named_like_a_catalog_entry() -> None:
    """`use "x"` looks next to the including file first: an example named x.llmp would include itself."""
    catalog_names = {p.stem for p in catalog.catalog_dir().glob("*.llmp")}
    assert not catalog_names & {p.stem for p in EXAMPLES.glob("*.llmp")}


# ---- aliases ----------------------------------------------------------------------------------

def test_find_follows_an_alias_to_its_canonical_file() -> None:
    assert catalog.find("gh200") == catalog.catalog_dir() / "gh200_96gb.llmp"
    assert catalog.find("gh200.llmp") == catalog.find("gh200_96gb")
    assert catalog.canonical("gh200") == "gh200_96gb" and catalog.canonical("b200") == "b200"
    assert catalog.entry("gh200") == ("gpu", catalog.catalog_dir() / "gh200_96gb.llmp")


@pytest.mark.parametrize(("alias", "target"), sorted(catalog.ALIASES.items()))
def test_every_alias_names_an_existing_entry_and_shadows_none(alias: str, target: str) -> None:
    ids = {i for kind in catalog.catalog_ids().values() for i in kind}
    stems = {p.stem for p in catalog.catalog_dir().glob("*.llmp")}
    assert target in ids and alias not in ids | stems
    assert target not in catalog.ALIASES  # one hop: an alias never names another alias


def test_a_typo_of_an_alias_is_suggested() -> None:
    with pytest.raises(SpecError) as info:
        catalog.find("gh20")
    assert info.value.hint is not None and "gh200" in info.value.hint
