"""Every public name has a docstring: each module, each name in a module's
``__all__``, and the public methods and properties of the classes there
(inherited docstrings count, as ``help()`` shows them)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import slipstream


def public_objects():
    modules = [slipstream] + [importlib.import_module(m.name) for m in pkgutil.walk_packages(slipstream.__path__,
                                                                                           "slipstream.")
                              if not m.name.endswith(("__main__", "libslipstream"))]
    seen = set()
    for module in modules:
        yield module.__name__, module
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            if id(obj) in seen or not (inspect.isclass(obj) or callable(obj)):
                continue
            seen.add(id(obj))
            yield f"{module.__name__}.{name}", obj
            if inspect.isclass(obj):
                for key, value in vars(obj).items():
                    if not key.startswith("_") and (callable(getattr(value, "__func__", value))
                                                    or isinstance(value, property)):
                        yield f"{obj.__module__}.{obj.__qualname__}.{key}", getattr(obj, key)


def test_every_public_name_has_a_docstring():
    names = dict(public_objects())
    missing = [name for name, obj in names.items() if not inspect.getdoc(obj)]
    assert len(names) > 300
    assert missing == []
