"""What an ``interconnect_inter`` cell of a published row says about the network between nodes.

A network cell is read as a list of *clauses* (split at role labels such as ``Compute:`` or
``Storage+Management:`` and at ``,`` ``;`` ``+``), each clause a small sentence of quantities and
roles: a count of NICs (``8x``, ``4 NICs``, ``(4 OPA links per node)``), a rate per NIC (``400Gb/s``,
``200 Gb / Sec``, ``100GbE``, ``NDR400``, ``3.2 Tbps``; bytes per second ``GB/s`` are x8), a scope
(per GPU, per node, per NIC), a fabric (InfiniBand and its generations, RoCE, Slingshot, ...) and a
role (compute, storage, management, the scale-up NVLink fabric, the PCIe host bus). The compute
fabric is what is left once storage, management, front-end Ethernet beside an RDMA fabric, NVLink
and PCIe clauses are set aside; its per-node rate is count x rate per NIC, whatever the order.

It is the one cell whose reading is a small parser of its own (clauses, roles, rates, scopes), so it
lives apart from the one-word meanings of :mod:`llmp.validate.cells`, whose :class:`CellError` it
raises the same way: a cell naming two compute fabrics, or contradicting itself, is not guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from llmp.validate.cells import CellError


class Fabric(StrEnum):
    """Scale-out network technologies a cell may name."""

    INFINIBAND = "InfiniBand"
    ROCE = "RoCE"
    SLINGSHOT = "Slingshot"
    OMNI_PATH = "Omni-Path"
    EFA = "EFA"
    SPECTRUM_X = "Spectrum-X"
    ETHERNET = "Ethernet"
    """Plain Ethernet (no RDMA named): front-end networking when an RDMA fabric is named beside it."""


class Role(StrEnum):
    """What a clause of a network cell describes."""

    COMPUTE = "compute"
    STORAGE = "storage"
    MANAGEMENT = "management"
    FRONT_END = "front-end Ethernet"
    SCALE_UP = "scale-up fabric (NVLink / xGMI), not the inter-node network"
    HOST_BUS = "host bus (PCIe), not a network"


_FABRICS: tuple[tuple[str, Fabric], ...] = (
    (r"\broce(?:v?2)?\b|\brocev2\b", Fabric.ROCE),
    (r"slingshot", Fabric.SLINGSHOT),
    (r"omni-?path|\bopa\b", Fabric.OMNI_PATH),
    (r"\befa\b|elastic fabric adapter", Fabric.EFA),
    (r"spectrum-?x", Fabric.SPECTRUM_X),
    (r"infini-?band|\bib\b|\b(?:[ehnx]dr|fdr|qdr)(?:\d+)?\b|quantum-?(?:2|x800)", Fabric.INFINIBAND),
    (r"ethernet|\d\s*gbe\b|\bgbe\b|gige|gigabit|gbase", Fabric.ETHERNET),
)
"""Fabric words, most specific first (a VPI card named ``InfiniBand NDR/Ethernet`` is InfiniBand)."""

GENERATION_GBPS: dict[str, float] = {"qdr": 40, "fdr": 56, "edr": 100, "hdr100": 100, "hdr": 200, "ndr200": 200,
                                     "ndr": 400, "xdr": 800}
"""InfiniBand generations → data rate of one 4x port, Gb/s (InfiniBand Trade Association roadmap: QDR 40,
FDR 56, EDR 100, HDR 200, NDR 400, XDR 800; HDR100 and NDR200 are the split-port variants)."""

IMPLIED_GBPS: dict[Fabric, tuple[float, str]] = {
    Fabric.SLINGSHOT: (200, "an HPE Slingshot 11 NIC runs at 200 Gb/s (NERSC Perlmutter, CSCS Alps: "
                            "data/hardware/hardware_systems.csv)"),
    Fabric.OMNI_PATH: (100, "Intel Omni-Path Architecture 100 Series: 100 Gb/s per port"),
}
"""Fabrics with one line rate, for a cell that counts NICs without a rate (``4 OPA links``)."""

_SCALE_UP = r"nvlink|nvswitch|nvl\d+|xgmi|infinity fabric|c2c"
_HOST_BUS = r"pci-?e|\bpci\b"
_RDMA = r"\brdma\b|\bback-?end\b|\bcompute\b|\bhca\b"
_LABEL = re.compile(r"(?i)\b((?:storage|management|mgmt|compute|front-?end|back-?end|in-?band|out-of-band)"
                    r"(?:\s*(?:\+|/|&|and)\s*(?:storage|management|mgmt|compute))*)\s*:")
_RATE = re.compile(r"(?<![A-Za-z0-9.])(?:(?P<mult>\d+)\s*[xX×]\s*)?(?P<num>\d+(?:\.\d+)?)\s*(?P<prefix>[TtGgMm])"
                   r"(?P<unit>bits?\s*/\s*s(?:ec)?|bps|b\s*/\s*sec(?:ond)?|b\s*/\s*s\b|B\s*/\s*s(?:ec)?|Bps|"
                   r"bit\b|b[Ee]\b|BE\b|base|b\b|(?=[\s,;)/]|$))")
_COUNT = re.compile(r"(?i)(?<![\w.-])(\d+)\s*[x×]\s*(?=[a-z(])|"
                    r"(?<![\w.-])(\d+)\s+(?:[a-z0-9-]+\s+){0,3}?(?:nics?|hcas?|links?|ports?|rails?|adapters?|cards?)\b")
_PER_GPU = r"per[- ]gpu|/\s*gpu\b|each gpu|gpu each|per accelerator|per device"
_PER_NODE = r"per[- ](?:node|server|host|system)|/\s*node\b|node[- ](?:to[- ])?node|injection|aggregate|total"


@dataclass(frozen=True, kw_only=True, slots=True)
class Clause:
    """One clause of a network cell, read."""

    text: str
    role: Role
    fabric: Fabric | None = None
    count: int | None = None
    """NICs (links) the clause counts in a node."""
    link_gbps: float | None = None
    """Rate of one NIC, Gb/s per direction (stated, or implied by the fabric's generation)."""
    node_gbps: float | None = None
    """The clause's bandwidth per node, when its scope is known."""
    why: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class NetworkCell:
    """The meaning of an ``interconnect_inter`` cell: the compute fabric between nodes."""

    fabric: Fabric | None = None
    generation: str | None = None
    """InfiniBand generation named (``ndr``, ``hdr``, ...)."""
    links: int | None = None
    link_gbps: float | None = None
    node_gbps: float | None = None
    """Bandwidth per node per direction, Gb/s (None: not stated, or its scope not stated)."""
    set_aside: tuple[str, ...] = ()
    """Clauses that are not the compute fabric, each with the role it was read as."""
    because: str = ""


def _split(cell: str) -> list[tuple[Role | None, str]]:
    """Clauses with the role their label gives (None: no label)."""
    pieces: list[tuple[Role | None, str]] = []
    marks = list(_LABEL.finditer(cell))
    starts = [(0, None)] + [(m.end(), _label_role(m.group(1))) for m in marks]
    ends = [m.start() for m in marks] + [len(cell)]
    for (start, role), end in zip(starts, ends):
        for clause in _top_level_split(cell[start:end]):
            if clause.strip(" .-"):
                pieces.append((role, clause.strip()))
    return pieces


def _label_role(label: str) -> Role:
    low = label.lower()
    if "compute" in low or "back" in low:
        return Role.COMPUTE
    if "storage" in low:
        return Role.STORAGE
    if "front" in low:
        return Role.FRONT_END
    return Role.MANAGEMENT


def _top_level_split(text: str) -> list[str]:
    """Split at ``,`` ``;`` and `` + `` outside parentheses."""
    out, depth, start = [], 0, 0
    for m in re.finditer(r"[(),;]|\s\+\s", text):
        depth += (m.group() == "(") - (m.group() == ")")
        if depth == 0 and m.group() not in "()":
            out.append(text[start:m.start()])
            start = m.end()
    return [*out, text[start:]]


def _fabric(low: str) -> tuple[Fabric | None, str | None]:
    generation = re.search(r"\b(hdr100|ndr200|[ehnx]dr|fdr|qdr)(\d*)\b", low)
    for pattern, fabric in _FABRICS:
        if re.search(pattern, low):
            return fabric, generation.group(1) if generation else None
    return None, None


def _rates(text: str, generation: str | None, low: str) -> list[tuple[float, int | None, str]]:
    """Every rate of one NIC a clause states: ``(Gb/s, count attached as '8x400', the words)``."""
    out = []
    for m in _RATE.finditer(text):
        unit = m.group("unit")
        scale = {"t": 1000.0, "g": 1.0, "m": 1e-3}[m.group("prefix").lower()]
        is_bytes = unit.startswith("B") and ("/" in unit or unit.endswith("ps"))
        if unit == "" and m.group("prefix") in "Tt":
            continue  # "3.2 T" with no unit is not read as a rate
        if unit.startswith("B") and not is_bytes and not unit.upper().startswith("BE"):
            continue  # "80GB": a capacity, not a rate
        gbps = float(m.group("num")) * scale * (8 if is_bytes else 1)
        mult = int(m.group("mult")) if m.group("mult") else None
        out.append((gbps, mult, m.group(0).strip()))
    named = re.search(r"\b(?:hdr100|ndr200|[ehnx]dr|fdr|qdr)(\d+)\b", low)
    if named:
        out.append((float(named.group(1)), None, named.group(0)))
    if not out and generation is not None:
        out.append((GENERATION_GBPS[generation], None, f"{generation.upper()} (implied)"))
    return out


def _clause(role: Role | None, text: str, gpus_per_node: int) -> Clause:
    low = text.lower()
    fabric, generation = _fabric(low)
    if role is None and fabric is None and re.search(_SCALE_UP, low):
        return Clause(text=text, role=Role.SCALE_UP)
    if role is None and re.search(_SCALE_UP, low) and fabric is Fabric.ETHERNET:
        fabric = None
    if fabric is None and re.search(_SCALE_UP, low):
        return Clause(text=text, role=Role.SCALE_UP)
    if fabric is None and re.search(_HOST_BUS, low) and not re.search(_RDMA, low):
        return Clause(text=text, role=Role.HOST_BUS)
    rates = _rates(text, generation, low)
    counts = {int(m.group(1) or m.group(2)) for m in _COUNT.finditer(text)}
    if role is None:
        role = Role.FRONT_END if fabric is Fabric.ETHERNET and not re.search(_RDMA, low) else Role.COMPUTE
    if len(counts) > 1:
        raise CellError(f"clause {text!r} counts {' and '.join(map(str, sorted(counts)))} NICs")
    count = counts.pop() if counts else None
    per_card = {r * (m if (m and count is not None) else 1) for r, m, _ in rates}
    if count is None:
        attached = {m for _, m, _ in rates if m}
        count = attached.pop() if len(attached) == 1 else None
    if not rates and fabric in IMPLIED_GBPS and count is not None:
        per_card = {IMPLIED_GBPS[fabric][0]}
    if len(per_card) > 1:
        raise CellError(f"clause {text!r} gives {len(per_card)} different rates per NIC "
                        f"({', '.join(f'{r:g}' for r in sorted(per_card))} Gb/s)")
    link = per_card.pop() if per_card else None
    if link is None:
        return Clause(text=text, role=role, fabric=fabric, count=count,
                      why="no bandwidth stated" + (f" ({count} NICs)" if count else ""))
    if re.search(_PER_GPU, low):
        return Clause(text=text, role=role, fabric=fabric, count=gpus_per_node, link_gbps=link,
                      node_gbps=link * gpus_per_node, why=f"{link:g} Gb/s per GPU x {gpus_per_node} GPUs")
    if count is not None:
        return Clause(text=text, role=role, fabric=fabric, count=count, link_gbps=link, node_gbps=count * link,
                      why=f"{count} x {link:g} Gb/s")
    if re.search(_PER_NODE, low):
        return Clause(text=text, role=role, fabric=fabric, link_gbps=link, node_gbps=link,
                      why=f"{link:g} Gb/s per node")
    return Clause(text=text, role=role, fabric=fabric, link_gbps=link,
                  why=f"{link:g} Gb/s, bandwidth scope (per GPU, per node or per NIC) not stated")


def _merged(clauses: list[tuple[Role | None, str]]) -> list[tuple[Role | None, str]]:
    """A clause that only names a fabric or a role (``InfiniBand``, ``RoCE v2``) and the next clause
    that only states quantities (``400 Gbps per GPU``) are one statement."""
    out: list[tuple[Role | None, str]] = []
    for role, text in clauses:
        bare = _fabric(text.lower())[0] is None and not re.search(_SCALE_UP + "|" + _HOST_BUS, text.lower())
        if out and bare and role is None and out[-1][0] is None and re.search(_SCALE_UP, out[-1][1].lower()) \
                and _fabric(out[-1][1].lower())[0] is None:
            out[-1] = (role, f"{out[-1][1]}, {text}")  # "18x NVLink, 14.4 TB/s aggregated": the same fabric
        elif out and bare and role == out[-1][0] and re.search(r"\d", text) and (
                not re.search(r"\d", out[-1][1])
                or (not _RATE.search(out[-1][1]) and _RATE.search(text) and not _COUNT.search(text))):
            out[-1] = (role, f"{out[-1][1]}, {text}")
        else:
            out.append((role, text))
    return out


def network(cell: str, gpus_per_node: int) -> NetworkCell:
    """The compute fabric an ``interconnect_inter`` cell states; raises :class:`CellError` (quoting the
    cell) when it names two compute fabrics with nothing to tell them apart, or contradicts itself."""
    if not cell.strip():
        return NetworkCell(because="blank")
    try:
        clauses = [_clause(role, text, gpus_per_node) for role, text in _merged(_split(cell))]
    except CellError as err:
        raise CellError(f"{cell!r}: {err}") from None
    rdma = any(c.role is Role.COMPUTE and c.fabric is not Fabric.ETHERNET for c in clauses)
    compute = [c for c in clauses if c.role is Role.COMPUTE]
    front = [c for c in clauses if c.role is Role.FRONT_END]
    if not rdma and not compute and front:  # only Ethernet named: that is the network
        compute, front = front, []
    aside = [c for c in clauses if c.role not in (Role.COMPUTE, Role.FRONT_END)] + front
    if len(compute) > 1:
        compute = _one_compute(cell, compute, gpus_per_node, aside)
    said = tuple(f"{c.role} {c.text!r}" for c in aside)
    if not compute:
        return NetworkCell(set_aside=said, because="no scale-out network named"
                           + (f" (set aside: {'; '.join(said)})" if said else ""))
    (c,) = compute
    generation = _fabric(c.text.lower())[1]
    because = c.why + (f" ({c.fabric}{' ' + generation.upper() if generation else ''})" if c.fabric else "")
    if said:
        because += f"; set aside: {'; '.join(said)}"
    return NetworkCell(fabric=c.fabric, generation=generation, links=c.count, link_gbps=c.link_gbps,
                       node_gbps=c.node_gbps, set_aside=said, because=because)


def _one_compute(cell: str, compute: list[Clause], gpus_per_node: int, aside: list[Clause]) -> list[Clause]:
    """Several unlabelled clauses could be the compute fabric: the one with a NIC per GPU (rail-optimised
    compute fabrics give each GPU its own NIC; storage and management cards are fewer), else refuse."""
    quantified = [c for c in compute if c.node_gbps is not None or c.count is not None]
    if len(quantified) <= 1 and len({c.fabric for c in compute}) <= 2:
        named = [c for c in compute if c.fabric is not None and c.fabric is not Fabric.ETHERNET]
        if quantified and (not named or quantified[0].fabric in (None, *[n.fabric for n in named])):
            keep = quantified[0]
            aside.extend(Clause(text=c.text, role=Role.STORAGE, fabric=c.fabric) for c in compute if c is not keep)
            merged = Clause(text=", ".join(c.text for c in compute), role=Role.COMPUTE,
                            fabric=keep.fabric or (named[0].fabric if named else None), count=keep.count,
                            link_gbps=keep.link_gbps, node_gbps=keep.node_gbps, why=keep.why)
            aside[:] = [a for a in aside if a.text not in merged.text]
            return [merged]
        if not quantified and len({c.fabric for c in compute}) == 1:
            return [compute[0]]
    per_gpu = [c for c in quantified if c.count == gpus_per_node]
    if len(per_gpu) == 1:
        aside.extend(Clause(text=c.text, role=Role.STORAGE, fabric=c.fabric) for c in compute if c is not per_gpu[0])
        return per_gpu
    raise CellError(f"{cell!r} names {len(compute)} networks ({'; '.join(c.text for c in compute)}) and does not "
                    "say which carries the training traffic: label it (\"Compute: 8x ...\") or keep only that one")
