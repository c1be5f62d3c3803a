"""Converting on a real Ray cluster (a head node and a second node, as
processes on this machine) into the real S3 server: the same bytes for any
number of workers and as ``slipstream.write`` on one machine, a worker
killed mid-write, a refused overwrite, Hugging Face rows, LitData chunks,
video rows, and the CLI."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
from jpeg_corpus import stored as tiled

import slipstream as ss

ray = pytest.importorskip("ray")
pytest.importorskip("webdataset")
import slipstream.ray as ssray  # noqa: E402
from cli_command import slipstream_command  # noqa: E402
from ray_cluster import local_cluster  # noqa: E402
from test_sources import jpegs, write_tars  # noqa: E402

cloudpickle = pytest.importorskip("ray.cloudpickle")
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray's workers cannot import the test modules

SAMPLES = 2000
OPTIONS = dict(page_size=1 << 16, shard_size="128KB")  # small pages and shards: many of each from small images


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A Ray cluster of two nodes (head: 1 CPU, worker node: 2 CPUs) on 127.0.0.1."""
    with local_cluster(tmp_path_factory.mktemp("ray"), head_cpus=1, node_cpus=2) as nodes:
        yield nodes


@pytest.fixture(scope="module")
def tars(tmp_path_factory, s3_server):
    """2,000 samples as ten WebDataset shards (webdataset's ShardWriter) in the S3 server."""
    from slipstream.format.objectstore import ObjectPrefix

    folder = tmp_path_factory.mktemp("wds")
    images = jpegs(SAMPLES, seed=11)
    remote = ss.Remote(storage_options=s3_server.storage_options(), cache_dir=folder / "cache")
    prefix = ObjectPrefix("s3://test/ray/wds", remote)
    for shard in write_tars(folder / "tars", images, per_shard=200):
        prefix.put_file(shard.rsplit("/", 1)[-1], shard)
    return images, remote, folder


def digests(url: str, remote: ss.Remote) -> dict[str, str]:
    """SHA-256 of every object under ``url``."""
    from slipstream.format.objectstore import ObjectPrefix

    prefix = ObjectPrefix(url, remote)
    return {name: hashlib.sha256(prefix.read_all(name)).hexdigest() for name in prefix.names()}


def convert(url: str, remote: ss.Remote, workers: int, fields: dict | None = None):
    """Convert the tar shards with ``slipstream.ray.write`` and ``workers`` encoding tasks at once
    (``fields`` replace those the tar shards map to)."""
    source = ss.WebDataset("s3://test/ray/wds/", remote=remote)
    return ssray.write(ssray.read_webdataset(source, concurrency=workers), url, {**source.fields, **(fields or {})},
                       concurrency=workers, remote=remote, **OPTIONS)


def convert_with_datasink(url: str, remote: ss.Remote, workers: int, sink: type = ssray.SlipstreamDatasink,
                          fused: bool = False, **extra):
    """Convert the tar shards with ``Dataset.write_datasink`` and ``workers`` write tasks at once;
    ``fused``: as many read tasks, so that Ray runs each read and its write as one task."""
    source = ss.WebDataset("s3://test/ray/wds/", remote=remote)
    dataset = ssray.read_webdataset(source, concurrency=workers if fused else None)
    dataset.context.execution_options.preserve_order = True
    target = sink(url, source.fields, remote=remote, **OPTIONS, **extra)
    dataset.write_datasink(target, concurrency=workers)
    assert ("ReadSlipstreamWebDataset->Write" in dataset.stats()) == fused
    return target.result


@pytest.fixture(scope="module")
def one_worker(cluster, tars):
    images, remote, _ = tars
    result = convert("s3://test/ray/one", remote, 1)
    return result, digests("s3://test/ray/one", remote)


