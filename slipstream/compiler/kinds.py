"""The kinds of pipeline operations, and the stages that follow from them.

Every operation is of one kind:

* :attr:`Kind.SAMPLE`: compiled (Numba) code run once per sample, fused
  into the sample loop of its stage;
* :attr:`Kind.BATCH`: compiled code run once per batch, after the sample
  loop of its stage;
* :attr:`Kind.TORCH`: Python code over batch tensors (a torch stage).

Stages follow from the kinds along each pipeline: a new stage starts where
the code changes between compiled and torch, and where a per-sample
operation follows a batch operation (the loop that would run it has ended).
Compiled stages have even numbers and torch stages odd ones, so that nodes
of different pipelines sharing a number, which are compiled into one
function, are always of one kind of stage.

Every operation also declares its :class:`Geometry`: whether it leaves
each pixel where it was, moves pixels by a map it writes out, or moves
them in a way nothing can follow.  Boxes, keypoints and masks that follow
an image (:mod:`slipstream.ops.detection`) read those declarations, and an
operation that declares nothing is :attr:`Geometry.UNKNOWN`, which they
refuse: a forgotten declaration is an error, never boxes off their objects.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable


class Kind(enum.Enum):
    """What code an operation hands back and where the compiler places it."""

    SAMPLE = "sample"
    BATCH = "batch"
    TORCH = "torch"

    @property
    def compiled(self) -> bool:
        """Whether the code is compiled with Numba (over NumPy arrays); False
        for Python code over torch tensors."""
        return self is not Kind.TORCH


class Geometry(enum.Enum):
    """How an operation moves the pixels of the image it transforms, as the
    fields that follow the image (boxes, keypoints, masks) must know it."""

    IDENTITY = "identity"
    """Every pixel stays where it was (tones, blurs, erasing, normalizing,
    dtype and device changes): what follows the image is left as it is."""

    MAPPED = "mapped"
    """Pixels move by a map the operation writes, per sample, into its
    output ``transform`` (:mod:`slipstream.fields.geometry`), during the
    compiled sample loop: what follows the image moves with it."""

    UNTRACKED = "untracked"
    """Pixels move where no per-sample map says (a mixture of differently
    warped images or of a batch's samples, a warp of batch tensors after the
    compiled stage): nothing can follow the image, and a pipeline that asks
    for it is refused."""

    UNKNOWN = "unknown"
    """Not declared, the default: treated as moving pixels where nothing
    says, so a field that follows the image refuses it by name."""


def stage_number(kind: Kind, sources: Iterable[tuple[Kind, int]]) -> int:
    """The stage of a node of ``kind`` reading nodes of the given kinds and
    (already numbered) stages; see the module docstring."""
    stage = 0
    for source_kind, source_stage in sources:
        after_loop = source_kind is Kind.BATCH and kind is not Kind.BATCH
        stage = max(stage, source_stage + (1 if after_loop else 0))
    if (stage % 2 == 0) != kind.compiled:
        stage += 1
    return stage


def is_compiled_stage(stage: int) -> bool:
    """Whether stage number ``stage`` is a compiled stage (else a torch stage)."""
    return stage % 2 == 0


__all__ = ["Geometry", "Kind", "is_compiled_stage", "stage_number"]
