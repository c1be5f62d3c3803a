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


@pytest.fixture(scope="session", autouse=True)
def no_loader_thread_outlives_the_tests():
    """After the whole suite, every loader's epoch thread has stopped (they
    stop when an epoch ends, is left, fails or its loader is collected)."""
    yield
    import gc
    import threading
    import time

    gc.collect()
    deadline = time.monotonic() + 10
    while True:
        left = [t.name for t in threading.enumerate() if t.name.startswith("slipstream-loader")]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not left, f"loader threads still running after the tests: {left}"


@pytest.fixture(scope="session")
def s3_server():
    """A real S3-compatible server (SeaweedFS) on 127.0.0.1 for the session,
    with one bucket, ``test``; its credentials in ``storage_options()``."""
    from object_store import S3Server

    with S3Server() as server:
        server.create_bucket("test")
        yield server


@pytest.fixture
def s3_proxy(s3_server):
    """A counting, delaying HTTP relay in front of the session's S3 server."""
    from object_store import Proxy

    with Proxy(s3_server.endpoint) as proxy:
        yield proxy