def test_any_number_of_workers_writes_the_same_bytes_as_write(one_worker, tars, tmp_path):
    images, remote, _ = tars
    result, expected = one_worker
    assert result.samples == SAMPLES and len(result.shards) > 5
    three = convert("s3://test/ray/three", remote, 3)
    assert three.shards == result.shards
    assert digests("s3://test/ray/three", remote) == expected  # manifest and every shard, SHA-256
    assert set(expected) == {"manifest.json", *result.shards}  # no part or stray shard left

    ss.write(tmp_path / "local", ss.WebDataset("s3://test/ray/wds/", remote=remote), workers=2,
                     verbose=False, **OPTIONS)
    assert {n: hashlib.sha256((tmp_path / "local" / n).read_bytes()).hexdigest()
            for n in os.listdir(tmp_path / "local")} == expected
    pipelines = {"image": [ss.ops.CenterCrop(16)], "label": None}

    def batches(path, **options):
        loader = ss.Loader(path, 100, pipelines, order=ss.Order("quasi_random", seed=3), verbose=False, **options)
        out = [(image.numpy().tobytes(), np.asarray(label).tolist()) for image, label in loader]
        loader.close()
        return out

    from_ray, from_write = batches("s3://test/ray/three", remote=remote), batches(tmp_path / "local")
    assert from_ray == from_write
    count = sum(len(labels) for _, labels in from_ray)
    assert count == SAMPLES
    with ss.open_dataset("s3://test/ray/three", remote=remote) as reader:
        assert bytes(reader.value_bytes(1234, "image")) == tiled(images[1234])
        assert reader[1234]["label"] == 1234 % 10


def test_the_datasink_writes_the_same_bytes(one_worker, tars):
    _, remote, _ = tars
    result, expected = one_worker
    for workers, fused in ((1, False), (3, True)):
        url = f"s3://test/ray/sink-{workers}"
        assert convert_with_datasink(url, remote, workers, fused=fused).shards == result.shards
        assert digests(url, remote) == expected  # and no part left in _parts/


def label_that_kills_its_worker_once(marker: str, label: int) -> ss.IntField:
    """An ``IntField`` (stored as one) whose encoding kills the worker
    process the first time it meets ``label`` (``marker``, a file, says it happened)."""

    class KillsItsWorkerOnce(ss.IntField):
        def encode(self, value):
            if value == label and not os.path.exists(marker):
                open(marker, "w").close()
                os.kill(os.getpid(), signal.SIGKILL)
            return super().encode(value)

    return KillsItsWorkerOnce()


def test_a_worker_killed_while_encoding_is_retried_and_the_bytes_are_the_same(one_worker, tars, tmp_path):
    _, remote, _ = tars
    marker = tmp_path / "killed"
    result = convert("s3://test/ray/killed", remote, 2, {"label": label_that_kills_its_worker_once(str(marker), 7)})
    assert marker.exists()  # a worker was killed mid-write
    assert result.samples == SAMPLES
    assert digests("s3://test/ray/killed", remote) == one_worker[1]


class KillsItsWorkerOnce(ssray.SlipstreamDatasink):
    """Kills the worker process of write task 2 once it has stored its
    part, the first time (``marker``, a file, says it happened)."""

    def __init__(self, *args, marker: str, **options):
        super().__init__(*args, **options)
        self.marker = marker

    def write(self, blocks, ctx):
        summary = super().write(blocks, ctx)
        if ctx.task_idx == 2 and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        return summary


def test_a_datasink_worker_killed_after_storing_its_part_is_retried(one_worker, tars, tmp_path):
    _, remote, _ = tars
    marker = tmp_path / "killed"
    result = convert_with_datasink("s3://test/ray/killed-sink", remote, 2, sink=KillsItsWorkerOnce,
                                   marker=str(marker))
    assert marker.exists()  # a worker was killed mid-write
    assert result.samples == SAMPLES
    assert digests("s3://test/ray/killed-sink", remote) == one_worker[1]


def test_an_existing_dataset_is_refused_unless_overwrite(one_worker, tars):
    _, remote, _ = tars
    source = ss.WebDataset("s3://test/ray/wds/", remote=remote)
    with pytest.raises(FileExistsError, match=r"s3://test/ray/one already holds a slipstream dataset "
                                              r"\(manifest.json\); pass overwrite=True"):
        ssray.write(ssray.read_webdataset(source), "s3://test/ray/one", source.fields, remote=remote, **OPTIONS)
    assert digests("s3://test/ray/one", remote) == one_worker[1]  # untouched
    again = ssray.write(ssray.read_webdataset(source), "s3://test/ray/one", source.fields, remote=remote,
                        overwrite=True, **OPTIONS)
    assert again.samples == SAMPLES and digests("s3://test/ray/one", remote) == one_worker[1]


