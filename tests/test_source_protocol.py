"""The Source protocol and the two registries: every built-in kind of
source keeps the protocol (checked on real small data), a type of one's
own is written once registered, and URLs open by their registered scheme."""

from __future__ import annotations

import json
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import detection_data
import numpy as np
import pytest
from PIL import Image

import slipstream as ss
from slipstream import native
from slipstream.format.location import LocalFolder, location_schemes, open_location, unregister_location_scheme
from slipstream.format.writer import SampleStream
from slipstream.sources import (
    ArrayColumns,
    ArrayRows,
    ImageFolder,
    IndexableSource,
    IterableSource,
    as_source,
    registered_sources,
    source_identity,
    unregister_source,
)
from slipstream.sources.adapters import NamedSamples, StreamSource
from slipstream.sources.protocol import SOURCE_METHODS, sample_count

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")  # pycocotools, NumPy 2


def jpeg(value: int, height: int = 20, width: int = 24) -> bytes:
    """A small JPEG of one grey level."""
    return native.jpeg_encode(np.full((height, width, 3), value, np.uint8), 90)


def image_folder(root: Path) -> Path:
    """``root/<class>/<image>.png``: two classes of two images, written by PIL."""
    for label, name in enumerate(["cat", "dog"]):
        (root / name).mkdir(parents=True)
        for k in range(2):
            Image.fromarray(np.full((16, 20, 3), 40 * label + 10 * k, np.uint8)).save(root / name / f"{k}.png")
    return root


def tar_shards(folder: Path, count: int = 5) -> list[str]:
    """Tar shards of ``.jpg`` and ``.cls`` members, by webdataset's ShardWriter."""
    webdataset = pytest.importorskip("webdataset")
    folder.mkdir(parents=True)
    with webdataset.ShardWriter(str(folder / "train-%06d.tar"), maxcount=3, verbose=0) as sink:
        for k in range(count):
            sink.write({"__key__": f"img{k:04d}", "jpg": jpeg(10 * k), "cls": k % 2})
    return sorted(str(p) for p in folder.glob("*.tar"))


def hugging_face(streaming: bool) -> Any:
    """A Hugging Face dataset of 6 JPEGs and class labels."""
    datasets = pytest.importorskip("datasets")
    features = datasets.Features({"image": datasets.Image(), "label": datasets.ClassLabel(names=["a", "b"])})
    dataset = datasets.Dataset.from_dict({"image": [{"bytes": jpeg(30 * k), "path": None} for k in range(6)],
                                          "label": [k % 2 for k in range(6)]}, features=features)
    return dataset.to_iterable_dataset(num_shards=2) if streaming else dataset


def litdata_folder(folder: Path) -> str:
    """A LitData dataset of 4 items ``{"image": PIL image, "label": 3 * k}``."""
    litdata = pytest.importorskip("litdata")
    import litdata_items

    files = []
    for k in range(4):
        files.append(folder / f"{k}.jpg")
        files[-1].write_bytes(jpeg(50 * k))
    interrupt = signal.getsignal(signal.SIGINT)  # litdata.optimize leaves its own SIGINT handler installed
    try:
        litdata.optimize(fn=litdata_items.image_and_label, inputs=[(str(f), k) for k, f in enumerate(files)],
                         output_dir=str(folder / "lit"), chunk_size=2, num_workers=1, mode="overwrite")
    finally:
        signal.signal(signal.SIGINT, interrupt)
    return str(folder / "lit")


