"""How many transformer layers each pipeline chunk holds, split the way the training stack splits them.

Chunks are numbered in model order: chunk ``g`` holds the ``g``-th slice of the layers and lives
on the pipeline rank its schedule places it on (Megatron's interleaving: ``g % pp``, with ``vp =
1`` a chunk is a stage; ZB-V's V: ``g`` and ``2 pp - 1 - g``; :mod:`llmp.analytic.schedules`). The
first chunk also holds the embedding, the last one the final norm, the output layer and the loss,
whatever the split. One rule applies per spec, chosen by the ``parallel`` fields:

* nothing given: ``layers / (pp * vp)`` on every chunk. Megatron-LM refuses layer counts that do
  not divide (``transformer_block.get_num_layers_to_build``: "num_layers should be divisible by
  pipeline_model_parallel_size"), so llmp does too and names the options below;
* ``stage_layers``: explicit counts per stage (each split equally over its ``vp`` chunks) or per
  chunk (Megatron-Core's ``pipeline_model_parallel_layout`` is the same idea);
* ``first_stage_layers`` / ``last_stage_layers``: Megatron-Core's uneven pipeline
  (``--decoder-first-pipeline-num-layers`` / ``--decoder-last-pipeline-num-layers``): the named
  stages get those counts, the others share the rest equally; a stage's count is split equally
  over its ``vp`` chunks. Its rules (``transformer_config.TransformerConfig.__post_init__``):
  counts positive and divisible by ``vp``, the rest divisible by the middle stages, and not
  combined with the accounting below;
* ``account_for_embedding`` / ``account_for_loss``: Megatron-Core counts the embedding (the loss)
  as one more layer, splits ``layers + 1 (+ 1)`` equally, and builds one transformer layer fewer
  on the very first (last) virtual stage (``get_num_layers_to_build``: "Reduce the number of
  layers to construct by 1 on the first (or last) stage"), which may leave it none;
* ``pipeline_layout``: Megatron-Core's ``--pipeline-model-parallel-layout`` string, one ``|``-separated
  stage per model chunk in model order, ``E`` the embedding, ``t`` a transformer layer, ``m`` a
  multi-token prediction module, ``L`` the loss, ``(...)*n`` and ``x*n`` repeats, commas cosmetic
  (NVIDIA/Megatron-LM@00caa53:megatron/core/transformer/pipeline_parallel_layer_layout.py,
  ``PipelineParallelLayerLayout.parse_str_to_list`` and ``validate_layer_layout``): any count per
  chunk, an empty chunk included. DeepSeek-V3 on pp 8 x vp 4 runs ``Et|(tt|)*30mL`` (one layer with
  the embedding, two on each of 30 chunks, the MTP module and the loss alone);
* ``partition``: DeepSpeed's ``PipelineModule._partition_layers`` (deepspeed/runtime/pipe/
  module.py) over the pipeline module's whole layer list (:class:`~llmp.spec.spec.PipeModule`):
  ``uniform`` splits the item count (``utils.partition_uniform``); ``parameters`` balances each
  item's parameter count on one tensor-parallel rank (``_count_layer_params`` builds the
  TP-sharded modules), embedding and head included; ``type:REGEX`` balances the items whose
  class or function name matches (``_find_layer_type``, case-insensitive), e.g. GPT-NeoX's
  default ``type:transformer|mlp`` or BLOOM's ``type:transformer|embedding``. DeepSpeed has no
  interleaved schedule, so ``vp = 1``. The layer list and each DeepSpeed generation's partition
  are :mod:`~llmp.analytic.deepspeed_partition`'s.

With none of these given, layers that do not divide the chunks are split as the training stack's own
code splits them (:data:`UNEVEN`): torchtitan and NeMo AutoModel spread them by rule, DeepSpeed's
stacks always partition (their profile's ``partition``), Megatron refuses them. What the Megatron
recipes choose for such models, when a published run does not say, is :func:`recipe_split`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from llmp.analytic import deepspeed_partition
from llmp.analytic.schedules import entry
from llmp.errors import InfeasibleError
from llmp.spec.spec import ParallelSpec, Spec, Stack

OPTIONS = ("stage_layers = [...]; Megatron-LM: first_stage_layers / last_stage_layers, "
           'account_for_embedding / account_for_loss, or pipeline_layout = "Et|(tt|)*30mL"; DeepSpeed '
           '(GPT-NeoX, Megatron-DeepSpeed): partition = "type:transformer" | "parameters" | "uniform"')
"""The ways to split layers that do not divide, for error hints."""


class SplitError(InfeasibleError):
    """The layers cannot be split as the spec asks; ``path`` names the field to point at."""

    def __init__(self, message: str, path: str, hint: str | None = None, label: str = "pipeline split",
                 symbolic: bool = False) -> None:
        super().__init__(message, hint=hint, label=label)
        self.path = path
        self.symbolic = symbolic
        """The split needs a number that a free symbol stands for (undecided, not wrong)."""


@dataclass(frozen=True, slots=True)
class Split:
    """Layers per chunk in model order."""

    chunks: tuple[int, ...]

    def stages(self, pp: int) -> tuple[int, ...]:
        """Layers per pipeline rank (its chunks ``r, r + pp, ...`` together)."""
        return tuple(sum(self.chunks[r::pp]) for r in range(pp))


def _int(value: Any, path: str) -> int:
    try:
        f = float(value)
    except TypeError:
        raise SplitError(f"{path} decides the pipeline split and must be a number, got {value}", path,
                         hint="give it a value with --set", symbolic=True) from None
    if f != int(f):
        raise SplitError(f"{path} = {f:g} is not a whole number", path)
    return int(f)


def split(spec: Spec) -> Split:
    """The chunk layer counts of ``spec`` (numbers needed), or :class:`SplitError` saying why not."""
    p = spec.parallel
    layers = _int(spec.model.layers, "model.layers")
    pp, vp = _int(p.pp, "parallel.pp"), _int(p.vp, "parallel.vp")
    megatron = [name for name in ("first_stage_layers", "last_stage_layers") if getattr(p, name) is not None]
    accounts = [name for name in ("account_for_embedding", "account_for_loss") if getattr(p, name)]
    explicit = [name for name in ("stage_layers", "pipeline_layout") if getattr(p, name)]
    given = [*explicit, *megatron, *accounts, *(["partition"] if p.partition else [])]
    if explicit and len(given) > 1:
        raise SplitError(f"{explicit[0]} gives the split; drop {', '.join(given[1:])}", f"parallel.{explicit[0]}")
    if megatron and accounts:
        raise SplitError(f"{' and '.join(megatron)} cannot be combined with {' and '.join(accounts)} "
                         "(Megatron-LM refuses the mix)", f"parallel.{megatron[0]}",
                         hint="use one of the two ways to make the first/last stage lighter")
    if p.partition and (megatron or accounts):
        raise SplitError(f'partition = "{p.partition}" is DeepSpeed\'s split; '
                         f"{', '.join([*megatron, *accounts])} are Megatron-LM's", "parallel.partition",
                         hint="keep the options of the stack the run used")
    if p.stage_layers is not None:
        chunks = _explicit(p.stage_layers, layers, pp, vp, _chunk_ranks(spec, pp, vp))
    elif p.pipeline_layout:
        chunks = megatron_layout(p.pipeline_layout, layers, pp, vp, _int(spec.model.mtp_layers, "model.mtp_layers"))
    elif megatron:
        chunks = _megatron_edges(p, layers, pp, vp, _chunk_ranks(spec, pp, vp))
    elif accounts:
        chunks = _megatron_accounting(p, layers, pp, vp)
    elif p.partition:
        chunks = _deepspeed(spec, layers, pp, vp)
    elif layers % (pp * vp) == 0:
        chunks = (layers // (pp * vp),) * (pp * vp)
    else:
        stack = spec.train.stack
        rule, source = UNEVEN.get(stack, (Uneven.REFUSE, ""))
        if rule is Uneven.REFUSE:
            why = f"stack {stack} refuses them too: {source}" if source else "Megatron-LM refuses this too"
            raise SplitError(f"model.layers({layers}) % (pp({pp}) * vp({vp})) = {layers % (pp * vp)}: the "
                             f"layers do not split equally over the pipeline chunks ({why})", "parallel.pp",
                             hint=f"say how the stack splits them: {OPTIONS}", label="not divisible")
        chunks = uneven(rule, layers, pp * vp)
    return Split(chunks=chunks)


class Uneven(StrEnum):
    """What a stack's own code does with layers that do not divide its pipeline chunks, told nothing."""

    REFUSE = "refuse"
    """It stops with an error (Megatron-LM and Megatron-Core)."""
    FIRST_MORE = "first_more"
    """The first ``layers % chunks`` chunks take one layer more (NeMo AutoModel)."""
    MIDDLE_MORE = "middle_more"
    """The first chunk takes ``layers // chunks``, the middle ones one more while the remainder lasts,
    the last one the rest (torchtitan)."""


