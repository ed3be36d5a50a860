"""The scaling-law properties run thoroughly: N runs of 1,000 random examples each, one seed per run.

    python benchmarks/properties.py [--runs 20] [--seed0 1] [--test NAME ...] [--record]

A property test that passes its 40 examples in the everyday suite can still fail on the one
example in a few thousand that breaks it (the hardware-monotonicity property did, until each
compute second could hide at most one collective). This runs the chosen properties of
``tests/property/analytic/test_scaling.py`` under the ``thorough`` Hypothesis profile (``tests/conftest.py``:
1,000 examples per property) once per seed, ``--hypothesis-seed`` = seed0, seed0 + 1, ..., and
reports per run whether every property passed, how many examples Hypothesis ran (passing, failing
and invalid, from ``--hypothesis-show-statistics``) and how long it took; a failing run prints the
falsifying example. Each run is a fresh ``pytest`` process, as a user would run it.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from recording import commit, machine, record

FILE = "tests/property/analytic/test_scaling.py"
DEFAULT_TESTS = ("test_step_time_never_rises_when_hardware_gets_faster",)
"""The property the issue names: step time never rises when any hardware rate gets faster."""


@dataclass(frozen=True)
class Run:
    seed: int
    passed: bool
    examples: dict[str, tuple[int, int, int]]
    """Per test: (passing, failing, invalid) examples of the generate phase."""
    seconds: float
    failure: str


def _examples(output: str) -> dict[str, tuple[int, int, int]]:
    """Per test, the generate phase's example counts from Hypothesis's statistics."""
    out: dict[str, tuple[int, int, int]] = {}
    for block in re.split(r"\n(?=\S+::\S+:\s*\n)", output):
        head = re.match(r"\S+::(\S+):\s*\n", block)
        phase = re.search(r"during generate phase.*?(\d+) passing examples?, (\d+) failing examples?, "
                          r"(\d+) invalid examples?", block, re.DOTALL)
        if head and phase:
            out[head.group(1)] = (int(phase.group(1)), int(phase.group(2)), int(phase.group(3)))
    return out


def run_once(seed: int, tests: tuple[str, ...]) -> tuple[Run, list[str]]:
    argv = [sys.executable, "-m", "pytest", FILE, "-p", "no:cacheprovider", "-q", "-k", " or ".join(tests),
            f"--hypothesis-seed={seed}", "--hypothesis-show-statistics"]
    env = {**os.environ, "LLMP_HYPOTHESIS_PROFILE": "thorough", "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    output = done.stdout + done.stderr
    failure = ""
    if done.returncode != 0:
        found = re.search(r"Falsifying example:.*?(?=\n\n|\Z)", output, re.DOTALL)
        failure = found.group(0) if found else output[-2000:]
    return Run(seed=seed, passed=done.returncode == 0, examples=_examples(output), seconds=seconds,
               failure=failure), argv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="how many seeds (runs) to try")
    parser.add_argument("--seed0", type=int, default=1, help="the first run's --hypothesis-seed")
    parser.add_argument("--test", action="append", default=[], metavar="NAME",
                        help=f"a property of {FILE} to run (repeatable; default: {', '.join(DEFAULT_TESTS)})")
    parser.add_argument("--record", action="store_true", help="append the section to benchmarks/RESULTS.md")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    tests = tuple(args.test) or DEFAULT_TESTS
    started = datetime.datetime.now(datetime.UTC)
    host = machine()
    runs: list[Run] = []
    argv: list[str] = []
    for i in range(args.runs):
        run, argv = run_once(args.seed0 + i, tests)
        runs.append(run)
        counts = "; ".join(f"{t}: {p} passing, {f} failing, {v} invalid" for t, (p, f, v) in run.examples.items())
        print(f"seed {run.seed}: {'pass' if run.passed else 'FAIL'} in {run.seconds:.0f} s ({counts})", flush=True)
        if run.failure:
            print(run.failure, flush=True)
    lines = [f"## Scaling properties, thorough profile ({started:%Y-%m-%d %H:%M} UTC)", "",
             f"Machine: {host}. Commit {commit()}.",
             f"Command: `LLMP_HYPOTHESIS_PROFILE=thorough {shlex.join(['python', '-m', 'pytest', *argv[3:]])}` "
             f"per run (seed varied), driven by `python benchmarks/properties.py --runs {args.runs} "
             f"--seed0 {args.seed0}`.", "",
             "| run | --hypothesis-seed | result | examples (passing / failing / invalid) | seconds |",
             "|---|---|---|---|---|"]
    for i, r in enumerate(runs, 1):
        counts = "; ".join(f"{t}: {p} / {f} / {v}" if len(tests) > 1 else f"{p} / {f} / {v}"
                           for t, (p, f, v) in r.examples.items()) or "not reported"
        lines.append(f"| {i} | {r.seed} | {'pass' if r.passed else 'FAIL'} | {counts} | {r.seconds:.0f} |")
    passed = sum(r.passed for r in runs)
    total = sum(p for r in runs for p, _, _ in r.examples.values())
    lines += ["", f"{passed} of {len(runs)} runs passed; {total} passing examples in all; "
              f"{sum(r.seconds for r in runs) / 60:.1f} min.", ""]
    for r in runs:
        if r.failure:
            lines += [f"Seed {r.seed} failed:", "", "```", r.failure, "```", ""]
    text = "\n".join(lines)
    print(text)
    if args.record:
        record(text)


if __name__ == "__main__":
    main()
