"""Counter-based randomness for pipeline operations.

Every random draw is a pure function of (seed, epoch, sample identity,
operation id, draw number): no generator state is carried from sample to
sample or shared between threads, so a batch is bit-identical whatever the
thread count, batch size, batch order or resume point.

A sample's identity is its dataset index, except for the copies 1, 2, ...
of a sample that repeated augmentation hands out several times in an epoch
(:class:`slipstream.Order`'s ``repeats``): copy ``c`` of index ``i`` is
``i + (c << 48)`` (:func:`slipstream.loader.orders.draw_identities`), so
each copy draws anew while copy 0, like every sample of an epoch without
repeats, draws from its index.  The key chains bijections of the
identity, so distinct identities give distinct keys of one operation.

The mixing function is SplitMix64's finalizer (Steele, Lea and Flood,
"Fast splittable pseudorandom number generators", OOPSLA 2014), a bijection
on 64-bit integers with good avalanche; a key is made by chaining it over the
four counters, and the k-th draw of a key mixes the key with k.

An operation names its draws rather than numbering them:
``DRAWS = named_draws("top", "left", "flip")`` gives each name a draw
number that is a function of the name alone, so that adding, removing or
renaming one draw never moves another; ``uniform(key, DRAWS.flip)`` is then
the flip's draw.  A name owns a block of :data:`DRAW_BLOCK` consecutive
numbers, so that indexed draws (``DRAWS.area + attempt``) stay its own.

All functions here are compiled with Numba and callable both from Python and
from operation code.
"""

from __future__ import annotations

import collections
import hashlib

import numpy as np

from slipstream.compiler.jit import cached_njit

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S11 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11)
_ONE = np.uint64(1)
_TWO_POW_MINUS_53 = 1.0 / 9007199254740992.0


@cached_njit
def mix64(x):
    """SplitMix64's finalizer: a well-mixed bijection of a 64-bit integer."""
    z = np.uint64(x)
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


@cached_njit
def sample_key(seed, epoch, identity, op_id):
    """The random key of one operation on one sample (its draw identity:
    its dataset index, or a repeated copy's) in one epoch."""
    k = mix64(np.uint64(seed) + _GOLDEN)
    k = mix64(k ^ (np.uint64(epoch) * _GOLDEN + _ONE))
    k = mix64(k ^ (np.uint64(identity) * _M1 + _ONE))
    return mix64(k ^ (np.uint64(op_id) * _M2 + _ONE))


