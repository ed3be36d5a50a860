"""Residual models: what the roofline misses, learned from light sampling.

Modules (nothing is imported here, so the torch-only modules stay importable on a bare GPU node):

* torch and numpy only: ``design`` (the shape design), ``bench`` and ``torch_ops`` (the timed
  kernels), ``timing``, ``samplefile``, ``sampling`` (``llmp sample``), ``collectives`` (torchrun
  entry), ``reference`` and ``measure_core`` (``llmp measure``; ``python -m
  llmp.residuals.measure_core --config cfg.json``), ``devices``;
* fit and predict (numpy, sympy; xgboost only to fit): ``features``, ``dataset``, ``model``
  (``ResidualModel``), ``forest`` (fitted trees evaluated with numpy), ``store`` (``load``,
  ``save``, ``choose``, ``default_for``, ``Residuals``), ``adapt``, ``fitting`` (``llmp fit``),
  ``score`` (``llmp score``), ``measure`` (spec -> measurement config).
"""
