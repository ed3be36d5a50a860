"""``llmp import-hf config.json [-o OUT.llmp]``: a Hugging Face config → a .llmp model block.

Flags and output only; the mapping (which ``model_type`` values, which keys, what is noted) is
:mod:`llmp.dsl.hf`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from llmp import files
from llmp.commands.flags import bounded_int
from llmp.dsl.hf import import_hf
from llmp.errors import InputError
from llmp.spec.values import MAXIMA


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", metavar="CONFIG", help="a Hugging Face config.json")
    parser.add_argument("-o", "--output", metavar="OUT", help="write here instead of stdout")
    parser.add_argument("--name", help="model id in the .llmp file (default: from the config)")
    parser.add_argument("--seq-len", type=bounded_int(int(MAXIMA["model.seq_len"])), metavar="N",
                        help="training sequence length (default: the config's maximum context)")


def run(args: argparse.Namespace) -> int:
    if args.output:
        files.output_file(args.output, "the model block")
    text = import_hf(args.config, name=args.name, seq_len=args.seq_len)
    if args.output:
        try:
            Path(args.output).write_text(text, encoding="utf-8")
        except OSError as err:
            raise InputError(f"cannot write {args.output}: {err.strerror or err}") from None
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
