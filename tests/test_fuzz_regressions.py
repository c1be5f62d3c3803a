"""Inputs that fuzzing once broke, replayed through the same code as the
file-format harness (native/fuzz/format_target.py): each must now be
refused with a slipstream error or load cleanly."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

FUZZ = Path(__file__).resolve().parents[1] / "native" / "fuzz"
sys.path.insert(0, str(FUZZ))

import format_target  # noqa: E402

INPUTS = sorted((FUZZ / "regressions" / "format").iterdir()) + sorted((FUZZ / "corpus" / "format").iterdir())


@pytest.mark.parametrize("path", INPUTS, ids=[f"{p.parent.parent.name}/{p.name}" for p in INPUTS])
def test_input_is_refused_cleanly_or_loads(path):
    format_target.test_one_input(path.read_bytes())


def test_the_regressions_are_there():
    assert len(list((FUZZ / "regressions" / "format").iterdir())) >= 4