def check_source(source: Any, fields: Mapping[str, Any] | None, count: int | None) -> Any:
    """Check that ``source`` keeps every part of the protocol, with
    ``fields`` (None: its default fields, which it must have) and
    ``count`` samples (None: a stream that does not know its length);
    return its samples."""
    assert [m for m in SOURCE_METHODS if not callable(getattr(source, m, None))] == []
    if fields is None:
        fields = source.default_fields()
        assert fields and all(hasattr(field, "type_id") for field in fields.values())
    else:
        with pytest.raises(ss.ArgumentError, match="fields must be given"):
            source.default_fields()
    metadata = source.user_metadata()
    assert isinstance(metadata, dict)
    json.dumps(metadata)  # a JSON object
    identity = source.identity()
    assert identity is None or (isinstance(identity, dict) and identity)
    json.dumps(identity)
    name = source.cache_name()
    assert isinstance(name, str) and name
    samples = source.samples_for(fields)
    assert sample_count(samples) == count
    if isinstance(samples, SampleStream):
        item_name, values = next(iter(samples))
        assert isinstance(item_name, str) and item_name and not isinstance(values, Exception)
        assert isinstance(samples.repeatable(), bool)
    else:
        values = samples[0]
        assert isinstance(samples.describe(0), str) and samples.describe(0)
    assert len(values) == len(fields)
    return samples


def test_an_image_folder_keeps_the_protocol(tmp_path):
    folder = ImageFolder(image_folder(tmp_path / "pets"))
    samples = check_source(folder, None, 4)
    assert samples is folder and folder[0] == (str(tmp_path / "pets" / "cat" / "0.png"), 0)
    assert folder.user_metadata() == {"classes": ["cat", "dog"]}
    # The identity is the one cached() has always keyed the folder by: no cache key changes.
    assert folder.identity() == {"folder": str((tmp_path / "pets").resolve()), "content": folder.fingerprint(),
                                 "classes": ["cat", "dog"]}
    assert source_identity(folder) == (folder.identity(), "pets")


def test_coco_and_segmentation_datasets_keep_the_protocol(tmp_path):
    pytest.importorskip("pycocotools")
    coco = detection_data.make_coco(tmp_path / "coco", count=3, seed=1)
    detection = ss.COCODetection(coco.images_root, coco.annotation_file)
    samples = check_source(detection, None, 3)
    assert isinstance(samples, NamedSamples) and samples.describe(0) == detection.describe(0)
    assert samples[0][1] == detection[0]["image_id"]  # the values of the default fields, in their order
    assert detection.user_metadata()["classes"] == coco.classes
    with pytest.raises(ss.ArgumentError, match="resizes images"):
        detection.samples_for({"image": ss.RGBImageField(max_resolution=64)})

    voc = detection_data.make_segmentation_folders(tmp_path / "voc", count=2, seed=2)
    segmentation = ss.SegmentationFolder(voc.images, voc.masks, classes=["bg", "shape"])
    samples = check_source(segmentation, None, 2)
    assert np.array_equal(samples[1][1], voc.class_maps[1])
    assert segmentation.user_metadata() == {"classes": ["bg", "shape"]}
    assert source_identity(segmentation)[0] == segmentation.identity() and segmentation.identity()["content"]


def test_tar_shards_keep_the_protocol(tmp_path):
    shards = tar_shards(tmp_path / "wds")
    source = ss.WebDataset(shards)
    assert check_source(source, None, 5) is source
    assert list(source.default_fields()) == ["image", "label"]
    relabelled = source.samples_for({"label": ss.IntField()})
    with pytest.warns(ss.SourceWarning, match="5 tar members of 5 samples match no field"):  # the .jpg members
        assert relabelled is not source and [values for _, values in relabelled] == [(k % 2,) for k in range(5)]
    assert [entry[0] for entry in source.identity()["webdataset"]] == [str(Path(s).resolve()) for s in shards]


@pytest.mark.parametrize("streaming", [False, True])
def test_hugging_face_datasets_keep_the_protocol(streaming):
    from slipstream.sources.huggingface import HuggingFaceSource, HuggingFaceStream

    dataset = hugging_face(streaming)
    source = HuggingFaceSource(dataset)
    samples = check_source(source, None, None if streaming else 6)  # an iterable made in memory tells no length
    assert isinstance(samples, HuggingFaceStream if streaming else IndexableSource)
    assert source.user_metadata() == {"classes": ["a", "b"]}
    # Without the label among the fields written, no class names are stored.
    assert HuggingFaceSource(dataset, {"image": ss.RGBImageField()}).user_metadata() == {}
    if not streaming:
        assert source.identity() == source_identity(dataset)[0]  # the dataset's fingerprint, before its cast
    check_source(samples, {"image": ss.RGBImageField(), "label": ss.IntField()}, None if streaming else 6)


