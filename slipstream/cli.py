"""Command line: ``slipstream write | info | convert | bench | demo | cache``."""

from __future__ import annotations

import argparse
import codecs
import dataclasses
import sys
from pathlib import Path

import numpy as np


BENCH_PIPELINES = ("bytes", "simclr", "train", "val")


def main(argv: list[str] | None = None) -> int:
    """Run ``slipstream ARGS...`` (``argv``, default the command line): its exit status."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors=_ESCAPED)
    args = build_parser().parse_args(argv)
    from slipstream.errors import SlipstreamError

    try:
        return _run(args)
    except (SlipstreamError, OSError) as exc:
        print(f"slipstream {args.command}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # the write left nothing half-done behind: one line, and the shell's status for SIGINT
        print(f"slipstream {args.command}: interrupted", file=sys.stderr)
        return 130


def _escaped(error: UnicodeError) -> tuple[str, int]:
    """What the output shows of text it cannot encode: a file name that is
    not UTF-8 (Python's text holds its bytes as lone surrogates) with those
    bytes as ``\\x`` escapes, as :func:`slipstream.sources.folders.shown_path`
    shows it; any other character as ``backslashreplace`` does."""
    if isinstance(error, UnicodeEncodeError):
        text = error.object[error.start:error.end]
        if all("\udc80" <= c <= "\udcff" for c in text):
            from slipstream.sources.folders import shown_path

            return shown_path(text), error.end
    return codecs.backslashreplace_errors(error)


_ESCAPED = "slipstream.escaped"
codecs.register_error(_ESCAPED, _escaped)


def build_parser() -> argparse.ArgumentParser:
    """The ``slipstream`` command's parser, every subcommand in it."""
    from slipstream import __version__, cli_cache

    parser = argparse.ArgumentParser(prog="slipstream", description="Fast data loading for PyTorch vision training.")
    parser.add_argument("--version", action="version", version=f"slipstream {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    write = commands.add_parser("write", help="write a dataset from an image folder (root/<class>/<image>, or flat), "
                                              "WebDataset tar shards or a LitData dataset")
    write.add_argument("folder", type=_path,
                       help="image folder with one subfolder per class (labels number the sorted class names), or a "
                            "flat folder of images (all labelled 0); or WebDataset tar shards: a .tar file, a brace "
                            "pattern (train-{000000..000099}.tar), or a folder or URL prefix ending in / holding .tar "
                            "files, or a shard index (.json, as webdataset's widsindex writes); or the folder of a "
                            "LitData optimized dataset (index.json) whose items have 'image' and 'label'")
    write.add_argument("output", type=_path,
                       help="dataset file to create, or the folder or URL (s3://bucket/prefix) of a sharded dataset")
    write.add_argument("--workers", type=int, default=None, help="encoding processes (default: one per core)")
    write.add_argument("--write-mode", choices=["jpeg", "raw", "smart", "yuv420"], default="jpeg",
                       help="how images are stored (default: jpeg, JPEG input with its DCT coefficients unchanged; "
                            "yuv420: the decoded YCbCr 4:2:0 planes, loaded with no entropy decoding)")
    write.add_argument("--max-resolution", type=int, default=None, help="shrink images whose longer side exceeds this")
    write.add_argument("--jpeg-quality", type=int, default=90, help="quality of images compressed here (default 90)")
    write.add_argument("--tile-width", type=int, default=None,
                       help="re-code stored JPEGs losslessly into tiles at most this wide: faster crops, same pixels "
                            "(default: RGBImageField's, 32); 0 keeps JPEG input byte for byte")
    write.add_argument("--page-size", type=int, default=8 << 20, help="bytes per page, a power of two (default 8 MiB)")
    write.add_argument("--page-checksums", action=argparse.BooleanOptionalAction, default=True,
                       help="store a CRC-32 of every page, checked when the page is first read (default: yes)")
    write.add_argument("--skip-errors", action="store_true", help="leave out unreadable images instead of stopping")
    write.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                       help="convert on a Ray cluster (ADDRESS, e.g. ray://head:10001 or auto; a local one when "
                            "omitted); writes a sharded dataset")
    _overwrite_option(write)
    _shard_options(write)

    info = commands.add_parser("info", help="describe a dataset (a slipstream file, a sharded dataset, a URL of "
                                            "either, or an FFCV .beton)")
    info.add_argument("file", type=_path,
                      help="dataset file, sharded dataset folder or manifest, or URL; or a source (a folder of "
                           "images, tar shards): then where its dataset file is kept in the cache")
    info.add_argument("--verify-pages", action="store_true",
                      help="check every page's CRC-32 now (a file written with --no-page-checksums has none to "
                           "check: the report says so, and the exit status stays 0)")

    convert = commands.add_parser("convert", help="copy a dataset file (e.g. an FFCV .beton) into a slipstream file")
    convert.add_argument("input", type=_path,
                         help="the dataset to copy: a slipstream file, a sharded dataset (folder or manifest), a "
                              "URL of either, or an FFCV .beton")
    convert.add_argument("output", type=_path,
                         help="dataset file to create, or the folder or URL (s3://bucket/prefix) of a sharded dataset")
    convert.add_argument("--tile-width", type=int, default=None,
                         help="re-code stored JPEGs losslessly into tiles this wide, e.g. 32: faster crops, "
                              "same pixels")
    convert.add_argument("--write-mode", choices=["yuv420"], default=None,
                         help="store the images as their decoded YCbCr 4:2:0 planes (loaded with no entropy decoding); "
                              "default: as they are")
    convert.add_argument("--page-size", type=int, default=8 << 20, help="bytes per page (default 8 MiB)")
    convert.add_argument("--page-checksums", action=argparse.BooleanOptionalAction, default=True,
                         help="store a CRC-32 of every page, checked when the page is first read (default: yes)")
    _overwrite_option(convert)
    _shard_options(convert)

    bench = commands.add_parser("bench", help="stream a dataset file through a standard pipeline, print images/s")
    bench.add_argument("file", type=_path, help="dataset file (slipstream or FFCV .beton) with an image field")
    bench.add_argument("--pipeline", choices=sorted(BENCH_PIPELINES), default="train",
                       help="train: RandomResizedCrop 224 + flip + normalize; val: center crop 224 + normalize; "
                            "simclr: two train views; bytes: stored bytes, no decoding (default: train)")
    bench.add_argument("--field", default=None, help="the image field (default: the file's only image field)")
    bench.add_argument("--batch-size", type=int, default=128, help="images per batch (default 128)")
    bench.add_argument("--epochs", type=int, default=3, help="timed passes over the file (default 3)")
    bench.add_argument("--threads", type=int, default=None, help="decoding threads (default: every core)")

    demo = commands.add_parser("demo", help="write a dataset of JPEGs, stream it with random crops, print images/s")
    demo.add_argument("--data", type=_path,
                      help="image folder, root/<class>/<image> or flat (default: generate pictures)")
    demo.add_argument("--epochs", type=int, default=3, help="passes over the images (default: 3)")
    demo.add_argument("--count", type=int, default=240, help="number of images to generate (default: 240)")
    demo.add_argument("--grid", default="demo-batch.png",
                      help="PNG to save one augmented batch to, with labels (default: demo-batch.png; '' for none)")

    status = commands.add_parser("status", help="what loading speed depends on here (processor, cores and quota, "
                                                "threads, versions, caches), a speed check, and each problem found "
                                                "with its fix; exit status 1 when one is found")
    status.add_argument("--seconds", type=float, default=5.0,
                        help="seconds of the speed check through the standard pipeline (default 5; 0: none)")
    status.add_argument("--threads", type=int, default=None, help="threads of the speed check (default: a loader's)")

    cli_cache.add_parser(commands, _path)
    return parser


