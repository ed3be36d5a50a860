"""Symbolic sensitivity of the step time: derivatives, elasticities, regimes and where they flip.

    from llmp.sensitivity import sensitivity
    report = sensitivity(spec, wrt=["model.hidden", "gpu.mem_bandwidth"])
    report.fields[0].elasticity, report.regimes, report.kinks

Modules: ``branches`` (values and active Max/Min branches at a point), ``fields`` (names,
``--at`` values, the spec's derivations), ``closed`` (phase closed forms, LaTeX), ``along``
(one-variable restrictions and their roots), ``regimes``, ``analysis`` (the engine),
``report`` (typed results), ``plot``.
"""

from __future__ import annotations

from llmp.callable_package import make_callable
from llmp.sensitivity.analysis import (
    Operating,
    analyze,
    closed_form,
    curve,
    derivatives,
    operating_point,
    sensitivity,
    symbolic_forms,
)
from llmp.sensitivity.closed import latex, phase_time, specialise
from llmp.sensitivity.fields import canonical, parse_at
from llmp.sensitivity.report import (
    CommRegime,
    FamilyRegime,
    FieldSensitivity,
    Flip,
    Sensitivity,
    StepRegime,
)

__all__ = ["CommRegime", "FamilyRegime", "FieldSensitivity", "Flip", "Operating", "Sensitivity", "StepRegime",
           "analyze", "canonical", "closed_form", "curve", "derivatives", "latex", "operating_point", "parse_at",
           "phase_time", "sensitivity", "specialise", "symbolic_forms"]


make_callable(__name__, sensitivity)  # llmp.sensitivity(...) is this function, whichever was imported first
