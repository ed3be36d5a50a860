"""Helpers that the unit tests of ``llmp.dsl`` (``tests/unit/dsl/``) and their properties
(``tests/property/dsl/``) both use: one home, imported under the name each test module reads.

Import with ``from dsl_helpers import derived_spec as spec`` (pytest puts tests/ on ``sys.path``).
"""

from __future__ import annotations

from llmp.dsl import loads
from llmp.hardware.spec import Device
from llmp.spec.spec import Spec

# ---- derived devices (test_derive.py) --------------------------------------------------------

DERIVE_REST = """
node n {{ gpu = {gpu}  gpus_per_node = 8  intra = nvlink4  inter = ndr_ib_x8 }}
cluster c {{ node = n }}
model m {{ arch = gpt  layers = 2  hidden = 128  heads = 4  vocab = 1024  seq_len = 128 }}
train {{ global_batch = 8 }}
"""
"""Everything of a spec but its devices: a node of ``{gpu}``, a cluster, a model and a batch."""


def derived_spec(devices: str, gpu: str = "h100_96", *, uses: str = 'use "h100_sxm5_80gb"\nuse "links"\n',
                 overrides: tuple[str, ...] = ()) -> Spec:
    return loads(uses + devices + DERIVE_REST.format(gpu=gpu), filename="<derive>", overrides=overrides)


def derived_device(devices: str, gpu: str = "h100_96", **kw: object) -> Device:
    return derived_spec(devices, gpu, **kw).cluster.gpu  # type: ignore[arg-type]
