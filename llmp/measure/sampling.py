"""``llmp sample``: time the design's kernels on this machine and append them to sample files.

The run is resumable by construction: the design is deterministic (``design.py``), each row's
key is a function of its case, rows are appended one complete line at a time as they are
measured (``samplefile.py``), and a rerun skips keys already on disk. Kill it at any moment and
rerun: no row is lost, none is duplicated.

Under torchrun (:mod:`~llmp.measure.ranks`) every rank measures its share of the cases not on
disk yet (:func:`share`) and appends them to its own files,
``DIR/<family>.rank<R>.csv``: one writer per file, so ranks on many nodes never interleave writes
to one file on a shared file system, and a node without a shared ``DIR`` keeps its own rows. The
keys already measured are gathered from every rank's view of ``DIR`` (the files of every rank and
of single-process runs), so a rerun with another world size skips exactly what is done.

Torch and numpy only (``rich`` for the progress bar when installed, plain text otherwise), so
a bare GPU node with a checkout and torch can sample.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from llmp import __version__, files
from llmp.errors import InputError, LlmpError
from llmp.measure import bench, design, devices, ranks, timing
from llmp.residuals import samplefile

DESIGN_VERSION = "halton-llm-v1"
SAMPLE_COLUMNS_TAIL = ("width", "time_s", "p10_s", "p90_s", "repeats", "error")


def columns(family: str) -> tuple[str, ...]:
    """Column names of ``DIR/<family>.csv``."""
    return ("key", "family", "pass", "variant", "dtype", *design.DIMS[family], *SAMPLE_COLUMNS_TAIL)


@dataclass(frozen=True, kw_only=True, slots=True)
class SampleConfig:
    """What to sample and where; built by ``llmp sample`` from its flags."""

    out: Path
    device: str = "cpu"
    """``cpu`` or ``cuda`` (the first visible GPU)."""
    families: tuple[str, ...] = design.FAMILIES
    dtypes: tuple[str, ...] | None = None
    """Element dtypes; default per device kind (``design.DEFAULT_DTYPES``)."""
    per_family: int = 40
    """Cases per family (``--budget``): the design prefix this run completes."""
    per_stratum: int | None = None
    """Instead of ``per_family``: k cases of every (operator, pass) (``--per-operator``,
    :func:`design.per_stratum_prefix`)."""
    minutes: float | None = None
    """Wall-clock limit; the run stops cleanly and a rerun continues where it stopped."""
    seed: int = 0
    threads: int = 1
    """CPU threads (``torch.set_num_threads``), recorded in the file. One by default: on a shared
    or busy machine an OpenMP team waits whole scheduler slices (4-8 ms per op measured on the dev
    VM under load) for preempted threads; ``llmp measure`` uses the same default."""
    device_id: str | None = None
    """Catalog id override when the device is not in ``llmp.hardware.names.CUDA``."""
    progress: bool = True
    memory_cap: int = 2**30
    """Bytes of rotated input sets per case (more sets defeat caches better)."""
    ranges: design.Ranges | None = None
    """Shape ranges; default ``design.RANGES[device]`` (narrower ranges make a quicker run)."""
    target_s: float = 0.15
    """Timed repeats per case fill about this many seconds (at least 5 repeats)."""
    world: ranks.World | None = None
    """The torchrun world this rank belongs to (its process group started); None: one process."""
    deadline: float | None = None
    """``time.monotonic()`` past which no case starts; default ``minutes`` from the start of ``run``."""


@dataclass(frozen=True, kw_only=True, slots=True)
class SampleReport:
    measured: int
    existing: int
    """Cases already on disk (skipped)."""
    failed: tuple[tuple[str, str], ...]
    """(key, reason) of cases that raised (recorded in the file with an ``error`` so reruns skip them)."""
    remaining: int
    """Cases of the requested design still unmeasured (non-zero only when ``minutes`` ran out)."""
    files: tuple[Path, ...]
    elapsed_s: float
    meta: dict[str, object] = field(default_factory=dict)


def device(kind: str) -> torch.device:
    """The device this process times: the CPU, or its GPU (under torchrun, its local rank's)."""
    if kind == "cuda":
        if not torch.cuda.is_available():
            raise InputError("--device cuda: torch sees no CUDA device on this machine",
                             hint=f"torch {torch.__version__} (CUDA build: {torch.version.cuda}); use --device cpu")
        return torch.device("cuda", torch.cuda.current_device())
    if kind != "cpu":
        raise InputError(f"unknown device kind {kind!r}", hint="use --device cpu or --device cuda")
    return torch.device("cpu")


def check_dtypes(kind: str, dtypes: tuple[str, ...] | None) -> tuple[str, ...]:
    """``dtypes`` (default: the device kind's), refused when the sampler cannot time them there."""
    dtypes = dtypes or design.DEFAULT_DTYPES[kind]
    bad = set(dtypes) - set(design.DTYPE_BYTES) | ({"fp16", "tf32"} & set(dtypes) if kind == "cpu" else set())
    if bad:
        raise InputError(f"unsupported dtypes {sorted(bad)} on {kind}",
                         hint=f"{kind} supports {', '.join(design.DEFAULT_DTYPES[kind])}"
                              + (", bf16" if kind == "cpu" else ""))
    return tuple(dtypes)


def file_of(out: Path, family: str, world: ranks.World | None) -> Path:
    """The file this process appends ``family``'s rows to (module docstring)."""
    return out / (f"{family}.csv" if world is None else f"{family}.rank{world.rank}.csv")


DEVICE_FIELDS = ("device_kind", "device_name", "device_id")
"""What says which device a sample file was measured on."""


def done_keys(out: Path, family: str, meta: dict[str, object]) -> set[str]:
    """Keys of ``family`` already in ``out`` (every rank's file and a single-process run's),
    refusing files of another setup (:data:`samplefile.RESUME_MUST_MATCH`): their rows would be
    skipped here and mixed there."""
    keys: set[str] = set()
    pattern = re.compile(rf"{re.escape(family)}(\.rank\d+)?\.csv")
    for path in sorted(p for p in out.glob(f"{family}*.csv") if pattern.fullmatch(p.name)):
        table = samplefile.read(path)
        for name in samplefile.RESUME_MUST_MATCH:
            if table.meta.get(name) != meta.get(name):
                raise InputError(f"{path} was sampled with {name}={table.meta.get(name)!r}, this run has "
                                 f"{meta.get(name)!r}; resuming would mix two setups in one sample directory",
                                 hint="sample into a new --out directory, or rerun with the original settings")
        keys.update(row["key"] for row in table.rows)
    return keys


def share(todo: list[design.Case], rank: int, size: int) -> list[design.Case]:
    """The cases ``rank`` of ``size`` measures: one of each block of ``size`` consecutive cases, the
    choice rotating by block, so that every rank gets its share of every family although the
    design interleaves families round-robin (a plain ``todo[rank::size]`` hands two ranks of a
    two-family run one family each)."""
    return [c for i, c in enumerate(todo) if (i + i // size) % size == rank]


def check_device(out: Path, meta: dict[str, object]) -> None:
    """Refuse a sample directory holding any file measured on another device (a copied or reused
    ``--out``): ``llmp fit DIR`` would fit both devices' rows as one."""
    for path in sorted(out.glob("*.csv")):
        table = samplefile.read(path)
        if any(name in table.meta and table.meta.get(name) != meta.get(name) for name in DEVICE_FIELDS):
            theirs, ours = (f"'{m.get('device_name')}' ({m.get('device_kind')}, catalog id {m.get('device_id')})"
                            for m in (table.meta, meta))
            raise InputError(f"{path} holds samples of another device: {theirs}; this machine is {ours}",
                             hint="sample each device into its own --out directory")


def header(config: SampleConfig, dev: torch.device, threads: int) -> dict[str, object]:
    """The record each sample file starts with (who, where, when, how)."""
    env = timing.environment(dev, threads)
    device_id = config.device_id or devices.catalog_id(dev.type, str(env["device_name"]))
    return {**env, "device_id": device_id, "design": DESIGN_VERSION, "seed": config.seed,
            "llmp": __version__, "rotation": "input sets rotated to cover 2x the last-level cache (<= 8 sets)"}


class _Progress:
    """A rich progress bar when rich is installed; a line every few percent otherwise."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.done, self.enabled = total, 0, enabled and total > 0
        self._bar = None
        self._last = -1
        if not self.enabled:
            return
        try:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
        except ImportError:
            return
        self._bar = Progress(TextColumn("sampling {task.description}"), BarColumn(), MofNCompleteColumn(),
                             TimeRemainingColumn(), transient=False)
        self._bar.start()
        self._task = self._bar.add_task("", total=total)

    def advance(self, label: str) -> None:
        self.done += 1
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(self._task, advance=1, description=label)
            return
        pct = int(100 * self.done / self.total)
        if pct // 5 != self._last // 5 or self.done == self.total:
            self._last = pct
            print(f"sampling {self.done}/{self.total} ({pct}%) {label}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def run(config: SampleConfig) -> SampleReport:
    """Measure the design prefix that is not on disk yet; return what happened."""
    files.output_dir(config.out, "--out (the sample directory)")
    unknown = sorted(set(config.families) - set(design.FAMILIES))
    if unknown:
        raise InputError(f"unknown kernel families {unknown}", hint=f"choose from {', '.join(design.FAMILIES)}")
    dev = device(config.device)
    dtypes = check_dtypes(dev.type, config.dtypes)
    threads = config.threads
    if threads < 1:
        raise InputError(f"--threads must be at least 1, got {threads}")
    if dev.type == "cpu":
        torch.set_num_threads(threads)
    torch.manual_seed(config.seed)
    meta = header(config, dev, threads)
    cache = timing.cache_bytes(dev)  # as recorded in meta
    ranges = config.ranges or design.RANGES[dev.type]
    meta["ranges"] = dataclasses.asdict(ranges)
    world = config.world
    if world is not None:
        meta.update(rank=world.rank, world=world.size, ranks_per_node=world.local_size)
    plan = design.design(config.families, ranges, tuple(dtypes), config.seed, config.per_family, config.per_stratum)
    done = _done(config, meta, world)
    todo = [c for c in plan if c.key not in done]
    existing = len(plan) - len(todo)
    if world is not None:
        todo = share(todo, world.rank, world.size)
    appenders = {f: samplefile.Appender(file_of(config.out, f, world), columns(f), meta, sync=True)
                 for f in config.families}
    start = time.monotonic()
    deadline = config.deadline
    if deadline is None and config.minutes is not None:
        deadline = start + 60 * config.minutes
    failed: list[tuple[str, str]] = []
    measured = 0
    bar = _Progress(len(todo), config.progress)
    try:
        for case in todo:
            if deadline is not None and time.monotonic() > deadline:
                break
            appenders[case.family].append(_measure(case, dev, cache, config, failed))
            measured += 1
            bar.advance(case.family)
    finally:
        bar.close()
        for a in appenders.values():
            a.close()
    return SampleReport(measured=measured, existing=existing, failed=tuple(failed), remaining=len(todo) - measured,
                        files=tuple(a.path for a in appenders.values()), elapsed_s=time.monotonic() - start, meta=meta)


def _done(config: SampleConfig, meta: dict[str, object], world: ranks.World | None) -> set[str]:
    """The keys of the cases ``config.out`` already holds for this device, as every rank sees them
    (a node-local directory holds that node's rows only); an error on any rank stops them all."""
    done, error = set(), None
    try:
        check_device(config.out, meta)
        for f in config.families:
            done |= done_keys(config.out, f, meta)
    except LlmpError as err:
        error = err
    if world is not None:  # every rank's view of DIR (a node-local DIR holds that node's rows only)
        ranks.agree(error)
        views: list[object] = [None] * world.size
        torch.distributed.all_gather_object(views, sorted(done))
        done = set().union(*(set(v) for v in views))  # type: ignore[call-overload]
    elif error is not None:
        raise error
    return done


def _measure(case: design.Case, dev: torch.device, cache: int, config: SampleConfig,
             failed: list[tuple[str, str]]) -> dict[str, object]:
    """Time one case; a case that raises becomes a row with its error (so reruns skip it too)."""
    row: dict[str, object] = {"key": case.key, "family": case.family, "pass": case.pass_, "variant": case.variant,
                              "dtype": case.dtype, **dict(case.dims), "width": case.width}
    try:
        fn = bench.build(case, dev, cache=cache, memory_cap=config.memory_cap)
        t = timing.time_calls(fn, dev, target_s=config.target_s)
        del fn
        row.update(time_s=f"{t.median_s:.6e}", p10_s=f"{t.p10_s:.6e}", p90_s=f"{t.p90_s:.6e}", repeats=t.repeats,
                   error="")
    except (RuntimeError, NotImplementedError, ValueError, MemoryError) as err:
        reason = f"{type(err).__name__}: {str(err).splitlines()[0][:160] if str(err) else ''}"
        failed.append((case.key, reason))
        row.update(time_s="", p10_s="", p90_s="", repeats=0, error=reason)
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    return row
