"""The plan's own inputs: a token count (``15T``, ``300B``, ``1.5e12``) and a duration (``30d``).

These are not spec quantities (the DSL has no token counts and no days), so they are parsed here,
once, for the library and the CLI alike; a number is taken as it is.
"""

from __future__ import annotations

import math
import re

from llmp.errors import InputError, LlmpError
from llmp.units import BANDWIDTH, format_time, parse_quantity

TOKEN_SUFFIX = {"": 1.0, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12, "P": 1e15}
"""Decimal multipliers for token counts; ``B`` (billion) is how token budgets are written
(Llama 3: "15T tokens"; Chinchilla: "1.4T"), ``G`` the SI spelling of the same."""

DURATION_UNIT = {"s": 1.0, "min": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}
"""Seconds, minutes, hours, days and weeks (``m`` is refused: minutes or months?)."""

_NUMBER = r"(?P<number>[0-9][0-9_]*(\.[0-9_]*)?([eE][+-]?[0-9]+)?|\.[0-9]+([eE][+-]?[0-9]+)?)"
_TOKENS = re.compile(_NUMBER + r"\s*(?P<suffix>[A-Za-z]*)")
_DURATION = re.compile(_NUMBER + r"\s*(?P<unit>[A-Za-z]*)")


MAX_TOKENS = 1e15
"""Most tokens a plan takes: 28x the largest corpus trained on (Qwen3, 36 T tokens; Llama 3 15.6 T)."""


def parse_tokens(value: str | float) -> float:
    """Tokens to train: a positive number, or text such as ``15T``, ``300B``, ``1.5e12``, ``2_000M``."""
    if isinstance(value, str):
        match = _TOKENS.fullmatch(value.strip())
        suffix = match["suffix"].upper() if match else ""
        if match is None or suffix not in TOKEN_SUFFIX or match["suffix"] in ("b", "t", "p"):
            raise InputError(f"cannot read a token count from {value!r}",
                             hint="write a number with an optional K, M, B (or G), T or P suffix, e.g. 15T, "
                                  "300B or 1.5e12")
        number = float(match["number"].replace("_", "")) * TOKEN_SUFFIX[suffix]
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    else:
        raise InputError(f"tokens must be a number or text like '15T', got {type(value).__name__}")
    if not math.isfinite(number) or number <= 0:
        raise InputError(f"the token count must be positive, got {value!r}", hint="e.g. --tokens 15T")
    if number != int(number):
        raise InputError(f"the token count must be whole, got {value!r}", hint="e.g. --tokens 15T")
    if number > MAX_TOKENS:
        raise InputError(f"{value!r} tokens is beyond any training run (at most 1e15, 1 P)",
                         hint="check the suffix: K, M, B (or G), T, P; e.g. --tokens 15T")
    return number


YEAR = 365.0 * 86400.0
MAX_DURATION = 10 * YEAR
"""Longest duration a plan takes: a decade, 30x the longest published pre-training runs (Llama 3
405B: 54 days; OPT-175B: about two months)."""
MIN_DURATION = 1.0
"""Shortest positive duration: a second (a deadline, an MTTF or a checkpoint interval below it is a
slip in the unit)."""


def parse_duration(value: str | float, *, allow_zero: bool = False, least: float = MIN_DURATION,
                   most: float = MAX_DURATION) -> float:
    """A duration in seconds: a positive number of seconds, or text ``<number><s|min|h|d|w>``
    (``30d``, ``36h``, ``2.5w``, ``10min``); ``allow_zero`` admits 0 (a restart that costs nothing
    beyond reading the checkpoint)."""
    if isinstance(value, str):
        match = _DURATION.fullmatch(value.strip())
        if match is None or match["unit"] not in DURATION_UNIT:
            raise InputError(f"cannot read a duration from {value!r}",
                             hint="write a number followed by s, min, h, d or w, e.g. 30d, 36h, 2w or 10min")
        seconds = float(match["number"].replace("_", "")) * DURATION_UNIT[match["unit"]]
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise InputError(f"a deadline must be seconds or text like '30d', got {type(value).__name__}")
    if not math.isfinite(seconds) or seconds < 0 or (seconds == 0 and not allow_zero):
        raise InputError(f"a duration must be {'zero or more' if allow_zero else 'positive'}, got {value!r}",
                         hint="e.g. --deadline 30d, --restart 10min")
    if 0 < seconds < least or seconds > most:
        raise InputError(f"a duration of {value!r} is outside {format_time(least)} to {format_time(most)}",
                         hint="check the unit: s, min, h, d or w, e.g. --deadline 30d, --restart 10min")
    return seconds


def parse_mttf(value: str, gpus: int | None) -> tuple[float, int]:
    """``--mttf D[@N]``: a job's mean time to failure D measured on N GPUs (seconds, GPUs). Without
    ``@N`` it is the MTTF on ``gpus``, the plan's own count (a deadline plan has none: it needs N)."""
    text, at, count = str(value).partition("@")
    if at:
        try:
            n = int(count.strip().replace("_", ""))
        except ValueError:
            n = 0
        if n < 1:
            raise InputError(f"cannot read a GPU count after '@' in --mttf {value!r}",
                             hint="e.g. --mttf 3h@16384 (an MTTF of 3 hours measured on 16,384 GPUs)")
    elif gpus is None:
        raise InputError(f"--mttf {value!r} needs the GPU count it was measured on when the plan searches GPU counts",
                         hint="e.g. --mttf 3h@16384 (scaled as 1 / GPUs to every count)")
    else:
        n = gpus
    if n > MAX_GPUS:
        raise InputError(f"--mttf {value!r}: {n} GPUs is beyond any real cluster (at most {MAX_GPUS:,})")
    return parse_duration(text, least=60.0, most=100 * YEAR), n  # Llama 3: 3 h on 16k GPUs


def parse_bandwidth(value: str | float) -> float:
    """A storage bandwidth in bytes/s: a number, or text with a unit (``2TB/s``, ``400 GB/s``)."""
    if isinstance(value, str):
        try:
            q = parse_quantity(value)
        except LlmpError:
            q = None
        if q is None or q.dim != BANDWIDTH:
            raise InputError(f"cannot read a bandwidth from {value!r}", hint="e.g. --storage-bandwidth 2TB/s")
        number = float(q.value)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    else:
        raise InputError(f"a bandwidth must be bytes/s or text like '2TB/s', got {type(value).__name__}")
    if not math.isfinite(number) or number <= 0:
        raise InputError(f"the storage bandwidth must be positive, got {value!r}", hint="e.g. 2TB/s")
    if not 1e6 <= number <= 1e15:
        raise InputError(f"a storage bandwidth of {value!r} is outside 1 MB/s to 1 PB/s (Llama 3's Tectonic "
                         "sustained 2 TB/s)", hint="check the unit, e.g. --storage-bandwidth 2TB/s")
    return number


MAX_GPUS = 10**7
"""Most GPUs a plan or an MTTF names: 50x the largest clusters reported (~2e5 GPUs)."""

MAX_PRICE = 1e6
"""Highest price per GPU-hour: a GPU-hour costs 2 to 12 US dollars in the cloud, and 1e6 leaves room
for a currency of many units per dollar."""


def check_price(price: float | None) -> None:
    """A price per GPU-hour that is positive and below :data:`MAX_PRICE`."""
    if price is not None and not (math.isfinite(price) and 0 < price <= MAX_PRICE):
        raise InputError(f"the price per GPU-hour must be above 0 and at most {MAX_PRICE:,.0f}, got {price!r}",
                         hint="e.g. --price-per-gpu-hour 2")
