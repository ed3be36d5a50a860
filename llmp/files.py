"""Files a user names: read a bounded amount of text, and check a path before any work starts.

Every command reads what a user gives it through :func:`read_text`, so ``llmp predict /dev/zero``
is refused at once instead of reading until memory runs out, a binary file is called "not text"
instead of failing deep inside a parser, and a directory or a missing file is named with the fix.
Every path a command will write is checked by :func:`output_file` or :func:`output_dir` before it
computes anything, so a minute of fitting or measuring is never thrown away on a typo in ``-o``.

On the floor of the package: imports nothing of llmp but :mod:`llmp.errors`.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from llmp.errors import InputError

MiB = 1 << 20


@dataclass(frozen=True, slots=True)
class Limit:
    """How much of one kind of file llmp reads, and why that is enough."""

    what: str
    """The kind of file, for messages ("a .llmp spec")."""
    bytes: int
    why: str
    """The largest real file of the kind, so the bound is visibly far above it."""


SPEC = Limit("a .llmp spec", 1 * MiB, "the largest shipped spec or catalog file is 15 KB")
JSON = Limit("a JSON file", 16 * MiB, "Hugging Face config.json files are a few KB; calibration files and "
             "store manifests under 1 MB")
CSV = Limit("a measurements CSV", 64 * MiB, "the largest published-runs file in validation/ is 1.1 MB")
SAMPLES = Limit("a sample file", 256 * MiB, "the largest public operator table imported (kernels.csv) is 12 MB")


def _describe_kind(mode: int) -> str | None:
    """What a non-regular file is, or None for a regular one."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return None


def input_file(path: str | os.PathLike[str], limit: Limit) -> Path:
    """``path`` if it names a readable regular file (or a pipe); :class:`InputError` saying why not."""
    p = Path(path)
    try:
        mode = p.stat().st_mode
    except FileNotFoundError:
        raise InputError(f"no such file: {p}", hint=f"give the path of {limit.what}") from None
    except (OSError, ValueError) as err:  # a name too long, a NUL in it, no permission on a folder
        raise InputError(f"cannot read {p}: {getattr(err, 'strerror', None) or err}") from None
    kind = _describe_kind(mode)
    if kind == "a directory":
        raise InputError(f"{p} is a directory, not {limit.what}", hint=f"give the path of {limit.what}")
    if kind is not None:
        raise InputError(f"{p} is {kind}, not {limit.what}", hint=f"give the path of {limit.what}")
    return p


def read_bytes(path: str | os.PathLike[str], limit: Limit) -> bytes:
    """At most ``limit.bytes`` of ``path``; a larger file is refused after reading one byte past it."""
    p = input_file(path, limit)
    try:
        with p.open("rb") as f:
            data = f.read(limit.bytes + 1)
    except OSError as err:
        raise InputError(f"cannot read {p}: {err.strerror or err}") from None
    if len(data) > limit.bytes:
        raise InputError(f"{p} is larger than {limit.bytes // MiB} MiB, far more than {limit.what} holds "
                         f"({limit.why})", hint=f"check that {p} is {limit.what}")
    return data


def decode(data: bytes, name: str, limit: Limit) -> str:
    """UTF-8 text (a byte-order mark dropped); :class:`InputError` for binary or other encodings."""
    if b"\0" in data:
        raise InputError(f"{name} is binary, not {limit.what} (it holds NUL bytes at offset {data.index(0)})",
                         hint=f"give {limit.what}, a text file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(f"{name} is not UTF-8 text (bad byte at offset {err.start})",
                         hint="save it as UTF-8") from None
    return text.removeprefix("\ufeff")


def read_text(path: str | os.PathLike[str], limit: Limit) -> str:
    """The UTF-8 text of ``path``, read up to ``limit``: see :func:`read_bytes` and :func:`decode`."""
    return decode(read_bytes(path, limit), str(path), limit)


def parse_json(text: str, name: str, *, constants: bool = True) -> object:
    """The JSON value in ``text``; :class:`InputError` for invalid or absurdly nested JSON.

    ``constants=False`` refuses ``NaN`` and ``Infinity``, which JSON itself does not allow.
    """
    if not text.strip():
        raise InputError(f"{name} is empty", hint="a JSON file holds one object: {...}")

    def refuse(token: str) -> float:
        raise ValueError(f"{token} is not a JSON number")

    try:
        return json.loads(text) if constants else json.loads(text, parse_constant=refuse)
    except json.JSONDecodeError as err:
        raise InputError(f"{name} is not valid JSON: {err.msg} at line {err.lineno} column {err.colno}") from None
    except ValueError as err:
        raise InputError(f"{name} is not valid JSON: {err}") from None
    except RecursionError:  # the decoder recurses once per nesting level
        raise InputError(f"{name} is not a file llmp reads: JSON nested hundreds of levels deep",
                         hint="configs, manifests and calibration files nest a few levels") from None


def _probe(p: Path) -> tuple[bool, bool, bool]:
    """(exists, is a directory, parent is a directory) of ``p``; :class:`InputError` for a name no
    file system accepts (too long, a NUL byte)."""
    try:
        return p.exists(), p.is_dir(), p.parent.is_dir()
    except (OSError, ValueError) as err:
        raise InputError(f"cannot write {p}: {getattr(err, 'strerror', None) or err}") from None


def output_file(path: str | os.PathLike[str], what: str = "the output") -> Path:
    """``path`` if a file can be written there: its folder exists and it is not a folder itself."""
    p = Path(path)
    exists, is_dir, parent_ok = _probe(p)
    if is_dir:
        raise InputError(f"{p} is a directory; {what} is a file", hint=f"give a file name, e.g. {p / 'out'}")
    if not parent_ok:
        raise InputError(f"cannot write {p}: no directory {p.parent}",
                         hint=f"create it first (mkdir -p {p.parent}) or write elsewhere")
    if not os.access(p.parent, os.W_OK) or (exists and not os.access(p, os.W_OK)):
        raise InputError(f"cannot write {p}: permission denied")
    return p


def output_dir(path: str | os.PathLike[str], what: str = "the output") -> Path:
    """``path`` if a directory can be written there: absent (and its parent exists) or a directory."""
    p = Path(path)
    exists, is_dir, parent_ok = _probe(p)
    if exists and not is_dir:
        raise InputError(f"{p} exists and is a file; {what} is a directory", hint="give a new or existing directory")
    if not exists and not parent_ok:
        raise InputError(f"cannot create {p}: no directory {p.parent}",
                         hint=f"create it first (mkdir -p {p.parent}) or write elsewhere")
    if not os.access(p if exists else p.parent, os.W_OK):
        raise InputError(f"cannot write {p}: permission denied")
    return p
