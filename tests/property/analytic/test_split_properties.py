"""Pipeline splits on generated layer counts and weights: chunks sum to the layers, even and
explicit equal splits agree, DeepSpeed's and DeeperSpeed's partitions, and every recipe split is one
Megatron accepts."""

from __future__ import annotations

import dataclasses
import itertools

from analytic_helpers import split_spec as _spec
from hypothesis import given, settings
from hypothesis import strategies as st

from llmp.analytic.deepspeed_partition import _bisection, _linear_partition
from llmp.analytic.split import recipe_split, split
from llmp.spec.spec import PipeModule


@st.composite
def splits(draw: st.DrawFn):
    """A spec with one of the ways to split (each with arguments it accepts) and its layers."""
    pp = draw(st.sampled_from([1, 2, 3, 4, 8]))
    way = draw(st.sampled_from(["even", "stage_layers", "chunk_layers", "edges", "accounting", "deepspeed"]))
    vp = draw(st.sampled_from([1, 2, 4])) if pp > 1 and way in ("even", "stage_layers", "chunk_layers", "edges",
                                                                 "accounting") else 1
    if way == "even":
        layers = pp * vp * draw(st.integers(1, 6))
        return _spec(layers, pp, vp), layers
    if way in ("stage_layers", "chunk_layers"):
        n = pp if way == "stage_layers" else pp * vp
        unit = vp if way == "stage_layers" else 1
        counts = tuple(unit * draw(st.integers(0, 6)) for _ in range(n))
        layers = sum(counts)
        if layers == 0:
            counts, layers = (unit,) * n, unit * n
        return _spec(layers, pp, vp, stage_layers=counts), layers
    if way == "edges" and pp > 1:
        first, last, middle = (vp * draw(st.integers(1, 5)) for _ in range(3))
        layers = first + last + middle * (pp - 2)
        return _spec(layers, pp, vp, first_stage_layers=first, last_stage_layers=last), layers
    if way == "accounting":
        emb, loss = draw(st.booleans()), draw(st.booleans())
        layers = pp * vp * draw(st.integers(1, 4)) - emb - loss
        if layers < 1:
            layers += pp * vp
        return _spec(layers, pp, vp, account_for_embedding=emb, account_for_loss=loss), layers
    layers = draw(st.integers(pp, 40))
    method = draw(st.sampled_from(["uniform", "parameters", "type:transformer|mlp", "type:transformer|embedding"]))
    module = draw(st.sampled_from(list(PipeModule)))
    return _spec(layers, pp, 1, partition=method, pipe_module=module), layers


@settings(max_examples=200)
@given(splits())
def test_chunk_layers_sum_to_the_layers_and_stages_sum_their_chunks(case):
    spec, layers = case
    s = split(spec)
    pp, vp = spec.parallel.pp, spec.parallel.vp
    assert len(s.chunks) == pp * vp and min(s.chunks) >= 0
    assert sum(s.chunks) == layers == sum(s.stages(pp))


@given(st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2, 3]), st.integers(1, 5))
def test_an_even_split_is_layers_over_chunks_and_explicit_equal_counts_agree(pp, vp, per):
    vp = vp if pp > 1 else 1
    layers = pp * vp * per
    even = split(_spec(layers, pp, vp))
    assert even.chunks == (per,) * (pp * vp)
    assert split(_spec(layers, pp, vp, stage_layers=(per * vp,) * pp)) == even


@settings(max_examples=100)
@given(st.lists(st.integers(0, 1), min_size=2, max_size=12), st.integers(1, 4))
def test_deeperspeed_bisection_finds_the_smallest_heaviest_part_of_a_type_partition(weights, parts):
    # The `type:` methods weigh items 0 or 1; with at least one unit per part the bisection's
    # greedy probe reaches the optimal bottleneck (brute force over every contiguous cut).
    n = len(weights)
    if n <= parts or sum(weights) < parts:
        return
    best = min(max(sum(weights[a:b]) for a, b in itertools.pairwise((0, *cuts, n)))
               for cuts in itertools.combinations(range(n + 1), parts - 1))
    bounds = _bisection(tuple(weights), parts)
    assert bounds[0] == 0 and bounds[-1] == n and bounds == sorted(bounds)
    assert max(sum(weights[a:b]) for a, b in itertools.pairwise(bounds)) == best


@settings(max_examples=100)
@given(st.lists(st.integers(0, 9), min_size=2, max_size=9), st.integers(1, 4))
def test_deepspeed_linear_partition_cuts_in_order(weights, parts):
    if len(weights) <= parts:
        return
    bounds = _linear_partition(tuple(weights), parts)
    assert len(bounds) == parts + 1 and bounds[0] == 0 and bounds[-1] == len(weights)
    assert bounds == sorted(bounds)


@settings(max_examples=60, deadline=None)
@given(layers=st.integers(2, 130), pp=st.sampled_from([2, 3, 4, 8, 16]), vp=st.sampled_from([1, 2, 4]),
       mtp=st.sampled_from([0, 1]))
def test_every_recipe_split_is_a_split_megatron_accepts(layers, pp, vp, mtp):
    recipe = recipe_split(layers, pp, vp, mtp)
    if recipe is None:
        return
    spec = _spec(layers, pp, vp, **dict(recipe.fields))
    spec = dataclasses.replace(spec, model=dataclasses.replace(spec.model, mtp_layers=mtp))
    chunks = split(spec).chunks
    assert sum(chunks) == layers and min(chunks) >= 0
    assert max(chunks[1:-1], default=chunks[0]) - min(chunks[1:-1], default=chunks[0]) <= 1
