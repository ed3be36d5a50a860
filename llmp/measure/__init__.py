"""The torch measurement kit: time kernels, collectives and whole training steps on real hardware.

Modules (torch and numpy only, so they run on a bare GPU node; nothing is imported here):
``design`` (which shapes to time), ``bench`` and ``torch_ops`` (the timed kernels), ``timing``
(warm-up, repeats, the clock), ``devices`` (which catalog device this is), ``sampling``
(``llmp sample``), ``collectives`` (the torchrun entry of ``llmp sample --families collectives``),
``reference`` (our own GPT/Llama in torch) and ``step`` (``llmp measure``: ``python -m
llmp.measure.step --config cfg.json``). ``from_spec`` turns a resolved ``Spec`` into a ``step``
config; it is the one module here that needs the DSL.

The kit writes sample rows (``llmp.residuals.samplefile``, the one thing it imports from
``llmp.residuals``); the residual models read them and never import this package.
"""
