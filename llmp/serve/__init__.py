"""``llmp serve``: the library behind a local web page.

Tabs: Editor (the spec with ``llmp check``'s located diagnostics as you type, and a picker of
catalog GPUs and nodes), Prediction (``llmp predict``: step time with its band, tokens/s, MFU,
memory against capacity, the breakdown, one step per pipeline rank from ``--trace``'s events),
What-if (controls that set the spec's fields through ``--set``, compared against the spec),
Search (``llmp search --gpus``: the best layouts per GPU count, the Pareto front of step time,
memory and GPUs, a click loads a layout into the editor), Plan (``llmp plan``: days, GPU-hours,
kWh and cost against GPU count with bands, failures included, and the deadline question) and
Export (the spec as ``.llmp``, the plan as CSV and PNG, a link that reproduces the view).

Built on Starlette (routes, forms, static files), Jinja2 (templates) and htmx (vendored in
``static/``, Zero-Clause BSD; no asset is fetched at run time); the ``[serve]`` extra installs them.
Modules: ``app`` (routes), ``view`` (the page's state, from a form or a link), ``pages`` (each
tab's content from the library's results), ``compute`` (the library calls, cached), ``controls``
(the what-if knobs), ``edit`` (writing overrides into the spec text), ``charts`` (SVG).
"""
