"""Flags several commands share. argparse ``type=`` functions for numeric flags: a bad value is a
usage error (exit 2) that names the flag, never a value silently accepted (``--minutes -1``
sampling nothing) or a traceback deep inside a command. Flag groups written once for every
command that takes them (``--quiet``; ``--residuals DIR | --no-residuals``), so they read alike."""

from __future__ import annotations

import argparse
import math


def _number(text: str, kind: type) -> float:
    try:
        return kind(text)
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"needs {what}, got {text!r}") from None


def positive_int(text: str) -> int:
    """A count of at least 1 (steps, threads, ranks, cases)."""
    value = int(_number(text, int))
    if value < 1:
        raise argparse.ArgumentTypeError(f"needs a positive whole number, got {value}")
    return value


def nonnegative_int(text: str) -> int:
    """A count that may be 0 (bootstrap members, warm-up steps)."""
    value = int(_number(text, int))
    if value < 0:
        raise argparse.ArgumentTypeError(f"needs a whole number of at least 0, got {value}")
    return value


def positive_float(text: str) -> float:
    """A finite number above 0 (minutes, scales, seconds)."""
    value = _number(text, float)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"needs a finite number above 0, got {text!r}")
    return value


def bounded_int(maximum: int):
    """A positive count of at most ``maximum`` (for fields with a plausibility limit)."""
    def check(text: str) -> int:
        value = positive_int(text)
        if value > maximum:
            raise argparse.ArgumentTypeError(f"{value} is beyond any real run (at most {maximum:.0e})")
        return value
    check.__name__ = "bounded_int"
    return check


def open_unit_interval(text: str) -> float:
    """A finite number strictly between 0 and 1 (a miscoverage, a fraction)."""
    value = _number(text, float)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"needs a number between 0 and 1 (exclusive), got {text!r}")
    return value


def add_quiet(parser: argparse.ArgumentParser) -> None:
    """``--quiet``: no progress bar (it is drawn on stderr only when that is a terminal anyway)."""
    parser.add_argument("--quiet", action="store_true", help="no progress bar on stderr")


def add_residuals(parser: argparse.ArgumentParser, *, store_help: str, bare_help: str) -> None:
    """``--residuals DIR`` (a store written by ``llmp fit``) or ``--no-residuals`` (the roofline
    composition alone), one excluding the other; each command says what they change for it.
    :func:`residuals_of` reads them."""
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--residuals", metavar="DIR", help=store_help)
    which.add_argument("--no-residuals", action="store_true", help=bare_help)


def residuals_of(args: argparse.Namespace, *, bare: str | None = "none") -> str | None:
    """The residual choice the flags of :func:`add_residuals` make: the store directory given,
    ``"default"`` (the shipped stores, as ``llmp predict`` picks them) without one, or ``bare``
    with ``--no-residuals`` (``"none"``, or what the command's function takes for the roofline alone)."""
    return bare if args.no_residuals else (args.residuals or "default")
