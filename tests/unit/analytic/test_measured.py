"""A machine's own collective measurements serve that machine: exact at measured points, the model
outside them (flagged), never for other links, and no residual correction on top."""

from __future__ import annotations

import dataclasses
import json
from importlib.resources import files
from pathlib import Path

import numpy as np
import pytest

import llmp
from llmp.analytic import measured
from llmp.analytic.collectives import Links, time
from llmp.analytic.kernels import Collective, CollectiveKind, Tier
from llmp.compose import predict
from llmp.dsl import catalog

ROOT = Path(__file__).resolve().parents[3]
SEED_EXAMPLE = ROOT / "examples" / "seed" / "llama13b_perlmutter_4_8_2.llmp"


def _links(node: str, inter: str | None = None) -> Links:
    n = catalog.node(node)
    return Links.between(n, catalog.link(inter) if inter else n.inter)


def _call(s: measured.Series, size: float) -> Collective:
    n = s.per_domain * s.domains
    if s.kind is CollectiveKind.SEND_RECV:
        return Collective(kind=s.kind, bytes=size, group=2, ranks_per_node=1 if s.domains > 1 else 2,
                          tier=Tier.INTER if s.domains > 1 else Tier.INTRA)
    return Collective(kind=s.kind, bytes=size, group=n, ranks_per_node=s.per_domain,
                      tier=Tier.INTER if s.domains > 1 else Tier.INTRA)


def _every_series() -> list[measured.Series]:
    return list({s.key: s for found in measured.load().values() for s in found}.values())


@pytest.mark.parametrize("series", _every_series(), ids=lambda s: s.key)
def test_a_table_is_exact_at_its_points_and_never_falls_as_messages_grow(series):
    links = _links(series.machines[0], series.network)
    sizes, seconds = np.exp(series.log_size), np.exp(series.log_seconds)
    got = [measured.serve(_call(series, s), links) for s in sizes]
    assert all(g is not None and g.seconds is not None for g in got)
    # several series of one shape (two sources): the one with the most measurements serves
    if all(g.series == series.key for g in got):
        assert [g.seconds for g in got] == pytest.approx(seconds, rel=1e-9)
    assert np.all(np.diff(series.log_seconds) >= 0)


def test_outside_the_measured_sizes_the_model_prices_and_says_why():
    links = _links("perlmutter_seed", "slingshot11_x4_seed")
    c = Collective(kind=CollectiveKind.ALL_REDUCE, bytes=1024, group=8, ranks_per_node=4, tier=Tier.INTER)
    s = measured.serve(c, links)
    assert s is not None and s.seconds is None and "outside the measured" in s.note


def test_tables_serve_only_the_links_they_were_measured_on():
    c = Collective(kind=CollectiveKind.ALL_REDUCE, bytes=2**28, group=8, ranks_per_node=4, tier=Tier.INTER)
    assert measured.serve(c, _links("perlmutter_seed", "slingshot11_x4_seed")).seconds is not None
    healthy = _links("perlmutter_gpu_80gb")  # the same GPUs and NVLink, a healthy Slingshot network
    assert measured.serve(c, healthy) is None
    inside = dataclasses.replace(c, group=4, ranks_per_node=4, tier=Tier.INTRA)
    assert measured.serve(inside, healthy).seconds is not None  # the seed's NVLink samples are Perlmutter's
    what_if = dataclasses.replace(healthy, intra_bandwidth=healthy.intra_bandwidth * 2)
    assert measured.serve(inside, what_if) is None


def test_sweeps_serve_like_single_calls():
    links = _links("perlmutter_seed", "slingshot11_x4_seed")
    sizes = np.array([1e3, 1e8, 5e8, 1e10])
    c = Collective(kind=CollectiveKind.ALL_REDUCE, bytes=sizes, group=8, ranks_per_node=4, tier=Tier.INTER)
    model = np.asarray(time(c, links))
    swept = measured.serve_arrays(c, model, links)
    single = []
    for i, s in enumerate(sizes):
        got = measured.serve(dataclasses.replace(c, bytes=float(s)), links)
        single.append(got.seconds if got is not None and got.seconds is not None else model[i])
    assert swept == pytest.approx(single, rel=1e-12)


def test_the_manifest_names_every_source_and_its_licence():
    manifest = json.loads(files("llmp.hardware").joinpath("collectives", measured.MANIFEST).read_text())
    for key, s in manifest["series"].items():
        assert "@" in s["source"] and ":" in s["source"], key
        assert s["licence"] and s["raw_rows"] >= s["points"] > 0 and 0 <= s["q"] < 2, key


def test_a_served_collective_is_not_corrected_again_and_the_provenance_says_so():
    pred = predict(llmp.load(SEED_EXAMPLE))
    served = [r for r in pred.ops if r.name.endswith("tp_all_reduce")]
    assert served and all(r.factor == 1.0 for r in served)
    lines = "\n".join(pred.provenance.measured)
    assert "seed:perlmutter_seed:all_reduce:4x2" in lines and "not corrected further" in lines
    assert "outside this machine's measurements" in lines  # the 4-byte loss all-reduce


def test_the_seeds_perlmutter_pays_its_slow_network_and_a_healthy_one_does_not():
    seed = predict(llmp.load(SEED_EXAMPLE))
    healthy = predict(llmp.loads(SEED_EXAMPLE.read_text().replace("perlmutter_seed", "perlmutter_gpu_80gb")))
    assert seed.breakdown["tp"] > 5 * healthy.breakdown["tp"]


def test_a_sweep_prices_served_collectives_as_one_prediction_does():
    from llmp.analytic.graph import decompose
    from llmp.analytic.pricing import price, price_arrays

    spec = llmp.load(SEED_EXAMPLE)
    graph = decompose(spec)
    one, many = price(graph, spec), price_arrays(graph, spec, 3)
    assert any(s is not None and s.seconds is not None for s in one.served)
    assert np.allclose(many.time, np.asarray(one.time, dtype=float)[:, None], rtol=1e-9)
