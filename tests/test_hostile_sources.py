"""Hostile and damaged source files: WebDataset tar shards written by
``tarfile`` and then cut or edited as bytes, and COCO annotation files (with
real JPEGs) edited to escape their image folder, to crash pycocotools or to
carry values of the wrong type.  Each class of problem is refused or
reported by name, never passed over in silence."""

from __future__ import annotations

import dataclasses
import io
import os
import re
import signal
import tarfile
import time

import detection_data
import numpy as np
import pytest

import slipstream as ss
from slipstream import native
from slipstream.format.writer import WriteResult
from slipstream.sources import COCODetection, WebDataset, expand_braces
from slipstream.sources.tarstream import MAX_MEMBER_SIZE

# ---------------------------------------------------------------- tar shards


def jpeg(seed: int) -> bytes:
    """A small real JPEG."""
    pixels = np.full((16, 24, 3), 40 * seed % 256, np.uint8)
    pixels[::3] = 255 - pixels[::3]
    return native.jpeg_encode(pixels, 90)


def tar_bytes(members: list[tuple[str, bytes]], format: int = tarfile.PAX_FORMAT) -> bytes:
    """A tar archive of ``(name, data)`` members, as ``tarfile`` writes it."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=format) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def sample_members(keys: list[str]) -> list[tuple[str, bytes]]:
    """A ``.jpg`` and a ``.cls`` member for each key."""
    return [member for k, key in enumerate(keys) for member in ((f"{key}.jpg", jpeg(k)), (f"{key}.cls", b"%d" % k))]


def offsets(data: bytes) -> dict[str, tarfile.TarInfo]:
    """Each member of an intact archive, by name (``offset`` is where its
    header starts, ``offset_data`` its data)."""
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {member.name: member for member in tar.getmembers()}


def write_shard(path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


def raised_then_skipped(tmp_path, source: WebDataset, message: str) -> WriteResult:
    """Write ``source`` with ``on_error="raise"``, which must fail with
    ``message``, then with ``"skip"``: the second result."""
    with pytest.raises(ss.FieldValueError, match=message):
        ss.write(tmp_path / "raise.slip", source, workers=0, verbose=False)
    assert not (tmp_path / "raise.slip").exists()
    return ss.write(tmp_path / "skip.slip", source, workers=0, on_error="skip", verbose=False)


CUTS = {
    # where the shard is cut -> (the sample named as lost, the members read of it, samples written before it)
    "at the end of the last member, without the end-of-archive marker": ("s2", ".jpg, .cls", 2),
    "at a block boundary between two members of a sample": ("s2", ".jpg", 2),
    "inside a member header": ("s2", ".jpg", 2),
    "inside a member's data": ("s2", "none", 2),
    "at a block boundary between two samples": ("s1", ".jpg, .cls", 1),
}


def cut_point(data: bytes, where: str) -> int:
    members = offsets(data)
    return {
        "at the end of the last member, without the end-of-archive marker": members["s2.cls"].offset_data + 512,
        "at a block boundary between two members of a sample": members["s2.cls"].offset,
        "inside a member header": members["s2.cls"].offset + 100,
        "inside a member's data": members["s2.jpg"].offset_data + 100,
        "at a block boundary between two samples": members["s2.jpg"].offset,
    }[where]


@pytest.mark.parametrize("where", list(CUTS))
def test_a_truncated_tar_is_an_error_naming_the_shard_and_the_samples_lost(tmp_path, where):
    data = tar_bytes(sample_members(["s0", "s1", "s2"]))
    shard = write_shard(tmp_path / "cut.tar", data[:cut_point(data, where)])
    lost, read, kept = CUTS[where]
    source = WebDataset(shard, {"image": ss.RGBImageField(), "label": ss.IntField()})
    message = (rf"cut\.tar: {lost}: FormatError: the tar shard is truncated.*; sample '{lost}' \(members read: "
               rf"{read}\) and any samples after it in the shard are lost \(samples read before it: {kept}\)")
    result = raised_then_skipped(tmp_path, source, message)
    assert result.samples == kept and len(result.skipped) == 1
    with ss.Reader(tmp_path / "skip.slip") as reader:
        assert [reader[i]["label"] for i in range(len(reader))] == list(range(kept))


def test_default_fields_are_not_taken_from_a_cut_first_sample(tmp_path):
    data = tar_bytes(sample_members(["s0", "s1"]))
    shard = write_shard(tmp_path / "cut.tar", data[:offsets(data)["s0.cls"].offset])  # s0 lost its label
    with pytest.raises(ss.ArgumentError, match=r"cut\.tar has no readable sample to take the fields from \(the last: "
                                               r"the tar shard is truncated.*sample 's0'.*\): pass fields="):
        WebDataset(shard)
    whole = WebDataset(write_shard(tmp_path / "whole.tar", data))
    assert list(whole.fields) == ["image", "label"]


@pytest.mark.parametrize("damage, pattern", [
    ("checksum", r"the tar shard is corrupt: the header at byte \d+ fails its checksum"),
    ("zeroed header", r"the tar shard is corrupt: a block of zeros at byte \d+ marks the end of the archive, but data "
                      r"follows it"),
    ("octal size", r"the tar shard is corrupt: the header at byte \d+ has a malformed size field"),
], ids=["checksum", "zeroed-header", "octal-size"])
def test_a_corrupt_tar_header_ends_the_shard_with_an_error(tmp_path, damage, pattern):
    data = bytearray(tar_bytes(sample_members(["s0", "s1", "s2"])))
    header = offsets(bytes(data))["s1.cls"].offset
    if damage == "checksum":
        data[header + 5] ^= 0x01
    elif damage == "zeroed header":
        data[header:header + 512] = bytes(512)
    else:
        data[header + 124:header + 136] = b"0000000009x\0"
        data[header + 148:header + 156] = b"%06o\0 " % (sum(data[header:header + 148]) + 256 + sum(
            data[header + 156:header + 512]))
    shard = write_shard(tmp_path / "bad.tar", bytes(data))
    result = ss.write(tmp_path / "skip.slip", WebDataset(shard, {"image": ss.RGBImageField()}), workers=0,
                      on_error="skip", verbose=False)
    assert result.samples == 1 and len(result.skipped) == 1
    assert "bad.tar: s1: FormatError: " in result.skipped[0][1]
    assert "sample 's1' (members read: .jpg) and any samples after it in the shard are lost" in result.skipped[0][1]
    assert re.search(pattern, result.skipped[0][1])


def checksummed(header: bytearray) -> bytes:
    """A tar header with its checksum field set."""
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\0 " % sum(header)
    return bytes(header)


def gnu_sparse_header(name: str, stored: int, expanded: int) -> bytes:
    """A GNU sparse member's header: ``stored`` bytes of data in the
    archive, ``expanded`` once its holes are filled."""
    info = tarfile.TarInfo(name)
    info.type, info.size = tarfile.GNUTYPE_SPARSE, stored
    header = bytearray(info.tobuf(tarfile.GNU_FORMAT))
    header[386:398] = tarfile.itn(0, 12, tarfile.GNU_FORMAT)  # one region: offset 0, `stored` bytes
    header[398:410] = tarfile.itn(stored, 12, tarfile.GNU_FORMAT)
    header[483:495] = tarfile.itn(expanded, 12, tarfile.GNU_FORMAT)
    return checksummed(header)


@pytest.mark.parametrize("kind", ["gnu", "pax"])
def test_sparse_members_are_refused_by_name_before_any_allocation(tmp_path, kind):
    huge = 64 << 30
    if kind == "gnu":
        sparse = gnu_sparse_header("s0.jpg", 512, huge) + bytes(512)
    else:
        info = tarfile.TarInfo("GNUSparseFile.0/s0.jpg")
        info.size = 512
        info.pax_headers = {"GNU.sparse.major": "1", "GNU.sparse.minor": "0", "GNU.sparse.name": "s0.jpg",
                            "GNU.sparse.realsize": str(huge)}
        sparse = info.tobuf(tarfile.PAX_FORMAT) + bytes(512)
    shard = write_shard(tmp_path / "sparse.tar", sparse + tar_bytes(sample_members(["s1"])))
    source = WebDataset(shard, {"image": ss.RGBImageField(), "label": ss.IntField()})
    result = raised_then_skipped(tmp_path, source, rf"sparse\.tar: s0: FormatError: member 's0\.jpg' \(at byte 0\) "
                                                   rf"is a sparse file \(of {huge} bytes once expanded\), which a "
                                                   rf"sample member cannot be: it is not read")
    assert result.samples == 1 and [i for i, _ in result.skipped] == [0]


def test_a_member_claiming_more_than_the_shard_holds_is_refused_unread(tmp_path):
    info = tarfile.TarInfo("s0.jpg")
    info.size = 64 << 30  # written in base-256 by the GNU format
    shard = write_shard(tmp_path / "huge.tar", info.tobuf(tarfile.GNU_FORMAT) + jpeg(0) + bytes(2048))
    source = WebDataset(shard, {"image": ss.RGBImageField()})
    with pytest.raises(ss.FieldValueError, match=r"huge\.tar: s0: FormatError: the tar shard is truncated \(or its "
                                                 r"header corrupt\): member 's0\.jpg' \(at byte 0\) claims "
                                                 r"68,719,476,736 bytes of data, but the shard ends [\d,]+ bytes after "
                                                 r"its header"):
        ss.write(tmp_path / "raise.slip", source, workers=0, verbose=False)


def test_a_member_over_the_size_limit_is_refused_and_the_shard_read_on(tmp_path):
    size = MAX_MEMBER_SIZE + 1
    info = tarfile.TarInfo("s0.jpg")
    info.size = size
    path = tmp_path / "big.tar"
    with open(path, "wb") as f:  # the member's data is a hole of the file: no disk, and not read
        f.write(info.tobuf(tarfile.GNU_FORMAT))
        f.seek(512 + size + (-size % 512))
        f.write(tar_bytes(sample_members(["s1"])))
    source = WebDataset(str(path), {"image": ss.RGBImageField(), "label": ss.IntField()})
    result = ss.write(tmp_path / "skip.slip", source, workers=0, on_error="skip", verbose=False)
    assert result.samples == 1 and len(result.skipped) == 1
    assert (f"big.tar: s0: FormatError: member 's0.jpg' (at byte 0) holds {size:,} bytes, more than the "
            f"{MAX_MEMBER_SIZE:,} a sample member may hold: it is not read") in result.skipped[0][1]


def one_sample_refused(tmp_path, members: list[tuple[str, bytes]], message: str) -> tuple[int, list[int]]:
    """Write a shard of ``members`` (images and labels) with ``on_error``
    "raise", which must fail with ``message``, then "skip": the number of
    samples written, and the indices of those skipped."""
    shard = write_shard(tmp_path / "shard.tar", tar_bytes(members))
    source = WebDataset(shard, {"image": ss.RGBImageField(), "label": ss.IntField()})
    result = raised_then_skipped(tmp_path, source, message)
    return result.samples, [i for i, _ in result.skipped]


def test_a_repeated_member_is_refused_by_name(tmp_path):
    members = sample_members(["s0"]) + [("s1.jpg", jpeg(1)), ("s1.cls", b"1"), ("s1.cls", b"7")] + \
        sample_members(["s2"])
    assert one_sample_refused(tmp_path, members, r"shard\.tar: s1: FormatError: the sample has two \.cls members, "
                                                 r"'s1\.cls' and 's1\.cls' \(at byte \d+\): which one it means is "
                                                 r"unknown") == (2, [1])


def test_a_sample_key_met_again_after_other_samples_is_refused_by_name(tmp_path):
    assert one_sample_refused(tmp_path, sample_members(["s0", "s1", "s0", "s2"]),
                              r"shard\.tar: s0: FormatError: sample key 's0' comes again at byte \d+, after other "
                              r"samples: the members of a sample must be consecutive") == (3, [2])


@pytest.mark.parametrize("kind", [tarfile.LNKTYPE, tarfile.SYMTYPE])
@pytest.mark.parametrize("format", [tarfile.GNU_FORMAT, tarfile.PAX_FORMAT])
def test_a_link_member_is_refused_by_name(tmp_path, kind, format):
    target = "images/" + "x" * 120 + ".jpg"  # longer than a header's link field: a GNU K header, or a pax linkpath
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=format) as tar:
        for name, data in sample_members(["s0"]) + [("s1.cls", b"1"), ("s1.jpg", None), ("s2.jpg", None)] + \
                sample_members(["s3"]):
            info = tarfile.TarInfo(name)
            if data is None:  # s2 has no other member
                info.type, info.linkname = kind, target
            else:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data or b""))
    shard = write_shard(tmp_path / "links.tar", buffer.getvalue())
    source = WebDataset(shard, {"image": ss.RGBImageField(), "label": ss.IntField()})
    what = "hard" if kind == tarfile.LNKTYPE else "symbolic"
    result = raised_then_skipped(tmp_path, source, rf"links\.tar: s1: FormatError: member 's1\.jpg' \(at byte \d+\) "
                                                   rf"is a {what} link to {re.escape(repr(target))}, which a sample "
                                                   rf"member cannot be: it is not read")
    assert result.samples == 2 and [i for i, _ in result.skipped] == [1, 2]
    assert f"links.tar: s2: FormatError: member 's2.jpg' (at byte" in result.skipped[1][1]
    assert source.length_hint() == 4


def test_solaris_extended_headers_name_their_members(tmp_path):
    keys = ["images/" + "y" * 120 + f"{k}" for k in range(3)]  # longer than a ustar header's name field
    data = bytearray(tar_bytes(sample_members(keys)))
    for offset in range(0, len(data), 512):
        header = tarfile.TarInfo.frombuf(bytes(data[offset:offset + 512]), "utf-8", "surrogateescape") \
            if any(data[offset:offset + 512]) and data[offset + 257:offset + 262] == b"ustar" else None
        if header is not None and header.type == tarfile.XHDTYPE:  # as Solaris tar writes it: type X
            data[offset + 156] = ord("X")
            block = data[offset:offset + 148] + b" " * 8 + data[offset + 156:offset + 512]
            data[offset + 148:offset + 156] = b"%06o\0 " % sum(block)
    with tarfile.open(fileobj=io.BytesIO(bytes(data))) as tar:
        assert tar.getnames() == [member for key in keys for member in (f"{key}.jpg", f"{key}.cls")]
    source = WebDataset(write_shard(tmp_path / "solaris.tar", bytes(data)),
                        {"image": ss.RGBImageField(), "label": ss.IntField()})
    assert [(name, values[1]) for name, values in source] == [(f"{source.shards[0]}: {key}", k)
                                                             for k, key in enumerate(keys)]


@pytest.mark.parametrize("label", ["٣", "1_000", " 3 ", "+3", "3.0", "0x10", ""])
def test_labels_must_be_plain_ascii_decimal_integers(tmp_path, label):
    members = sample_members(["s0"]) + [("s1.jpg", jpeg(1)), ("s1.cls", label.encode())]
    shard = write_shard(tmp_path / "labels.tar", tar_bytes(members))
    source = WebDataset(shard, {"image": ss.RGBImageField(), "label": ss.IntField()})
    with pytest.raises(ss.FieldValueError, match=rf"labels\.tar: s1: ValueError: a \.cls member must hold an "
                                                 rf"integer, it holds {re.escape(repr(label))}: only ASCII decimal "
                                                 rf"digits"):
        ss.write(tmp_path / "raise.slip", source, workers=0, verbose=False)


def test_labels_in_plain_decimal_are_read(tmp_path):
    members = [("s0.jpg", jpeg(0)), ("s0.cls", b"7\n"), ("s1.jpg", jpeg(1)), ("s1.cls", b"-1"),
               ("s2.jpg", jpeg(2)), ("s2.cls", b"0042\r\n")]
    shard = write_shard(tmp_path / "labels.tar", tar_bytes(members))
    ss.write(tmp_path / "out.slip", WebDataset(shard), workers=0, verbose=False)
    with ss.Reader(tmp_path / "out.slip") as reader:
        assert [reader[i]["label"] for i in range(3)] == [7, -1, 42]


def test_brace_patterns_are_bounded_before_they_are_expanded():
    started = time.perf_counter()
    with pytest.raises(ss.ArgumentError, match=r"'s3://b/\{0\.\.999999999999\}\.tar' stands for 1,000,000,000,000 "
                                               r"shard names, more than the 1,000,000 a shard pattern may"):
        WebDataset("s3://b/{0..999999999999}.tar")
    with pytest.raises(ss.ArgumentError, match=r"stands for 10,000,000,000 shard names"):
        expand_braces("{00000..99999}-{00000..99999}.tar")
    with pytest.raises(ss.ArgumentError, match=r"the range \{1\.\.9{30}\} has bounds of more than 18 digits"):
        expand_braces("{1.." + "9" * 30 + "}.tar")
    with pytest.raises(ss.ArgumentError, match=r"nests braces"):
        expand_braces("{a,{b,c}}.tar")
    assert time.perf_counter() - started < 5  # refused by counting, not by running out of memory
    assert expand_braces("{a,b}-{8..10}") == ["a-8", "a-9", "a-10", "b-8", "b-9", "b-10"]


def test_a_fifo_in_place_of_a_shard_is_refused_without_waiting(tmp_path):
    os.mkfifo(tmp_path / "fifo.tar")
    shard = str(tmp_path / "fifo.tar")
    source = WebDataset([shard], {"image": ss.RGBImageField()})
    with pytest.raises(ss.FormatError, match=r"fifo\.tar is a FIFO \(named pipe\), not a regular file, so not a tar shard"):
        ss.write(tmp_path / "out.slip", source, workers=0, verbose=False)


# ---------------------------------------------------------------- COCO annotation files


@pytest.fixture
def coco(tmp_path) -> detection_data.COCOData:
    pytest.importorskip("pycocotools")
    return detection_data.make_coco(tmp_path / "coco", count=4, seed=11)


def first_polygon_annotation(content: dict) -> dict:
    return min((a for a in content["annotations"] if isinstance(a["segmentation"], list)), key=lambda a: a["id"])


@pytest.mark.parametrize("name", ["../../secret/x.jpg", "{outside}", "images/../../secret/x.jpg"])
def test_file_names_must_stay_inside_the_image_folder(coco, tmp_path, name):
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "x.jpg").write_bytes(coco.images[0].path.read_bytes())  # a real image: reading it would succeed
    name = name.format(outside=secret / "x.jpg")
    target = coco.images[1]

    def change(content):
        next(i for i in content["images"] if i["id"] == target.image_id)["file_name"] = name

    detection_data.edited(coco, change)
    with pytest.raises(ss.ArgumentError, match=rf"instances\.json: image {target.image_id} has file_name "
                                               rf"'{name}', which is not a path inside the image folder .*: file "
                                               rf"names must be relative, without '\.\.'"):
        COCODetection(coco.images_root, coco.annotation_file, masks=False)


ZIGZAG = [v for k in range(3000) for v in ((0, 5) if k % 2 else (90, 5 + k % 7))]
"""A polygon inside any image of the fixture (96 pixels a side at least),
whose outline crosses it 3000 times: longer than 100 image perimeters."""


def set_polygon(polygon):
    def change(content):
        annotation = first_polygon_annotation(content)
        annotation["segmentation"] = [polygon]
        annotation["id"] = 901
    return change


@pytest.mark.parametrize("polygon, pattern", [
    ([0, 0, 1e8, 0, 0, 1e8], r"polygon 0 of its segmentation has the point \(1e\+08, 0\), more than 2 image sizes "
                             r"outside its \d+x\d+ image"),
    ([-5e9, 3, 10, 10, 3, 30], r"polygon 0 of its segmentation has the point \(-5e\+09, 3\), more than 2 image "
                               r"sizes outside"),
    (ZIGZAG, r"polygon 0 of its segmentation has an outline of [\d,]+ pixels, more than 100 times its \d+x\d+ "
             r"image's perimeter"),
    ([float("nan"), 0, 5, 0, 0, 5], r"polygon 0 of its segmentation is not a list of x, y coordinates \(finite "
                                    r"numbers, an even count\)"),
    ([True, 0, 5, 0, 0, 5], r"polygon 0 of its segmentation is not a list of x, y coordinates"),
    (["1", "0", "5", "0", "0", "5"], r"polygon 0 of its segmentation is not a list of x, y coordinates"),
    ([1, 2, 3, 4, 5, 6, 7], r"polygon 0 of its segmentation is not a list of x, y coordinates"),
], ids=["1e8", "far-negative", "zigzag", "nan", "bool", "strings", "odd"])
def test_polygons_are_checked_before_pycocotools_sees_them(coco, polygon, pattern):
    detection_data.edited(coco, set_polygon(polygon))
    with pytest.raises(ss.ArgumentError, match=r"instances\.json: annotation 901 \(image \d+\): " + pattern):
        COCODetection(coco.images_root, coco.annotation_file)


def test_polygons_a_little_outside_their_image_are_kept(coco, tmp_path):
    target = next(i for i in coco.images if "polygon" in i.encodings)

    def change(content):
        annotation = next(a for a in content["annotations"] if a["image_id"] == target.image_id
                          and isinstance(a["segmentation"], list))
        annotation["segmentation"] = [[-3, -3, target.width + 3, -3, -3, target.height + 3]]

    detection_data.edited(coco, change)
    source = COCODetection(coco.images_root, coco.annotation_file)
    masks = source[source.image_ids.index(target.image_id)]["masks"]
    assert masks.any(axis=0)[0, 0] and masks.shape[1:] == (target.height, target.width)


def test_a_pycocotools_crash_is_contained_and_follows_on_error(coco, tmp_path):
    """pycocotools crashes (SIGSEGV) on a polygon the checks refuse; put in
    the dataset behind their back, it stands for a crash on an input nobody
    foresaw: the sample fails by name, the process lives on."""
    source = COCODetection(coco.images_root, coco.annotation_file)
    sample = next(k for k, a in enumerate(source._annotations) if len(a.ids) >= 2)
    annotations = source._annotations[sample]
    segmentations = list(annotations.segmentations)
    segmentations[1] = ("polygons", (np.array([0, 0, 1e10, 0, 0, 1e10]),))
    source._annotations[sample] = dataclasses.replace(annotations, segmentations=tuple(segmentations))
    reference = COCODetection(coco.images_root, coco.annotation_file)
    image_id = source.image_ids[sample]
    crash = (rf"instances\.json: annotation {annotations.ids[1]} \(image {image_id}\): its segmentation cannot be "
             rf"decoded: pycocotools crashed on it \(SIGSEGV; in a helper process, which is restarted\)")
    with pytest.raises(ss.FormatError, match=crash):
        source[sample]
    for k in range(len(source)):  # the other samples still decode, and as pycocotools decodes them
        if k != sample:
            assert np.array_equal(source[k]["masks"], reference[k]["masks"])
    for workers in (0, 2):
        result = ss.write(tmp_path / f"skip{workers}.slip", source, workers=workers, on_error="skip", verbose=False)
        assert result.samples == len(source) - 1 and [i for i, _ in result.skipped] == [sample]
        assert f"sample {sample} (image {image_id}, " in result.skipped[0][1]
    with pytest.raises(ss.FieldValueError, match=crash):
        ss.write(tmp_path / "raise.slip", source, workers=2, verbose=False)


def test_a_helper_killed_between_samples_is_replaced(coco):
    from slipstream.sources.maskprocess import MASKS

    source = COCODetection(coco.images_root, coco.annotation_file)
    first = source[1]["masks"]
    os.kill(MASKS._process.pid, signal.SIGKILL)
    MASKS._process.wait()
    assert np.array_equal(source[1]["masks"], first)


@pytest.mark.parametrize("bbox", [[True, 0, 5, 5], ["1", "2", "3", "4"], [1, 2, 3], [1, 2, 3, 4, 5], None,
                                  [10 ** 400, 0, 1, 1], [0, 0, float("inf"), 1]],
                         ids=["bool", "strings", "three", "five", "null", "huge-int", "infinity"])
def test_boxes_must_be_four_finite_numbers(coco, bbox):
    def change(content):
        annotation = min(content["annotations"], key=lambda a: a["id"])
        annotation["bbox"], annotation["id"] = bbox, 902

    detection_data.edited(coco, change)
    with pytest.raises(ss.ArgumentError, match=r"instances\.json: annotation 902 \(image \d+\) has bbox .*, not four "
                                               r"finite numbers \[x, y, w, h\]"):
        COCODetection(coco.images_root, coco.annotation_file, masks=False)


def test_duplicate_annotation_ids_are_refused(coco):
    def change(content):
        annotations = sorted(content["annotations"], key=lambda a: a["id"])
        annotations[1]["id"] = annotations[0]["id"]

    detection_data.edited(coco, change)
    with pytest.raises(ss.ArgumentError, match=r"instances\.json: annotation id 1 is listed twice"):
        COCODetection(coco.images_root, coco.annotation_file, masks=False)


@pytest.mark.parametrize("key, value, pattern", [
    ("image_id", [1], r"annotation 1 is of image \[1\], which the file does not list in 'images'"),
    ("image_id", True, r"annotation 1 is of image True, which the file does not list in 'images'"),
    ("category_id", {"id": 3}, r"annotation 1 \(image \d+\) has category id \{'id': 3\}, which is not one of the "
                               r"file's categories"),
], ids=["image-list", "image-bool", "category-object"])
def test_ids_of_the_wrong_type_are_named(coco, key, value, pattern):
    def change(content):
        min(content["annotations"], key=lambda a: a["id"])[key] = value

    detection_data.edited(coco, change)
    with pytest.raises(ss.ArgumentError, match=r"instances\.json: " + pattern):
        COCODetection(coco.images_root, coco.annotation_file, masks=False)
