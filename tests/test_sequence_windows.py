"""Sequence windows over an image dataset: consecutive frames stored as JPEGs,
loaded T at a time with one crop and flip per window; which indices start a
window; the frames a window holds; threads, resume and sharding over
windows."""

from __future__ import annotations

import numpy as np
import pytest

import real_photos
import slipstream as ss
from slipstream import native
from slipstream.ops import CenterCrop, RandomHorizontalFlip, RandomResizedCrop, SequenceWindow, window_starts
from slipstream.sources.synthetic_video import pan_zoom

FRAMES_PER_VIDEO = 10
FIELDS = {"image": ss.RGBImageField(), "video": ss.IntField(), "frame": ss.IntField()}


@pytest.fixture(scope="module")
def frames(tmp_path_factory) -> str:
    """Five videos of 10 frames as JPEGs: two pans, one at another size, a still picture, and the
    still picture at two sizes."""
    rows = []
    videos = [("coffee", (72, 96)), ("chelsea", (72, 96)), ("astronaut", (90, 120))]
    for video, (name, size) in enumerate(videos):
        for frame, pixels in enumerate(pan_zoom(real_photos.pixels(name), FRAMES_PER_VIDEO, size)):
            rows.append((native.jpeg_encode(pixels, 90), video, frame))
    still = native.jpeg_encode(real_photos.pixels("rocket", (96, 72)), 90)
    rows += [(still, 3, frame) for frame in range(FRAMES_PER_VIDEO)]
    # The same picture, its last frames twice as large: a window's crop lands on the same part of each.
    large = native.jpeg_encode(real_photos.pixels("rocket", (192, 144)), 90)
    rows += [(still if frame < 5 else large, 4, frame) for frame in range(FRAMES_PER_VIDEO)]
    path = str(tmp_path_factory.mktemp("sequences") / "frames.slip")
    ss.write(path, rows, FIELDS, verbose=False)
    return path