_MEGATRON_REFUSES = ("NVIDIA/Megatron-LM@00caa53:megatron/core/transformer/transformer_block.py, "
                     "get_num_layers_to_build: num_layers must divide by pipeline_model_parallel_size (and by "
                     "virtual_pipeline_model_parallel_size) unless the uneven pipeline, the embedding/loss "
                     "accounting or a pipeline_model_parallel_layout says how")

UNEVEN: dict[Stack, tuple[Uneven, str]] = {
    Stack.MEGATRON_LM: (Uneven.REFUSE, "NVIDIA/Megatron-LM@v2.6:megatron/arguments.py: num_layers must be "
                        "divisible by transformer_pipeline_model_parallel_size"),
    Stack.MEGATRON_CORE: (Uneven.REFUSE, _MEGATRON_REFUSES),
    Stack.NEMO: (Uneven.REFUSE, _MEGATRON_REFUSES + " (NeMo and Megatron-Bridge build Megatron-Core models)"),
    Stack.NEMO_AUTOMODEL: (Uneven.FIRST_MORE, (
        "NVIDIA-NeMo/Automodel@00f4041:nemo_automodel/components/distributed/pipelining/functional.py, "
        "generate_hf_model_fqn_per_model_part: layers // chunks per stage, the first layers % chunks one more")),
    Stack.TORCHTITAN: (Uneven.MIDDLE_MORE, (
        "pytorch/torchtitan@6806473:torchtitan/parallelisms/pipelining_utils.py, generate_split_points: the "
        "first stage layers // stages, each middle stage one more while the remainder lasts, the last the rest")),
}
"""Each stack's own rule for layers that do not divide the pipeline chunks (a stack not listed leaves
it to the spec: llmp refuses, naming the options). DeepSpeed's stacks (Megatron-DeepSpeed, GPT-NeoX)
always split by their ``partition`` method, which their profile sets."""


