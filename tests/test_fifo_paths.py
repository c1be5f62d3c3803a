"""A FIFO, a socket or a folder where a dataset file (or its manifest, or a
LitData index) should be is refused with a FormatError naming it, by every
entry point that opens datasets: never a wait for a writer that never comes,
never "has no images"."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path
from typing import Any, Callable

import pytest

import slipstream as ss
from slipstream import cli
from slipstream.errors import FormatError


def finishing(call: Callable[[], Any], fifos: list[Path], seconds: float = 20) -> BaseException | None:
    """What ``call`` raises (None if it returns), run in a thread; fails the
    test if it is still waiting after ``seconds`` (the FIFOs are then opened
    for writing, which releases a reader blocked in ``open``)."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001  (handed to the test)
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        for fifo in fifos:
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
        thread.join(5)
        pytest.fail(f"still waiting after {seconds} s: a FIFO was opened as if it were a file")
    return outcome[0]


def special(kind: str, path: Path) -> Path:
    """A FIFO, a socket or a folder at ``path``."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.close()
    else:
        path.mkdir()
    return path


FIELDS = {"image": ss.RGBImageField()}
WORDS = {"fifo": "FIFO", "socket": "socket", "folder": "folder"}

ENTRY_POINTS: dict[str, Callable[[Path, Path], Any]] = {
    "open_dataset": lambda path, out: ss.open_dataset(path),
    "Loader": lambda path, out: ss.Loader(path, batch_size=2),
    "convert": lambda path, out: ss.convert(path, out / "converted.slip"),
}


def cli_call(*args: str) -> Callable[[Path, Path], Any]:
    def call(path: Path, out: Path) -> Any:
        status = cli.main([args[0], str(path), *[str(out / a) for a in args[1:]]])
        if status != 0:
            raise SystemExit(status)
    return call


CLI_POINTS = {"cli info": cli_call("info"), "cli convert": cli_call("convert", "converted.slip")}


@pytest.mark.parametrize("entry", [*ENTRY_POINTS, *CLI_POINTS])
@pytest.mark.parametrize("where", ["x.slip", "x.beton", "folder/manifest.json", "manifest.json given"])
@pytest.mark.parametrize("kind", ["fifo", "socket", "folder"])
def test_a_path_that_is_not_a_regular_file_is_refused_by_name(tmp_path, capsys, entry, where, kind):
    if kind == "folder" and where.startswith("x."):
        pytest.skip("a folder named x.slip is a sharded dataset's folder, tested by its manifest")
    out = tmp_path / "out"
    out.mkdir()
    if where.endswith("manifest.json") or where == "manifest.json given":
        (tmp_path / "folder").mkdir()
        made = special(kind, tmp_path / "folder" / "manifest.json")
        given = made if where == "manifest.json given" else tmp_path / "folder"
    else:
        made = given = special(kind, tmp_path / where)
    call = {**ENTRY_POINTS, **CLI_POINTS}[entry]
    raised = finishing(lambda: call(given, out), [made])
    assert raised is not None, f"{entry} opened {made} ({kind})"
    if entry.startswith("cli"):
        message = capsys.readouterr().err
        assert isinstance(raised, SystemExit) and raised.code == 1
    else:
        assert isinstance(raised, FormatError), f"{type(raised).__name__}: {raised}"
        message = str(raised)
    assert str(made) in message and WORDS[kind] in message, message
    assert "no images" not in message
    assert list(out.iterdir()) == [], "a half-written output was left behind"


@pytest.mark.parametrize("opening", ["Loader of the folder", "LitData"])
def test_a_fifo_litdata_index_is_not_waited_on(tmp_path, opening):
    os.mkfifo(tmp_path / "index.json")
    call = (lambda: ss.Loader(tmp_path, batch_size=2)) if opening.startswith("Loader") else \
        (lambda: ss.LitData(tmp_path)[0])
    raised = finishing(call, [tmp_path / "index.json"])
    assert raised is not None


def test_a_fifo_among_image_paths_is_a_sample_that_cannot_be_encoded_named(tmp_path, photo):
    good = tmp_path / "good.jpg"
    good.write_bytes(photo.data)
    os.mkfifo(tmp_path / "pipe.jpg")
    images = [str(good), str(tmp_path / "pipe.jpg"), str(good)]
    samples = [(path,) for path in images]
    result = finishing(lambda: ss.write(tmp_path / "out.slip", samples, FIELDS, on_error="raise", workers=0,
                                        verbose=False), [tmp_path / "pipe.jpg"])
    assert isinstance(result, ss.errors.FieldValueError), result
    assert "pipe.jpg" in str(result) and "FIFO" in str(result)
    assert not (tmp_path / "out.slip").exists()
    written = ss.write(tmp_path / "out.slip", samples, FIELDS, on_error="skip", workers=0, verbose=False)
    assert written.samples == 2 and [index for index, _ in written.skipped] == [1]
