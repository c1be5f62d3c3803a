"""Operations: immutable descriptions of pipeline steps that declare their
output and memory, then hand back code.

An operation never keeps per-run state.  The compiler derives everything
that differs between uses (buffers, random keys) from the node the operation
is placed at, so one operation object can appear in several pipelines.
Subclasses are best written as frozen dataclasses.

Code conventions, for the function ``generate_code()`` returns:

Each operation is of one :class:`~slipstream.compiler.kinds.Kind`, its
class attribute ``kind``; the stages of a pipeline follow from the kinds.

* per-sample operation (``Kind.SAMPLE``): ``code(x, *outs, key) -> y``.
  ``x`` is the sample's input value, ``outs`` one per-sample array per
  declared :class:`Allocation` (a 1-element array for a scalar allocation),
  ``key`` the sample's random key (see :mod:`slipstream.compiler.random`).
  ``y`` must be ``outs[0]`` when the operation declares an allocation (on
  every sample, even one it leaves unchanged: copy ``x`` into it), and ``x``
  itself (possibly modified in place) when it declares none; the compiler
  finds each batch's memory by following that rule.
* batch operation (``Kind.BATCH``): ``code(xs, *outs, keys) -> ys``
  over the ``n`` samples of the batch, after the per-sample loop; ``keys``
  holds each sample's random key.
* decoder (:class:`Decoder`): ``code(*inputs, index, *outs, key) -> y``,
  where ``inputs`` are the arrays :meth:`Decoder.inputs` names and ``index``
  the sample's index in the dataset.  A decoder that can fail
  (:attr:`Decoder.can_fail`) gets one more out after its own, ``status``,
  its per-sample status (see :class:`Decoder`).
* torch operation (``Kind.TORCH``): ``code(x) -> y`` on batch tensors.

An operation that declares its arguments (:mod:`slipstream.compiler.params`)
receives one more argument, last: ``values``, what its
:meth:`Operation.runtime_values` returns (``code(x, *outs, key, values)``).  Its
code reads its probabilities, magnitudes and ranges from there, never from
the closure: values in the closure are compiled into the machine code, and
changing one would compile the stage again.

Compiled code is compiled with ``numba.njit``: plain Python over NumPy arrays,
calling other jitted functions and the native intrinsics.  For pixel loops
that LLVM can vectorize, index flat C-contiguous views (``x.reshape(-1)``)
with unsigned integers (``numba.uint64``): Numba wraps negative signed
indices around, and that check on every access blocks vectorization
whenever LLVM cannot prove the index non-negative (a 192 x 192 RGB flip:
14 us per image with unsigned indices, 135 us with ``int`` ones).
"""

from __future__ import annotations

import abc
import dataclasses
import sys
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from slipstream.compiler import params
from slipstream.compiler.kinds import Geometry, Kind
from slipstream.compiler.state import Allocation, State
from slipstream.errors import ArgumentError

Declared = tuple[State, "Allocation | Sequence[Allocation] | None"]


