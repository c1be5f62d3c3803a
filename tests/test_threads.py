"""The threads that run a compiled stage's samples: every position of a
batch goes to exactly one call, every call is waited for, and a failure in
any thread reaches the caller."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from slipstream.compiler.jit import uncached_njit
from slipstream.compiler.threads import claim, run_parts


def _take_all(claims, n, taken, call):
    """Claim positions until none is left, writing which call took each; how many this call took."""
    count = 0
    i = claim(claims)
    while i < n:
        taken[i] = call
        count += 1
        i = claim(claims)
    return count


take_all = uncached_njit(_take_all, entry=True)


@pytest.mark.parametrize("parts", [1, 2, 7])
def test_each_position_goes_to_exactly_one_call(parts):
    n = 5000
    claims, taken = np.zeros(1, np.int64), np.full(n, -1, np.int64)
    counts = [0] * parts

    def part(call: int) -> None:
        counts[call] = take_all(claims, n, taken, call)

    run_parts(part, parts)
    assert (taken >= 0).all() and sum(counts) == n  # every position taken, none twice
    assert np.bincount(taken, minlength=parts).tolist() == counts
    assert claims[0] == n + parts  # each call claimed once past the end


def test_run_parts_waits_for_every_part_and_raises_the_first_failure():
    finished: list[int] = []
    lock = threading.Lock()

    def part(call: int) -> None:
        if call == 0:
            raise ValueError("part 0 failed")
        time.sleep(0.05 * call)
        with lock:
            finished.append(call)
        if call == 2:
            raise KeyError("part 2 failed")

    with pytest.raises(ValueError, match="part 0 failed"):
        run_parts(part, 4)
    assert sorted(finished) == [1, 2, 3]  # the others ran to their end before the caller saw the failure


def test_a_failure_in_a_pool_thread_reaches_the_caller():
    def part(call: int) -> None:
        if call == 1:
            raise RuntimeError(f"call {call} on {threading.current_thread().name}")

    with pytest.raises(RuntimeError, match="call 1 on slipstream-stage"):
        run_parts(part, 2)
