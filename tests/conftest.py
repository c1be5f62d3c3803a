"""Shared fixtures: the generated JPEG corpus, built once per test session."""

from __future__ import annotations

import pytest

import jpeg_corpus


@pytest.fixture(scope="session")
def corpus() -> list[jpeg_corpus.Sample]:
    return jpeg_corpus.corpus()


@pytest.fixture(scope="session")
def photo() -> jpeg_corpus.Sample:
    """A photo-sized 4:2:0 JPEG."""
    return jpeg_corpus.make_sample(375, 500, "RGB", 2, seed=7)
