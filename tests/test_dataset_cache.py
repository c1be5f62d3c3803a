"""The dataset cache a user can see and manage: the files ``ss.cached`` and
loaders over sources keep, logged as they are written, listed and pruned
(``ss.cache``, ``slipstream cache``), an older copy of a changed source
replaced once no process holds it, no lock files left behind; a first
epoch that failed given up so that it can be retried in the same process;
a loader over a source taking what ``ss.cached`` takes; and the messages
of the cache folder and of the command line around it."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import logging
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_sources import jpegs

import slipstream as ss
from slipstream.cli import main
from slipstream.convert import cache_entry
from slipstream.sources import synthetic_folder

PIPELINES = {"image": [ss.ops.CenterCrop(16)], "label": None}
"""The smallest pipeline worth compiling, as the first-epoch tests use."""


@pytest.fixture
def folder(tmp_path):
    return synthetic_folder(tmp_path / "photos", count=8, height=40, width=48, verbose=False)


def cli(*args: str) -> tuple[int, str, str]:
    """Run the ``slipstream`` command in this process: its status, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(list(args))
        except SystemExit as exc:  # --help, or arguments argparse refuses
            status = exc.code
    return status, out.getvalue(), err.getvalue()


def add_image(folder: Path) -> None:
    """Change the folder's content: one more image in its first class."""
    first = sorted(p for p in folder.iterdir() if p.is_dir())[0]
    (first / "added.jpg").write_bytes(jpegs(1, seed=5)[0])


