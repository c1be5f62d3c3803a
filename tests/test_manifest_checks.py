"""A sharded dataset's manifest cannot switch off the checks of its shards:
every member of a manifest is checked (type and range, names, totals) before
a shard is opened, and every shard, local or in object storage (the real S3
server of ``object_store.py``), is checked against its entry (size, header
checksum, samples, pages, page size, fields, user metadata) before the
first sample is read.  The manifests here are forged the way a hostile or
careless hand would: members changed and the manifest's checksum computed
again, so that only the checks of the members can refuse them."""

from __future__ import annotations

import json
import math
import re
import uuid
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import jpeg_corpus
import slipstream as ss
from slipstream.format import manifest as M

COUNT, PAGE = 128, 16384
FIELDS = {"image": ss.RGBImageField(tile_width=None), "label": ss.IntField()}  # shards of 64 samples: sizes as made
PLACES = ("local", "remote")


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """The samples as one file and as a two-shard dataset (64 samples a
    shard), and the files that replace a shard in the tests: 88 samples,
    and 64 samples in pages twice as large."""
    root = tmp_path_factory.mktemp("manifest-checks")
    samples = [(jpeg_corpus.make_sample(48, 64, seed=i).data, i) for i in range(COUNT)]
    ss.write(root / "one.slip", samples, FIELDS, workers=0, page_size=PAGE, verbose=False)
    ss.write(root / "sharded", samples, FIELDS, workers=0, page_size=PAGE, shards=2, verbose=False)
    ss.write(root / "eighty-eight.slip", samples[:88], FIELDS, workers=0, page_size=PAGE, verbose=False)
    ss.write(root / "large-pages.slip", samples[:64], FIELDS, workers=0, page_size=2 * PAGE, verbose=False)
    return root


def manifest_of(written: Path) -> dict:
    """The two-shard dataset's manifest, as JSON, without its checksum."""
    body = json.loads((written / "sharded" / M.NAME).read_bytes())
    del body["crc32"]
    return body


def shard_files(written: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (written / "sharded").iterdir() if p.name != M.NAME}


def signed(body: dict) -> bytes:
    """``body`` as a manifest with its checksum computed again (the canonical
    JSON of docs/format.md), as a forger would."""
    def canonical(value: dict) -> bytes:
        try:
            return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
        except UnicodeEncodeError:  # text with no UTF-8 form: all of it ASCII, escaped
            return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    return canonical({**body, "crc32": zlib.crc32(canonical(body))})


def place(request, tmp_path: Path, where: str, files: dict[str, bytes]) -> str:
    """``files`` as a dataset's folder (local) or prefix in the bucket
    (remote); its path or URL."""
    if where == "local":
        folder = tmp_path / "dataset"
        folder.mkdir()
        for name, data in files.items():
            (folder / name).write_bytes(data)
        return str(folder)
    import obstore

    store = request.getfixturevalue("s3_server").store("test")
    prefix = f"checks-{uuid.uuid4().hex[:12]}"
    for name, data in files.items():
        obstore.put(store, f"{prefix}/{name}", data)
    return f"s3://test/{prefix}"


def remote_options(request, tmp_path: Path, where: str) -> ss.Remote | None:
    if where == "local":
        return None
    return ss.Remote(storage_options=request.getfixturevalue("s3_server").storage_options(),
                     cache_dir=tmp_path / "cache")


def parent(body: dict, keys: tuple[str | int, ...]) -> dict | list:
    """What holds the member at ``keys`` of ``body``."""
    for key in keys[:-1]:
        body = body[key]
    return body


def at(*keys: str | int, value: object) -> Callable[[dict], bytes]:
    """A forger that sets the member at ``keys`` to ``value``."""
    def forge(body: dict) -> bytes:
        parent(body, keys)[keys[-1]] = value
        return signed(body)
    return forge


def without(*keys: str | int) -> Callable[[dict], bytes]:
    """A forger that removes the member at ``keys``."""
    def forge(body: dict) -> bytes:
        del parent(body, keys)[keys[-1]]
        return signed(body)
    return forge


def retyped(text: bytes, replacement: bytes, *keys: str | int, value: object) -> Callable[[dict], bytes]:
    """A forger that sets ``keys`` to ``value``, then writes ``text`` as
    ``replacement`` in the JSON (for what json.dumps cannot write)."""
    def forge(body: dict) -> bytes:
        return at(*keys, value=value)(body).replace(text, replacement, 1)
    return forge