class Operation(params.Declares):
    """Base class of every pipeline operation.

    Class attributes:
        kind: what code the operation hands back and where it runs: per
            sample inside the compiled sample loop (the default), per batch
            after it, or in Python over torch tensors (:class:`Kind`).
        geometry: how it moves the pixels of an image (:class:`Geometry`):
            ``IDENTITY`` for an operation that moves none, ``MAPPED`` for
            one that writes its map into an output ``transform``
            (:mod:`slipstream.fields.geometry`), ``UNTRACKED`` for one that
            moves them where no map says.  The default, ``UNKNOWN``, makes
            boxes, keypoints and masks that follow the image refuse the
            operation by name.
    """

    kind: ClassVar[Kind] = Kind.SAMPLE
    geometry: ClassVar[Geometry] = Geometry.UNKNOWN

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        legacy = [f"{name} = {cls.__dict__[name]}" for name in ("jit", "batch")
                  if isinstance(cls.__dict__.get(name), bool)]
        if legacy:  # the booleans of earlier releases would otherwise be read by nothing: the operation misplaced
            raise TypeError(f"{cls.__qualname__} sets {' and '.join(legacy)}, which nothing reads: set kind = "
                            f"Kind.SAMPLE (compiled, per sample), Kind.BATCH (compiled, per batch) or Kind.TORCH "
                            f"(Python, on tensors) instead (slipstream.compiler.Kind)")

    def runtime_values(self) -> tuple[Any, ...] | None:
        """The run-time values the compiled code receives as its last
        argument, ``values``: by default the operation's declared values
        (:mod:`slipstream.compiler.params`) in declaration order, packed
        (numbers as float64 or int64, pairs as tuples, sequences as
        arrays).  An operation may hand derived data instead (logarithms of
        its ranges, a table), as long as their types follow from its
        structure alone.  None, the default of an operation that declares
        no arguments: its code takes no values."""
        return params.packed_values(self) if params.declares(type(self)) else None

    def declare(self, state: State) -> Declared:
        """The outgoing state and the memory needed, from the incoming state.

        Raise ``ValueError`` or ``TypeError`` with a short reason when the
        incoming state is not one this operation can take; the compiler
        reports it together with the operation that produced the state.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement declare()")

    def generate_code(self) -> Callable[..., Any]:
        """The function that does the work (see the module docstring)."""
        raise NotImplementedError(f"{type(self).__name__} must implement generate_code()")

    def fingerprint(self) -> str:
        """Text that changes whenever the generated code may change: used to
        key the compile cache.  The default, for a dataclass, is the class
        and every field its ``repr`` shows but its declared values (changing
        a value compiles nothing), operations among them by their own
        fingerprints; for another class, the class and the ``repr``.  NumPy
        arrays in it are written whole, with every float exact (their usual
        ``repr`` drops the middle of a large array and rounds)."""
        cls = type(self)
        if dataclasses.is_dataclass(self):
            return super().fingerprint()
        with np.printoptions(threshold=sys.maxsize, floatmode="unique"):
            return f"{cls.__module__}.{cls.__qualname__}:{self!r}"

    def draws_like(self) -> Operation:
        """The operation whose random streams this one takes: itself, unless
        it stands in for another and must draw what that one would (the
        planner of a decode on the GPU draws the crops of the CPU decoder
        it replaces, so both give the same crops for the same seed)."""
        return self


STATUS = "status"
"""The name of the status output of a decoder that can fail."""


class Decoder(Operation):
    """The first operation of a pipeline: makes a sample from stored data.

    Class attributes:
        can_fail: whether a sample's data may be undecodable (corrupt bytes,
            a value too long for its buffer).  Code must not raise inside the
            sample loop (an exception stops the whole batch), so such a
            decoder reports each sample's outcome instead: its node
            declares one more allocation after the decoder's own, the int32
            scalar output :data:`STATUS`, which its code receives after its
            own outs (before ``key``) and must write on every sample: 0 on
            success, else a native status (:class:`slipstream.native.Status`),
            with its output then filled with zeros so that nothing
            half-decoded flows on.  Buffers are reused from batch to batch,
            so a status left unwritten would be an earlier batch's.  The
            compiled pipeline hands the batch's statuses out
            (:meth:`~slipstream.compiler.CompiledPipeline.status`), and the
            loader applies its ``on_error`` from them.
    """

    can_fail: ClassVar[bool] = False

    def stored_field(self) -> str | None:
        """The field of the dataset this decoder reads, part of what keys
        the random streams of its pipeline (never the output's name, which
        the user may change); None, the default, when it reads none."""
        return None

    def inputs(self) -> tuple[Any, ...]:
        """Arrays passed to the compiled stage and on to the code, before
        ``index``: the data this decoder reads; where it lists the marker
        :data:`slipstream.compiler.symbols.KNOWN` instead of an array, the
        code gets the sample's failure status known before the batch ran
        (int32, 0 when none is known), a per-batch input of the stage as
        the indices are.  What the code makes, its status included, goes
        into its declared outs, which the runtime reads from what the stage
        returns, not into these."""
        return ()

    def declare(self, state: State | None) -> Declared:  # type: ignore[override]
        raise NotImplementedError(f"{type(self).__name__} must implement declare()")


class DeclaresGeometry:
    """A torch-side callable (usually a ``torch.nn.Module``) that says how
    it moves pixels, in its class attribute ``geometry``
    (:class:`Geometry`), as operations do.  A module placed in a pipeline
    whose image other fields follow must be one: a plain module is
    :attr:`Geometry.UNKNOWN` and refused there.  Subclass it and set
    ``geometry = Geometry.IDENTITY`` on a module that moves no pixel."""

    geometry: ClassVar[Geometry]


class TakesKeys(abc.ABC):
    """A torch-side callable (usually a ``torch.nn.Module``) whose random
    draws can come from the pipeline's counter-based keys.

    In a pipeline it is called as ``fn(x, keys)``: ``keys`` is a uint64
    NumPy array with the random key of each sample of the batch
    (:func:`slipstream.compiler.random.batch_keys`), so its draws depend only
    on the seed, the epoch, the samples and the operation, and a loader
    resumed from ``state_dict()`` repeats them exactly.  Called with
    ``keys=None`` (outside a pipeline) it may draw from anywhere.
    """

    @abc.abstractmethod
    def __call__(self, x: Any, keys: np.ndarray | None = None) -> Any:
        """The batch ``x`` transformed, with draws from ``keys`` when given."""


@dataclasses.dataclass(frozen=True, eq=False)
class TorchOperation(Operation):
    """Python code over batch tensors: a ``torch.nn.Module`` or any callable
    taking and returning a tensor.  Modules placed in a pipeline are wrapped
    in this automatically.

    Its output state is found by running the code once on a zero tensor of
    the input's shape with a batch of one, before the first batch.  A
    callable that :class:`TakesKeys` also receives the batch's random keys;
    one that :class:`DeclaresGeometry` gives its geometry, else it is
    :attr:`Geometry.UNKNOWN`.
    """

    fn: Callable[[Any], Any]
    kind: ClassVar[Kind] = Kind.TORCH

    def declare(self, state: State) -> Declared:
        import torch

        with torch.no_grad():
            probe = self.fn(torch.zeros((1, *state.shape), dtype=torch_dtype(state.dtype), device=state.device))
        if not isinstance(probe, torch.Tensor):
            raise TypeError(f"returns {type(probe).__name__}, not a torch.Tensor")
        return State(shape=tuple(probe.shape[1:]), dtype=probe.dtype, device=str(probe.device)), None

    def generate_code(self) -> Callable[..., Any]:
        return self.fn

    @property
    def geometry(self) -> Geometry:  # type: ignore[override]  # the callable's declaration, not the class's
        """How the callable moves pixels: its own declaration
        (:class:`DeclaresGeometry`), else :attr:`Geometry.UNKNOWN`."""
        return self.fn.geometry if isinstance(self.fn, DeclaresGeometry) else Geometry.UNKNOWN

    @property
    def takes_keys(self) -> bool:
        """Whether the code is called with the batch's random keys as well."""
        return isinstance(self.fn, TakesKeys)

    def fingerprint(self) -> str:
        return f"{type(self).__qualname__}:{type(self.fn).__module__}.{type(self.fn).__qualname__}"