def _first_more(layers: int, chunks: int) -> tuple[int, ...]:
    base, extra = divmod(layers, chunks)
    return tuple(base + (1 if g < extra else 0) for g in range(chunks))


def _middle_more(layers: int, chunks: int) -> tuple[int, ...]:
    base, extra = divmod(layers, chunks)
    out = [base]
    for _ in range(1, chunks - 1):
        out.append(base + (1 if extra > 0 else 0))
        extra -= 1 if extra > 0 else 0
    return (*out, layers - sum(out)) if chunks > 1 else (layers,)


_UNEVEN_SPLITS = {Uneven.FIRST_MORE: _first_more, Uneven.MIDDLE_MORE: _middle_more}


def uneven(rule: Uneven, layers: int, chunks: int) -> tuple[int, ...]:
    """Layers per chunk as a stack's rule (:class:`Uneven`, not ``REFUSE``) splits ``layers`` over ``chunks``."""
    return _UNEVEN_SPLITS[rule](layers, chunks)


@dataclass(frozen=True, kw_only=True, slots=True)
class RecipeSplit:
    """The ``parallel`` fields a Megatron recipe sets to split layers that do not divide, and why."""

    fields: tuple[tuple[str, Any], ...]
    why: str


_BRIDGE_ACCOUNTING = ("Megatron-Bridge's recipes for models whose layers do not divide the chunks count the "
                      "embedding and the loss as one layer each (NVIDIA-NeMo/Megatron-Bridge@3594df9:src/megatron/"
                      "bridge/recipes/llama/llama31_405b.py, account_for_embedding_in_pipeline_split = "
                      "account_for_loss_in_pipeline_split = True)")


