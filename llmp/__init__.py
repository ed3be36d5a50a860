"""llmp: predict one LLM training step on a cluster from a .llmp spec.

The public API, json-module style: ``load``/``loads`` give a :class:`Spec`; ``predict`` gives a
:class:`Prediction`. Everything is imported lazily so ``import llmp`` stays cheap.
"""

from __future__ import annotations

__version__ = "0.1.0"