def test_a_litdata_dataset_keeps_the_protocol(tmp_path):
    source = ss.LitData(litdata_folder(tmp_path))
    samples = check_source(source, None, 4)
    assert isinstance(samples, IndexableSource) and samples[2][list(source.default_fields()).index("label")] == 6
    assert source.identity()["index"] and source.cache_name() == "lit"


def test_the_adapters_keep_the_protocol():
    fields = {"x": ss.IntField(), "y": ss.FloatField()}
    rows = ArrayRows([np.arange(5), np.linspace(0, 1, 5)])
    assert check_source(rows, fields, 5) is rows and rows.identity() is None
    with pytest.raises(ss.ArgumentError, match="2 arrays for 1 fields"):
        rows.samples_for({"x": ss.IntField()})

    columns = ArrayColumns({"y": np.linspace(0, 1, 5), "x": np.arange(5)})
    samples = check_source(columns, None, 5)
    assert type(columns.default_fields()["x"]).__name__ == "IntField"
    assert samples[4] == (1.0, 4)
    assert columns.samples_for(fields)[4] == (4, 1.0)  # in the order of the fields asked for
    with pytest.raises(ss.ArgumentError, match=r"fields \['z'\] have no array"):
        columns.samples_for({"z": ss.IntField()})

    indexable = IndexableSource([{"x": k, "y": k / 2} for k in range(3)], list(fields))
    assert check_source(indexable, fields, 3)[2] == (2, 1.0) and indexable.identity() is None
    iterable = IterableSource(({"x": k, "y": 0.5} for k in range(3)), list(fields))
    assert check_source(iterable, fields, None) is iterable