def _run(args: argparse.Namespace) -> int:
    import slipstream as ss

    if args.command == "write":
        from slipstream.convert import check_tiles

        tiles = {} if args.tile_width is None else {"tile_width": args.tile_width or None}
        check_tiles(args.write_mode, tiles.get("tile_width"))
        image = ss.RGBImageField(write_mode=args.write_mode, max_resolution=args.max_resolution,
                                 jpeg_quality=args.jpeg_quality, **tiles)
        source, fields = _write_source(args.folder, image)
        options = dict(page_size=args.page_size, page_checksums=args.page_checksums,
                       on_error="skip" if args.skip_errors else "raise", shard_size=args.shard_size,
                       shards=args.shards)
        if args.ray is not None:
            result = _write_on_ray(args.ray, source, fields, args.output, overwrite=args.overwrite, **options)
        else:
            result = ss.write(args.output, source, fields, workers=args.workers, overwrite=args.overwrite, **options)
        print(_written(result))
        for index, reason in result.skipped:
            print(f"skipped {reason}")
        return 0
    if args.command == "info":
        from slipstream.cli_cache import source_report

        report = source_report(args.file)
        if report is not None:
            text, cached_file = report
            print(text)
            if cached_file is None:
                return 0
            args.file = str(cached_file)  # and what the file holds
        with ss.open_dataset(args.file) as reader:
            pages, problem = verify_pages(reader) if args.verify_pages else (None, None)
            print(describe(reader, pages=pages))
        if problem is not None:  # after the report, which holds everything else there is to know
            print(f"slipstream info: {problem.message}", file=sys.stderr)
            return 1 if problem.fatal else 0
        return 0
    if args.command == "convert":
        result = ss.convert(args.input, args.output, tile_width=args.tile_width, write_mode=args.write_mode,
                            page_size=args.page_size, page_checksums=args.page_checksums, shard_size=args.shard_size,
                            shards=args.shards, overwrite=args.overwrite)
        print(_written(result))
        return 0
    if args.command == "demo":
        from slipstream import demo as demo_module

        return demo_module.main(args.data, args.epochs, args.count, args.grid or None)
    if args.command == "cache":
        from slipstream import cli_cache

        return cli_cache.run(args)
    if args.command == "status":
        from slipstream import status

        return status.main(args.seconds, args.threads)
    if args.command == "bench":
        from slipstream.bench import stream

        stream(args.file, args.pipeline, field=args.field, batch_size=args.batch_size, epochs=args.epochs,
               threads=args.threads)
        return 0
    return 2


