"""Catalog ids resolve as the data and the users name them: every GPU on its own, every alias,
and every ``gpu_id`` of the published measurements (when the shared data folder is present)."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest

import llmp.dsl
from llmp.hardware import catalog
from llmp.hardware.spec import Device

PROBE = """use "{use}"
model m {{ arch = gpt  layers = 2  hidden = 128  heads = 4  vocab = 1024  seq_len = 128 }}
node probe {{ gpu = {gpu}  gpus_per_node = 1  intra = link {{ bandwidth = 1 GB/s  latency = 1 us }}
             inter = link {{ bandwidth = 1 GB/s  latency = 1 us }} }}
cluster c {{ node = probe }}
train {{ precision = fp32  global_batch = 4 }}
"""
PUBLISHED = Path(os.environ.get("LLMP_SHARED_DATA",
                                Path(__file__).resolve().parents[4] / "shared" / "data")) / "published"


def resolve_gpu(name: str) -> Device:
    """The GPU a spec gets when it writes ``use "NAME"`` and ``gpu = NAME``."""
    return llmp.dsl.loads(PROBE.format(use=name, gpu=name), filename=f"<gpu {name}>").cluster.gpu


@pytest.mark.parametrize("gpu", catalog.catalog_ids()["gpu"])
def test_every_catalog_gpu_resolves_under_its_own_id(gpu: str) -> None:
    assert resolve_gpu(gpu).id == gpu


@pytest.mark.parametrize(("alias", "target"), sorted(catalog.ALIASES.items()))
def test_an_alias_resolves_to_the_canonical_device(alias: str, target: str) -> None:
    assert resolve_gpu(alias).id == target  # `use` and `gpu =` both follow the alias; check shows this id


def _published_gpu_ids() -> set[str]:
    ids: set[str] = set()
    for path in sorted(PUBLISHED.glob("*.csv")):
        with path.open(newline="", encoding="utf-8") as f:
            ids |= {row["gpu_id"] for row in csv.DictReader(f) if row.get("gpu_id")}
    return ids


@pytest.mark.skipif(not PUBLISHED.is_dir(), reason=f"shared data folder not present ({PUBLISHED}); not in CI")
def test_every_gpu_id_of_the_published_measurements_is_a_catalog_gpu() -> None:
    ids = _published_gpu_ids()
    assert ids, f"no gpu_id values in {PUBLISHED}"
    unresolved = {gpu: catalog.entry(gpu) for gpu in ids if (catalog.entry(gpu) or ("",))[0] != "gpu"}
    assert not unresolved, f"gpu_id values with no catalog gpu: {sorted(unresolved)}"
    for gpu in sorted(ids):
        assert resolve_gpu(gpu).id == catalog.canonical(gpu)
