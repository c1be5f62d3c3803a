"""Shared fixtures: the generated JPEG corpus, built once per test session;
the ``cuda`` marker; the device the loader tests ask for their batches on."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile

import pytest

import jpeg_corpus

DEVICE_VARIABLE = "SLIPSTREAM_TEST_DEVICE"


COMPILE_CACHE = "SLIPSTREAM_COMPILE_CACHE_DIR"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--collected-at-least", type=int, default=0, metavar="N",
                     help="fail when fewer than N tests are collected (make test passes the count in tests/COLLECTED)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "cuda: needs a CUDA device; skipped without one (make gpu-check runs them "
                                       "on a GPU machine)")
    # One compile cache for the whole run, its worker processes and the interpreters its tests start: a stage
    # compiles once per run.  Tests whose point is a cold cache (or another one) set their own.
    if COMPILE_CACHE not in os.environ and not hasattr(config, "workerinput"):
        folder = tempfile.mkdtemp(prefix="slipstream-test-compile-")
        os.environ[COMPILE_CACHE] = folder
        config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
    # A run started in the background by a shell without job control (`make test &`, nohup) inherits SIGINT
    # ignored, and so would the interpreters its tests start: the Ctrl-C tests need Python's own handler.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_finish(session: pytest.Session) -> None:
    """With ``--collected-at-least N``: fewer tests than N is a failure of the run."""
    floor = session.config.getoption("collected_at_least")
    if floor and len(session.items) < floor:
        raise pytest.UsageError(f"{len(session.items)} tests were collected, fewer than the {floor} of "
                                f"tests/COLLECTED: a test was lost (if one was removed on purpose, lower the count)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the tests marked ``cuda`` where torch finds no CUDA device."""
    marked = [item for item in items if item.get_closest_marker("cuda") is not None]
    if not marked:
        return
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (make gpu-check runs it on a GPU machine)")
    for item in marked:
        item.add_marker(skip)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """The converted-dataset cache of ``slipstream.cached`` in the test's
    own folder (``SLIPSTREAM_CACHE_DIR``): its datasets folder."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("SLIPSTREAM_CACHE_DIR", str(folder))
    return folder / "datasets"


@pytest.fixture(scope="session")
def device():
    """The device loader tests ask for their batches on: ``$SLIPSTREAM_TEST_DEVICE``
    (``make gpu-check`` runs the loader's suite with ``cuda``), else the CPU."""
    import torch

    wanted = torch.device(os.environ.get(DEVICE_VARIABLE) or "cpu")
    if wanted.type == "cuda" and not torch.cuda.is_available():
        pytest.fail(f"{DEVICE_VARIABLE}={wanted} but torch finds no CUDA device")
    return wanted


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