def _write_source(name: str, image: object) -> tuple[object, dict[str, object]]:
    """What ``write`` reads, and its fields: WebDataset tar shards (a
    ``.tar``, a brace pattern, a URL prefix ending in ``/``, a folder of
    ``.tar`` files, a shard index ``.json``), a LitData dataset (a folder
    with LitData's ``index.json``, not just any file of that name), else an
    image folder."""
    import slipstream as ss
    from slipstream.sources.paths import holds_tar_shards, is_litdata_index
    from slipstream.sources.shard_index import shard_index_at

    fields = {"image": image, "label": ss.IntField()}
    path = Path(name)
    index = shard_index_at(name, ss.Remote())
    if index is not None:
        return ss.WebDataset(index, fields), fields
    if "{" in name or name.endswith(".tar") or ("://" in name and name.endswith("/")) or \
            ("://" not in name and path.is_dir() and holds_tar_shards(path, name)):
        return ss.WebDataset(name, fields), fields
    if "://" not in name and is_litdata_index(path / "index.json"):
        return ss.LitData(name), fields
    return ss.sources.ImageFolder(name), fields


def _write_on_ray(address: str, source: object, fields: dict[str, object], output: str, **options: object) -> object:
    """Write ``source`` at ``output`` on the Ray cluster at ``address`` (``local``: start one here)."""
    from slipstream.errors import ArgumentError

    try:
        import ray
    except ImportError as exc:
        raise ArgumentError(f"--ray needs Ray, which this Python cannot import ({exc}): pip install "
                            f"'slipstream[ray]'") from exc

    import slipstream as ss
    import slipstream.ray as ssray
    from slipstream.format.remote import absolute

    ray.init(address=None if address == "local" else address, include_dashboard=False, log_to_driver=False)
    try:
        if isinstance(source, ss.WebDataset):
            return ssray.write(ssray.read_webdataset(source), output, fields, **options)
        if isinstance(source, ss.LitData):
            return ssray.write(ssray.read_litdata(source.input_dir, fields), output, fields, **options)
        folder = source  # an ImageFolder: workers read its files by path
        rows = [{"image": absolute(path), "label": label} for path, label in (folder[i] for i in range(len(folder)))]
        return ssray.write(ray.data.from_items(rows), output, fields, user_metadata=folder.user_metadata(), **options)
    finally:
        ray.shutdown()