def test_window_starts_keep_each_window_inside_one_run_of_its_group(frames, tmp_path):
    starts = window_starts(frames, 4, stride=2, group="video")
    span, total = 6, 50
    expected = [i for i in range(total) if i + span < total and i // 10 == (i + span) // 10]
    assert starts.tolist() == expected
    assert window_starts(frames, 4, stride=2).tolist() == list(range(total - span))
    assert window_starts(frames, total + 1).size == 0
    # A value that comes back after another is another run.
    path = tmp_path / "runs.slip"
    ss.write(path, [(v,) for v in (0, 0, 1, 1, 0, 0)], {"video": ss.IntField()}, verbose=False)
    assert window_starts(path, 2, group="video").tolist() == [0, 2, 4]
    with pytest.raises(ss.ArgumentError, match="no field 'clip'"):
        window_starts(frames, 2, group="clip")
    with pytest.raises(ss.ArgumentError, match="no single number"):
        window_starts(frames, 2, group="image")
    with pytest.raises(ss.ArgumentError, match="at least 1"):
        window_starts(frames, 0)


def _load(path, pipeline, indices, **options):
    loader = ss.Loader(path, batch_size=4, pipelines={"image": pipeline}, indices=indices, verbose=False, **options)
    return [tuple(t.clone() for t in batch) for batch in loader]


def _stack(batches, column=0):
    return np.concatenate([b[column].numpy() for b in batches])


def test_a_window_holds_the_frames_at_its_stride_each_cropped_as_alone(frames):
    starts = window_starts(frames, 3, stride=3, group="video")
    starts = starts[starts < 40]  # the videos whose frames share one size (the last one's crop is scaled)
    order = ss.Order(kind="sequential")
    windows = _stack(_load(frames, [SequenceWindow(3, stride=3), CenterCrop(48)], starts, order=order))
    alone = _stack(_load(frames, [CenterCrop(48)], None, order=order))
    assert windows.shape == (len(starts), 3, 48, 48, 3)
    for window, start in zip(windows, starts.tolist()):
        for t in range(3):
            assert np.array_equal(window[t], alone[start + 3 * t]), (start, t)


def test_one_crop_and_flip_per_window(frames):
    pipeline = [SequenceWindow(4, stride=2), RandomResizedCrop(40, scale=(0.08, 1.0)), RandomHorizontalFlip()]
    starts = window_starts(frames, 4, stride=2, group="video")
    batches = _load(frames, pipeline, starts, order=ss.Order(kind="sequential"))
    windows, videos = _stack(batches).astype(np.int64), _stack(batches, 1)
    stills = windows[videos == 3]
    assert len(stills) == 4
    # The still picture's frames are one JPEG: one crop and flip give identical frames ...
    assert all(np.array_equal(window[t], window[0]) for window in stills for t in range(4))
    # ... and the windows' draws differ from window to window.
    assert min(np.abs(stills[i, 0] - stills[j, 0]).mean() for i in range(4) for j in range(i)) > 1


def test_a_frame_of_another_size_is_cropped_at_the_same_place(frames):
    """The window's region, drawn on its first frame (72 x 96), lands on the same part of the picture in a
    frame twice as large: CenterCrop's 36-pixel square at (18, 30) becomes a 72-pixel one at (36, 60)."""
    starts = np.array([41, 43])  # frames 41, 43, 45, 47: two small, two large
    batches = _load(frames, [SequenceWindow(4, stride=2), CenterCrop(40, ratio=0.5)], starts,
                    order=ss.Order(kind="sequential"))
    windows = _stack(batches).astype(np.int64)
    assert all(np.abs(window - window[0]).mean() < 6 for window in windows)
    large = native.jpeg_encode(real_photos.pixels("rocket", (192, 144)), 90)
    unscaled = native.jpeg_decode_crop_resize(large, 18, 30, 36, 36, 40, 40).astype(np.int64)
    assert np.abs(unscaled - windows[0, 0]).mean() > 12  # the unscaled region: another part of the picture


def test_windows_for_any_thread_count_after_a_resume_and_over_ranks(frames):
    pipeline = [SequenceWindow(4, stride=2), RandomResizedCrop(40), RandomHorizontalFlip()]
    starts = window_starts(frames, 4, stride=2, group="video")
    one = _load(frames, pipeline, starts, num_threads=1)
    two = _load(frames, pipeline, starts, num_threads=2)
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(one, two))
    loader = ss.Loader(frames, batch_size=4, pipelines={"image": pipeline}, indices=starts, verbose=False)
    iterator = iter(loader)
    next(iterator)
    resumed = ss.Loader(frames, batch_size=4, pipelines={"image": pipeline}, indices=starts, verbose=False)
    resumed.load_state_dict(loader.state_dict())
    rest = [tuple(t.clone() for t in batch) for batch in resumed]
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(one[1:], rest)) and len(rest) == len(one) - 1
    # Two ranks share the windows: each start once, the windows those of one process.
    assert len(starts) % 2 == 0  # no window repeated to even the ranks out
    ranks = [_load(frames, pipeline, starts, sharding=ss.Sharding(rank=r, world_size=2)) for r in range(2)]
    seen = [int(v) * 10 + int(f) for rank in ranks for b in rank for v, f in zip(b[1], b[2])]
    assert sorted(seen) == starts.tolist()
    whole = {int(v) * 10 + int(f): w for b in one for w, v, f in zip(b[0].numpy(), b[1], b[2])}
    assert all(np.array_equal(w, whole[int(v) * 10 + int(f)]) for rank in ranks for b in rank
               for w, v, f in zip(b[0].numpy(), b[1], b[2]))


def test_a_window_without_a_crop_is_refused(frames):
    with pytest.raises(ss.ArgumentError, match="must be followed by a crop"):
        ss.Loader(frames, batch_size=2, pipelines={"image": [SequenceWindow(2)]}, verbose=False)


def test_a_page_pool_brings_in_every_frame_of_a_window(frames, tmp_path):
    """With pages read into a pool before each batch (not the mapped file),
    the pages of a window's later frames come in with its first's: the
    windows are those of the mapped file."""
    reader = ss.open_dataset(frames)
    rows = [(reader.read(i, "image"), reader.read(i, "video"), reader.read(i, "frame")) for i in range(len(reader))]
    paged = tmp_path / "paged.slip"
    ss.write(paged, rows, FIELDS, page_size=4096, verbose=False)
    assert ss.open_dataset(paged).page_count > 40
    pipeline = [SequenceWindow(4, stride=2), CenterCrop(40)]
    starts = window_starts(paged, 4, stride=2, group="video")
    order = ss.Order(kind="sequential")
    mapped = _stack(_load(paged, pipeline, starts, order=order))
    pooled = _stack(_load(paged, pipeline, starts, order=order, memory=ss.Memory(os_cache=False, pool_pages=64)))
    assert np.array_equal(mapped, pooled)

