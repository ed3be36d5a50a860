"""What every benchmark records with its figures: the machine, the commit, and the section it
appends to benchmarks/RESULTS.md (other sections are left as they are) when run with ``--record``;
without it a benchmark only prints, so a checkout's tracked files change only when asked."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "RESULTS.md"


def data_folder(path: Path, needs: str = "") -> Path:
    """``path`` (the public data folder, ``../shared/data`` beside the checkout) when it holds
    ``needs``; else exit with a message saying what is missing and where to get it, not a traceback."""
    if not (path / needs).is_dir():
        raise SystemExit(f"error: no data folder at {path / needs}\n  hint: these benchmarks read the public "
                         "measurements from ../shared/data beside the checkout (each source's README there "
                         "names its public repository); pass --data DIR where the command takes it")
    return path


def machine() -> str:
    """CPU model, CPU count, Python and OS of this machine."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = f", load average {os.getloadavg()[0]:.1f} at start (other jobs share the machine)" \
        if hasattr(os, "getloadavg") else ""
    return f"{cpu}, {os.cpu_count()} CPUs, Python {platform.python_version()}, {platform.system()}{load}"


def commit() -> str:
    """Short git commit of the working tree, with ``+uncommitted`` when it has changes."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True,
                               check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+uncommitted" if dirty else "")


def record(text: str) -> None:
    """Append a section to RESULTS.md (other sections are left as they are); scripts call it only
    under ``--record``."""
    new = not RESULTS.exists()
    with RESULTS.open("a", encoding="utf-8") as f:
        f.write(("# Benchmark results\n\n" if new else "\n") + text)
    print(f"appended to {RESULTS}")
