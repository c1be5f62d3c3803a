"""Per-sample status as a declared output of a stage: a decoder that can fail
(``Decoder.can_fail``) writes each sample's status into an output of its
node, the stage returns it, the compiled pipeline hands it out
(``CompiledPipeline.status``), and the loader applies ``on_error`` from it
and from the known failures, a per-batch input of the stage as the
indices are."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np
import pytest

import jpeg_corpus
import slipstream as ss
from slipstream import native
from slipstream.compiler import STATUS, Allocation, Decoder, Pipeline, State
from slipstream.fields.base import Encoded
from slipstream.fields.image import JPEG_MODE

NEGATIVE = int(native.Status.ECORRUPT)


@dataclasses.dataclass(frozen=True, eq=False)
class NonNegative(Decoder):
    """Copies ``values[index]``, failing (zeros, status ECORRUPT) on a negative value."""

    values: np.ndarray
    can_fail: ClassVar[bool] = True

    def inputs(self):
        return (self.values,)

    def declare(self, state):
        return State(shape=(), dtype=np.int64), Allocation((), np.int64)

    def generate_code(self):
        failure = np.int32(NEGATIVE)

        def read(values, index, out, status, key):
            if values[index] < 0:
                status[0] = failure
                out[0] = 0
            else:
                status[0] = 0
                out[0] = values[index]
            return out

        return read

    def fingerprint(self):
        return "NonNegative"


def test_a_decoder_that_can_fail_declares_its_status_and_the_stage_returns_it():
    values = np.array([3, -1, 5, 7, -2, 9], np.int64)
    others = np.array([3, 5, -7, 7, 1, 9], np.int64)
    compiled = Pipeline({"a": [NonNegative(values)], "b": [NonNegative(others)]}).compile(batch_size=4)
    statuses = compiled.graph.statuses()
    assert [(b.node.pipeline, b.allocation.name, b.allocation.shape, b.allocation.dtype) for b in statuses] == [
        ("a", STATUS, (), np.dtype(np.int32)), ("b", STATUS, (), np.dtype(np.int32))]
    [source] = compiled.sources
    returned = source.source.strip().splitlines()[-1]
    for buffer in statuses:
        assert buffer.symbol in source.statuses and buffer.symbol not in source.scratch
        assert f"{buffer.symbol.name}[:n]" in returned, returned
    assert not [line for line in compiled.memory_plan().splitlines() if "per thread" in line]

    out = compiled(np.array([0, 1, 2, 3]))
    np.testing.assert_array_equal(out["a"], [3, 0, 5, 7])
    np.testing.assert_array_equal(compiled.status(), [0, NEGATIVE, NEGATIVE, 0])  # a fails on 1, b on 2
    compiled(np.array([0, 2, 3]))  # the same slot's memory again, after another's: every status rewritten
    compiled(np.array([0, 3, 5, 4]))
    np.testing.assert_array_equal(compiled.status(), [0, 0, 0, NEGATIVE])
    compiled(np.array([0, 3, 5, 5]))
    np.testing.assert_array_equal(compiled.status(), [0, 0, 0, 0])


def test_a_decoder_may_not_name_an_allocation_status():
    @dataclasses.dataclass(frozen=True, eq=False)
    class Named(NonNegative):
        def declare(self, state):
            return State(shape=(), dtype=np.int64), [Allocation((), np.int64), Allocation((), np.int32, name=STATUS)]

    with pytest.raises(ss.PipelineError, match="named 'status'"):
        Pipeline([Named(np.arange(3))]).compile(batch_size=2)


@dataclasses.dataclass(frozen=True)
class UncheckedImage(ss.RGBImageField):
    """Stores any bytes as a 16x16 JPEG, unchecked, so that bad bytes reach the loader."""

    def encode(self, value):
        return Encoded({"height": 16, "width": 16, "mode": JPEG_MODE}, value)


BAD = 3


@pytest.fixture(scope="module")
def with_a_bad_jpeg(tmp_path_factory):
    images = [jpeg_corpus.make_sample(16, 16, seed=k).data for k in range(8)]
    images[BAD] = images[BAD][:40]  # cut inside its headers
    path = tmp_path_factory.mktemp("status") / "bad.slip"
    ss.write(path, [(data, k) for k, data in enumerate(images)], {"image": UncheckedImage(), "label": ss.IntField()},
             workers=0, verbose=False)
    return path


def test_a_corrupt_jpeg_is_reported_from_the_status_output(with_a_bad_jpeg):
    with ss.Loader(with_a_bad_jpeg, 8, {"image": [ss.ops.CenterCrop(8)]}, order="sequential",
                   verbose=False) as loader:
        assert not hasattr(loader.source, "errors")
        assert [b.node.pipeline for b in loader.compiled.graph.statuses()] == ["image"]
        with pytest.raises(ss.DecodeError, match=rf"bad.slip: sample {BAD} cannot be decoded"):
            list(loader)
        status = loader.compiled.status()
        assert np.flatnonzero(status).tolist() == [BAD]
    with ss.Loader(with_a_bad_jpeg, 8, {"image": [ss.ops.CenterCrop(8)]}, order="sequential", on_error="skip",
                   verbose=False) as loader:
        for _ in range(2):
            with pytest.warns(ss.SampleWarning):
                [(images, labels)] = list(loader)
            assert labels.tolist() == [k for k in range(8) if k != BAD] and all(image.any() for image in images)
        assert set(loader.failures) == {BAD} and loader.failure_count == 2


def test_a_corrupt_page_fails_a_sample_whose_fields_cannot_fail(tmp_path):
    """No decoder of the loader can fail (an array field): the sample in a
    page that fails its checksum is still reported, from ``source.failed``."""
    path = tmp_path / "vectors.slip"
    vectors = np.arange(64 * 200, dtype=np.float32).reshape(200, 64)
    ss.write(path, [(v,) for v in vectors], {"vec": ss.NDArrayField(np.float32, (64,))}, page_size=4096,
             workers=0, verbose=False)
    reader = ss.Reader(path)
    offsets = reader.metadata["vec"]["offset"].astype(np.int64)
    pages = (offsets - reader.data_offset) // reader.page_size
    damaged = set(np.flatnonzero(pages == pages[20]).tolist())
    reader.close()
    data = bytearray(path.read_bytes())
    data[int(offsets[20]) + 5] ^= 0x10
    path.write_bytes(bytes(data))
    with ss.Loader(path, 50, order="sequential", on_error="skip", verbose=False) as loader:
        assert loader.compiled.graph.statuses() == []
        with pytest.warns(ss.SampleWarning):
            batches = [vec.numpy().copy() for (vec,) in loader]
        kept = np.concatenate(batches)
        assert len(kept) == 200 - len(damaged)
        assert set(loader.failures) == damaged
