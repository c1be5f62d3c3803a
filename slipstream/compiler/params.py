"""Declared parameters: each argument of an operation declared once, with
its domain, its default and its meaning, and whether it is a *value* or
*structural*.

An operation (a frozen dataclass) declares an argument as a field whose
default is :func:`param`::

    @dataclasses.dataclass(frozen=True)
    class RandomSolarize(Operation):
        threshold: float = param(Float(0, 255), "values at or above it are inverted", default=128)
        p: float = param(PROBABILITY, "probability of solarizing a sample", default=0.5)

From that one declaration follow:

* the check at construction: :class:`~slipstream.compiler.Operation` runs
  every declared argument through its :class:`Domain` before the
  operation's own ``__post_init__``, keeps the normalized value (a float
  for a :class:`Float`, a tuple for a :class:`Pair`, ...) and refuses
  anything else (NaN, an infinity, a bool where a number is meant, a value
  out of range, a wrong type) with an :class:`~slipstream.ArgumentError`
  naming the operation and the argument;
* the parameter tables of docs/operations.md (:func:`table`);
* what the compiled stage receives.  A *value* (the default) is data: the
  stage takes the operation's :meth:`~slipstream.compiler.Operation.runtime_values`
  as an argument and never writes them into its source, so that changing a
  probability, a magnitude or a range reuses the compiled stage.  A
  *structural* argument (``structural=True``) shapes the generated code or
  the memory plan (an output size, an interpolation, which kind of fill):
  it is part of the compile cache key.

A domain also names values it refuses (:meth:`Domain.invalid`) and one it
accepts (:meth:`Domain.example`), so that a test can put every declared
argument of every operation to hostile values.
"""

from __future__ import annotations

import abc
import copy
import dataclasses
import functools
import math
import numbers
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from slipstream.compiler.handles import Output
from slipstream.errors import ArgumentError

METADATA_KEY = "slipstream.param"
"""The key of a declared field's :class:`Param` in its ``dataclasses.Field.metadata``."""


class Refused(Exception):
    """Raised by :meth:`Domain.accept`: the value is not in the domain,
    with an optional reason beyond the domain's description."""

    def __init__(self, reason: str = "") -> None:
        super().__init__(reason)
        self.reason = reason


class Domain(abc.ABC):
    """The values an argument accepts, and the form it keeps them in."""

    @abc.abstractmethod
    def accept(self, value: Any) -> Any:
        """``value`` normalized (a float for a number, a tuple for a pair,
        ...), or :class:`Refused`."""

    @abc.abstractmethod
    def describe(self) -> str:
        """The domain in words, after "must be": ``"a number in [0, 1]"``."""

    def pack(self, value: Any) -> Any:
        """An accepted value as compiled code receives it (numbers as
        float64 or int64, pairs as tuples, sequences as arrays)."""
        return value

    @abc.abstractmethod
    def invalid(self) -> tuple[Any, ...]:
        """Values the domain refuses, for tests: NaN, infinities, values out
        of range, wrong types."""

    @abc.abstractmethod
    def example(self) -> Any:
        """A value the domain accepts, for tests."""