def hold_in_another_process(path: Path) -> subprocess.Popen:
    """A real process that holds ``path`` with a shared lock, as a loader of
    another process holds the file it reads, until its stdin closes."""
    code = ("import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); fcntl.flock(fd, fcntl.LOCK_SH); "
            "print('held', flush=True); sys.stdin.read()")
    proc = subprocess.Popen([sys.executable, "-c", code, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def release(proc: subprocess.Popen) -> None:
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0


# ---------------------------------------------------------------- messages (item 8)


def test_a_cache_dir_that_is_a_dangling_link_is_named_with_its_variable(tmp_path, monkeypatch, folder):
    link = tmp_path / "cache-link"
    link.symlink_to(tmp_path / "unmounted" / "scratch")
    monkeypatch.setenv("SLIPSTREAM_CACHE_DIR", str(link))
    with pytest.raises(ss.ArgumentError) as caught:
        ss.cached(folder, verbose=False)
    message = str(caught.value)
    assert "SLIPSTREAM_CACHE_DIR" in message and str(link) in message and "does not exist" in message, message
    assert str(tmp_path / "unmounted" / "scratch") in message  # where the link points
    file = tmp_path / "a-file"
    file.write_text("not a folder")
    monkeypatch.setenv("SLIPSTREAM_CACHE_DIR", str(file))
    with pytest.raises(ss.ArgumentError, match=rf"SLIPSTREAM_CACHE_DIR={re.escape(str(file))}.*is a file"):
        ss.cached(folder, verbose=False)


def test_write_refuses_tiles_with_planes_or_raw_pixels_as_convert_does(tmp_path, folder):
    status, _, err = cli("write", str(folder), str(tmp_path / "planes.slip"), "--write-mode", "yuv420",
                         "--tile-width", "16", "--workers", "0")
    assert status == 1 and 'tile_width tiles stored JPEGs, and write_mode="yuv420" stores planes' in err, err
    assert not (tmp_path / "planes.slip").exists()
    status, _, raw_err = cli("write", str(folder), str(tmp_path / "raw.slip"), "--write-mode", "raw",
                             "--tile-width", "16", "--workers", "0")
    assert status == 1 and 'write_mode="raw" stores raw pixels' in raw_err, raw_err
    # The same check, so the same words, as convert's.
    ss.write(tmp_path / "in.slip", folder, workers=0, verbose=False)
    status, _, convert_err = cli("convert", str(tmp_path / "in.slip"), str(tmp_path / "out.slip"), "--write-mode",
                                 "yuv420", "--tile-width", "16")
    assert status == 1 and convert_err.split(": ", 1)[1] == err.split(": ", 1)[1]


def _subcommands(help_text: str) -> list[str]:
    """The subcommands a help text lists (its positional ``{write,info,...}``)."""
    found = re.search(r"^  \{([a-z,]+)\}", help_text, re.MULTILINE)
    return found.group(1).split(",") if found else []


def _arguments_without_help(help_text: str) -> list[str]:
    """The arguments of a help text's sections that have no description:
    a line naming an argument, followed by none of its own."""
    lines = help_text.splitlines()
    bare = []
    for k, line in enumerate(lines):
        named = re.fullmatch(r"  (\S.*?)(\s{2,}\S.*)?", line)
        if not named or named.group(2) or line.startswith("   "):
            continue
        following = lines[k + 1] if k + 1 < len(lines) else ""
        if not following.startswith(" " * 6):  # the description would be on the next line, indented further
            bare.append(named.group(1))
    return [name for name in bare if not name.startswith("{")]


def test_every_argument_of_every_command_has_help():
    missing = {}
    pending = [[]]
    while pending:
        command = pending.pop()
        status, text, _ = cli(*command, "--help")
        assert status == 0, command
        missing.update({" ".join([*command, name]): True for name in _arguments_without_help(text)})
        pending += [[*command, sub] for sub in _subcommands(text)]
    assert not missing, f"arguments without help: {sorted(missing)}"


def test_info_of_a_source_folder_says_where_its_dataset_file_is(cache, folder):
    status, out, err = cli("info", str(folder))
    assert status == 0, err
    path = cache_entry(folder, create=False).path
    assert f"its dataset file in the cache: {path}, not written yet" in out, out
    assert not cache.exists()  # saying where creates nothing
    written = ss.cached(folder, verbose=False)
    assert written == path
    status, out, err = cli("info", str(folder))
    assert status == 0, err
    assert f"its dataset file in the cache: {path} ({path.stat().st_size:,} bytes)" in out, out
    assert "8 samples" in out  # and what the file holds


# ---------------------------------------------------------------- the cache, visible and manageable (item 9)


def test_writing_a_cached_file_is_logged_with_where_and_about_how_big(cache, folder, caplog):
    with caplog.at_level(logging.INFO, logger="slipstream"):
        path = ss.cached(folder, verbose=False)
    records = [r for r in caplog.records if r.name == "slipstream.cache" and str(path) in r.getMessage()]
    assert len(records) == 1, caplog.text
    estimate, actual = records[0].estimated_bytes, path.stat().st_size
    assert 0.5 * actual < estimate < 2 * actual, (estimate, actual)
    assert "about" in records[0].getMessage() and "free there" in records[0].getMessage()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="slipstream"):
        assert ss.cached(folder, verbose=False) == path
    assert not [r for r in caplog.records if "written now" in r.getMessage()]  # found, not written again
    assert not list(cache.glob("*.lock"))  # the builder removed its lock file


def test_a_large_copy_is_a_warning_python_shows_without_logging_set_up(cache, folder, monkeypatch, caplog):
    from slipstream import cache_use

    monkeypatch.setattr(cache_use, "LARGE_COPY", 1)  # this folder's few kilobytes stand for a gigabyte
    path = ss.cached(folder, verbose=False)
    told = [r for r in caplog.records if f"is written now at {path}: about" in r.getMessage()]
    assert [r.levelno for r in told] == [logging.WARNING]  # shown by Python's last-resort handler


def test_a_newer_copy_replaces_the_older_once_no_process_holds_it(cache, folder):
    old = ss.cached(folder, verbose=False)
    holder = hold_in_another_process(old)  # a loader of another process reads the old copy
    try:
        add_image(folder)
        new = ss.cached(folder, verbose=False)
        assert new != old and old.exists() and new.exists()
        listed = {entry.path: entry for entry in ss.cache.list()}
        assert listed[old].superseded and listed[old].held and listed[old].stale
        assert not listed[new].superseded and not listed[new].held
        assert ss.cache.prune(stale=True).held == (listed[old],)  # held: kept
        assert old.exists()
    finally:
        release(holder)
    assert ss.cached(folder, verbose=False) == new  # the next use removes the copy it supersedes
    assert not old.exists() and [entry.path for entry in ss.cache.list()] == [new]
    assert sorted(p.name for p in cache.iterdir()) == sorted([new.name, new.with_suffix(".json").name])


def test_a_loader_holds_the_file_it_reads_against_a_newer_copy_and_prune(cache, folder):
    old = ss.cached(folder, verbose=False)
    with ss.Loader(old, 4, PIPELINES, verbose=False) as loader:
        add_image(folder)
        new = ss.cached(folder, verbose=False)
        assert old.exists()  # the loader reads it
        assert ss.cache.prune(everything=True).held[0].path == old and old.exists()
        assert sum(len(batch[0]) for batch in loader) == 8
    assert not new.exists()  # pruned: nothing held it
    assert ss.cache.prune(everything=True).removed[0].path == old and not old.exists()  # let go when it closed


def test_lock_files_nothing_holds_are_pruned_and_held_ones_kept(cache, folder):
    path = ss.cached(folder, verbose=False)
    stale = cache / "other-0123456789abcdef0123.slip.lock"  # left by a killed process, or an earlier release
    stale.touch()
    busy = cache / "busy-0123456789abcdef0123.slip.lock"
    busy.touch()
    holder = hold_in_another_process(busy)
    try:
        dry = ss.cache.prune(stale=True, dry_run=True)
        assert dry.leftovers == (stale,) and stale.exists()
        pruned = ss.cache.prune(stale=True)
        assert pruned.leftovers == (stale,) and not stale.exists() and busy.exists()
    finally:
        release(holder)
    assert path.exists()  # current: stale=True does not choose it


def test_prune_by_age_and_by_size_least_recently_used_first(cache, tmp_path):
    paths = []
    for k in range(3):
        source = synthetic_folder(tmp_path / f"set{k}", count=4, height=32, width=32, seed=k, verbose=False)
        paths.append(ss.cached(source, verbose=False, workers=0))
    now = time.time()
    for k, path in enumerate(paths):  # last used 30, 20 and 10 days ago
        os.utime(path.with_suffix(".json"), (now - (3 - k) * 10 * 86400,) * 2)
    listed = ss.cache.list()
    assert [entry.path for entry in listed] == paths[::-1]  # most recently used first
    with pytest.raises(dataclasses.FrozenInstanceError):
        listed[0].bytes = 0
    assert [e.path for e in ss.cache.prune(older_than=25 * 86400, dry_run=True).removed] == [paths[0]]
    assert paths[0].exists()
    limit = listed[0].bytes + listed[1].bytes
    pruned = ss.cache.prune(max_bytes=limit)
    assert [e.path for e in pruned.removed] == [paths[0]] and pruned.freed_bytes == listed[2].bytes
    assert not paths[0].exists() and paths[1].exists() and paths[2].exists()
    with pytest.raises(ss.ArgumentError, match="stale=True, older_than=, max_bytes= or everything=True"):
        ss.cache.prune()
    mine = cache / "train.slip"  # a user's own file in the folder: not the cache's to list or remove
    mine.write_bytes(paths[1].read_bytes())
    assert mine not in [e.path for e in ss.cache.list()]
    assert {e.path for e in ss.cache.prune(everything=True).removed} == {paths[1], paths[2]} and mine.exists()


def test_cache_list_and_prune_on_the_command_line(cache, folder):
    old = ss.cached(folder, verbose=False)
    add_image(folder)
    holder = hold_in_another_process(old)
    try:
        new = ss.cached(folder, verbose=False)
    finally:
        release(holder)
    from slipstream.cache_files import human_size

    status, out, err = cli("cache", "list")
    assert status == 0, err
    lines = out.splitlines()
    assert lines[0] == f"{cache}: 2 dataset files, {human_size(old.stat().st_size + new.stat().st_size)}"
    row = next(line for line in lines if old.name in line)
    assert "superseded" in row and "ImageFolder(" in row and str(folder) in row
    assert "current" in next(line for line in lines if new.name in line)
    status, out, _ = cli("cache", "prune", "--stale", "--dry-run")
    assert status == 0 and f"would remove {old.name}" in out and old.exists(), out
    status, out, _ = cli("cache", "prune", "--stale")
    assert status == 0 and f"removed {old.name}" in out and not old.exists() and new.exists(), out
    assert "1 dataset file left" in out
    status, _, err = cli("cache", "prune")
    assert status == 1 and "--stale, --older-than, --max-size or --all" in err
    status, _, err = cli("cache", "prune", "--older-than", "soon")
    assert status == 2 and "an age such as 30d" in err


# ---------------------------------------------------------------- a failed first epoch, retried (item 10)


def test_a_failed_first_epoch_can_be_retried_in_the_same_process(cache, tmp_path):
    folder = tmp_path / "bad"
    (folder / "a").mkdir(parents=True)
    for k, data in enumerate(jpegs(8, seed=31)):
        (folder / "a" / f"{k}.jpg").write_bytes(data)
    (folder / "a" / "5.jpg").write_bytes(jpegs(1, seed=32)[0][:200])  # cut short
    strict = ss.Loader(folder, 4, PIPELINES, order="sequential", verbose=False)  # on_error="raise"
    with pytest.raises(ss.FieldValueError, match=r"5\.jpg"):
        for _ in strict:
            pass
    # The notebook cell run again with on_error="skip", the failed loader still alive: it gave its claim up.
    with ss.Loader(folder, 4, PIPELINES, order="sequential", on_error="skip", verbose=False) as retried:
        for _ in range(2):  # the first epoch, then the file it wrote
            with pytest.warns(ss.SampleWarning, match="sample 5"):
                assert sum(len(batch[0]) for batch in retried) == 7
        assert retried._epochs.first is None and retried.reader.path.exists()
    with pytest.raises(ss.SlipstreamError, match="its epoch 0 failed .*create a new Loader"):
        iter(strict)
    strict.close()


# ---------------------------------------------------------------- what ss.cached takes (item 11)


def test_a_loader_over_a_source_takes_what_cached_takes(cache, folder, caplog):
    with caplog.at_level(logging.INFO, logger="slipstream.cache"):
        with ss.Loader(folder, 4, PIPELINES, order="sequential", write_mode="yuv420", verbose=False) as loader:
            assert loader._epochs.first is not None  # the first epoch writes the file as it trains
            for _ in range(2):
                assert sum(len(batch[0]) for batch in loader) == 8
            path = loader.reader.path
            assert (loader.reader.metadata["image"]["mode"] == 2).all()  # YCbCr 4:2:0 planes
    assert "first epoch as it trains" in caplog.text
    assert ss.cached(folder, write_mode="yuv420", verbose=False) == path
    fields = {"image": ss.RGBImageField(write_mode="raw"), "label": ss.IntField()}
    entry = cache_entry(folder, fields, create=False)
    assert cache_entry(folder, write_mode="raw", create=False).path == entry.path
    with ss.Loader(folder, 4, PIPELINES, fields=fields, workers=0, verbose=False) as loader:
        assert loader._epochs.first.entry.path == entry.path and loader._epochs.first.entry.fields == fields
    with pytest.raises(ss.ArgumentError, match=r"unexpected keyword argument 'write_mode'"):  # a dataset already
        ss.Loader(path, 4, PIPELINES, write_mode="raw", verbose=False)