def test_bad_rows_follow_on_error(cluster, tmp_path):
    rows = [{"image": data, "label": k} for k, data in enumerate(jpegs(40, seed=12))]
    rows[17]["image"] = b"\xff\xd8\xff broken"
    fields = {"image": ss.RGBImageField(), "label": ss.IntField()}
    with pytest.raises(Exception, match=r"was not written: row 17 of write task \d+, field 'image'|"
                                        r"field 'image'"):
        ssray.write(ray.data.from_items(rows), str(tmp_path / "raise"), fields)
    assert not (tmp_path / "raise" / "manifest.json").exists()
    assert not any((tmp_path / "raise").glob("shard-*"))
    result = ssray.write(ray.data.from_items(rows, override_num_blocks=4), str(tmp_path / "skip"), fields,
                         on_error="skip")
    assert [i for i, _ in result.skipped] == [17] and result.samples == 39
    with ss.open_dataset(tmp_path / "skip") as reader:
        assert [reader[i]["label"] for i in range(39)] == [k for k in range(40) if k != 17]


def test_shards_by_count_and_an_empty_dataset(cluster, tmp_path):
    rows = [{"image": data, "label": k} for k, data in enumerate(jpegs(30, seed=13))]
    fields = {"image": ss.RGBImageField(), "label": ss.IntField()}
    result = ssray.write(ray.data.from_items(rows, override_num_blocks=7), str(tmp_path / "ray"), fields, shards=3,
                         concurrency=2, page_size=4096)
    local = ss.write(tmp_path / "local", rows, fields, shards=3, page_size=4096, workers=0, verbose=False)
    assert len(result.shards) == 3 and result.shards == local.shards
    assert all((tmp_path / "ray" / n).read_bytes() == (tmp_path / "local" / n).read_bytes()
               for n in ["manifest.json", *result.shards])

    empty = ssray.write(ray.data.from_items([{"image": b"", "label": 0}]).filter(lambda row: False),
                        str(tmp_path / "empty"), fields)
    assert empty.samples == 0 and len(empty.shards) == 1
    with ss.open_dataset(tmp_path / "empty") as reader:
        assert len(reader) == 0
    with pytest.raises(ss.ArgumentError, match="concurrency must be a positive integer"):
        ssray.write(ray.data.from_items(rows), str(tmp_path / "none"), fields, concurrency=0)


def test_samples_a_source_cannot_read_become_named_error_rows():
    from slipstream.ray.datasource import ERROR, KEY, _ReadUnit

    samples = [("a", (b"x", 1)), ("b", OSError("truncated")), ("c", (b"y",)), ("d", (b"z", 4))]
    frames = list(_ReadUnit(["image", "label"], lambda unit: iter(samples), "unit")())
    rows = [row for frame in frames for row in frame.to_pylist()]  # an Arrow table: bytes, integers, text
    assert [r[KEY] for r in rows] == ["a", "b", "c", "d"]
    assert [r[ERROR] for r in rows] == ["", "OSError: truncated", "ValueError: 1 values for the 2 fields 'image', "
                                        "'label'", ""]
    assert [r["label"] for r in rows] == [1, None, None, 4] and type(rows[3]["label"]) is int  # not floats


def test_hugging_face_rows_through_ray(cluster, tmp_path):
    from test_sources import hf_dataset

    images, dataset = hf_dataset()
    fields = {"image": ss.RGBImageField(), "label": ss.IntField()}
    result = ssray.write(ray.data.from_huggingface(dataset), str(tmp_path / "hf"), fields)
    assert result.samples == 20
    with ss.open_dataset(tmp_path / "hf") as reader:
        assert [bytes(reader.value_bytes(k, "image")) for k in range(20)] == [tiled(i) for i in images]
        assert [reader[k]["label"] for k in range(20)] == [k % 4 for k in range(20)]


