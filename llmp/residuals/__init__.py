"""Residual models: what the roofline misses, learned from operator measurements.

Modules (numpy and sympy to predict; xgboost only to fit; never torch): ``samplefile`` (the
sample-file format the measurement kit writes and everything here reads; standard library only),
``features``, ``dataset`` (sample files -> observations), ``model`` (``ResidualModel``),
``forest`` (fitted trees evaluated with numpy), ``transfer`` (the cross-GPU model), ``store``
(``load``, ``save``, ``choose``, ``default_for``, ``Residuals``), ``adapt``, ``fitting``
(``llmp fit``), ``score`` (``llmp score``) and ``importers/`` (public measurements in llmp's own
sample schema, ``llmp import-samples``).

The measurements themselves come from ``llmp.measure`` (torch), which imports ``samplefile``
from here and nothing else; nothing here imports ``llmp.measure``.
"""