class Countdown(SampleStream):
    """A stream class of one's own: values ``(n,)`` from ``n`` down to 1."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self):
        for value in range(self.n, 0, -1):
            yield f"step {value}", (value,)

    def length_hint(self) -> int:
        return self.n


def test_a_stream_of_ones_own_is_a_source_once_its_fields_are_given(tmp_path):
    stream = Countdown(4)
    source = StreamSource(stream)
    assert check_source(source, {"n": ss.IntField()}, 4) is stream
    with pytest.raises(ss.ArgumentError, match="fields must be given for a source of type Countdown"):
        ss.write(tmp_path / "c.slip", stream, verbose=False)
    ss.write(tmp_path / "c.slip", stream, {"n": ss.IntField()}, workers=0, verbose=False)
    with ss.Reader(tmp_path / "c.slip") as reader:
        assert [reader[k]["n"] for k in range(4)] == [4, 3, 2, 1]


def test_every_built_in_kind_is_a_registry_entry():
    described = [entry.description for entry in registered_sources()]
    for kind in ("a path", "an ImageFolder", "a WebDataset", "a Hugging Face dataset", "a dict of arrays",
                 "a LitData dataset", "an object with len() and [i]", "an iterable"):
        assert any(d.startswith(kind) for d in described), kind
    assert described[-1] == "an iterable"  # the catch-alls last
    with pytest.raises(ss.ArgumentError) as refused:
        as_source(3.5, {"x": ss.FloatField()})
    message = str(refused.value)
    assert message.startswith("cannot write from a float: give a path")
    assert all(d in message for d in described) and "register_source" in message


# ---------------------------------------------------------------- a source type of one's own


class Recordings:
    """A type of one's own, neither indexable nor iterable: recordings of
    a sensor, fetched by number."""

    def __init__(self, readings: list[np.ndarray], site: str) -> None:
        self._readings = readings
        self.site = site

    def count(self) -> int:
        return len(self._readings)

    def fetch(self, number: int) -> np.ndarray:
        return self._readings[number]


class RecordingsSource:
    """Recordings as a Source: fields ``signal`` and ``peak``."""

    def __init__(self, recordings: Recordings) -> None:
        self.recordings = recordings

    def default_fields(self) -> dict[str, Any]:
        return {"signal": ss.NDArrayField(np.float32, (8,)), "peak": ss.FloatField()}

    def user_metadata(self) -> dict[str, Any]:
        return {"site": self.recordings.site}

    def identity(self) -> dict[str, Any]:
        return {"recordings": self.recordings.site, "count": self.recordings.count()}

    def cache_name(self) -> str:
        return f"recordings-{self.recordings.site}"

    def samples_for(self, fields: Mapping[str, Any]) -> RecordingsSource:
        return self

    def __len__(self) -> int:
        return self.recordings.count()

    def __getitem__(self, index: int) -> tuple[np.ndarray, float]:
        signal = self.recordings.fetch(index)
        return signal, float(signal.max())

    def describe(self, index: int) -> str:
        return f"recording {index} of {self.recordings.site}"


@pytest.fixture
def recordings() -> Recordings:
    rng = np.random.default_rng(7)
    return Recordings([rng.random(8, dtype=np.float32) for _ in range(5)], "north")


def test_a_type_of_ones_own_is_written_once_registered(tmp_path, recordings):
    with pytest.raises(ss.ArgumentError, match="cannot write from a Recordings: give .*register_source"):
        ss.write(tmp_path / "r.slip", recordings, verbose=False)
    ss.register_source(Recordings, lambda obj, fields: RecordingsSource(obj), description="sensor recordings")
    try:
        assert registered_sources()[0].description == "sensor recordings"  # tried before the built-in kinds
        result = ss.write(tmp_path / "r.slip", recordings, workers=0, verbose=False)
        assert result.samples == 5
        with ss.Reader(tmp_path / "r.slip") as reader:
            assert list(reader.fields) == ["signal", "peak"] and reader.user_metadata == {"site": "north"}
            for k in range(5):
                assert np.array_equal(reader[k]["signal"], recordings.fetch(k))
                assert reader[k]["peak"] == pytest.approx(float(recordings.fetch(k).max()))
    finally:
        unregister_source(Recordings)
    with pytest.raises(ss.ArgumentError, match="cannot write from a Recordings"):
        as_source(recordings, None)


def test_a_source_class_of_ones_own_is_registered_as_it_is_and_cached_by_its_identity(tmp_path, recordings):
    source = RecordingsSource(recordings)
    ss.register_source(RecordingsSource)
    try:
        samples, fields, metadata = as_source(source, None)
        assert samples is source and list(fields) == ["signal", "peak"] and metadata == {"site": "north"}
        path = ss.cached(source, cache_dir=tmp_path / "cache", workers=0, verbose=False)
        assert path.name.startswith("recordings-north-") and path.exists()
        assert ss.cached(source, cache_dir=tmp_path / "cache", workers=0, verbose=False) == path
        more = RecordingsSource(Recordings(recordings._readings[:3], "north"))
        assert ss.cached(more, cache_dir=tmp_path / "cache", workers=0, verbose=False) != path  # another identity
        with ss.Reader(path) as reader:
            assert len(reader) == 5
    finally:
        unregister_source(RecordingsSource)


def test_registering_checks_what_it_is_given(recordings):
    with pytest.raises(ss.ArgumentError, match=r"Recordings is not a slipstream.sources.Source \(it lacks "
                                               r"default_fields\(\), user_metadata\(\)"):
        ss.register_source(Recordings)
    with pytest.raises(ss.ArgumentError, match="needs a description"):
        ss.register_source(lambda obj: False)
    with pytest.raises(ss.ArgumentError, match="kind must be a type"):
        ss.register_source("Recordings")
    with pytest.raises(ss.ArgumentError, match="no source kind is registered for Recordings"):
        unregister_source(Recordings)
    ss.register_source(Recordings, lambda obj, fields: obj, description="recordings, unadapted")
    try:
        with pytest.raises(ss.ArgumentError, match=r"a Recordings \(made by .* from a Recordings\) is not a "
                                                   r"slipstream.sources.Source: it lacks default_fields\(\)"):
            as_source(recordings, None)
    finally:
        unregister_source(Recordings)


# ---------------------------------------------------------------- URL schemes


@pytest.fixture
def scratch(tmp_path):
    """The scheme ``scratch://name``, registered for the test: the folder ``tmp_path/scratch/name``."""
    root = tmp_path / "scratch"
    opened = []

    def factory(url: str, remote: ss.Remote) -> LocalFolder:
        opened.append((url, remote))
        return LocalFolder(root / url[len("scratch://"):])

    ss.register_location_scheme("scratch", factory)
    try:
        yield root, opened
    finally:
        unregister_location_scheme("scratch")


