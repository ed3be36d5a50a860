"""Ranking fidelity: does llmp order configurations of one job the way the measurements do?

    python benchmarks/ranking.py [--record]

Choosing a configuration is the main use of a predictor, so beyond the error on each row this
asks whether the predicted *order* is right (DESIGN.md, validation protocol). Rows are published
measurements (validation/megatron_sc21.csv, validation/llm_foundry_mpt.csv: a TEST set, nothing
is fitted to them), mapped to specs by ``llmp.validate`` (the same mapping ``llmp validate``
uses) and predicted with the analytic model.

Groups (at least 3 measurements each):

* configuration groups: same source, model, GPU, precision and sequence length; the rows differ
  in GPU count, micro-batch, global batch or parallel layout (SC21 Table 2: ZeRO-3-style data
  parallelism against PTD parallelism at 384-2240 GPUs; llm-foundry: 8-512 GPUs, micro-batches);
* workload groups (reported apart): same model, GPU and precision, sequence length varying too.

The compared quantity is throughput per GPU (tokens/s/GPU), which is what one ranks
configurations of a job by; step times are not comparable across global batches or GPU counts.
Kendall's tau-b (scipy.stats.kendalltau) per group; overall, the pooled pair count:
(concordant - discordant) / (concordant + discordant) over all within-group pairs.

Appends a "Ranking fidelity (issue 7)" section to benchmarks/RESULTS.md (date, machine, command).
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

from scipy.stats import kendalltau

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from recording import commit, machine, record

from llmp.compose import predict
from llmp.validate import Mapped, group_measurements, map_measurement, read_csvs

FILES = ("validation/megatron_sc21.csv", "validation/llm_foundry_mpt.csv")
MIN_GROUP = 3


@dataclass(frozen=True, kw_only=True, slots=True)
class Point:
    """One measured configuration: its layout and per-GPU throughput, measured and predicted."""

    key: str
    layout: str
    seq_len: int
    measured: float
    predicted: float


@dataclass(frozen=True, kw_only=True, slots=True)
class Group:
    name: str
    points: tuple[Point, ...]

    @property
    def tau(self) -> tuple[float, float]:
        res = kendalltau([p.measured for p in self.points], [p.predicted for p in self.points])
        return float(res.statistic), float(res.pvalue)

    def pairs(self) -> tuple[int, int]:
        """(concordant, discordant) pairs; pairs tied in either ordering count as neither."""
        c = d = 0
        for a, b in combinations(self.points, 2):
            s = (a.measured - b.measured) * (a.predicted - b.predicted)
            c, d = c + (s > 0), d + (s < 0)
        return c, d


def _point(m: Mapped) -> Point:
    ctx = m.context
    tokens = ctx.global_batch * ctx.seq_len
    predicted_s = predict(m.spec).step_time_s
    p, t = m.spec.parallel, m.spec.train
    layout = (f"{ctx.num_gpus} GPUs tp{p.tp} pp{p.pp} dp{p.dp} mb{t.micro_batch} gb{t.global_batch} "
              f"zero {p.zero.value} recompute {t.recompute.value}")
    return Point(key=m.metric_row.key, layout=layout, seq_len=ctx.seq_len,
                 measured=tokens / (m.measured_s * ctx.num_gpus), predicted=tokens / (predicted_s * ctx.num_gpus))


def collect(files: Sequence[str]) -> tuple[list[Group], list[Group], int]:
    """Configuration groups, workload groups, and the number of measurements that could not be mapped."""
    by_config: dict[tuple[str, ...], list[Point]] = defaultdict(list)
    by_workload: dict[tuple[str, ...], list[Point]] = defaultdict(list)
    skipped = 0
    for m in group_measurements(read_csvs([str(ROOT / f) for f in files])):
        mapped = map_measurement(m)
        if not isinstance(mapped, Mapped):
            skipped += 1
            continue
        row = mapped.metric_row
        base = (row.text("source"), row.text("model_name"), row.text("gpu_id"), row.text("dtype"))
        point = _point(mapped)
        by_config[(*base, f"seq {point.seq_len}")].append(point)
        by_workload[base].append(point)

    def groups(table: dict[tuple[str, ...], list[Point]], varied_seq: bool) -> list[Group]:
        out = []
        for key, points in table.items():
            if len(points) < MIN_GROUP or (varied_seq and len({p.seq_len for p in points}) < 2):
                continue
            out.append(Group(name=" / ".join(key), points=tuple(points)))
        return out

    return groups(by_config, False), groups(by_workload, True), skipped


def pooled(groups: Sequence[Group]) -> tuple[float, int, int]:
    c = sum(g.pairs()[0] for g in groups)
    d = sum(g.pairs()[1] for g in groups)
    return ((c - d) / (c + d) if c + d else float("nan")), c, d


def _table(groups: Sequence[Group]) -> list[str]:
    lines = ["| group | n | Kendall tau-b | p-value | concordant | discordant | best measured | predicted rank of it |",
             "|---|---|---|---|---|---|---|---|"]
    for g in sorted(groups, key=lambda g: g.name):
        tau, pv = g.tau
        c, d = g.pairs()
        best = max(g.points, key=lambda p: p.measured)
        rank = 1 + sum(p.predicted > best.predicted for p in g.points)
        lines.append(f"| {g.name} | {len(g.points)} | {tau:+.2f} | {pv:.2g} | {c} | {d} | {best.layout} | {rank} |")
    tau, c, d = pooled(groups)
    taus = [g.tau[0] for g in groups]
    lines.append(f"| **all ({len(groups)} groups)** | {sum(len(g.points) for g in groups)} | pooled {tau:+.2f} "
                 f"(mean of groups {sum(taus) / len(taus):+.2f}) | | {c} | {d} | | |")
    return lines


def section(config: Sequence[Group], workload: Sequence[Group], skipped: int, command: str) -> str:
    lines = [f"## Ranking fidelity (issue 7) — {dt.date.today().isoformat()}", "",
             f"- command: `{command}`", f"- machine: {machine()}", f"- llmp commit: {commit()}",
             (f"- data: {', '.join(FILES)} (published, a TEST set: nothing fitted or tuned to them), mapped by "
             f"llmp.validate; {skipped} measurements could not be mapped"),
             "- predictions: analytic model (roofline and alpha-beta), no residual models",
             ("- compared: tokens/s per GPU, measured vs predicted; tau-b per group (scipy.stats.kendalltau), "
             "pooled = (concordant - discordant) / (concordant + discordant) over within-group pairs"), "",
             "### Configuration groups (same model, GPU, precision and sequence length)", "", *_table(config), "",
             "### Workload groups (sequence length varies as well)", "", *_table(workload), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", action="store_true", help="append the section to benchmarks/RESULTS.md")
    args = parser.parse_args(argv)
    config, workload, skipped = collect(FILES)
    text = section(config, workload, skipped, "python benchmarks/ranking.py")
    print(text)
    if args.record:
        record(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
