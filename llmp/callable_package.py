"""A package that shares its name with the API function it exports, and answers a call as that function.

``llmp.validate``, ``llmp.search`` and ``llmp.sensitivity`` are functions of the public API
(:mod:`llmp`, imported on first use) and packages of the same names. Python binds a package onto
its parent when the package is first imported, so once anything has imported ``llmp.search.engine``
(a command, another module, a user), ``llmp.search`` is the package and not the function the API
promises. Giving the package's module object a ``__call__`` that runs the function makes
``llmp.search(spec)`` mean the same whichever was imported first.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any


def make_callable(module_name: str, function: Callable[..., Any]) -> None:
    """Let the module ``module_name`` be called as ``function`` (its docstring stays the module's)."""

    class CallablePackage(types.ModuleType):
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return function(*args, **kwargs)

    CallablePackage.__name__ = f"CallablePackage[{function.__name__}]"
    sys.modules[module_name].__class__ = CallablePackage
