"""The ``llmp`` command line: parse flags, call the API, render. Nothing else lives here.

Each subcommand is a module in ``llmp.commands`` with ``add_parser(subparsers)`` and
``run(args) -> int``; modules are imported only when their command runs, so ``llmp check``
never pays for torch or xgboost. Exit codes: 0 ok, 1 user or spec error (message on stderr,
no traceback), 2 usage.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from llmp.errors import InputError, LlmpError

DESCRIPTION = ("Predict the time of one LLM training step on a cluster, say where the time goes, and answer "
               "what-if questions. 'llmp COMMAND --help' describes a command.")
"""What ``llmp --help`` says to a user (the module docstring above is for developers)."""

# (command, module in llmp.commands, one-line help)
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("check", "check", "parse and resolve a spec; print it with derived quantities"),
    ("predict", "predict", "predict one training step: time, breakdown, memory, band"),
    ("ops", "ops", "list the operators of a spec with FLOPs, bytes and times"),
    ("sensitivity", "sensitivity", "symbolic derivatives and elasticities of step time"),
    ("search", "search", "sweep and rank configurations"),
    ("plan", "plan", "how long and how much a whole training run costs, or how many GPUs meet a deadline"),
    ("serve", "serve", "the library behind a local web page: editor, prediction, what-if, search, plan, export"),
    ("validate", "validate", "score predictions against measured runs (CSV)"),
    ("calibrate", "calibrate", "fit a stack's factors on a few of your own measured steps"),
    ("sample", "sample", "micro-benchmark operators on this machine's device"),
    ("fit", "fit", "fit residual models from sample files, or adapt a store to a new device"),
    ("score", "score", "score a residual store on measured samples, per family, operator and pass"),
    ("split", "split", "split sample files into train and held-out halves by shape"),
    ("measure", "measure", "time real training steps of a spec's model with torch"),
    ("import-hf", "import_hf", "write a .llmp model section from a Hugging Face config.json"),
    ("import-samples", "import_samples", "turn public GPU operator/NCCL measurements into sample files"),
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="llmp", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, _module, help_text in COMMANDS:
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    names = {name: module for name, module, _ in COMMANDS}
    if not argv or argv[0] not in names:
        _parser().parse_args(argv)  # prints usage (exit 2) or the top-level help (exit 0)
        return 2
    module = importlib.import_module(f"llmp.commands.{names[argv[0]]}")
    parser = argparse.ArgumentParser(prog=f"llmp {argv[0]}",
                                     description=next(h for n, _, h in COMMANDS if n == argv[0]))
    module.add_parser(parser)
    args = parser.parse_args(argv[1:])
    try:
        return int(module.run(args) or 0)
    except LlmpError as err:
        spec = getattr(args, "spec", None)
        if err.span is None and err.file is None and isinstance(spec, str) and not isinstance(err, InputError):
            err.file = spec  # an error about the spec without a place in it still names the file
        print(err.render(), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