def repeated_samples(body: dict) -> bytes:
    data = signed(body)
    return data.replace(b'"samples":128,', b'"samples":128,"samples":120,', 1)


def float_checksum(body: dict) -> bytes:
    data = signed(body)
    crc = json.loads(data)["crc32"]
    return data.replace(f'"crc32":{crc}'.encode(), f'"crc32":{crc}.0'.encode(), 1)


def no_shards(body: dict) -> bytes:
    body.update(shards=[], samples=0)
    return signed(body)


def repeated_name(body: dict) -> bytes:
    body["shards"][1]["name"] = body["shards"][0]["name"]
    return signed(body)


def repeated_field(body: dict) -> bytes:
    body["fields"][1]["name"] = "image"
    return signed(body)


def lone_surrogate(body: dict) -> bytes:
    body["shards"][0]["name"] = "shard-\ud800.slip"
    return signed(body)


WHOLE = "it must be a whole number from"
MANIFEST_CASES = [
    ("negative-header-crc32", at("shards", 1, "header_crc32", value=-1),
     r"shards\[1\]\.header_crc32 is -1: it must be a whole number from 0 to 4,294,967,295"),
    ("header-crc32-over-32-bits", at("shards", 0, "header_crc32", value=2 ** 32),
     r"shards\[0\]\.header_crc32 is 4294967296: " + WHOLE),
    ("infinite-samples", at("shards", 0, "samples", value=math.inf), r"shards\[0\]\.samples is Infinity: " + WHOLE),
    ("nan-bytes", at("shards", 1, "bytes", value=math.nan), r"shards\[1\]\.bytes is NaN: " + WHOLE),
    ("1e400-samples", retyped(b"Infinity", b"1e400", "samples", value=math.inf), r"samples is Infinity: " + WHOLE),
    ("fractional-samples", at("shards", 0, "samples", value=63.5), r"shards\[0\]\.samples is 63.5: " + WHOLE),
    ("float-samples", at("shards", 0, "samples", value=64.0), r"shards\[0\]\.samples is 64.0: " + WHOLE),
    ("boolean-pages", at("shards", 0, "pages", value=True), r"shards\[0\]\.pages is true: " + WHOLE),
    ("negative-samples", at("shards", 0, "samples", value=-64), r"shards\[0\]\.samples is -64: " + WHOLE),
    ("huge-samples", at("shards", 0, "samples", value=2 ** 64), r"shards\[0\]\.samples is 18446744073709551616: "
                                                                  r"it must be a whole number from 0 to "
                                                                  r"9,223,372,036,854,775,807"),
    ("bytes-shorter-than-a-header", at("shards", 0, "bytes", value=100),
     r"shards\[0\]\.bytes is 100: it must be a whole number from 160 to"),
    ("text-pages", at("shards", 0, "pages", value="8"), r'shards\[0\]\.pages is "8": ' + WHOLE),
    ("pages-beyond-bytes", at("shards", 0, "pages", value=10 ** 6),
     r"shards\[0\]\.pages is 1,000,000: more pages of 16,384 bytes than fit in the [0-9,]+ bytes of "
     r"shards\[0\]\.bytes"),
    ("name-with-nul", at("shards", 0, "name", value="shard-00000\0.slip"),
     r'shards\[0\]\.name "shard-00000\\u0000.slip" holds a NUL byte'),
    ("name-with-newline", at("shards", 0, "name", value="shard\n.slip"),
     r"shards\[0\]\.name .* holds the control character U\+000A"),
    ("name-with-slash", at("shards", 0, "name", value="../other/shard.slip"),
     r"shards\[0\]\.name \"../other/shard.slip\" holds a path separator"),
    ("name-with-backslash", at("shards", 1, "name", value="..\\shard.slip"),
     r"shards\[1\]\.name .* holds a path separator"),
    ("name-dot-dot", at("shards", 0, "name", value=".."), r'shards\[0\]\.name "\.\." is not a file name'),
    ("name-too-long", at("shards", 0, "name", value="s" * 300),
     r"shards\[0\]\.name \"s+\.\.\. is 300 bytes long: the limit is 255"),
    ("name-empty", at("shards", 0, "name", value=""), r'shards\[0\]\.name is "": it must be a non-empty string'),
    ("name-number", at("shards", 0, "name", value=7), r"shards\[0\]\.name is 7: it must be a non-empty string"),
    ("name-lone-surrogate", lone_surrogate, r"shards\[0\]\.name .* is not valid Unicode \(it holds a lone surrogate\)"),
    ("repeated-shard-name", repeated_name, r'shards lists the shard name "shard-00000-[0-9a-f]{8}\.slip" twice'),
    ("repeated-field-name", repeated_field, r'fields lists the field name "image" twice'),
    ("page-size-not-a-power-of-two", at("page_size", value=5000),
     r"page_size is 5000: it must be a power of two from 4,096 to 1,073,741,824"),
    ("page-size-too-large", at("page_size", value=2 ** 31), r"page_size is 2147483648: it must be a power of two"),
    ("page-size-float", at("page_size", value=16384.0), r"page_size is 16384.0: it must be a power of two"),
    ("totals-disagree", at("samples", value=129), r"samples is 129 but the shards listed hold 128"),
    ("missing-member", without("shards", 0, "pages"), r"shards\[0\]\.pages is missing"),
    ("no-shards", no_shards, r"shards is \[\]: it must be a non-empty JSON array"),
    ("shard-not-an-object", at("shards", 1, value=[1, 2]), r"shards\[1\] is \[1, 2\]: it must be a JSON object"),
    ("page-checksums-text", at("page_checksums", value="yes"), r'page_checksums is "yes": it must be true or false'),
    ("user-metadata-list", at("user_metadata", value=[]), r"user_metadata is \[\]: it must be a JSON object"),
    ("record-big-endian", at("fields", 1, "record", value=[["value", ">i8"]]),
     r"fields\[1\]\.record: record entry 'value' has type '>i8'"),
    ("record-not-pairs", at("fields", 1, "record", value=[["value"]]),
     r"fields\[1\]\.record is \[\[\"value\"\]\]: it must be a list of \[name, numpy dtype string\] pairs"),
    ("type-id-negative", at("fields", 0, "type_id", value=-1), r"fields\[0\]\.type_id is -1: " + WHOLE),
    ("version-true", at("version", value=True), r"version is true: it must be a whole number \(this slipstream reads "
                                                r"version 1\)"),
    ("repeated-member", repeated_samples, r'repeats the member "samples" in one object'),
    ("checksum-float", float_checksum, r"crc32 is [0-9]+\.0: it must be a whole number from 0 to 4,294,967,295"),
]