def torch_dtype(dtype: Any) -> Any:
    """The ``torch.dtype`` of a torch or NumPy dtype (imports torch)."""
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    try:
        return torch.from_numpy(np.zeros(0, np.dtype(dtype))).dtype
    except TypeError as exc:
        raise TypeError(f"{dtype!r} is not a dtype torch has") from exc


def torch_device(device: Any) -> Any:
    """``device`` as a ``torch.device`` this machine has (imports torch).

    Checked where it is given (a loader's ``device=``, ``ToDevice``), so
    that a device the machine lacks fails when the loader or operation is
    made, not at the first batch in the loader's thread.

    Raises:
        ArgumentError: ``device`` is not a torch device, or names a CUDA
            device torch does not find.
    """
    import torch

    try:
        checked = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ArgumentError(f"device {device!r} is not a torch device: {exc}") from None
    if checked.type != "cuda":
        return checked
    if not torch.cuda.is_available():
        raise ArgumentError(f"device {str(checked)!r} was asked for, but torch finds no CUDA device here "
                            f"(torch.cuda.is_available() is False; torch {torch.__version__})")
    if checked.index is not None and checked.index >= torch.cuda.device_count():
        raise ArgumentError(f"device {str(checked)!r} was asked for, but torch finds {torch.cuda.device_count()} "
                            f"CUDA device(s)")
    return checked


def as_operation(item: Any) -> Operation:
    """An operation for a pipeline entry: operations as they are, torch
    modules wrapped in :class:`TorchOperation`."""
    if isinstance(item, Operation):
        return item
    torch = sys.modules.get("torch")  # a module instance means torch is imported already
    if torch is not None and isinstance(item, torch.nn.Module):
        return TorchOperation(item)
    raise TypeError(f"{item!r} is not an Operation, a Node or a torch.nn.Module")