def recipe_split(layers: int, pp: int, vp: int, mtp_layers: int = 0) -> RecipeSplit | None:
    """How a Megatron-Core recipe splits ``layers`` that do not divide ``pp * vp`` chunks, for a run
    that does not say: the embedding and loss accounting where ``layers + 2`` divides the chunks (the
    Megatron-Bridge recipes' choice, :data:`_BRIDGE_ACCOUNTING`); otherwise the same accounting spread
    as evenly as the chunks allow, written as a ``pipeline_layout`` (Megatron-Core runs any counts
    that way): ``layers + 2 + mtp_layers`` counted (each MTP module one layer on the last chunk, as
    DeepSeek-V3's layouts keep the last chunk lighter), ``// chunks`` each, the spare ones on the
    chunks after the first, the first and last then giving up the embedding's and the loss's (and
    the MTP modules') places. None when the layers divide."""
    chunks = pp * vp
    if layers % chunks == 0:
        return None
    if (layers + 2) % chunks == 0 and (layers + 2) // chunks >= 1:
        return RecipeSplit(fields=(("account_for_embedding", True), ("account_for_loss", True)),
                           why=_BRIDGE_ACCOUNTING)
    base, extra = divmod(layers + 2 + mtp_layers, chunks)
    spread = [base] + [base + 1] * extra + [base] * (chunks - 1 - extra)  # extra < chunks: spares after the first
    spread[0] -= 1
    spread[-1] -= 1 + mtp_layers
    if min(spread) < 0:
        return None
    return RecipeSplit(fields=(("pipeline_layout", layout_text(tuple(spread), mtp_layers)),), why=(
        f"{layers} + 2 accounted layers do not divide {chunks} chunks either; {_BRIDGE_ACCOUNTING}, so llmp "
        "assumes that accounting spread as evenly as the chunks allow, as a --pipeline-model-parallel-layout"))


def layout_text(chunks: tuple[int, ...], mtp_layers: int = 0) -> str:
    """The Megatron-Core layout string of per-chunk layer counts (``Et*4|t*4|...|tmL``)."""
    def stage(g: int, n: int) -> str:
        body = "t" * n if n <= 2 else f"t*{n}"
        head = "E" if g == 0 else ""
        tail = ("m" * mtp_layers + "L") if g == len(chunks) - 1 else ""
        return head + body + tail
    return "|".join(stage(g, n) for g, n in enumerate(chunks))


_LAYOUT_REPEAT = (re.compile(r"\(([^)]+)\)\*(\d+)"), re.compile(r"(.)\*(\d+)"))
"""Megatron's unrolling, in its order: ``(...)*n``, then ``x*n``."""