def test_video_rows_through_ray(cluster, tmp_path):
    """Rows of video bytes: on the cluster, the dataset ``ss.write`` writes."""
    import real_photos
    from slipstream.sources.synthetic_video import encode_clip, pan_zoom

    clips = [encode_clip(tmp_path / f"clip{i}.mp4", pan_zoom(real_photos.pixels("coffee"), 6 + i, (48, 64)),
                         (48, 64)).read_bytes() for i in range(3)]
    rows = [{"video": clip, "label": i} for i, clip in enumerate(clips)]
    fields = {"video": ss.VideoField(), "label": ss.IntField()}
    result = ssray.write(ray.data.from_items(rows), str(tmp_path / "ray"), fields, shards=2)
    assert result.samples == 3 and not result.skipped
    ss.write(tmp_path / "direct", [(r["video"], r["label"]) for r in rows], fields, shards=2, verbose=False)
    with ss.open_dataset(tmp_path / "ray") as reader, ss.open_dataset(tmp_path / "direct") as direct:
        assert [bytes(reader.value_bytes(k, "video")) for k in range(3)] == \
            [bytes(direct.value_bytes(k, "video")) for k in range(3)]
        assert [len(reader.read(k, "video")) for k in range(3)] == [6, 7, 8]


def test_litdata_chunks_through_ray(cluster, tmp_path):
    from test_sources import check_litdata_copy, litdata_dataset

    images, files, folder = litdata_dataset(tmp_path, count=24)
    dataset = ssray.read_litdata(folder)
    assert dataset.columns() == ["image", "label", "__key__", "__error__"]
    result = ssray.write(dataset, str(tmp_path / "lit"), {"image": ss.RGBImageField(), "label": ss.IntField()},
                         concurrency=2)
    assert result.samples == 24 and not result.skipped
    check_litdata_copy(tmp_path / "lit", images, files)

    out = tmp_path / "lit-cli"  # the CLI takes a LitData folder too
    done = subprocess.run([slipstream_command(), "write", folder, str(out), "--ray", cluster.address,
                           "--shard-size", "64KB"], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"wrote {out}: 24 samples in" in done.stdout
    check_litdata_copy(out, images, files)


def test_cli_writes_on_the_cluster(cluster, tars, tmp_path):
    _, _, folder = tars
    out = tmp_path / "cli"
    command = [slipstream_command(), "write", str(folder / "tars"), str(out),
               "--ray", cluster.address, "--page-size", str(1 << 16), "--shard-size", "256KB"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"wrote {out}: {SAMPLES} samples in" in done.stdout
    again = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert again.returncode == 1 and "already holds a slipstream dataset" in again.stderr
    with ss.open_dataset(out) as reader:
        assert len(reader) == SAMPLES and reader[5]["label"] == 5


def test_relative_paths_are_the_drivers_wherever_the_workers_run(cluster, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the cluster's processes run in the folder local_cluster made: another one
    write_tars(tmp_path / "tars", jpegs(30, seed=14), per_shard=10)
    source = ss.WebDataset("tars/")
    local = ss.write(tmp_path / "local", source, shard_size="1GB", workers=0, verbose=False)
    result = ssray.write(ssray.read_webdataset(source), "out", source.fields)
    assert result.samples == 30 and result.shards == local.shards
    assert all((tmp_path / "out" / n).read_bytes() == (tmp_path / "local" / n).read_bytes()
               for n in ["manifest.json", *result.shards])

    folder = tmp_path / "images" / "a"
    folder.mkdir(parents=True)
    for k, data in enumerate(jpegs(6, seed=15)):
        (folder / f"{k}.jpg").write_bytes(data)
    done = subprocess.run([slipstream_command(), "write", "images", "cli", "--ray", cluster.address],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    with ss.open_dataset(tmp_path / "cli") as reader:
        assert len(reader) == 6 and reader.user_metadata == {"classes": ["a"]}


def test_verbose_is_taken_as_by_write(cluster, tmp_path):
    rows = [{"image": data, "label": k} for k, data in enumerate(jpegs(8, seed=16))]
    fields = {"image": ss.RGBImageField(), "label": ss.IntField()}
    quiet = ssray.write(ray.data.from_items(rows), str(tmp_path / "quiet"), fields, verbose=False)
    local = ss.write(tmp_path / "local", rows, fields, shard_size="1GB", workers=0, verbose=False)
    assert quiet.shards == local.shards
    assert all((tmp_path / "quiet" / n).read_bytes() == (tmp_path / "local" / n).read_bytes()
               for n in ["manifest.json", *quiet.shards])
