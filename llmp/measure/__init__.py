"""The torch measurement kit: time kernels, collectives and whole training steps on real hardware.

Modules (torch and numpy only, so they run on a bare GPU node; nothing is imported here):
``design`` (which shapes to time), ``bench`` and ``torch_ops`` (the timed kernels), ``timing``
(warm-up, repeats, the clock), ``devices`` (which catalog device this is), ``sampling``
(``llmp sample``'s kernels, one process or one rank of many), ``ranks`` (the torchrun world
``llmp sample`` runs in), ``collectives`` (collectives in the group shapes of that world),
``reference`` (our own GPT/Llama in torch) and ``step`` (``llmp measure``: ``python -m
llmp.measure.step --config cfg.json``). ``from_spec`` turns a resolved ``Spec`` into a ``step``
config and ``estimate`` prices a sampling run on a catalog device (``llmp sample --plan``); they
are the two modules here that need the DSL and the catalog.

The kit writes sample rows (``llmp.residuals.samplefile``, the one thing its measuring modules
import from ``llmp.residuals``; ``estimate`` prices cases with the residual features' roofline, the
time the residual factors multiply); the residual models read them and never import this package.
"""
