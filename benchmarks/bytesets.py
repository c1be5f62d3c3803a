"""The sets of JPEG bytes the comparison (``compare.py``) runs on, each
system's copy of each set, and the check that every system of a row reads
the same bytes.

A *byte set* is one folder of JPEGs:

* ``original``: the photos as they are, the input folder's own files;
* ``reencoded``: the JPEGs FFCV's writer stores in its ``.beton`` (it
  decodes every photo and re-encodes it with OpenCV at quality 90),
  written back out as a folder;
* ``1024``: the photos resized with Pillow (Lanczos) to a 1024-pixel longer
  side and encoded once by FFCV's writer at quality 90, written back out as
  a folder.

Every system reads one of these, in its own format where it has one, with
the JPEG bytes unchanged: the folder itself (the DataLoader, DALI, SPDL),
slipstream's file written from the folder byte for byte, FFCV's ``.beton``
(for the two sets its writer made: FFCV cannot store a file's JPEG bytes
unchanged in an image field), LitData's and MosaicML streaming's datasets
written by their own writers.  Three copies are not byte for byte, and are
rows of their own: slipstream's tiled file (the same JPEGs re-coded
losslessly into restart-marker tiles: the same pixels, checked here),
slipstream's planes file (each JPEG decoded to its YCbCr 4:2:0 planes,
``RGBImageField(write_mode="yuv420")``: the planes checked here to be the
JPEG's own, whose pixels the tests hold to libjpeg-turbo's) and, for the
raw-bytes scenario, the ``BytesField`` files of FFCV and slipstream (the
files' bytes as a byte string, checked here like the others).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PEERS = REPO / "benchmarks" / "peers"
VENVS = REPO / "benchmarks" / ".venvs"
DATA = REPO / "benchmarks" / ".data"
TILE_WIDTH = 32  # slipstream's tiled file: RGBImageField(tile_width=32)
LONG_SIDE = 1024

SETS = {
    "original": "the photos as they are (the folder's own files)",
    "reencoded": "FFCV's re-encoding of the photos (its writer's JPEGs: OpenCV, quality 90), as a folder",
    "1024": f"the photos resized to a {LONG_SIDE}-px longer side (Pillow, Lanczos), encoded once by FFCV's "
            "writer at quality 90, as a folder",
}

# What each kind of copy is, relative to its set's folder.
RELATION = {
    "folder": "the folder's files (checked by its runner)",
    "slip": "slipstream's file of the folder's JPEG bytes, unchanged",
    "beton": "FFCV's .beton: the JPEG bytes FFCV's writer made, which the folder was written from",
    "tiled": f"the folder's JPEGs re-coded losslessly into {TILE_WIDTH}-px tiles (same pixels)",
    "planes": "the folder's JPEGs decoded to their YCbCr 4:2:0 planes (write_mode=\"yuv420\")",
    "bytes-slip": "the folder's files as a slipstream BytesField",
    "bytes-beton": "the folder's files as an FFCV BytesField",
    "litdata": "litdata.optimize of the folder's bytes, unchanged (checked by its runner)",
    "mds": "MDSWriter of the folder's bytes, unchanged (checked by its runner)",
}


class DifferentBytes(SystemExit):
    """Two systems of one row would decode different bytes."""


def ffcv_python() -> Path:
    """The FFCV environment's interpreter, which runs ``ffcv_write.py``."""
    python = VENVS / "ffcv" / "bin" / "python"
    if not python.exists():
        raise SystemExit("FFCV's environment is missing: run `make bench-peers` first")
    return python


def _ffcv_write(folder: Path, out: Path, *flags: str) -> None:
    """FFCV's writer over ``folder`` into ``out``, through a partial file so
    that a run that stops half-way leaves no short ``.beton`` to reuse."""
    partial = out.with_name(out.name + ".partial")
    print(f"writing {out} with FFCV's writer {' '.join(flags)}", flush=True)
    subprocess.run([str(ffcv_python()), str(PEERS / "ffcv_write.py"), str(folder), str(partial), *flags], check=True)
    partial.rename(out)


