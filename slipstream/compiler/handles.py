"""Handles on a pipeline mapping's outputs, by which entries of one output
refer to another.

A pipelines mapping is keyed by its outputs; an entry that reads another
output (boxes that follow an image, labels mixed as the image was, a view
of a multi-crop) names which.  An :class:`Output` handle names it by
identity: the object that keys the mapping is the object the entry holds,
so the graph resolves the reference by that object, never by comparing
text, and a handle that keys no output of the mapping is refused::

    image, boxes = Output("image"), Output("boxes")
    pipelines = {
        image: [RandomIoUCrop(300), RandomHorizontalFlip(), Normalize()],
        boxes: [BoundingBoxes(follow=image)],
        "labels": [KeptWithBoxes(boxes)],
    }

A handle's ``name`` is the output's user-facing name: the key of the
batch dict, and the field an output of the dataset's own reads.  A plain
string key or reference still names an output (``{"image": [...],
"boxes": [BoundingBoxes(follow="image")]}``) and is lowered to the same
graph; names are looked up once, where the mapping is lowered
(:meth:`Handles.name_of`), and nowhere else.  No name keys a random stream
(:mod:`slipstream.compiler.random`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any, Union

from slipstream.errors import PipelineError


@dataclasses.dataclass(frozen=True, eq=False)  # eq=False: two handles are one output only if they are one object
class Output:
    """A handle on one output of a pipelines mapping; ``name`` is the
    output's user-facing name (see the module docstring)."""

    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise PipelineError(f"Output: name must be a non-empty str, got {self.name!r}")

    def __repr__(self) -> str:
        return f"Output({self.name!r})"


OutputRef = Union[Output, str]
"""A reference to an output: its handle, or its user-facing name."""

FieldName = str
"""The name of a field stored in the dataset (not an output: a view or an
output of another name may read it)."""


def output_name(key: Any) -> str:
    """The user-facing name of a pipelines mapping's key: a handle's name,
    or the key itself when it is a str.

    Raises:
        PipelineError: the key is neither an :class:`Output` nor a non-empty str.
    """
    if isinstance(key, Output):
        return key.name
    if isinstance(key, str) and key:
        return key
    raise PipelineError(f"a pipelines mapping is keyed by output names (str) or slipstream.Output handles, not "
                        f"{key!r:.80} ({type(key).__name__})")


class Handles:
    """The outputs of one pipelines mapping by name and by handle: the one
    place a reference (:data:`OutputRef`) becomes the output it means."""

    def __init__(self, keys: Iterable[Any]) -> None:
        self._names: list[str] = []
        self._by_handle: dict[Output, str] = {}
        for key in keys:
            name = output_name(key)
            if name in self._names:
                raise PipelineError(f"two outputs of the pipelines mapping are named {name!r} (an Output handle "
                                    f"and a str key, or two handles of one name): each output needs its own name")
            self._names.append(name)
            if isinstance(key, Output):
                self._by_handle[key] = name

    @property
    def names(self) -> list[str]:
        """Every output's name, in the mapping's order."""
        return list(self._names)

    def name_of(self, ref: OutputRef, referrer: str) -> str:
        """The name of the output ``ref`` refers to, for an entry of output
        ``referrer``: a handle by identity, a name as it is.

        Raises:
            PipelineError: a handle that keys no output of the mapping, or a
                name no output has.
        """
        if isinstance(ref, Output):
            found = self._by_handle.get(ref)
            if found is None:
                raise PipelineError(f"pipeline {referrer!r} refers to {ref!r}, a handle that keys no output of this "
                                    f"mapping (outputs: {', '.join(self._names)}): refer to the very Output object "
                                    f"the mapping is keyed by, or to the output's name")
            return found
        if ref not in self._names:
            raise PipelineError(f"pipeline {referrer!r} refers to pipeline {ref!r}, which does not exist "
                                f"(pipelines: {', '.join(self._names)})")
        return ref


__all__ = ["FieldName", "Handles", "Output", "output_name"]