def megatron_layout(text: str, layers: int, pp: int, vp: int, mtp_layers: int = 0) -> tuple[int, ...]:
    """Transformer layers per chunk of a Megatron-Core pipeline layout string (module docstring),
    checked as Megatron checks it, plus llmp's own placement: the embedding on the first chunk, the
    MTP modules and the loss on the last."""
    path = "parallel.pipeline_layout"
    unrolled = text.replace(",", "")
    for pattern in _LAYOUT_REPEAT:
        unrolled = pattern.sub(lambda m: m.group(1) * int(m.group(2)), unrolled)
    stages = unrolled.split("|")
    bad = sorted(set(unrolled) - set("ELtm|"))
    if bad:
        raise SplitError(f'pipeline_layout "{text}": unknown layer character {bad[0]!r}', path,
                         hint="E embedding, t transformer layer, m MTP module, L loss; | between stages; "
                              "(...)*n repeats")
    if len(stages) != pp * vp:
        raise SplitError(f'pipeline_layout "{text}" has {len(stages)} stages; pp({pp}) * vp({vp}) = {pp * vp} '
                         "(one per model chunk)", path)
    counts = tuple(st.count("t") for st in stages)
    where = {c: [g for g, st in enumerate(stages) if c in st] for c in "ELm"}
    if sum(counts) != layers:
        raise SplitError(f'pipeline_layout "{text}" places {sum(counts)} transformer layers, not '
                         f"model.layers({layers})", path)
    if unrolled.count("E") != 1 or where["E"] != [0] or not stages[0].startswith("E"):
        raise SplitError(f'pipeline_layout "{text}": the embedding E must open the first stage, once', path)
    if unrolled.count("L") != 1 or where["L"] != [pp * vp - 1] or not stages[-1].endswith("L"):
        raise SplitError(f'pipeline_layout "{text}": the loss L must close the last stage, once', path)
    if unrolled.count("m") != mtp_layers:
        raise SplitError(f'pipeline_layout "{text}" places {unrolled.count("m")} MTP modules; model.mtp_layers is '
                         f"{mtp_layers}", path)
    if mtp_layers and (where["m"] != [pp * vp - 1] or "t" in stages[-1][stages[-1].index("m"):]):
        raise SplitError(f'pipeline_layout "{text}": llmp runs the MTP modules on the last stage, after its '
                         "transformer layers (a standalone MTP stage is not modelled)", path)
    return counts


def _chunk_ranks(spec: Spec, pp: int, vp: int) -> tuple[int, ...]:
    """The pipeline rank of each chunk under the spec's schedule (of the first model copy)."""
    # The schedule table lives with the composition, which imports this module.
    return entry(spec.parallel.schedule).chunk_ranks(pp, vp)[:pp * vp]