def test_a_registered_scheme_opens_its_urls(scratch):
    root, opened = scratch
    assert "scratch" in location_schemes()
    location = open_location("SCRATCH://runs/a")  # schemes are case-insensitive
    assert isinstance(location, LocalFolder) and location.path == root / "runs" / "a"
    remote = ss.Remote(retries=2)
    open_location("scratch://b", remote)
    assert opened[-1] == ("scratch://b", remote)
    assert isinstance(opened[0][1], ss.Remote)  # the defaults when none are given


def test_a_sharded_dataset_is_written_and_read_at_a_registered_scheme(scratch):
    root, opened = scratch
    values = np.arange(40)
    result = ss.write("scratch://ds", {"x": values}, shards=2, page_size=4096, workers=0, verbose=False)
    assert result.samples == 40 and (root / "ds" / "manifest.json").is_file()
    with ss.open_dataset("scratch://ds") as reader:
        assert [reader[k]["x"] for k in range(40)] == list(values)
    assert {url for url, _ in opened} == {"scratch://ds"}


def test_an_unknown_scheme_is_refused_naming_it():
    with pytest.raises(ss.ArgumentError) as refused:
        open_location("nosuch://bucket/data")
    message = str(refused.value)
    assert message.startswith("nosuch://bucket/data: no storage is registered for URLs of scheme nosuch://")
    assert "s3" in message and "file" in message and "register_location_scheme" in message
    with pytest.raises(ss.ArgumentError, match="nosuch://bucket/data: no storage"):
        ss.open_dataset("nosuch://bucket/data")


def test_built_in_schemes_stay_registered():
    assert {"file", "s3", "gs", "az", "http", "https"} <= set(location_schemes())
    assert isinstance(open_location("file:///tmp"), LocalFolder)
    with pytest.raises(ss.ArgumentError, match="is not a URL scheme"):
        ss.register_location_scheme("s3://", lambda url, remote: LocalFolder(url))
    with pytest.raises(ss.ArgumentError, match="no location scheme 'scratch' is registered"):
        unregister_location_scheme("scratch")


def test_a_type_registered_with_an_adapter_is_cached_by_its_source_s_identity(tmp_path, recordings):
    """cached() asks the object itself first, then the Source its adapter
    made: a type of one's own needs no name= when its adapter identifies it."""
    with pytest.raises(ss.ArgumentError, match="cannot write from a Recordings"):
        ss.cached(recordings, cache_dir=tmp_path / "cache", workers=0, verbose=False)
    ss.register_source(Recordings, lambda obj, fields: RecordingsSource(obj), description="sensor recordings")
    try:
        path = ss.cached(recordings, cache_dir=tmp_path / "cache", workers=0, verbose=False)
        assert path.name.startswith("recordings-north-") and path.exists()
        assert ss.cached(recordings, cache_dir=tmp_path / "cache", workers=0, verbose=False) == path
        fewer = Recordings(recordings._readings[:3], "north")
        assert ss.cached(fewer, cache_dir=tmp_path / "cache", workers=0, verbose=False) != path  # its identity moved
        with ss.Reader(path) as reader:
            assert len(reader) == 5 and reader.user_metadata == {"site": "north"}
    finally:
        unregister_source(Recordings)
