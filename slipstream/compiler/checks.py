"""Checks of an operation's code, read from its bytecode before it is
compiled: mistakes that would otherwise pass silently (numbers that follow
no seed, an output that stays zeros)."""

from __future__ import annotations

import dis
import types
from typing import Any

import numpy as np


def _python_code(fn: Any) -> types.CodeType | None:
    """The code object of ``fn``, or of the Python function a Numba dispatcher compiles."""
    return getattr(getattr(fn, "py_func", fn), "__code__", None)


def unseeded_draws(fn: Any) -> str | None:
    """What ``fn`` (an operation's code, or a Numba function of it) draws
    random numbers from without a key: Python's ``random`` or NumPy's
    global ``numpy.random``, as written in it (``"np.random"``); None when
    it uses neither.  Nested functions are read too."""
    py = getattr(fn, "py_func", fn)
    code = _python_code(fn)
    if code is None:
        return None
    scope = dict(getattr(py, "__globals__", {}))
    for name, cell in zip(code.co_freevars, py.__closure__ or ()):
        try:
            scope[name] = cell.cell_contents
        except ValueError:  # a cell not yet filled
            continue
    pending = [code]
    while pending:
        current = pending.pop()
        pending.extend(c for c in current.co_consts if isinstance(c, types.CodeType))
        previous = None
        for instruction in dis.get_instructions(current):
            if instruction.opname in ("LOAD_GLOBAL", "LOAD_DEREF", "LOAD_NAME"):
                value = scope.get(instruction.argval)
                module = value.__name__ if isinstance(value, types.ModuleType) else \
                    getattr(value, "__module__", None) if callable(value) else None
                if module == "random" or (module or "").startswith("numpy.random"):
                    return instruction.argval
                previous = instruction.argval if value is np else None
            elif instruction.opname in ("LOAD_ATTR", "LOAD_METHOD") and previous is not None:
                if instruction.argval == "random":
                    return f"{previous}.random"
                previous = None
            else:
                previous = None
    return None


def returns_its_input(fn: Any) -> str | None:
    """The name of ``fn``'s first parameter (the value an operation
    transforms) when ``fn`` returns it unchanged, as ``return x``
    somewhere in its own body; else None."""
    code = _python_code(fn)
    if code is None or code.co_argcount == 0:
        return None
    first = code.co_varnames[0]
    previous = None
    for instruction in dis.get_instructions(code):
        if instruction.opname == "RETURN_VALUE" and previous is not None and \
                previous.opname.startswith("LOAD_FAST") and previous.argval == first:
            return first
        previous = instruction
    return None


__all__ = ["returns_its_input", "unseeded_draws"]