def _per_stage(stages: tuple[int, ...], vp: int, ranks: tuple[int, ...]) -> tuple[int, ...]:
    """Chunk counts in model order from per-stage counts, each stage split equally over its
    chunks (``ranks``: the stage of each chunk)."""
    return tuple(stages[r] // vp for r in ranks)


def _explicit(stage_layers: tuple[int, ...], layers: int, pp: int, vp: int,
              ranks: tuple[int, ...]) -> tuple[int, ...]:
    path = "parallel.stage_layers"
    if len(stage_layers) not in (pp, pp * vp):
        want = f"pp({pp})" if vp == 1 else f"pp({pp}) or pp * vp({pp * vp})"
        raise SplitError(f"stage_layers has {len(stage_layers)} entries; it needs {want}", path,
                         hint="one count per pipeline stage, or one per model chunk in model order")
    if sum(stage_layers) != layers:
        raise SplitError(f"stage_layers sums to {sum(stage_layers)}, not model.layers({layers})", path)
    if len(stage_layers) == pp * vp:
        return tuple(stage_layers)
    odd = [n for n in stage_layers if n % vp]
    if odd:
        raise SplitError(f"stage_layers entry {odd[0]} % vp({vp}) = {odd[0] % vp}: each stage's layers are "
                         "split equally over its vp chunks", path,
                         hint=f"give {pp * vp} per-chunk counts instead")
    return _per_stage(stage_layers, vp, ranks)


def _megatron_edges(p: ParallelSpec, layers: int, pp: int, vp: int, ranks: tuple[int, ...]) -> tuple[int, ...]:
    """Megatron-Core ``--decoder-first/last-pipeline-num-layers``."""
    first = None if p.first_stage_layers is None else _int(p.first_stage_layers, "parallel.first_stage_layers")
    last = None if p.last_stage_layers is None else _int(p.last_stage_layers, "parallel.last_stage_layers")
    path = "parallel.first_stage_layers" if first is not None else "parallel.last_stage_layers"
    if pp == 1:
        raise SplitError("first_stage_layers / last_stage_layers need pp > 1", path)
    for name, n in (("first_stage_layers", first), ("last_stage_layers", last)):
        if n is not None and n % vp:
            raise SplitError(f"{name}({n}) % vp({vp}) = {n % vp}: a stage's layers are split equally over "
                             "its vp chunks (Megatron-LM requires it)", f"parallel.{name}")
    middle_stages = pp - (first is not None) - (last is not None)
    rest = layers - (first or 0) - (last or 0)
    if rest < 0 or (rest > 0) != (middle_stages > 0):
        raise SplitError(f"first/last stages take {(first or 0) + (last or 0)} of model.layers({layers}), leaving "
                         f"{rest} for {middle_stages} middle stages", path)
    if middle_stages and (rest % middle_stages or (rest // middle_stages) % vp):
        raise SplitError(f"the {rest} remaining layers do not split equally over {middle_stages} middle stages "
                         f"(and their vp({vp}) chunks), as Megatron-LM requires", path)
    middle = rest // middle_stages if middle_stages else 0
    stages = tuple(first if (r == 0 and first is not None) else last if (r == pp - 1 and last is not None)
                   else middle for r in range(pp))
    return _per_stage(stages, vp, ranks)


def _megatron_accounting(p: ParallelSpec, layers: int, pp: int, vp: int) -> tuple[int, ...]:
    """Megatron-Core ``--account-for-embedding/loss-in-pipeline-split``."""
    total = layers + p.account_for_embedding + p.account_for_loss
    path = "parallel.account_for_embedding" if p.account_for_embedding else "parallel.account_for_loss"
    if total % (pp * vp):
        raise SplitError(f"model.layers({layers}) + {total - layers} accounted = {total} % (pp({pp}) * vp({vp})) = "
                         f"{total % (pp * vp)}: Megatron-LM needs the accounted layers to split equally", path)
    chunks = [total // (pp * vp)] * (pp * vp)
    chunks[0] -= p.account_for_embedding
    chunks[-1] -= p.account_for_loss
    if min(chunks) < 0:
        raise SplitError("not enough layers for the embedding and loss stages (a chunk would hold fewer than "
                         "0 layers)", path)
    return tuple(chunks)


# ---- DeepSpeed ------------------------------------------------------------------------------

def _deepspeed(spec: Spec, layers: int, pp: int, vp: int) -> tuple[int, ...]:
    p = spec.parallel
    method = p.partition.lower()  # _partition_layers: method = method.lower()
    path = "parallel.partition"
    if vp > 1:
        raise SplitError(f'partition = "{p.partition}" is DeepSpeed\'s pipeline, which has no interleaved '
                         f"schedule; vp({vp}) must be 1", path)
    names, params, is_layer = deepspeed_partition.items(spec, layers)
    if method == "uniform":
        bounds = deepspeed_partition.uniform(len(names), pp, p.pipe_module)
    elif method == "parameters":
        bounds = deepspeed_partition.balanced(tuple(_whole(w) for w in params), pp, p.pipe_module)
    elif method.startswith("type:"):
        try:
            pattern = re.compile(method.split(":", 1)[1], re.IGNORECASE)
        except re.error as err:
            raise SplitError(f'partition = "{p.partition}": bad regular expression ({err})', path) from None
        bounds = deepspeed_partition.balanced(tuple(int(bool(pattern.search(n))) for n in names), pp,
                                              p.pipe_module)
    else:
        raise SplitError(f'partition = "{p.partition}" is not a DeepSpeed partition method', path,
                         hint='use "uniform", "parameters" or "type:REGEX" (e.g. "type:transformer")')
    return tuple(sum(is_layer[bounds[s]:bounds[s + 1]]) for s in range(pp))


def _whole(params: Any) -> int:
    try:
        return round(float(params))
    except TypeError:
        raise SplitError(f"partition = \"parameters\" needs the model's sizes as numbers, got {params}",
                         "parallel.partition", hint="give the free fields values with --set", symbolic=True) from None