def export_images(beton: Path, source: Path, out: Path) -> None:
    """Write the JPEG bytes of ``beton`` (written by ``ffcv_write.py`` from
    ``source``, sample ``i`` from the ``i``-th of ``find_samples(source)``)
    into ``out`` under each photo's own relative path, so that the folder
    readers find the same files and classes."""
    import slipstream as ss
    from peer_common import find_samples

    samples = find_samples(source)
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    with ss.open_dataset(beton) as reader:
        if len(reader) != len(samples):
            raise SystemExit(f"{beton} holds {len(reader)} samples, {source} {len(samples)}: write it again")
        for i, (path, label) in enumerate(samples):
            if int(reader.read(i, "label")) != label:
                raise SystemExit(f"{beton}: sample {i} has label {reader.read(i, 'label')}, {path} {label}")
            target = partial / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(bytes(reader.value_bytes(i, "image")))
    shutil.rmtree(out, ignore_errors=True)
    partial.rename(out)


def write_slip(folder: Path, out: Path) -> None:
    """slipstream's file of ``folder``'s JPEGs, byte for byte, with the
    peers' labels (``find_samples``)."""
    import slipstream as ss
    from peer_common import find_samples

    samples = [(str(path), label) for path, label in find_samples(folder)]
    ss.write(out, samples, {"image": ss.RGBImageField(tile_width=None), "label": ss.IntField()}, verbose=False,
             overwrite=True)


def prepare(folder: Path, byte_set: str, writers: dict[str, tuple[Path, Path]],
            kinds_read: set[str] | None = None) -> dict[str, Path]:
    """Every copy of ``byte_set`` (made from the photos in ``folder``) that
    a system reads, by kind (:data:`RELATION`), written once and reused by
    later runs: those of ``kinds_read`` only when given (the raw-bytes copies
    need FFCV's writer, which a run without the raw row does not).
    ``writers`` maps a peer's own kind (``litdata``, ``mds``) to its
    interpreter and writer script."""
    import slipstream as ss

    DATA.mkdir(parents=True, exist_ok=True)
    stem = f"{folder.name}-{byte_set}"
    paths: dict[str, Path] = {}
    if byte_set == "original":
        paths["folder"] = folder
    else:
        beton = DATA / f"{stem}.beton"
        if not beton.exists():
            _ffcv_write(folder, beton, *(["--long-side", str(LONG_SIDE)] if byte_set == "1024" else []))
        paths["beton"], paths["folder"] = beton, DATA / stem
        if not paths["folder"].exists():
            export_images(beton, folder, paths["folder"])
    kinds = {"bytes-beton": DATA / f"{stem}-bytes.beton", "bytes-slip": DATA / f"{stem}-bytes.slip",
             "slip": DATA / f"{stem}.slip", "tiled": DATA / f"{stem}-tiles{TILE_WIDTH}.slip",
             "planes": DATA / f"{stem}-yuv420.slip"}
    wanted = set(kinds) if kinds_read is None else set(kinds_read) & set(kinds)
    if wanted & {"tiled", "planes"}:
        wanted.add("slip")  # made from it, and checked against it
    if wanted & {"bytes-beton", "bytes-slip"} and not kinds["bytes-beton"].exists():
        _ffcv_write(paths["folder"], kinds["bytes-beton"], "--bytes")
    if "bytes-slip" in wanted and not kinds["bytes-slip"].exists():
        ss.convert(kinds["bytes-beton"], kinds["bytes-slip"], verbose=False)
    if "slip" in wanted and not kinds["slip"].exists():
        write_slip(paths["folder"], kinds["slip"])
    if "tiled" in wanted and not kinds["tiled"].exists():
        ss.convert(kinds["slip"], kinds["tiled"], tile_width=TILE_WIDTH, verbose=False)
    if "planes" in wanted and not kinds["planes"].exists():
        ss.convert(kinds["slip"], kinds["planes"], write_mode="yuv420", verbose=False)
    paths.update({kind: path for kind, path in kinds.items() if kind in wanted})
    for kind, (python, writer) in writers.items():
        if kinds_read is not None and kind not in kinds_read:
            continue
        copy = DATA / f"{stem}.{kind}"
        if not copy.exists():
            print(f"writing {copy} with {writer.name}", flush=True)
            subprocess.run([str(python), str(writer), str(paths["folder"]), str(copy)], check=True, cwd=REPO)
        paths[kind] = copy
    return paths


