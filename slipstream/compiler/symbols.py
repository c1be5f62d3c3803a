"""The names of a generated stage function's parameters and local values.

The code generator writes these names and :class:`~slipstream.compiler.CompiledPipeline`
binds a value to each parameter; both take them from here, as
:class:`Symbol` objects that say what they stand for (their :class:`Role`),
so that no side decodes a name from its spelling.
"""

from __future__ import annotations

import dataclasses
import enum


class Role(enum.Enum):
    """What a stage parameter or local name stands for."""

    INDICES = "indices"  # the batch's dataset indices, int64 (n,)
    DRAWS = "draws"  # the batch's draw identities (what the random keys are drawn from), int64 (n,)
    KNOWN_FAILURES = "known_failures"  # each sample's failure status known before the batch ran, int32 (n,)
    COUNT = "n"  # the number of samples in the batch
    SEED = "seed"  # the pipeline's seed, uint64
    EPOCH = "epoch"  # the epoch, int64
    INPUT = "in"  # an array a decoder reads (Decoder.inputs())
    BUFFER = "b"  # one allocation of a node: (batch_size, *shape), or (threads, *shape) when per thread
    KEYS = "k"  # the per-sample random keys of a batch operation, uint64 (batch_size,)
    VALUES = "p"  # the run-time values of an operation a node calls (Operation.runtime_values)
    NODE_VALUES = "q"  # the run-time values of a node itself (Node.runtime_values)
    VALUE = "v"  # a node's value: a local inside its stage, a parameter in later stages
    SAMPLE = "i"  # the sample loop's position in the batch
    INDEX = "index"  # the current sample's dataset index
    DRAW = "draw"  # the current sample's draw identity
    KNOWN = "known"  # the current sample's known failure status (0: none known); also a decoder's input marker
    THREAD = "tid"  # which of a compiled stage's concurrent calls this is: its row of the per-thread buffers
    CLAIMS = "claims"  # the next sample position a compiled stage's calls take, int64 (1,), taken atomically
    FINISH = "finish"  # whether a compiled stage's call runs the batch's statements after the samples
    TRACE = "trace"  # where a diagnostic stage is: the node running and the sample's position, int64 (2,)
    DONE = "done"  # 1 for each sample whose statements all ran, uint8 (batch_size,)
    TICKS = "ticks"  # processor cycles each node's statements took, per call: int64 (threads, nodes of the stage)
    CYCLES = "c"  # the cycle counter when a node's statements started, a local of the sample loop


@dataclasses.dataclass(frozen=True)
class Symbol:
    """One name in generated code.

    Attributes:
        role: what the name stands for.
        node: the id of the node it belongs to (inputs, buffers, keys and
            values), else -1.
        position: which of the node's inputs or allocations, else 0.
    """

    role: Role
    node: int = -1
    position: int = 0

    @property
    def name(self) -> str:
        """The identifier in generated code, unique per symbol."""
        if self.node < 0:
            return self.role.value
        if self.role in (Role.INPUT, Role.BUFFER, Role.VALUES):
            return f"{self.role.value}{self.node}_{self.position}"
        return f"{self.role.value}{self.node}"

    def __str__(self) -> str:
        return self.name


INDICES = Symbol(Role.INDICES)
DRAWS = Symbol(Role.DRAWS)
KNOWN_FAILURES = Symbol(Role.KNOWN_FAILURES)
COUNT = Symbol(Role.COUNT)
SEED = Symbol(Role.SEED)
EPOCH = Symbol(Role.EPOCH)
SAMPLE = Symbol(Role.SAMPLE)
INDEX = Symbol(Role.INDEX)
DRAW = Symbol(Role.DRAW)
KNOWN = Symbol(Role.KNOWN)
"""The current sample's known failure status, a local of the sample loop
(``KNOWN_FAILURES[i]``, as ``INDEX`` is ``INDICES[i]``).  A decoder lists
this symbol among its :meth:`~slipstream.compiler.Decoder.inputs`, in place
of an array, where its code takes that status: the code generator passes
the sample's status there (an int32 scalar), so that the failures known
before a batch reach the decoders as an input of each call of the stage,
never as memory shared with another layer."""
THREAD = Symbol(Role.THREAD)
CLAIMS = Symbol(Role.CLAIMS)
FINISH = Symbol(Role.FINISH)
TRACE = Symbol(Role.TRACE)
DONE = Symbol(Role.DONE)
TICKS = Symbol(Role.TICKS)

BATCH_PARAMETERS = (INDICES, DRAWS, KNOWN_FAILURES, COUNT, SEED, EPOCH)
"""The parameters every stage starts with, in this order (a compiled stage
then takes ``DONE`` and ``TICKS``)."""

CALL_PARAMETERS = (CLAIMS, THREAD, FINISH)
"""The parameters a compiled stage takes before all others, which differ
from one of its concurrent calls to the next (see
:func:`slipstream.compiler.codegen.generate_stage`)."""


def value(node_id: int) -> Symbol:
    """The value of node ``node_id``."""
    return Symbol(Role.VALUE, node_id)


def buffer(node_id: int, position: int) -> Symbol:
    """Allocation ``position`` of node ``node_id``."""
    return Symbol(Role.BUFFER, node_id, position)


def keys(node_id: int) -> Symbol:
    """The per-sample random keys of batch node ``node_id``."""
    return Symbol(Role.KEYS, node_id)


def values(node_id: int, position: int) -> Symbol:
    """The run-time values of the operation node ``node_id`` calls at
    ``position`` (0 its own, 1, 2, ... others a node with control flow
    calls)."""
    return Symbol(Role.VALUES, node_id, position)


def cycles(node_id: int) -> Symbol:
    """The cycle counter read when node ``node_id``'s statements started."""
    return Symbol(Role.CYCLES, node_id)


def node_values(node_id: int) -> Symbol:
    """The run-time values of node ``node_id`` itself (``Node.runtime_values``)."""
    return Symbol(Role.NODE_VALUES, node_id)


def input_array(node_id: int, position: int) -> Symbol:
    """Input ``position`` of decoder node ``node_id``."""
    return Symbol(Role.INPUT, node_id, position)


__all__ = ["BATCH_PARAMETERS", "CALL_PARAMETERS", "CLAIMS", "COUNT", "DONE", "DRAW", "DRAWS", "EPOCH", "FINISH",
           "INDEX", "INDICES", "KNOWN", "KNOWN_FAILURES", "Role", "SAMPLE", "SEED", "Symbol", "THREAD", "TRACE",
           "buffer", "input_array", "keys", "node_values", "value", "values"]
