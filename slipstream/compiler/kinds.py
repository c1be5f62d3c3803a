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


__all__ = ["Kind", "is_compiled_stage", "stage_number"]