@pytest.mark.parametrize("where", PLACES)
@pytest.mark.parametrize("forge, message", [case[1:] for case in MANIFEST_CASES],
                         ids=[case[0] for case in MANIFEST_CASES])
def test_a_manifest_member_out_of_range_is_named(written, request, tmp_path, where, forge, message):
    location = place(request, tmp_path, where, {M.NAME: forge(manifest_of(written)), **shard_files(written)})
    manifest = f"{location}/{M.NAME}"
    with pytest.raises(ss.FormatError, match=message) as caught:
        ss.open_dataset(location, remote=remote_options(request, tmp_path, where))
    assert str(caught.value).startswith(f"{manifest}: ")


# ---------------------------------------------------------------- shards against their entries


def replaced_by(file: str, *, keep: tuple[str, ...] = ()) -> Callable[[Path, dict, dict], None]:
    """Shard 1 replaced by ``file``, its entry forged to match the new
    file's size, header checksum, samples and pages but for ``keep``."""
    def forge(written: Path, body: dict, files: dict[str, bytes]) -> None:
        entry = body["shards"][1]
        with ss.Reader(written / file) as reader:
            truth = {"bytes": (written / file).stat().st_size, "header_crc32": int(reader.header["header_crc32"]),
                     "samples": len(reader), "pages": reader.page_count}
        entry.update({k: v for k, v in truth.items() if k not in keep})
        files[entry["name"]] = (written / file).read_bytes()
    return forge


