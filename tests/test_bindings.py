"""The generated bindings mirror the header: fresh, complete, same values and layouts as C."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import slipstream
from slipstream import _native, native

ROOT = Path(__file__).resolve().parent.parent
HEADER = ROOT / "native" / "include" / "slipstream.h"


def load_generator():
    spec = importlib.util.spec_from_file_location("generate_bindings", ROOT / "codegen" / "generate_bindings.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_committed_bindings_are_fresh():
    generator = load_generator()
    committed = (ROOT / "slipstream" / "_native.py").read_text()
    assert generator.generate() == committed, "slipstream/_native.py is stale: run `make bindings`"


def test_installed_package_matches_the_source_tree():
    installed = Path(_native.__file__).read_text()
    assert installed == (ROOT / "slipstream" / "_native.py").read_text(), "reinstall: pip install ."
    assert _native.HEADER_SHA256 == load_generator().parse_header(HEADER.read_text()).sha256


def test_every_function_has_an_intrinsic_and_a_python_wrapper():
    names = re.findall(r"SLIP_API\s+[\w\s*]+?\b(slip_\w+)\s*\(", HEADER.read_text())
    assert len(names) == len(_native.FUNCTIONS) >= 13
    for name in names:
        assert name in _native.FUNCTIONS
        assert callable(getattr(native, name)), f"no intrinsic {name}"
        assert callable(getattr(native, name.removeprefix("slip_"))), f"no Python wrapper for {name}"
        assert getattr(native, name.removeprefix("slip_")).__doc__


def c_program_output(tmp_path: Path, body: str) -> str:
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        pytest.skip("no C compiler")
    source = tmp_path / "probe.c"
    source.write_text(f'#include <stddef.h>\n#include <stdio.h>\n#include "slipstream.h"\nint main(void) {{\n{body}\nreturn 0;\n}}\n')
    exe = tmp_path / "probe"
    subprocess.run([compiler, "-std=c11", f"-I{HEADER.parent}", str(source), "-o", str(exe)], check=True)
    return subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout


def test_enums_and_constants_have_the_c_values(tmp_path):
    """Each Python enum lists the members of its C enum, in order, with the
    values a C compiler gives them."""
    header = HEADER.read_text()
    pairs = []
    for enum in (native.Status, native.Colorspace, native.Subsampling, native.DecodeFlags, native.EncodeFlags,
                 native.Interp, native.Dtype, native.Limit, native.Primitive, native.TimmOp, native.VideoCodec,
                 native.VideoColour):
        c_enum = re.search(r"``(slip_\w+)``", enum.__doc__).group(1)
        body = re.search(rf"typedef enum {c_enum} \{{(.*?)\}}", header, re.S).group(1)
        c_names = re.findall(r"\b(SLIP_\w+)\s*=", body)
        assert len(c_names) == len(enum.__members__), c_enum
        pairs += list(zip(enum.__members__.values(), c_names))
    names = [c for _, c in pairs] + ["SLIP_ABI_VERSION", "SLIP_MAX_DIMENSION", "SLIP_MAX_DECODE_MEMORY",
                                     "SLIP_DEFAULT_MAX_SCANS", "SLIP_DEFAULT_MAX_PIXELS", "SLIP_DEFAULT_MAX_PASSES",
                                     "SLIP_DEFAULT_MAX_VIDEO_DECODES"]
    body = "\n".join(f'printf("%s %lld\\n", "{c}", (long long){c});' for c in names)
    values = {k: int(v) for k, v in (line.split() for line in c_program_output(tmp_path, body).splitlines())}
    for member, c_name in pairs:
        assert int(member) == values[c_name], (member, c_name)
        assert c_name.endswith(member.name.removeprefix("S") if member.name[1:].isdigit() else member.name)
    assert len(pairs) == len(re.findall(r"^\s*SLIP_\w+\s*=", header, re.M))
    assert _native.ABI_VERSION == values["SLIP_ABI_VERSION"] == native.abi_version()
    assert _native.MAX_DIMENSION == values["SLIP_MAX_DIMENSION"]
    assert _native.MAX_DECODE_MEMORY == values["SLIP_MAX_DECODE_MEMORY"]
    assert _native.DEFAULT_MAX_SCANS == values["SLIP_DEFAULT_MAX_SCANS"]
    assert _native.DEFAULT_MAX_PIXELS == values["SLIP_DEFAULT_MAX_PIXELS"]
    assert _native.DEFAULT_MAX_PASSES == values["SLIP_DEFAULT_MAX_PASSES"]
    assert _native.DEFAULT_MAX_VIDEO_DECODES == values["SLIP_DEFAULT_MAX_VIDEO_DECODES"]


def test_struct_dtype_has_the_c_layout(tmp_path):
    dtype = native.JPEG_INFO_DTYPE
    lines = ['printf("size %zu\\n", sizeof(slip_jpeg_info_t));']
    lines += [f'printf("{f} %zu\\n", offsetof(slip_jpeg_info_t, {f}));' for f in dtype.names]
    layout = dict(line.split() for line in c_program_output(tmp_path, "\n".join(lines)).splitlines())
    assert dtype.itemsize == int(layout["size"])
    for name in dtype.names:
        assert dtype.fields[name][1] == int(layout[name]), name
    assert np.dtype(native.JpegInfoStruct).itemsize == dtype.itemsize


def test_generator_refuses_what_it_does_not_understand():
    generator = load_generator()
    good = "/** Doc. */\nSLIP_API int32_t slip_ok(int32_t a);\n"
    assert [f.name for f in generator.parse_header(good).functions] == ["slip_ok"]
    for bad in ("SLIP_API int32_t slip_undocumented(int32_t a);\n",
                "/** Doc. */\nSLIP_API int32_t slip_pp(uint8_t **p);\n",
                "/** Doc. */\nSLIP_API long slip_long(void);\n",
                "/** Doc. */\ntypedef enum slip_e { SLIP_E_A, SLIP_E_B = 1 } slip_e;\n"):
        with pytest.raises(generator.HeaderError):
            generator.parse_header(bad)


def test_library_identity():
    assert native.version() == slipstream.__version__
    assert native.strerror(native.Status.ETRUNCATED).startswith("SLIP_ETRUNCATED")
    assert native.strerror(12345) == "unknown status"


def test_native_calls_release_the_gil():
    """ctypes releases the GIL around calls through a CDLL (not a PyDLL), and
    every prototype is set on that library."""
    import ctypes

    assert type(native.lib) is ctypes.CDLL
    for name in _native.FUNCTIONS:
        fn = getattr(native.lib, name)
        assert not fn._flags_ & ctypes._FUNCFLAG_PYTHONAPI, name
        assert fn.argtypes is not None, name


def test_python_ints_outside_a_parameter_s_c_range_are_refused_not_wrapped():
    """ctypes would pass 2**32 + 1 to an int32_t parameter as 1; every call
    of the Python API checks its integer arguments against their C types
    first and raises ArgumentError naming the function, the parameter and
    its range."""
    from slipstream._abi import NUMPY_TYPES
    from slipstream.errors import ArgumentError

    with pytest.raises(ArgumentError, match=r"^planes_bytes: height = 4294967297 is outside the range of its C type "
                                            r"int32_t, -2147483648 to 2147483647$"):
        native.planes_bytes(2**32 + 1, 1)
    planes = native.rgb_to_planes(np.zeros((4, 4, 3), np.uint8))
    with pytest.raises(ArgumentError, match=r"planes_crop_resize: height = 4294967300 is outside"):
        native.planes_crop_resize(planes, 2**32 + 4, 4, 0, 0, 4, 4, 2, 2)
    with pytest.raises(ArgumentError, match=r"planes_crop_resize: x = -4294967296 is outside"):
        native.planes_crop_resize(planes, 4, 4, 0, np.int64(-2**32), 4, 4, 2, 2)
    checked = 0
    for sig in _native.FUNCTIONS.values():
        for i, (ctype, name) in enumerate(sig.params):
            if ctype not in NUMPY_TYPES or NUMPY_TYPES[ctype].kind not in "iu":
                continue
            info = np.iinfo(NUMPY_TYPES[ctype])
            for value in (int(info.min) - 1, int(info.max) + 1):
                args = [0] * len(sig.params)  # refused before the call: no pointer is read
                args[i] = value
                with pytest.raises(ArgumentError, match=rf"^{sig.name[5:]}: {name} = {value} is outside the range "
                                                        rf"of its C type {ctype}, {info.min} to {info.max}$"):
                    getattr(native._calls, sig.name)(*args)
                checked += 1
    assert checked > 100, checked
