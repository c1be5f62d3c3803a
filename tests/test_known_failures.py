"""Known failures as a per-batch input of the compiled stage.

A sample known to have failed before its batch runs (the dataset holds no
values for it, or its bytes lie in a page that failed its checksum) reaches
the decoders as an input of each call, ``known``, as the batch's indices
do; no array is shared between the loader and the decoders for it.  The
epoch iterator works the statuses out from one table of its own
(``KnownFailures``), from what the stager reports (``Staged``), and one
function decides after the batch which samples failed.  The decoders'
columns change only through ``DecodeSource.refresh``, whose version each
call is given.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np
import pytest

import jpeg_corpus
import slipstream as ss
from slipstream.compiler import Allocation, Decoder, Pipeline, State, symbols
from slipstream.fields.base import Encoded
from slipstream.fields.decoders import COUNT_DECODES_VARIABLE, UNREADABLE, DecodeSource
from slipstream.fields.image import JPEG_MODE
from slipstream.loader.iterator import KnownFailures
from slipstream.loader.outputs import resolve_outputs
from slipstream.loader.stager import CORRUPT, Staged

SAMPLES = 24
DAMAGED = 9  # whose page is corrupted
GONE = 5  # recorded without values
CUT = 3  # a JPEG cut inside its headers, stored unchecked
CROP = 8


def images() -> list[bytes]:
    return [jpeg_corpus.make_sample(16, 16, seed=k).data for k in range(SAMPLES)]


@pytest.fixture(scope="module")
def damaged(tmp_path_factory) -> tuple[Any, set[int]]:
    """JPEGs in 4 KiB pages, a byte of sample DAMAGED's value changed after
    writing: its page fails its checksum.  Returns the file and the samples
    of that page."""
    path = tmp_path_factory.mktemp("known") / "damaged.slip"
    ss.write(path, [(data, k) for k, data in enumerate(images())], {"image": ss.RGBImageField(),
                                                                     "label": ss.IntField()},
             page_size=4096, workers=0, verbose=False)
    with ss.Reader(path) as reader:
        offsets = reader.metadata["image"]["offset"].astype(np.int64)
        pages = (offsets - reader.data_offset) // reader.page_size
    data = bytearray(path.read_bytes())
    data[int(offsets[DAMAGED]) + 40] ^= 0x10
    path.write_bytes(bytes(data))
    return path, set(np.flatnonzero(pages == pages[DAMAGED]).tolist())


@pytest.fixture(scope="module")
def without_values(tmp_path_factory):
    """JPEGs, sample GONE recorded as one the writer could not read."""
    path = tmp_path_factory.mktemp("known") / "gone.slip"
    ss.write(path, [(data, k) for k, data in enumerate(images())], {"image": ss.RGBImageField(),
                                                                     "label": ss.IntField()},
             user_metadata={"slipstream.unreadable": {str(GONE): "its source could not be read"}},
             workers=0, verbose=False)
    return path


@dataclasses.dataclass(frozen=True)
class UncheckedImage(ss.RGBImageField):
    """Stores any bytes as a 16x16 JPEG, unchecked, so that bad bytes reach the decoders."""

    def encode(self, value):
        return Encoded({"height": 16, "width": 16, "mode": JPEG_MODE}, value)


@pytest.fixture(scope="module")
def cut(tmp_path_factory):
    """JPEGs, sample CUT's cut inside its headers: only a decoder can tell."""
    data = images()
    data[CUT] = data[CUT][:40]
    path = tmp_path_factory.mktemp("known") / "cut.slip"
    ss.write(path, [(d, k) for k, d in enumerate(data)], {"image": UncheckedImage(), "label": ss.IntField()},
             workers=0, verbose=False)
    return path


def two_epochs(path, monkeypatch) -> tuple[list[list[np.ndarray]], np.ndarray, ss.Loader]:
    """Two epochs of a skipping loader over ``path`` counting its decodes:
    each epoch's (images, labels) batches and the decodes per sample."""
    monkeypatch.setenv(COUNT_DECODES_VARIABLE, "1")
    loader = ss.Loader(path, 5, {"image": [ss.ops.CenterCrop(CROP)]}, order="sequential", on_error="skip",
                       verbose=False)
    epochs = []
    for _ in range(2):
        with pytest.warns(ss.SampleWarning):
            epochs.append([[value.numpy().copy() for value in batch] for batch in loader])
    return epochs, loader.source.decodes.copy(), loader