def negative_crc32_over(file: str) -> Callable[[Path, dict, dict], None]:
    """The issue's attack: shard 1 replaced by ``file`` and its entry's
    ``header_crc32`` made negative, which used to switch its checks off."""
    def forge(written: Path, body: dict, files: dict[str, bytes]) -> None:
        replaced_by(file, keep=("samples",))(written, body, files)
        body["shards"][1]["header_crc32"] = -1
    return forge


def cut(keep: int) -> Callable[[Path, dict, dict], None]:
    """Shard 1 cut to its first ``keep`` bytes (a partial copy or upload)."""
    def forge(written: Path, body: dict, files: dict[str, bytes]) -> None:
        name = body["shards"][1]["name"]
        files[name] = files[name][:keep]
    return forge


def swapped(written: Path, body: dict, files: dict[str, bytes]) -> None:
    files[body["shards"][1]["name"]] = files[body["shards"][0]["name"]]


def entry(key: str, change: Callable[[int], int]) -> Callable[[Path, dict, dict], None]:
    def forge(written: Path, body: dict, files: dict[str, bytes]) -> None:
        body["shards"][1][key] = change(body["shards"][1][key])
    return forge


def member(change: Callable[[dict], None]) -> Callable[[Path, dict, dict], None]:
    def forge(written: Path, body: dict, files: dict[str, bytes]) -> None:
        change(body)
    return forge


def disagrees(difference: str) -> Callable[[dict], str]:
    """The pattern of the message of a shard disagreeing with its entry in
    ``difference`` (a pattern formatted with shard 1's entry)."""
    return lambda e: r"the manifest disagrees with shard shard-0000[01]-[0-9a-f]{8}\.slip: (.*; )?" + difference.format(
        **e, more=e["bytes"] + 4096, fewer=e["pages"] - 1, other=e["header_crc32"] ^ 1)


def refused(member: str) -> Callable[[dict], str]:
    """The pattern of the message of a manifest refused for ``member``."""
    return lambda e: re.escape(member)


SHARD_CASES = [
    ("replaced-by-larger-pages", replaced_by("large-pages.slip"),
     disagrees(r"its page size \(the manifest says 16,384 bytes, the shard 32,768\)")),
    ("replaced-by-88-samples", replaced_by("eighty-eight.slip", keep=("samples",)),
     disagrees(r"its sample count \(the manifest says 64, the shard 88\)")),
    ("negative-crc32-over-88-samples", negative_crc32_over("eighty-eight.slip"),
     refused("shards[1].header_crc32 is -1: it must be a whole number")),
    ("negative-crc32-over-larger-pages", negative_crc32_over("large-pages.slip"),
     refused("shards[1].header_crc32 is -1: it must be a whole number")),
    ("replaced-by-another-shard", swapped,
     disagrees(r"its header checksum \(the manifest says {header_crc32:08x}, the shard [0-9a-f]{{8}}\): the shard "
               r"was rewritten or replaced")),
    ("cut-short", cut(100_000), disagrees(r"its size \(the manifest says {bytes:,} bytes, the shard 100,000\)$")),
    ("cut-inside-its-header", cut(100), disagrees(r"its size \(the manifest says {bytes:,} bytes, the shard 100\)$")),
    ("emptied", cut(0), disagrees(r"its size \(the manifest says {bytes:,} bytes, the shard 0\)$")),
    ("bytes-of-another-size", entry("bytes", lambda n: n + 4096),
     disagrees(r"its size \(the manifest says {more:,} bytes, the shard {bytes:,}\)$")),
    ("another-header-crc32", entry("header_crc32", lambda c: c ^ 1),
     disagrees(r"its header checksum \(the manifest says {other:08x}, the shard {header_crc32:08x}\)")),
    ("fewer-pages", entry("pages", lambda n: n - 1),
     disagrees(r"its data pages \(the manifest says {fewer}, the shard {pages}\)$")),
    ("no-page-checksums", member(lambda body: body.update(page_checksums=False)),
     disagrees(r"its page checksums \(the manifest says absent, the shard present\)")),
    ("renamed-field", member(lambda body: body["fields"][1].update(name="class")),
     disagrees(r"its fields \(the manifest says image, class, the shard image, label\)")),
    ("retyped-field", member(lambda body: body["fields"][1].update(type_id=3)),
     disagrees(r"its field 'label' \(the manifest says \{{\"arguments\": \{{\}}, \"record\": \[\[\"value\", "
               r"\"<i8\"\]\], \"type_id\": 3\}}, the shard \{{.*\"type_id\": 2\}}\)")),
    ("other-user-metadata", member(lambda body: body.update(user_metadata={"classes": ["cat", "dog"]})),
     disagrees(r'its user metadata \(the manifest says \{{"classes": \["cat", "dog"\]\}}, the shard \{{\}}\)')),
]