def _path(text: str) -> str:
    """A path or URL argument: an empty one (an unset shell variable) is
    refused, where a path would take it for the current folder."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path (the current folder would be taken for it): give a path")
    return text


def _overwrite_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a dataset already at OUTPUT (without it, an existing OUTPUT is refused)")


def _shard_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--shard-size", default=None,
                       help="write a sharded dataset (shard files and a manifest) into OUTPUT, a new shard every "
                            "SHARD_SIZE bytes, e.g. 1GB (a URL output gets 1GB shards by default)")
    group.add_argument("--shards", type=int, default=None,
                       help="write a sharded dataset of at most this many shards, of about equal sample counts (a "
                            "shard ends only where a page starts: fewer pages, fewer shards)")


def _written(result: object) -> str:
    """The line ``write`` and ``convert`` print about what they wrote."""
    r = result  # a WriteResult
    if r.shards:
        return f"wrote {r.path}: {r.samples} samples in {len(r.shards)} shards and a manifest"
    return f"wrote {r.path}: {r.samples} samples, {Path(r.path).stat().st_size:,} bytes"


@dataclasses.dataclass(frozen=True)
class PageProblem:
    """Why ``info --verify-pages`` could not vouch for every page: a
    one-line ``message``, and whether it is ``fatal`` (a damaged page: exit
    status 1) or a check that could not run (no checksums: exit status 0)."""

    message: str
    fatal: bool


def verify_pages(reader: object) -> tuple[str, PageProblem | None]:
    """Check every page of ``reader`` against its CRC-32, for ``info
    --verify-pages``: what the report's checksums line says of the pages,
    and the problem to report after it (``None``: every page is good)."""
    from slipstream.errors import FormatError

    r = reader  # a slipstream.Reader or ShardedReader
    if r.page_checksums is None:
        if r.format == "ffcv":
            why = "an FFCV file, which has none"
        else:
            why = "written with --no-page-checksums or page_checksums=False"
        return ("none stored, so not verified",
                PageProblem(f"--verify-pages: {r.path} has no page checksums ({why}), so its pages were not checked; "
                            f"`slipstream convert {r.path} COPY` copies it, without re-encoding, into a file that has "
                            f"them (as `slipstream write` writes by default: --page-checksums, page_checksums=True)",
                            fatal=False))
    try:
        r.verify_pages()
    except FormatError as exc:
        return "a damaged page (below)", PageProblem(str(exc), fatal=True)
    return "verified", None


def describe(reader: object, pages: str | None = None) -> str:
    """What ``slipstream info`` prints: fields, counts, sizes, image sizes,
    checksums.  ``pages``: what ``--verify-pages`` found (see
    :func:`verify_pages`), or ``None`` when the pages were not checked."""
    r = reader  # a slipstream.Reader
    manifest = getattr(r, "manifest", None)  # a sharded or remote dataset
    size = sum(s.bytes for s in manifest.shards) if manifest is not None else Path(r.path).stat().st_size
    lines = [f"{r.path}: {type(r).__name__}, {len(r):,} samples, {size:,} bytes", f"format: {r.format}"]
    if manifest is not None:
        names = [s.name for s in manifest.shards]
        lines.append(f"shards: {len(names):,} ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})")
    lines += [f"pages: {r.page_count:,} of {r.page_size:,} bytes ({r.data_size:,} bytes of data)", "fields:"]
    for name, field in r.fields.items():
        records = r.metadata[name]
        stored = f", {int(records['size'].sum()):,} bytes stored" if "size" in records.dtype.names else ""
        lines.append(f"  {name}: {field!r}{stored}")
        if {"height", "width"} <= set(records.dtype.names) and len(records):
            lines += _image_sizes(records)
        if "length" in records.dtype.names and len(records):
            lengths = records["length"].astype(np.int64)
            lines.append(f"    rows: {int(lengths.sum()):,} in all, {lengths.min()}..{lengths.max()} per sample "
                         f"(median {int(np.median(lengths))})")
    if r.user_metadata:
        text = ", ".join(f"{k}={v!r}" for k, v in r.user_metadata.items())
        lines.append(f"user metadata: {text[:300]}{' ...' if len(text) > 300 else ''}")
    if pages is None:
        pages = "stored, each checked when first read (--verify-pages: all now)" \
            if getattr(r, "page_checksums", None) is not None else "none stored"
    lines.append(f"checksums: header and tables verified; pages: {pages}")
    return "\n".join(lines)


def _image_sizes(records: np.ndarray) -> list[str]:
    heights, widths = records["height"].astype(np.int64), records["width"].astype(np.int64)
    longer = np.maximum(heights, widths)
    edges = [0, 64, 128, 256, 384, 512, 768, 1024, 2048, np.iinfo(np.int64).max]
    counts, _ = np.histogram(longer, bins=edges)
    histogram = ", ".join(f"{'>' + str(lo) if hi == edges[-1] else f'{lo}-{hi}'}: {c:,}"
                          for lo, hi, c in zip(edges[:-1], edges[1:], counts) if c)
    lines = [f"    sizes: height {heights.min()}..{heights.max()} (median {int(np.median(heights))}), "
             f"width {widths.min()}..{widths.max()} (median {int(np.median(widths))})",
             f"    longer side: {histogram}"]
    if "mode" in records.dtype.names:  # an image field: JPEG, raw pixels or YCbCr planes
        modes = np.bincount(records["mode"], minlength=3)
        lines.append(f"    stored as: {modes[0]:,} JPEG, {modes[1]:,} raw, {modes[2]:,} YCbCr 4:2:0 planes")
    return lines


if __name__ == "__main__":
    sys.exit(main())