def stored_digest(path: Path) -> dict[str, Any]:
    """The image count and ``peer_common.bytes_digest`` of the JPEG bytes a
    slipstream file or FFCV ``.beton`` stores in its ``image`` field."""
    import slipstream as ss
    from peer_common import bytes_digest, bytes_tag

    with ss.open_dataset(path) as reader:
        tags = [bytes_tag(bytes(reader.value_bytes(i, "image"))) for i in range(len(reader))]
    return {"images": len(tags), "bytes_digest": bytes_digest(tags)}


def same_pixels(a: Path, b: Path) -> str | None:
    """None when the images of two slipstream files decode to the same
    pixels, sample by sample; else which sample differs."""
    import numpy as np
    import slipstream as ss

    with ss.open_dataset(a) as left, ss.open_dataset(b) as right:
        if len(left) != len(right):
            return f"{len(left)} samples against {len(right)}"
        for i in range(len(left)):
            if not np.array_equal(left.read(i, "image"), right.read(i, "image")):
                return f"sample {i} decodes to different pixels"
    return None


def same_planes(planes: Path, jpegs: Path) -> str | None:
    """None when every image of the planes file ``planes`` holds exactly the
    planes ``native.jpeg_decode_planes`` makes of the same sample's JPEG in
    ``jpegs``; else which sample differs."""
    import numpy as np
    import slipstream as ss

    with ss.open_dataset(planes) as left, ss.open_dataset(jpegs) as right:
        if len(left) != len(right):
            return f"{len(left)} samples against {len(right)}"
        for i in range(len(left)):
            expected = ss.native.jpeg_decode_planes(bytes(right.value_bytes(i, "image")))
            if not np.array_equal(np.frombuffer(left.value_bytes(i, "image"), np.uint8), expected.reshape(-1)):
                return f"sample {i} holds other planes than its JPEG's"
    return None


def copy_bytes(path: Path) -> int:
    """The bytes a copy takes on disk: a file's size, or a folder's files' sizes."""
    if path.is_dir():
        return sum(entry.stat().st_size for entry in path.rglob("*") if entry.is_file())
    return path.stat().st_size


def verify_set(byte_set: str, paths: dict[str, Path],
               reads: dict[str, dict[str, str]]) -> dict[str, dict[str, dict[str, str]]]:
    """Check that the systems of each row of ``byte_set`` decode the same
    bytes: ``reads`` maps each row's scenario to {system: kind of copy it
    reads}.  Each copy is checked once, however many rows read it.  Returns,
    per scenario and system, the file, what it is and its size; raises
    :class:`DifferentBytes`, naming the system and its file, when a copy
    does not hold the set's bytes (for the tiled file, its pixels; for the
    planes file, its JPEGs' planes)."""
    from peer_common import folder_digest

    expected = folder_digest(paths["folder"])
    problems: dict[str, str | None] = {}

    def problem(kind: str) -> str | None:
        if kind not in problems:
            problems[kind] = None
            if kind == "tiled":
                problems[kind] = problem("slip") or same_pixels(paths[kind], paths["slip"])
            elif kind == "planes":
                problems[kind] = problem("slip") or same_planes(paths[kind], paths["slip"])
            elif kind in ("slip", "beton", "bytes-slip", "bytes-beton"):
                got = stored_digest(paths[kind])
                if got != expected:
                    problems[kind] = (f"it holds {got['images']} images with bytes digest "
                                      f"{got['bytes_digest'][:16]}, the folder {expected['images']} with "
                                      f"{expected['bytes_digest'][:16]}")
        return problems[kind]

    out: dict[str, dict[str, dict[str, str]]] = {}
    for scenario, by_system in reads.items():
        for system, kind in by_system.items():
            path = paths.get(kind)
            if path is None:
                raise DifferentBytes(f"{system} has no copy of the {byte_set!r} bytes ({kind})")
            if (why := problem(kind)) is not None:
                raise DifferentBytes(f"{system} would not read the {byte_set!r} bytes from {path}: {why}")
            out.setdefault(scenario, {})[system] = {"file": str(path), "holds": RELATION[kind],
                                                    "bytes": copy_bytes(path)}
    return out
