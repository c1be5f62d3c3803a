"""Image operations over windows of frames: one draw per window.

A window of frames (a video's, or consecutive images') is one sample of
shape (frames, height, width, channels).  An operation written for one
image, (height, width, channels), applies to such a sample through
:class:`EachFrame`: its code runs on every frame with the sample's key, so
it draws the same numbers for every frame of the window (one colour
jitter, one blur, one solarize coin per window) and the frames stay
consistent with one another, as a clip's augmentation must.

:func:`slipstream.compiler.rewrites.each_frame` is the rewrite the
pipeline lists go through (in :func:`~slipstream.compiler.rewrites.fold`): in a list that starts with an
entry that :class:`MakesWindows`, every later per-sample operation is
wrapped, except those that :class:`TakesWindows` themselves
(``Normalize``, which packs all frames in one pass into the layout asked).
"""

from __future__ import annotations

import abc
import dataclasses
import inspect
from collections.abc import Callable
from typing import Any, ClassVar

from numba.core.dispatcher import Dispatcher

from slipstream.compiler.jit import uncached_njit
from slipstream.compiler.kinds import Geometry, Kind
from slipstream.compiler.operation import Operation
from slipstream.compiler.state import Allocation, State


class MakesWindows(abc.ABC):
    """A pipeline's first entry whose samples are windows of frames,
    (frames, height, width, channels)."""


class TakesWindows(abc.ABC):
    """An operation that takes windows of frames as they are, rather than
    each frame through :class:`EachFrame`."""


@dataclasses.dataclass(frozen=True)
class EachFrame(Operation):
    """``op``, an operation on (height, width, channels) images, applied to
    every frame of a (frames, height, width, channels) window with the same
    random draws (see the module docstring).  ``op`` may work in place or
    write outputs of its own (at most :data:`MOST_OUTS`, each then one per
    frame); an operation that writes a map of where its pixels went is
    refused."""

    op: Operation
    kind: ClassVar[Kind] = Kind.SAMPLE

    def __post_init__(self) -> None:
        if not isinstance(self.op, Operation) or self.op.kind is not Kind.SAMPLE:
            raise TypeError(f"EachFrame applies per-sample operations, got {self.op!r}")

    @property
    def geometry(self) -> Geometry:  # type: ignore[override]
        """Its operation's: every frame moves as the operation moves an image."""
        return self.op.geometry

    def declare(self, state: State) -> tuple[State, list[Allocation]]:
        if len(state.shape) != 4:
            raise ValueError(f"{self.op!r} applies to each frame of (frames, height, width, channels) windows, got "
                             f"{state.describe()}")
        frames = state.shape[0]
        inner, memory = self.op.declare(State(state.shape[1:], state.dtype, state.device))
        allocations = [memory] if isinstance(memory, Allocation) else list(memory or ())
        named = [a.name for a in allocations if a.name]
        if named or len(allocations) > MOST_OUTS:
            raise ValueError(f"{self.op!r} writes {', '.join(named) or f'{len(allocations)} outputs'}: the operations "
                             f"that apply to each frame of a window work in place or write at most {MOST_OUTS} "
                             f"unnamed outputs (a map of where the pixels went follows no window)")
        return (State((frames, *inner.shape), inner.dtype, inner.device),
                [Allocation((frames, *a.shape), a.dtype) for a in allocations])

    def runtime_values(self) -> tuple[Any, ...] | None:
        """Its operation's values."""
        return self.op.runtime_values()

    def draws_like(self) -> Operation:
        """Its operation: a wrapped operation draws what it draws on an image."""
        return self.op.draws_like()

    def generate_code(self):
        code = self.op.generate_code()
        # The operation's code takes (x, *outs, key[, values]), its key named ``key`` by convention.
        names = list(inspect.signature(getattr(code, "py_func", code)).parameters)
        if "key" not in names or len(names) - names.index("key") > 2 or names.index("key") > 1 + MOST_OUTS:
            raise TypeError(f"EachFrame: the code of {self.op!r} takes {names}, not (x, *outs, key[, values]) with "
                            f"at most {MOST_OUTS} outs")
        outs, takes_values = names.index("key") - 1, len(names) - names.index("key") == 2
        return _FRAME_LOOPS[outs, takes_values](code if isinstance(code, Dispatcher) else uncached_njit(code))

    def __repr__(self) -> str:
        return f"EachFrame({self.op!r})"


MOST_OUTS = 2
"""The most outputs (an image, a scratch buffer) an operation applied to each frame may write."""


def _loops() -> dict[tuple[int, bool], Callable[[Any], Any]]:
    """For each (outs, whether the code takes values): the function that
    makes the loop calling ``apply`` on every frame (and frame of each out)
    with the window's key; the loop returns the first out, or ``x`` when
    the operation works in place."""
    def o0(apply):
        def each_frame(x, key):
            for t in range(x.shape[0]):
                apply(x[t], key)
            return x
        return each_frame

    def o0v(apply):
        def each_frame(x, key, values):
            for t in range(x.shape[0]):
                apply(x[t], key, values)
            return x
        return each_frame

    def o1(apply):
        def each_frame(x, out, key):
            for t in range(x.shape[0]):
                apply(x[t], out[t], key)
            return out
        return each_frame

    def o1v(apply):
        def each_frame(x, out, key, values):
            for t in range(x.shape[0]):
                apply(x[t], out[t], key, values)
            return out
        return each_frame

    def o2(apply):
        def each_frame(x, out, scratch, key):
            for t in range(x.shape[0]):
                apply(x[t], out[t], scratch[t], key)
            return out
        return each_frame

    def o2v(apply):
        def each_frame(x, out, scratch, key, values):
            for t in range(x.shape[0]):
                apply(x[t], out[t], scratch[t], key, values)
            return out
        return each_frame

    return {(0, False): o0, (0, True): o0v, (1, False): o1, (1, True): o1v, (2, False): o2, (2, True): o2v}


_FRAME_LOOPS = _loops()


__all__ = ["EachFrame", "MakesWindows", "TakesWindows"]