def _is_real(value: Any) -> bool:
    """A real number (NumPy's too), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _is_integer(value: Any) -> bool:
    """An integer (NumPy's too), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


_WRONG_TYPES: tuple[Any, ...] = (None, "1", [1.0], {1: 2})
"""Values of no declared domain's type, besides each domain's own."""


def _bound_text(low: float | None, high: float | None, low_open: bool, high_open: bool, noun: str) -> str:
    if low is None and high is None:
        return noun
    if high is None:
        return f"{noun} {'>' if low_open else '>='} {_number(low)}"
    if low is None:
        return f"{noun} {'<' if high_open else '<='} {_number(high)}"
    return f"{noun} in {'(' if low_open else '['}{_number(low)}, {_number(high)}{')' if high_open else ']'}"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


@dataclasses.dataclass(frozen=True)
class Float(Domain):
    """A finite real number (int, float or a NumPy scalar, not a bool),
    within [low, high] (either end open, or absent); kept as a float."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def accept(self, value: Any) -> float:
        if not _is_real(value) or not math.isfinite(float(value)):
            raise Refused()
        number = float(value)
        if self.low is not None and (number < self.low or (self.low_open and number == self.low)):
            raise Refused()
        if self.high is not None and (number > self.high or (self.high_open and number == self.high)):
            raise Refused()
        return number

    def describe(self) -> str:
        return _bound_text(self.low, self.high, self.low_open, self.high_open, "a number")

    def pack(self, value: Any) -> float:
        return float(value)

    def invalid(self) -> tuple[Any, ...]:
        outside = []
        if self.low is not None:
            outside.append(self.low if self.low_open else self.low - max(1.0, abs(self.low)))
        if self.high is not None:
            outside.append(self.high if self.high_open else self.high + max(1.0, abs(self.high)))
        return (math.nan, math.inf, -math.inf, True, np.bool_(False), *outside, *_WRONG_TYPES)

    def example(self) -> float:
        if self.low is not None and self.high is not None:
            return (self.low + self.high) / 2
        if self.low is not None:
            return self.low + 1.0
        return 0.0 if self.high is None or self.high > 0 else self.high - 1.0


@dataclasses.dataclass(frozen=True)
class Int(Domain):
    """An integer (a Python or NumPy int, not a bool nor a float), within
    [low, high] where given; kept as an int."""

    low: int | None = None
    high: int | None = None

    def accept(self, value: Any) -> int:
        if not _is_integer(value):
            raise Refused()
        number = int(value)
        if (self.low is not None and number < self.low) or (self.high is not None and number > self.high):
            raise Refused()
        return number

    def describe(self) -> str:
        return _bound_text(self.low, self.high, False, False, "an int")

    def pack(self, value: Any) -> int:
        return int(value)

    def invalid(self) -> tuple[Any, ...]:
        outside = ([self.low - 1] if self.low is not None else []) + ([self.high + 1] if self.high is not None else [])
        return (1.5, 2.0, math.nan, math.inf, True, *outside, *_WRONG_TYPES)

    def example(self) -> int:
        if self.low is not None:
            return self.low if self.high is None else (self.low + self.high) // 2
        return 0 if self.high is None or self.high >= 0 else self.high


@dataclasses.dataclass(frozen=True)
class Bool(Domain):
    """A bool (Python's or NumPy's), not a number standing for one."""

    def accept(self, value: Any) -> bool:
        if not isinstance(value, (bool, np.bool_)):
            raise Refused()
        return bool(value)

    def describe(self) -> str:
        return "a bool"

    def invalid(self) -> tuple[Any, ...]:
        return (0, 1, 1.0, math.nan, "True", None)

    def example(self) -> bool:
        return True


@dataclasses.dataclass(frozen=True)
class Choice(Domain):
    """One of ``options`` (strings).  ``normalize`` maps other spellings
    (an enum member such as torchvision's ``InterpolationMode.BILINEAR``,
    upper case) to an option first; it returns None for what it does not
    know."""

    options: tuple[str, ...]
    normalize: Callable[[Any], str | None] | None = dataclasses.field(default=None, compare=False)

    def accept(self, value: Any) -> str:
        name = self.normalize(value) if self.normalize is not None else value
        if not isinstance(name, str) or name not in self.options:
            raise Refused()
        return name

    def describe(self) -> str:
        quoted = [repr(option) for option in self.options]
        return f"one of {', '.join(quoted)}" if len(quoted) > 2 else " or ".join(quoted)

    def invalid(self) -> tuple[Any, ...]:
        return ("no such option", 3, None, math.nan, True)

    def example(self) -> str:
        return self.options[0]


def enum_name(value: Any) -> str | None:
    """``value`` as a lower-case option name: a string as it is (lower
    case), an enum member by its value or name (torchvision's
    ``InterpolationMode.BILINEAR`` is ``"bilinear"``), else None."""
    if isinstance(value, str):
        return value.lower().rsplit(".", 1)[-1]
    inner = getattr(value, "value", None)
    if isinstance(inner, str):
        return inner.lower()
    name = getattr(value, "name", None)
    return name.lower() if isinstance(name, str) else None


@dataclasses.dataclass(frozen=True)
class Text(Domain):
    """A non-empty str (a field's or a pipeline's name)."""

    def accept(self, value: Any) -> str:
        if not isinstance(value, str) or not value:
            raise Refused()
        return value

    def describe(self) -> str:
        return "a non-empty str"

    def invalid(self) -> tuple[Any, ...]:
        return ("", 3, None, b"image", math.nan)

    def example(self) -> str:
        return "image"


class OutputReference(Text):
    """An output of the pipelines mapping: its
    :class:`~slipstream.compiler.handles.Output` handle or its name (a
    non-empty str)."""

    def accept(self, value: Any) -> Any:
        return value if isinstance(value, Output) else super().accept(value)

    def describe(self) -> str:
        return "an output's slipstream.Output handle or its name (a non-empty str)"


@dataclasses.dataclass(frozen=True)
class Pair(Domain):
    """Two values of ``item`` (a tuple, list or 1-D array of two), with
    low <= high when ``ordered``; kept as a tuple."""

    item: Domain
    ordered: bool = True

    def accept(self, value: Any) -> tuple[Any, Any]:
        if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)) or len(value) != 2:
            raise Refused()
        pair = (self.item.accept(value[0]), self.item.accept(value[1]))
        if self.ordered and pair[0] > pair[1]:
            raise Refused("low > high")
        return pair

    def describe(self) -> str:
        order = ", low <= high" if self.ordered else ""
        return f"a (low, high) pair of {_plural(self.item.describe())}{order}"

    def pack(self, value: Any) -> tuple[Any, Any]:
        return (self.item.pack(value[0]), self.item.pack(value[1]))

    def invalid(self) -> tuple[Any, ...]:
        good = self.item.example()
        paired = [(bad, good) for bad in self.item.invalid() if not isinstance(bad, (list, dict))]
        reversed_pair = [(good + 1, good)] if self.ordered and _is_real(good) else []
        return (*paired, *reversed_pair, (good,), (good, good, good), good, "ab", None)

    def example(self) -> tuple[Any, Any]:
        good = self.item.example()
        return (good, good)


def _plural(description: str) -> str:
    """``"a number in [0, 1]"`` -> ``"numbers in [0, 1]"``."""
    for article, noun in (("a number", "numbers"), ("an int", "ints"), ("a bool", "bools"),
                          ("a (low, high) pair", "(low, high) pairs")):
        if description.startswith(article):
            return noun + description[len(article):]
    return description


@dataclasses.dataclass(frozen=True)
class Spread(Domain):
    """torchvision's form of a random factor's range: a number ``v >= 0``
    for [center - v, center + v] (clipped at ``floor``), or a (low, high)
    pair itself, within [floor, ceiling]; with ``none``, None too, for no
    spread; kept as a (low, high) tuple."""

    center: float = 1.0
    floor: float | None = 0.0
    ceiling: float | None = None
    none: bool = False

    def _range(self) -> Float:
        return Float(self.floor, self.ceiling)

    def accept(self, value: Any) -> tuple[float, float]:
        if value is None and self.none:
            return (self.center, self.center)
        if _is_real(value):
            spread = Float(0.0).accept(value)
            low, high = self.center - spread, self.center + spread
            if self.floor is not None:
                low = max(low, self.floor)
            if self.ceiling is not None and high > self.ceiling:
                raise Refused(f"center + v must be <= {_number(self.ceiling)}")
            return (low, high)
        return Pair(self._range()).accept(value)

    def describe(self) -> str:
        spread = "[-v, v]" if self.center == 0 else f"[{_number(self.center)} - v, {_number(self.center)} + v]"
        nothing = "None (no spread), " if self.none else ""
        return f"{nothing}a number v >= 0 (meaning {spread}) or {Pair(self._range()).describe()}"

    def invalid(self) -> tuple[Any, ...]:
        pairs = [bad for bad in Pair(self._range()).invalid() if not _is_real(bad)]  # a number is a spread
        return tuple(bad for bad in (-1.0, math.nan, math.inf, True, *pairs) if not (bad is None and self.none))

    def example(self) -> tuple[float, float]:
        return (self.center, self.center)


@dataclasses.dataclass(frozen=True)
class Size(Domain):
    """An output size: an int s >= 1 (meaning (s, s)) or an (height, width)
    pair of them; kept as an (int, int) tuple."""

    most: int = 1 << 16

    def accept(self, value: Any) -> tuple[int, int]:
        side = Int(1, self.most)
        if _is_integer(value):
            s = side.accept(value)
            return (s, s)
        return Pair(side, ordered=False).accept(value)

    def describe(self) -> str:
        return f"an int in [1, {self.most}] (a square) or an (height, width) pair of them"

    def invalid(self) -> tuple[Any, ...]:
        return (0, -3, self.most + 1, 1.5, math.nan, True, (0, 4), (4, 0), (4.5, 4), (4,), (4, 4, 4), *_WRONG_TYPES)

    def example(self) -> tuple[int, int]:
        return (8, 8)


@dataclasses.dataclass(frozen=True)
class Numbers(Domain):
    """``count`` numbers of ``item`` (a sequence or 1-D array; ``count``
    None: one or more; with ``broadcast``, also one number, meaning
    ``count`` of it), kept as a tuple of floats (a float64 array for
    compiled code)."""

    item: Float = Float()
    count: int | None = None
    broadcast: bool = False

    def accept(self, value: Any) -> tuple[float, ...]:
        if self.broadcast and _is_real(value):
            return (self.item.accept(value),) * (self.count or 1)
        if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)):
            raise Refused()
        if (isinstance(value, np.ndarray) and value.ndim != 1) or len(value) == 0 or \
                (self.count is not None and len(value) != self.count):
            raise Refused()
        return tuple(self.item.accept(v) for v in value)  # a nested sequence: its items are no numbers

    def describe(self) -> str:
        many = "one or more" if self.count is None else str(self.count)
        one = f"{self.item.describe()} or " if self.broadcast else ""
        return f"{one}{many} {_plural(self.item.describe())}"

    def pack(self, value: Any) -> np.ndarray:
        return np.array(value, np.float64)

    def invalid(self) -> tuple[Any, ...]:
        good = self.item.example()
        length = self.count or 1
        wrong = [(bad,) * length for bad in self.item.invalid() if not isinstance(bad, (list, dict, str))]
        short = [(good,) * (self.count - 1)] if self.count else []
        scalar = [] if self.broadcast else [good]
        return (*wrong, *short, (), *scalar, "abc", None)

    def example(self) -> tuple[float, ...]:
        return (self.item.example(),) * (self.count or 1)


@dataclasses.dataclass(frozen=True)
class Many(Domain):
    """One or more values of ``item`` (a sequence), kept as a tuple."""

    item: Domain

    def accept(self, value: Any) -> tuple[Any, ...]:
        if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)) or len(value) == 0:
            raise Refused()
        return tuple(self.item.accept(v) for v in value)

    def describe(self) -> str:
        return f"one or more {_plural(self.item.describe())}"

    def pack(self, value: Any) -> tuple[Any, ...]:
        return tuple(self.item.pack(v) for v in value)

    def invalid(self) -> tuple[Any, ...]:
        return (*((bad,) for bad in self.item.invalid() if bad is not None), (), "ab", None, 3)

    def example(self) -> tuple[Any, ...]:
        return (self.item.example(),)


@dataclasses.dataclass(frozen=True)
class OrNone(Domain):
    """None, or a value of ``domain``."""

    domain: Domain

    def accept(self, value: Any) -> Any:
        return None if value is None else self.domain.accept(value)

    def describe(self) -> str:
        return f"None or {self.domain.describe()}"

    def pack(self, value: Any) -> Any:
        return None if value is None else self.domain.pack(value)

    def invalid(self) -> tuple[Any, ...]:
        return tuple(v for v in self.domain.invalid() if v is not None)

    def example(self) -> Any:
        return None


@dataclasses.dataclass(frozen=True)
class Custom(Domain):
    """A domain written as a function: ``check(value)`` returns the
    normalized value or raises :class:`Refused` (or an
    :class:`~slipstream.ArgumentError`, whose message is kept);
    ``text`` describes it, ``bad`` lists values it refuses and ``good``
    one it accepts."""

    check: Callable[[Any], Any] = dataclasses.field(compare=False)
    text: str = ""
    bad: tuple[Any, ...] = (None,)
    good: Any = None

    def accept(self, value: Any) -> Any:
        return self.check(value)

    def describe(self) -> str:
        return self.text

    def invalid(self) -> tuple[Any, ...]:
        return self.bad

    def example(self) -> Any:
        return self.good


PROBABILITY = Float(0.0, 1.0)
"""A probability: a number in [0, 1]."""

FIELD_NAME = Text()
OUTPUT = OutputReference()
"""The name of a dataset field or of a pipeline."""


@dataclasses.dataclass(frozen=True)
class Param:
    """One declared argument.

    Attributes:
        domain: what it accepts and how it is kept.
        doc: what it means, one phrase (the docs' "meaning" column).
        structural: whether it shapes the generated code or the memory
            plan (part of the compile cache key) instead of being a value
            the compiled code reads at run time.
        type_text: the docs' "type" column, when the domain's description
            is not the best short form.
    """

    domain: Domain
    doc: str
    structural: bool = False
    type_text: str | None = None


REQUIRED: Any = dataclasses.MISSING
"""The ``default`` of an argument that must be given."""


def param(domain: Domain, doc: str, *, default: Any = REQUIRED, structural: bool = False,
          type_text: str | None = None) -> Any:
    """A declared dataclass field: ``name: type = param(domain, doc, default=...)``.
    See the module docstring."""
    declared = Param(domain, doc, structural, type_text)
    return dataclasses.field(default=default, metadata={METADATA_KEY: declared})


@dataclasses.dataclass(frozen=True)
class Argument:
    """One declared argument of a class: its name, declaration and default
    (:data:`REQUIRED` when it has none)."""

    name: str
    param: Param
    default: Any


@functools.cache
def declared(cls: type) -> tuple[Argument, ...]:
    """The declared arguments of dataclass ``cls``, in field order (empty
    for a class that declares none, or is no dataclass)."""
    if not dataclasses.is_dataclass(cls):
        return ()
    return tuple(Argument(f.name, f.metadata[METADATA_KEY], f.default) for f in dataclasses.fields(cls)
                 if METADATA_KEY in f.metadata)


def declares(cls: type) -> bool:
    """Whether ``cls`` declares its arguments (its code then takes values)."""
    return bool(declared(cls))


class Declares:
    """Base of the frozen dataclasses that declare their arguments with
    :func:`param` (operations, crops): the declared arguments are checked
    and normalized (:func:`check_arguments`) when an instance is made,
    before the class's own ``__post_init__`` runs on the normalized
    values, whether or not that one calls its base's."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("__post_init__")
        if own is not None and not getattr(own, "checks_arguments", False):
            cls.__post_init__ = _checking_first(cls, own)

    def __post_init__(self) -> None:
        if _outermost_post_init(type(self)) is Declares:
            check_arguments(self)

    def fingerprint(self) -> str:
        """The class and its structure (:func:`structure_text`): what its
        compiled code may depend on, its values left out."""
        return f"{type(self).__module__}.{type(self).__qualname__}({structure_text(self)})"


@functools.cache
def _outermost_post_init(cls: type) -> type:
    """The class whose ``__post_init__`` an instance of ``cls`` runs."""
    return next(c for c in cls.__mro__ if "__post_init__" in c.__dict__)


def _checking_first(cls: type, own: Callable[..., None]) -> Callable[..., None]:
    """``cls``'s own ``__post_init__``, run after the check of the declared
    arguments when ``cls``'s is the one an instance runs (once, however
    the subclasses' chain up)."""

    @functools.wraps(own)
    def __post_init__(self: Any, *args: Any) -> None:
        if _outermost_post_init(type(self)) is cls:
            check_arguments(self)
        own(self, *args)

    __post_init__.checks_arguments = True  # type: ignore[attr-defined]
    return __post_init__


def check_arguments(obj: Any) -> None:
    """Check and normalize every declared argument of the (frozen) dataclass
    ``obj`` in place.

    Raises:
        ArgumentError: an argument outside its domain, naming the class,
            the argument, what it must be and the value given.
    """
    owner = type(obj).__name__
    for entry in declared(type(obj)):
        given = getattr(obj, entry.name)
        try:
            accepted = entry.param.domain.accept(given)
        except Refused as refused:
            reason = f" ({refused.reason})" if refused.reason else ""
            raise ArgumentError(f"{owner}: {entry.name} must be {entry.param.domain.describe()}, got "
                                f"{_shown(given)}{reason}") from None
        except ArgumentError as exc:  # a domain's own reason, named after the argument unless it names it
            text = str(exc)
            named = text.startswith(entry.name) or text.startswith(f"{owner}: {entry.name}")
            raise ArgumentError(text if text.startswith(f"{owner}: ") else
                                f"{owner}: {text}" if named else f"{owner}: {entry.name}: {text}") from None
        object.__setattr__(obj, entry.name, accepted)


def checked_for(owner: str, make: Callable[[], Any]) -> Any:
    """``make()``: an operation made to check the arguments of another
    class, ``owner`` (a torch module taking the same arguments), whose
    :class:`~slipstream.ArgumentError` names ``owner`` instead."""
    try:
        return make()
    except ArgumentError as exc:
        _, named, reason = str(exc).partition(": ")
        raise ArgumentError(f"{owner}: {reason if named else exc}") from None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def packed_values(obj: Any) -> tuple[Any, ...]:
    """The values (not the structural arguments) of ``obj``'s declared
    arguments, in declaration order, packed for compiled code."""
    return tuple(entry.param.domain.pack(getattr(obj, entry.name)) for entry in declared(type(obj))
                 if not entry.param.structural)


def structure_text(obj: Any) -> str:
    """Every field of dataclass ``obj`` but its declared values, as text:
    what its compiled code may depend on beyond its class.  NumPy arrays
    are written whole, floats exactly."""
    values = {entry.name for entry in declared(type(obj)) if not entry.param.structural}
    parts = []
    with np.printoptions(threshold=sys.maxsize, floatmode="unique"):
        for f in dataclasses.fields(obj):
            if f.name in values or not f.repr:
                continue
            value = getattr(obj, f.name)
            fingerprint = getattr(value, "fingerprint", None)
            text = fingerprint() if callable(fingerprint) and not isinstance(value, type) else repr(value)
            parts.append(f"{f.name}={text}")
    return ", ".join(parts)


class Hidden:
    """What a declared value reads as while the operation's code is
    generated (:func:`structural_view`): any use of it (a number made of
    it, a comparison, an attribute) is a
    :class:`~slipstream.PipelineError` naming the operation and the value,
    so that no value can be compiled into a stage whose compile cache key
    leaves it out."""

    __slots__ = ("_owner", "_name")

    def __init__(self, owner: str, name: str) -> None:
        object.__setattr__(self, "_owner", owner)
        object.__setattr__(self, "_name", name)

    def _used(self, *_: Any, **__: Any) -> Any:
        from slipstream.errors import PipelineError

        raise PipelineError(
            f"{self._owner}.generate_code() reads its value {self._name!r}: values reach compiled code as its "
            f"last argument, values (Operation.runtime_values), and generate_code() may read structural arguments only "
            f"(declare {self._name!r} structural=True if it shapes the code or the memory)")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._used()

    def __repr__(self) -> str:
        return f"<value {self._name} of {self._owner}>"

    __bool__ = __float__ = __int__ = __index__ = __complex__ = __len__ = __iter__ = __getitem__ = _used
    __contains__ = __array__ = __round__ = __trunc__ = __floor__ = __ceil__ = __neg__ = __pos__ = __abs__ = _used
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _used
    __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __pow__ = __rpow__ = __divmod__ = _used
    __lt__ = __le__ = __gt__ = __ge__ = __eq__ = __ne__ = __hash__ = _used  # type: ignore[assignment]


def structural_view(obj: Any) -> Any:
    """A copy of the dataclass ``obj`` whose declared values are
    :class:`Hidden`, as are those of the operations among its fields: what
    ``generate_code()`` runs on, so that the code it makes follows from
    the structure alone (the compile cache key).  ``obj`` itself when it
    declares nothing and holds nothing that does."""
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        return obj
    owner = type(obj).__name__
    values = {entry.name for entry in declared(type(obj)) if not entry.param.structural}
    changed = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if f.name in values:
            changed[f.name] = Hidden(owner, f.name)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            view = structural_view(value)
            if view is not value:
                changed[f.name] = view
    if not changed:
        return obj
    view = copy.copy(obj)
    for name, value in changed.items():
        object.__setattr__(view, name, value)
    return view


def table(cls: type) -> str:
    """The Markdown table of ``cls``'s declared arguments: parameter, type,
    default, meaning (docs/operations.md)."""
    rows = ["| parameter | type | default | meaning |", "|---|---|---|---|"]
    for entry in declared(cls):
        kind = entry.param.type_text or entry.param.domain.describe()
        default = "required" if entry.default is REQUIRED else f"`{entry.default!r}`"
        rows.append(f"| `{entry.name}` | {kind} | {default} | {entry.param.doc} |")
    return "\n".join(rows)


__all__ = ["Argument", "Bool", "Choice", "Custom", "Declares", "Domain", "FIELD_NAME", "Float", "Hidden", "Int",
           "Many", "Numbers", "OUTPUT", "OrNone", "OutputReference", "PROBABILITY", "Pair", "Param", "REQUIRED", "Refused", "Size", "Spread",
           "Text", "check_arguments", "checked_for", "declared", "declares", "enum_name", "packed_values", "param",
           "structural_view", "structure_text", "table"]
