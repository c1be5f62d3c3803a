"""Runtime support for the generated bindings in :mod:`slipstream._native`.

Maps the C types of ``slipstream.h`` to ctypes, NumPy, Numba and LLVM types,
loads the shared library, and lowers calls to it from Numba code.  Calls from
compiled code name the C symbol rather than embedding its address, so that
functions calling kernels can be cached on disk by Numba
(``llvmlite.binding.load_library_permanently`` makes the symbols resolvable).
"""

from __future__ import annotations

import ctypes
import dataclasses
import importlib.metadata
import operator
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import llvmlite.binding
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.core.errors import TypingError
from numba.np.numpy_support import from_dtype

from slipstream.errors import ArgumentError, LibraryError

CTYPES: dict[str, type] = {
    "int32_t": ctypes.c_int32,
    "int64_t": ctypes.c_int64,
    "uint32_t": ctypes.c_uint32,
    "uint64_t": ctypes.c_uint64,
    "uint8_t": ctypes.c_uint8,
    "size_t": ctypes.c_size_t,
    "int": ctypes.c_int,
    "double": ctypes.c_double,
    "float": ctypes.c_float,
}
"""ctypes type of every scalar C type the header may use."""

NUMPY_TYPES: dict[str, np.dtype] = {name: np.dtype(ctype) for name, ctype in CTYPES.items()}
"""NumPy dtype of every scalar C type the header may use."""

_NUMBA_SCALARS: dict[str, types.Type] = {name: from_dtype(dtype) for name, dtype in NUMPY_TYPES.items()}
_STRUCTS: dict[str, np.dtype] = {}
_VOID_P = ir.IntType(8).as_pointer()


def register_struct(c_name: str, dtype: np.dtype) -> None:
    """Let pointers to C struct ``c_name`` accept arrays of ``dtype`` in Numba code."""
    _STRUCTS[c_name] = dtype


@dataclasses.dataclass(frozen=True)
class Signature:
    """A C function of the header: name, return type and ``(type, name)`` parameters."""

    name: str
    restype: str
    params: tuple[tuple[str, str], ...]


def _pointee(ctype: str) -> str | None:
    """``const uint8_t *`` -> ``uint8_t``; None for non-pointers."""
    if not ctype.endswith(" *"):
        return None
    return ctype.removesuffix(" *").removeprefix("const ")


def _ctypes_type(ctype: str) -> type | None:
    if ctype == "void":
        return None
    if ctype == "const char *":
        return ctypes.c_char_p
    if _pointee(ctype) is not None:
        return ctypes.c_void_p
    return CTYPES[ctype]


def _llvm_type(ctype: str) -> ir.Type:
    if ctype == "void":
        return ir.VoidType()
    if _pointee(ctype) is not None:
        return _VOID_P
    if ctype in ("double", "float"):
        return ir.DoubleType() if ctype == "double" else ir.FloatType()
    return ir.IntType(NUMPY_TYPES[ctype].itemsize * 8)


def _numba_return_type(ctype: str) -> types.Type:
    if ctype == "void":
        return types.none
    if _pointee(ctype) is not None:
        return types.voidptr
    return _NUMBA_SCALARS[ctype]


def library_filename() -> str:
    if sys.platform == "darwin":
        return "libslipstream.dylib"
    if sys.platform == "win32":
        return "slipstream.dll"
    return "libslipstream.so"


def library_path() -> Path:
    """Where the shared library is loaded from: ``$SLIPSTREAM_LIBRARY`` if set
    (for example a sanitizer build), else next to this package."""
    override = os.environ.get("SLIPSTREAM_LIBRARY")
    return Path(override) if override else Path(__file__).resolve().parent / library_filename()


def shadowed_install(package: Path) -> Path | None:
    """The folder of an installed slipstream that ``package`` hides, or None.

    ``package`` hides one when it is the package folder of a source tree
    (``pyproject.toml`` and ``native/`` beside it) while the installed
    distribution's library lies elsewhere: Python found the tree first,
    as it does from the repository root (the current folder comes first
    on ``sys.path``) or with the tree on ``PYTHONPATH``.
    """
    root = package.parent
    if not ((root / "pyproject.toml").is_file() and (root / "native").is_dir()):
        return None
    try:
        installed = importlib.metadata.distribution("slipstream").locate_file(f"slipstream/{library_filename()}")
    except importlib.metadata.PackageNotFoundError:
        return None
    library = Path(str(installed)).resolve()
    return library.parent if library.is_file() and library.parent != package else None


def missing_library_message(path: Path) -> str:
    """Why the library ``path`` is missing and what to do: a source tree
    imported in place of the installed package, or no install at all."""
    package = Path(__file__).resolve().parent
    installed = None if os.environ.get("SLIPSTREAM_LIBRARY") else shadowed_install(package)
    if installed is not None:
        return (f"the native library {path} does not exist: slipstream was imported from the source tree "
                f"{package.parent}, which hides the installed slipstream in {installed} (Python looks in the "
                "current folder and PYTHONPATH first). Run Python from another folder, install the tree in place "
                "(`pip install -e .`), or set SLIPSTREAM_LIBRARY to a built libslipstream.so.")
    return (f"the native library {path} does not exist. slipstream must be installed with pip "
            "(`pip install .` or `make test`), which builds it with CMake; importing the source tree "
            "without installing it does not work.")