def stream_id(root: str, identity: str, occurrence: int) -> int:
    """The identity of the ``occurrence``-th operation of kind ``identity``
    (its node's and operation's classes: ``Node.identity()``) in the
    pipeline of root ``root`` (what the pipeline reads, and how many
    pipelines reading the same come before it: never an output's name), as
    an even integer below 2**63: the operation's streams are
    ``sample_key(seed, epoch, identity, stream_id + s)`` for s = 0, 1."""
    digest = hashlib.sha256(f"{root}\0{identity}\0{occurrence}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 2 << 1


def keyed_stream_id(key: str) -> int:
    """The identity of an operation given an explicit stream key
    (:class:`slipstream.Keyed`): a function of the key alone, so that the
    same key draws the same numbers in any output and at any place, and
    an even integer below 2**63 as :func:`stream_id`'s is.  The prefix
    keeps it apart from every :func:`stream_id`."""
    digest = hashlib.sha256(f"\0key\0{key}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 2 << 1


DRAW_BLOCK = 1 << 32
"""How many consecutive draw numbers a named draw owns unless
:func:`named_draws` is told otherwise: ``DRAWS.name + i`` is the name's own
for ``0 <= i < DRAW_BLOCK``."""

_FIRST_DRAW_BITS = 60  # first numbers below 2**60 and blocks of at most 2**60: 2k + 1 (normal) stays below 2**62


def draw_number(name: str) -> int:
    """The first draw number of the draw named ``name``: the leading bits of
    the name's SHA-256, a function of the name alone, below 2**60."""
    digest = hashlib.sha256(f"draw\0{name}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> (64 - _FIRST_DRAW_BITS)


def named_draws(*names: str, block: int = DRAW_BLOCK) -> tuple[int, ...]:
    """The draw numbers of one operation's named draws, as a named tuple
    (``DRAWS.top``; compiled code reads a module-level one as constants).

    Each name's number is :func:`draw_number` of the name, whatever the
    other names are, so a draw added or removed leaves the others where
    they were, and two operations that name a draw alike (a crop and the
    flip folded into it: ``"flip"``) draw it alike.  Each name owns the
    ``block`` numbers from its own: give every name of an operation at
    once, so that overlapping blocks are found when the module is imported.

    Raises:
        ValueError: a name given twice, or one that cannot be a named
            tuple's field (not an identifier, a keyword, a leading
            underscore); a block out of [1, 2**60]; two names whose blocks
            overlap.
    """
    if not names:
        raise ValueError("named_draws needs at least one name")
    if not 1 <= block <= 1 << _FIRST_DRAW_BITS:
        raise ValueError(f"named_draws: block must lie in [1, 2**{_FIRST_DRAW_BITS}], got {block}")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"named_draws: {', '.join(map(repr, repeated))} given twice")
    if not all(isinstance(name, str) for name in names):
        raise ValueError(f"named_draws: a draw's name is a string, got {names!r}")
    try:
        fields = collections.namedtuple("NamedDraws", names)
    except ValueError as exc:  # a name that cannot be a field: not an identifier, a keyword, a leading underscore
        raise ValueError(f"named_draws: {exc}") from None
    numbers = [draw_number(name) for name in names]
    ordered = sorted(zip(numbers, names))
    for (first, name), (second, other) in zip(ordered, ordered[1:]):
        if second - first < block:
            raise ValueError(f"named draws {name!r} and {other!r} overlap: their blocks of {block} numbers start "
                             f"{second - first} apart; rename one of them")
    return fields(*numbers)


@cached_njit(entry=True)  # torch stages call it from Python
def batch_keys(seed, epoch, identities, n, op_id):
    """The random keys of operation ``op_id`` for the first ``n`` samples of a
    batch (their draw identities), as a uint64 array: what a batch operation
    receives as ``keys``."""
    keys = np.empty(n, np.uint64)
    for i in range(n):
        keys[i] = sample_key(seed, epoch, identities[i], op_id)
    return keys


@cached_njit(entry=True)  # batch operations call it from Python
def uniforms(keys, k):
    """The k-th draw of each key, as float64 values in [0, 1)."""
    out = np.empty(keys.size, np.float64)
    for i in range(keys.size):
        out[i] = uniform(keys[i], k)
    return out


@cached_njit
def draw(key, k):
    """The k-th 64-bit random integer of a key."""
    return mix64(np.uint64(key) ^ (np.uint64(k) + _ONE) * _GOLDEN)


@cached_njit
def uniform(key, k):
    """The k-th draw of a key as a float in [0, 1), with 53 random bits."""
    return np.float64(draw(key, k) >> _S11) * _TWO_POW_MINUS_53


@cached_njit
def uniform_range(key, k, low, high):
    """The k-th draw of a key as a float in [low, high)."""
    return low + (high - low) * uniform(key, k)


@cached_njit
def integers(key, k, low, high):
    """The k-th draw of a key as an integer in [low, high)."""
    return low + np.int64(uniform(key, k) * (high - low))


@cached_njit
def normal(key, k):
    """A standard normal value from draws 2k and 2k + 1 (Box-Muller)."""
    u = 1.0 - uniform(key, 2 * k)  # in (0, 1]: log is finite
    return np.sqrt(-2.0 * np.log(u)) * np.cos(2.0 * np.pi * uniform(key, 2 * k + 1))


@cached_njit
def gamma(key, k, shape):
    """A Gamma(shape, 1) value (Marsaglia and Tsang, ACM TOMS 26(3), 2000),
    from the draws of sub-key ``draw(key, k)``; shape > 0."""
    sub = draw(key, k)
    boost = 1.0
    if shape < 1.0:  # Gamma(a) = Gamma(a + 1) * U^(1/a)
        boost = uniform(sub, 2) ** (1.0 / shape)
        shape += 1.0
    d = shape - 1.0 / 3.0
    c = 1.0 / np.sqrt(9.0 * d)
    for attempt in range(1, 1000):
        x = normal(sub, 2 * attempt)
        v = (1.0 + c * x) ** 3
        if v <= 0.0:
            continue
        u = 1.0 - uniform(sub, 4 * attempt + 2)  # normal() took draws 4 * attempt and 4 * attempt + 1
        if np.log(u) < 0.5 * x * x + d - d * v + d * np.log(v):
            return d * v * boost
    return d * boost  # unreachable in practice: each try is accepted with probability > 0.95


@cached_njit
def beta(key, k, a, b):
    """A Beta(a, b) value from two Gamma draws (sub-keys 2k and 2k + 1)."""
    x = gamma(key, 2 * k, a)
    y = gamma(key, 2 * k + 1, b)
    return x / (x + y)
