"""Field classes by type id: how a reader turns a file's field descriptors
back into field objects.  Field classes register themselves (see
:class:`slipstream.fields.Field`); third-party ids start at
:data:`FIRST_USER_TYPE_ID`."""

from __future__ import annotations

from typing import Any

FIRST_USER_TYPE_ID = 1000
"""Type ids below this are reserved for slipstream's own fields."""

_classes: dict[int, type] = {}


def register(cls: type, type_id: int) -> None:
    """Make ``cls`` the field class of ``type_id``.

    Raises:
        ValueError: another class already has this id.
    """
    if not isinstance(type_id, int) or not 0 < type_id < 2**32:
        raise ValueError(f"{cls.__qualname__}: type_id must be an integer from 1 to 2**32 - 1, got {type_id!r}")
    existing = _classes.get(type_id)
    if existing is not None and (existing.__module__, existing.__qualname__) != (cls.__module__, cls.__qualname__):
        raise ValueError(f"type id {type_id} is taken by {existing.__module__}.{existing.__qualname__}; "
                         f"{cls.__module__}.{cls.__qualname__} needs another (ids from {FIRST_USER_TYPE_ID} are free)")
    _classes[type_id] = cls


def lookup(type_id: int) -> Any:
    """The field class registered for ``type_id``, or ``None``."""
    return _classes.get(type_id)


def registered() -> dict[int, type]:
    """Every registered type id and its class."""
    return dict(_classes)