def load_library(abi_version: int, signatures: Iterable[Signature]) -> ctypes.CDLL:
    """Load libslipstream, set every prototype, check its ABI version and make
    its symbols resolvable from Numba-compiled code."""
    path = library_path()
    if not path.is_file():
        raise LibraryError(missing_library_message(path))
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as exc:
        raise LibraryError(f"cannot load the native library {path}: {exc}") from exc
    for sig in signatures:
        try:
            fn = getattr(lib, sig.name)
        except AttributeError as exc:
            raise LibraryError(f"{path} does not export {sig.name}: rebuild it (`pip install .`)") from exc
        fn.restype = _ctypes_type(sig.restype)
        fn.argtypes = [_ctypes_type(ctype) for ctype, _ in sig.params]
    built = lib.slip_abi_version()
    if built != abi_version:
        raise LibraryError(
            f"{path} was built for ABI version {built} but the bindings expect {abi_version}: "
            "reinstall slipstream (`pip install .`) so that library and bindings match"
        )
    llvmlite.binding.load_library_permanently(str(path))
    return lib


class CheckedCalls:
    """The library's functions, each range-checking its integer arguments
    first: ctypes converts a Python int to a C integer modulo 2**bits, so a
    value out of the C type's range would reach the function as another,
    possibly valid-looking one (2**32 + 1 as an ``int32_t`` is 1).  Functions
    without integer parameters are the ctypes functions themselves."""

    def __init__(self, lib: ctypes.CDLL, signatures: Iterable[Signature]) -> None:
        for sig in signatures:
            setattr(self, sig.name, _range_checked(getattr(lib, sig.name), sig))


_INTEGER_RANGES = {name: (int(np.iinfo(dtype).min), int(np.iinfo(dtype).max))
                   for name, dtype in NUMPY_TYPES.items() if dtype.kind in "iu"}


def _range_checked(fn: Any, sig: Signature) -> Any:
    checks = [(i, name, ctype, *_INTEGER_RANGES[ctype]) for i, (ctype, name) in enumerate(sig.params)
              if ctype in _INTEGER_RANGES]
    if not checks:
        return fn
    function = sig.name.removeprefix("slip_")

    def call(*args: Any) -> Any:
        for i, name, ctype, low, high in checks:
            try:
                value = operator.index(args[i])
            except TypeError:
                continue  # ctypes refuses what is not an integer
            if not low <= value <= high:
                raise ArgumentError(f"{function}: {name} = {value} is outside the range of its C type {ctype}, "
                                    f"{low} to {high}")
        return fn(*args)

    call.__name__ = call.__qualname__ = sig.name
    return call


# ---------------------------------------------------------------- Numba lowering

_Converter = Callable[[object, ir.IRBuilder, types.Type, ir.Value], ir.Value]


def _scalar_converter(fn: str, pname: str, ctype: str, ty: types.Type) -> _Converter:
    target = _NUMBA_SCALARS[ctype]
    source = ty.dtype if isinstance(ty, (types.IntEnumMember, types.EnumMember)) else ty
    if isinstance(target, types.Float):
        ok = isinstance(source, (types.Integer, types.Float, types.Boolean))
    else:
        ok = isinstance(source, (types.Integer, types.Boolean))
    if not ok:
        raise TypingError(f"{fn}: argument {pname!r} is C {ctype}; got {ty}")

    def convert(context, builder, fromty, value):
        # An enum member is represented by its underlying value.
        return context.cast(builder, value, source, target)

    return convert


def _pointer_converter(fn: str, pname: str, ctype: str, ty: types.Type) -> _Converter:
    pointee = _pointee(ctype)
    if pointee == "void":
        expected = None
    elif pointee in _STRUCTS:
        expected = from_dtype(_STRUCTS[pointee])
    elif pointee in _NUMBA_SCALARS:
        expected = _NUMBA_SCALARS[pointee]
    else:
        raise TypingError(f"{fn}: argument {pname!r} of type {ctype} cannot be passed from Numba code")

    if isinstance(ty, types.Array):
        if expected is not None and ty.dtype != expected:
            raise TypingError(f"{fn}: argument {pname!r} is C {ctype}: it needs an array of {expected}, got {ty}")

        def convert(context, builder, fromty, value):
            data = context.make_array(fromty)(context, builder, value).data
            return builder.bitcast(data, _VOID_P)

        return convert
    if isinstance(ty, types.CPointer) and (expected is None or ty.dtype == expected) or ty == types.voidptr:

        def convert(context, builder, fromty, value):
            return builder.bitcast(value, _VOID_P)

        return convert
    if isinstance(ty, types.Integer):

        def convert(context, builder, fromty, value):
            return builder.inttoptr(value, _VOID_P)

        return convert
    raise TypingError(f"{fn}: argument {pname!r} is C {ctype}: pass an array, a pointer or an address, got {ty}")


def lower_call(signature: Signature, argtys: tuple[types.Type, ...]):
    """Typing and lowering of a Numba intrinsic that calls ``signature``.

    Scalars are converted to the C parameter type; arrays, typed pointers and
    integer addresses are passed as the pointer a C pointer parameter needs.
    Returns ``(numba_signature, codegen)`` as ``numba.extending.intrinsic``
    expects.
    """
    if len(argtys) != len(signature.params):
        raise TypingError(f"{signature.name} takes {len(signature.params)} arguments, got {len(argtys)}")
    converters = []
    for (ctype, pname), ty in zip(signature.params, argtys):
        make = _pointer_converter if _pointee(ctype) is not None else _scalar_converter
        converters.append(make(signature.name, pname, ctype, ty))
    fnty = ir.FunctionType(_llvm_type(signature.restype), [_llvm_type(ctype) for ctype, _ in signature.params])
    restype = _numba_return_type(signature.restype)

    def codegen(context, builder, sig, args):
        fn = cgutils.get_or_insert_function(builder.module, fnty, signature.name)
        values = [convert(context, builder, ty, value) for convert, ty, value in zip(converters, sig.args, args)]
        result = builder.call(fn, values)
        return context.get_dummy_value() if signature.restype == "void" else result

    return restype(*argtys), codegen
