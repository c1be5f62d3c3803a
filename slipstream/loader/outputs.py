"""A loader's outputs: from the user's ``pipelines`` mapping to one
operation list per output, each starting with a decoder.

Every output is one of:

* a field of the dataset, named as the field, with its operations (the
  field's default decoder goes in front of a list that starts with none) or
  ``None`` to drop it; fields the mapping does not name get their default
  pipeline;
* a :class:`View`: another output reading a field, declared as such (the
  second view of SimCLR, the crops of multi-crop);
* a list that starts with a decoder or a reference to another output.

Any of these given as :class:`~slipstream.compiler.graph.Internal` is read
by other outputs (``RefNode``) but not handed out.

An output is keyed by its name or by a :class:`~slipstream.compiler.handles.Output`
handle (whose name it then has), which other outputs' entries refer to
by identity; the keys are kept as given, for the graph to resolve.

Any other name is refused, with the closest field suggested: a misspelt
field name would otherwise become an extra output and leave the field it
meant to configure with its default pipeline.  Outputs come in the order
the mapping names them, then the fields it does not name, in the dataset's
order.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from slipstream.compiler import Decoder, RefNode
from slipstream.compiler.graph import Internal, View, check_pipeline, unwrapped
from slipstream.compiler.handles import Handles, OutputRef
from slipstream.compiler.rewrites import FieldOperation, Keyed, fold, unkeyed
from slipstream.errors import ArgumentError


Given = Mapping[OutputRef, "Sequence[Any] | View | Internal | None"]


def resolve_outputs(given: Given, fields: Mapping[str, Any], source: Any,
                    dataset: Any) -> dict[OutputRef, list[Any] | Internal]:
    """Each output's operations, checked, folded and bound to ``source``
    (a :class:`~slipstream.fields.decoders.DecodeSource`), in output order,
    under the key the mapping gives it (a name, or an
    :class:`~slipstream.compiler.handles.Output` handle); an
    :class:`~slipstream.compiler.graph.Internal` pipeline's kept so.

    Args:
        given: the user's ``pipelines`` mapping.
        fields: the dataset's fields by name.
        source: what decoders read the dataset through.
        dataset: the dataset's path or URL, for messages.

    Raises:
        ArgumentError: a name that is neither a field, nor a view, nor a
            pipeline starting with a decoder; a view of a missing field;
            every output dropped.
        PipelineError: an entry that is not an operation.
    """
    if not isinstance(given, Mapping):
        raise ArgumentError(f"pipelines must be a mapping of output name to operations, got {given!r}")
    keys = {name: key for name, key in zip(Handles(given).names, given)}
    entries = {name: unwrapped(given[key]) for name, key in keys.items()}
    views = {name: entry for name, (entry, _) in entries.items() if isinstance(entry, View)}
    for name, view in views.items():
        if view.field not in fields:
            raise ArgumentError(f"output {name!r} is a view of field {view.field!r}, which {dataset} does not have"
                                f"{_suggestion(view.field, fields)} (fields: {', '.join(fields)})")
    viewed = {view.field for view in views.values()}
    outputs: dict[OutputRef, list[Any] | Internal] = {}
    for name in [*keys, *(f for f in fields if f not in keys and f not in viewed)]:
        entry, output = entries.get(name, ((), True))
        if entry is None:
            if name not in fields:
                raise ArgumentError(_unknown(name, fields, dataset, "drops it with None"))
            continue
        if isinstance(entry, View):
            operations = _field_pipeline(name, entry.field, entry.operations, fields, source)
        elif name in fields:
            operations = _field_pipeline(name, name, entry, fields, source)
        else:
            operations = fold(check_pipeline(name, entry))
            if not operations or not isinstance(unkeyed(operations[0]), (Decoder, RefNode)):
                raise ArgumentError(_unknown(name, fields, dataset, "gives it operations that do not start "
                                                                    "with a decoder or a RefNode"))
        outputs[keys.get(name, name)] = operations if output else Internal(operations)
    if all(isinstance(operations, Internal) for operations in outputs.values()):
        raise ArgumentError(f"every field of {dataset} was dropped: nothing to load")
    return outputs


def _field_pipeline(output: str, field: str, entries: Sequence[Any], fields: Mapping[str, Any],
                    source: Any) -> list[Any]:
    """The operations of an output reading ``field``: the field's default
    decoder in front unless the list starts with one, decoding operations
    bound to the field."""
    operations = fold(check_pipeline(output, entries))
    if not operations or not isinstance(unkeyed(operations[0]), (Decoder, RefNode, FieldOperation)):
        operations = fields[field].default_pipeline(field, source) + operations
    bound: list[Any] = []
    for op in operations:
        inner = unkeyed(op)
        entry = inner.bind(source, field) if isinstance(inner, FieldOperation) else inner
        entry = entry if isinstance(entry, list) else [entry]
        if isinstance(op, Keyed):  # the first entry decodes and draws; what a bind adds after it draws nothing
            entry[0] = Keyed(entry[0], op.key)
        bound.extend(entry)
    return bound


def _unknown(name: str, fields: Mapping[str, Any], dataset: Any, what: str) -> str:
    return (f"pipelines names output {name!r} and {what}, but {dataset} has no field {name!r}"
            f"{_suggestion(name, fields)} (fields: {', '.join(fields)}).  For another output that reads a field, "
            f"write {name!r}: slipstream.View(field, [operations...])")


def _suggestion(name: str, fields: Mapping[str, Any]) -> str:
    close = difflib.get_close_matches(name, list(fields), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


__all__ = ["View", "resolve_outputs"]