def same_batches(a: list[list[np.ndarray]], b: list[list[np.ndarray]]) -> bool:
    return len(a) == len(b) and all(len(x) == len(y) and all(np.array_equal(u, v) for u, v in zip(x, y))
                                    for x, y in zip(a, b))


# ---------------------------------------------------------------- through the loader


def test_samples_in_a_corrupt_page_are_never_decoded_and_both_epochs_are_alike(damaged, monkeypatch):
    path, page_mates = damaged
    (first, second), decodes, loader = two_epochs(path, monkeypatch)
    with loader:
        assert same_batches(first, second)
        labels = np.concatenate([labels for _, labels in first]).tolist()
        assert labels == [k for k in range(SAMPLES) if k not in page_mates]
        assert all(image.any() for images, _ in first for image in images)
        # Known before each batch ran, in either epoch: the decoders were told, and never decoded them.
        assert DAMAGED in page_mates and decodes[sorted(page_mates)].tolist() == [0] * len(page_mates)
        assert decodes[labels].tolist() == [2] * len(labels)
        assert set(loader.failures) == page_mates and loader.failure_count == 2 * len(page_mates)
        assert "does not match its checksum" in loader.failures[DAMAGED]


def test_a_sample_without_values_is_never_decoded_and_both_epochs_are_alike(without_values, monkeypatch):
    (first, second), decodes, loader = two_epochs(without_values, monkeypatch)
    with loader:
        assert same_batches(first, second)
        assert np.concatenate([labels for _, labels in first]).tolist() == [k for k in range(SAMPLES) if k != GONE]
        assert decodes[GONE] == 0 and np.delete(decodes, GONE).tolist() == [2] * (SAMPLES - 1)
        assert set(loader.failures) == {GONE} and "its source could not be read" in loader.failures[GONE]


def test_a_decoders_own_failure_is_found_again_each_epoch(cut, monkeypatch):
    """A decoder's failure is not a known failure: a crop that reads only
    part of a damaged image may decode under another draw, so each epoch
    decodes the sample again, and skips it again."""
    (first, second), decodes, loader = two_epochs(cut, monkeypatch)
    with loader:
        assert same_batches(first, second)
        assert np.concatenate([labels for _, labels in first]).tolist() == [k for k in range(SAMPLES) if k != CUT]
        assert decodes.tolist() == [2] * SAMPLES
        assert set(loader.failures) == {CUT} and loader.failure_count == 2


# ---------------------------------------------------------------- the compiled stage's input


def test_the_decoders_read_the_known_statuses_given_with_the_call(damaged):
    """A real image decoder over a sound sample: given a status, it does not
    decode it, reports that status and gives zeros; the next call, given
    none, decodes it.  Nothing is kept between calls."""
    path, _ = damaged
    with ss.Reader(path) as reader:
        source = DecodeSource(reader, reader.storage, count_decodes=True)
        compiled = Pipeline(resolve_outputs({"image": [ss.ops.CenterCrop(CROP)]}, reader.fields, source,
                                            reader.path)).compile(4, slots=2, verbose=False)
        [stage] = [s for s in compiled.sources if s.jit]
        assert symbols.KNOWN_FAILURES in stage.params and "known = known_failures[i]" in stage.source
        indices = np.array([0, 1, 2, 4])
        told = np.array([0, CORRUPT, 0, 0], np.int32)
        out = compiled(indices, known=told)
        np.testing.assert_array_equal(compiled.status(), told)
        assert not out["image"][1].any() and all(out["image"][k].any() for k in (0, 2, 3))
        assert source.decodes[indices].tolist() == [1, 0, 1, 1]
        again = compiled(indices)
        assert not compiled.status().any() and again["image"][1].any()
        assert source.decodes[indices].tolist() == [2, 1, 2, 2]
        with pytest.raises(ss.ArgumentError, match="known must have the shape of indices"):
            compiled(indices, known=np.zeros(3, np.int32))