@pytest.mark.parametrize("where", PLACES)
@pytest.mark.parametrize("forge, message", [case[1:] for case in SHARD_CASES], ids=[case[0] for case in SHARD_CASES])
def test_a_shard_that_disagrees_with_its_entry_is_refused(written, request, tmp_path, where, forge, message):
    body, files = manifest_of(written), shard_files(written)
    forge(written, body, files)
    location = place(request, tmp_path, where, {M.NAME: signed(body), **files})
    expected = message(manifest_of(written)["shards"][1])
    options = remote_options(request, tmp_path, where)
    with pytest.raises(ss.FormatError, match=expected) as caught:
        ss.open_dataset(location, remote=options)
    assert str(caught.value).startswith(f"{location}")
    with pytest.raises(ss.FormatError, match=expected):  # refused before a loader serves a batch
        ss.Loader(location, 8, remote=options, verbose=False)


# ---------------------------------------------------------------- good datasets


@pytest.mark.parametrize("where", PLACES)
def test_good_datasets_still_open_and_read_the_same(written, request, tmp_path, where):
    location = place(request, tmp_path, where, {M.NAME: (written / "sharded" / M.NAME).read_bytes(),
                                                **shard_files(written)})
    options = remote_options(request, tmp_path, where)
    with ss.Reader(written / "one.slip") as single, ss.open_dataset(location, remote=options) as reader:
        assert len(reader) == COUNT and reader.page_count == single.page_count
        assert reader.manifest == M.decode((written / "sharded" / M.NAME).read_bytes())
        for i in range(COUNT):
            got, want = reader[i], single[i]
            assert got["label"] == want["label"] == i
            np.testing.assert_array_equal(got["image"], want["image"])
        reader.verify_pages()


def test_a_good_manifest_decodes_to_what_was_encoded(written):
    manifest = M.decode((written / "sharded" / M.NAME).read_bytes())
    assert M.decode(manifest.encode()) == manifest
    assert [s.samples for s in manifest.shards] == [64, 64] and manifest.page_size == PAGE


def test_a_single_file_at_a_url_still_opens(written, s3_server, tmp_path):
    url = place_single(s3_server, written / "one.slip")
    options = ss.Remote(storage_options=s3_server.storage_options(), cache_dir=tmp_path / "cache")
    with ss.open_dataset(url, remote=options) as reader, ss.Reader(written / "one.slip") as single:
        assert reader.manifest.shards[0].bytes == (written / "one.slip").stat().st_size
        assert reader.manifest.shards[0].header_crc32 == int(single.header["header_crc32"])
        np.testing.assert_array_equal(reader[COUNT - 1]["image"], single[COUNT - 1]["image"])


def place_single(s3_server, path: Path) -> str:
    import obstore

    name = f"checks-{uuid.uuid4().hex[:12]}/{path.name}"
    obstore.put(s3_server.store("test"), name, path.read_bytes())
    return f"s3://test/{name}"


def test_checking_remote_shards_costs_no_request(written, request, s3_server, s3_proxy, tmp_path):
    """The object's size comes with its header's ranged GET: opening makes
    the same requests as before the size was checked (one HEAD and one GET
    of the manifest, two ranged GETs a shard) and no HEAD of a shard."""
    url = place(request, tmp_path, "remote", {M.NAME: (written / "sharded" / M.NAME).read_bytes(),
                                              **shard_files(written)})
    s3_proxy.reset_counts()
    options = ss.Remote(storage_options=s3_server.storage_options(endpoint=s3_proxy.endpoint),
                        cache_dir=tmp_path / "cache")
    with ss.open_dataset(url, remote=options) as reader:
        assert len(reader.shards) == 2
    assert s3_proxy.count("HEAD", path_contains=".slip") == 0
    assert s3_proxy.count("GET", path_contains=".slip", ranged_only=True) == 4
    assert s3_proxy.count(None) == 2 + 4