@dataclasses.dataclass(frozen=True, eq=False)
class Told(Decoder):
    """Copies ``values[index]``, or, for a sample with a known status, reports it."""

    tables: dict  # {"values": the array its code reads}, which the test replaces
    can_fail: ClassVar[bool] = True

    def inputs(self):
        return (self.tables["values"], symbols.KNOWN)

    def declare(self, state):
        return State(shape=(), dtype=np.int64), Allocation((), np.int64)

    def generate_code(self):
        def read(values, known, index, out, status, key):
            status[0] = known
            out[0] = values[index] if known == 0 else 0
            return out

        return read

    def fingerprint(self):
        return "Told"


def test_a_decoder_takes_the_known_status_where_it_lists_the_marker():
    tables = {"values": np.arange(10, 20, dtype=np.int64)}
    compiled = Pipeline([Told(tables)]).compile(batch_size=4)
    [stage] = compiled.sources
    assert symbols.input_array(0, 0) in stage.params and symbols.input_array(0, 1) not in stage.params
    out = compiled(np.array([1, 2, 3]), known=np.array([0, 0, 7]))
    assert out.tolist() == [11, 12, 0] and compiled.status().tolist() == [0, 0, 7]
    out = compiled(np.array([1, 2, 3]))
    assert out.tolist() == [11, 12, 13] and compiled.status().tolist() == [0, 0, 0]


def test_a_call_given_another_tables_version_binds_the_decoders_inputs_again():
    tables = {"values": np.arange(10, dtype=np.int64)}
    compiled = Pipeline([Told(tables)]).compile(batch_size=2)
    assert compiled(np.array([3, 4])).tolist() == [3, 4]
    tables["values"] = np.arange(100, 110, dtype=np.int64)  # the owner's new tables
    assert compiled(np.array([3, 4])).tolist() == [3, 4]  # not told: the tables bound
    assert compiled(np.array([3, 4]), tables=1).tolist() == [103, 104] and compiled.tables == 1
    assert compiled(np.array([3, 4]), tables=1).tolist() == [103, 104]


def test_a_refresh_is_the_columns_one_write_and_numbers_it(damaged):
    path, _ = damaged
    with ss.Reader(path) as reader:
        source = DecodeSource(reader, reader.storage)
        assert not hasattr(source, "failed") and source.version == 0
        labels = source.column("label", "value")
        reader.metadata = reader.metadata.copy()
        reader.metadata["label"]["value"][:2] += 100
        assert labels[:2].tolist() == [0, 1]  # a copy of the records, until refreshed
        assert source.refresh(np.array([0, 1])) == 1 and source.version == 1
        assert labels[:3].tolist() == [100, 101, 2]


# ---------------------------------------------------------------- the iterator's table


def test_the_table_of_known_failures_follows_what_the_stager_reports(without_values):
    with ss.Reader(without_values) as reader:
        table = KnownFailures(reader)
        batch = np.array([7, GONE, 2, 11])
        assert table.before_batch(batch, Staged()).tolist() == [0, UNREADABLE, 0, 0]
        assert table.before_batch(batch, Staged(corrupt=np.array([2]))).tolist() == [0, UNREADABLE, CORRUPT, 0]
        # Arrived again (a source read again), its records are what the dataset says now.
        assert table.before_batch(batch, Staged(arrived=np.array([2, GONE]))).tolist() == [0, UNREADABLE, 0, 0]
        later = np.array([SAMPLES - 1, 0])
        assert table.before_batch(later, Staged()).tolist() == [0, 0]


def test_the_page_stager_reports_samples_in_corrupt_pages(damaged):
    from slipstream.loader import staging

    path, page_mates = damaged
    with ss.Reader(path) as reader:
        stager = staging.Stager(reader.page_store(os_cache=True, pool_pages=0), reader)
        source = DecodeSource(reader, stager.storage)
        source.offsets("image")  # the decoders' field, whose pages the stager brings in
        batches = [np.arange(SAMPLES)]
        stager.start_epoch(batches, source)
        staged = stager.prepare(0)
        assert isinstance(staged, Staged) and staged.arrived is None
        assert sorted(staged.corrupt.tolist()) == sorted(page_mates)
        stager.release(0)
        stager.close()
