#!/usr/bin/env python3
"""Generate ``slipstream/_native.py`` from ``native/include/slipstream.h``.

The header is the single source of truth of the C ABI.  This generator reads
it and writes one Python module holding, for every declaration:

* ``#define SLIP_X <integer>``  -> a module constant ``X``;
* ``typedef enum slip_foo``     -> an ``enum.IntEnum`` (``IntFlag`` for ``*_flags``) ``Foo``;
* ``typedef struct slip_foo_t`` -> a NumPy structured dtype ``FOO_DTYPE`` and a
  ``ctypes.Structure`` ``FooStruct`` with the same layout;
* ``SLIP_API T slip_f(...)``    -> a ctypes prototype on ``lib.slip_f`` and a Numba
  intrinsic ``slip_f`` with the same name and argument order.

Only the subset of C used by the header is understood (documented at the top
of the header); anything else is an error, so that the bindings can never
silently miss a declaration.

Usage: ``python codegen/generate_bindings.py [--check]``.  With ``--check`` the
generator writes nothing and exits with status 1 when the committed file is
out of date.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import re
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEADER = ROOT / "native" / "include" / "slipstream.h"
OUTPUT = ROOT / "slipstream" / "_native.py"

SCALAR_TYPES = {"int32_t", "int64_t", "uint32_t", "uint64_t", "uint8_t", "size_t", "int", "double", "float"}

_DOC = r"/\*\*(?!<)(?P<doc>(?:(?!\*/).)*)\*/"
_DEFINE_RE = re.compile(_DOC + r"\s*#define\s+SLIP_(?P<name>\w+)\s+(?P<value>-?\d+)\s*\n", re.S)
_ENUM_RE = re.compile(_DOC + r"\s*typedef\s+enum\s+(?P<tag>\w+)\s*\{(?P<body>.*?)\}\s*(?P<name>\w+)\s*;", re.S)
_STRUCT_RE = re.compile(_DOC + r"\s*typedef\s+struct\s+(?P<tag>\w+)\s*\{(?P<body>.*?)\}\s*(?P<name>\w+)\s*;", re.S)
_FUNC_RE = re.compile(_DOC + r"\s*SLIP_API\s+(?P<decl>[^;(]*?)\s*\((?P<params>[^)]*)\)\s*;", re.S)
_ENUM_MEMBER_RE = re.compile(
    r"(?:/\*\*(?!<)(?P<pre>(?:(?!\*/).)*)\*/\s*)?(?P<name>SLIP_\w+)\s*=\s*(?P<value>-?\d+)\s*,?\s*"
    r"(?:/\*\*<(?P<post>(?:(?!\*/).)*)\*/)?",
    re.S,
)
_STRUCT_MEMBER_RE = re.compile(r"(?P<type>\w+)\s+(?P<name>\w+)\s*;\s*(?:/\*\*<(?P<doc>(?:(?!\*/).)*)\*/)?", re.S)


class HeaderError(Exception):
    """The header uses a construct the generator does not understand."""


@dataclasses.dataclass(frozen=True)
class Constant:
    name: str
    value: int
    doc: str


@dataclasses.dataclass(frozen=True)
class EnumMember:
    name: str
    value: int
    doc: str


@dataclasses.dataclass(frozen=True)
class Enum:
    c_name: str
    doc: str
    members: tuple[EnumMember, ...]

    @property
    def py_name(self) -> str:
        return camel(self.c_name.removeprefix("slip_"))

    @property
    def is_flags(self) -> bool:
        return self.c_name.endswith("_flags")


@dataclasses.dataclass(frozen=True)
class Field:
    ctype: str
    name: str
    doc: str


@dataclasses.dataclass(frozen=True)
class Struct:
    c_name: str
    doc: str
    fields: tuple[Field, ...]

    @property
    def base(self) -> str:
        return self.c_name.removeprefix("slip_").removesuffix("_t")


@dataclasses.dataclass(frozen=True)
class Param:
    ctype: str
    name: str


@dataclasses.dataclass(frozen=True)
class Function:
    name: str
    restype: str
    params: tuple[Param, ...]
    doc: str


@dataclasses.dataclass(frozen=True)
class Header:
    sha256: str
    constants: tuple[Constant, ...]
    enums: tuple[Enum, ...]
    structs: tuple[Struct, ...]
    functions: tuple[Function, ...]


def camel(snake: str) -> str:
    return "".join(part.capitalize() for part in snake.split("_"))


def member_prefix(names: list[str]) -> str:
    """Longest common prefix of the names that ends with an underscore."""
    common = names[0]
    for name in names[1:]:
        while not name.startswith(common):
            common = common[:-1]
    return common[: common.rfind("_") + 1]


def clean_doc(raw: str) -> str:
    """Text of a ``/** ... */`` comment without the leading asterisks."""
    lines = [re.sub(r"^\s*\*? ?", "", line) for line in raw.strip().splitlines()]
    if not lines:
        return ""
    first, rest = lines[0].strip(), textwrap.dedent("\n".join(lines[1:]))
    return f"{first}\n{rest}".strip()


def normalize_type(text: str) -> str:
    """``const  uint8_t*`` -> ``const uint8_t *``."""
    text = re.sub(r"\s+", " ", text.replace("*", " * ")).strip()
    return text.replace("* *", "**")


def split_decl(decl: str) -> tuple[str, str]:
    """Split ``const uint8_t *data`` into (``const uint8_t *``, ``data``)."""
    match = re.fullmatch(r"(?P<type>.*?[\s*])(?P<name>\w+)", decl.strip(), re.S)
    if not match:
        raise HeaderError(f"cannot split {decl!r} into a type and a name")
    return normalize_type(match["type"]), match["name"]


def check_type(ctype: str, structs: set[str], where: str) -> None:
    base = ctype.removeprefix("const ").removesuffix(" *")
    pointer = ctype.endswith(" *")
    if ctype.count("*") > 1:
        raise HeaderError(f"{where}: pointer to pointer {ctype!r} is not supported")
    if base in SCALAR_TYPES or (pointer and base in structs | {"void", "char"}):
        return
    raise HeaderError(f"{where}: type {ctype!r} is not supported by the binding generator")


def parse_header(text: str) -> Header:
    constants = tuple(Constant(m["name"], int(m["value"]), clean_doc(m["doc"])) for m in _DEFINE_RE.finditer(text))

    enums = []
    for m in _ENUM_RE.finditer(text):
        if m["tag"] != m["name"]:
            raise HeaderError(f"enum {m['tag']} must be typedef'd to the same name")
        members = tuple(
            EnumMember(e["name"], int(e["value"]), clean_doc(e["post"] or e["pre"] or ""))
            for e in _ENUM_MEMBER_RE.finditer(m["body"])
        )
        declared = re.findall(r"\bSLIP_\w+", re.sub(r"/\*.*?\*/", "", m["body"], flags=re.S))
        if len(declared) != len(members) or not members:
            raise HeaderError(f"enum {m['name']}: every member needs an explicit value")
        enums.append(Enum(m["name"], clean_doc(m["doc"]), members))

    structs = []
    for m in _STRUCT_RE.finditer(text):
        if m["tag"] != m["name"]:
            raise HeaderError(f"struct {m['tag']} must be typedef'd to the same name")
        fields = tuple(
            Field(f["type"], f["name"], clean_doc(f["doc"] or "")) for f in _STRUCT_MEMBER_RE.finditer(m["body"])
        )
        if len(fields) != m["body"].count(";"):
            raise HeaderError(f"struct {m['name']}: only `scalar_t name;` members are supported")
        for f in fields:
            if f.ctype not in SCALAR_TYPES:
                raise HeaderError(f"struct {m['name']}.{f.name}: type {f.ctype} is not supported")
        structs.append(Struct(m["name"], clean_doc(m["doc"]), fields))
    struct_names = {s.c_name for s in structs}

    functions = []
    for m in _FUNC_RE.finditer(text):
        restype, name = split_decl(m["decl"])
        check_type(restype, struct_names, name)
        params_text = m["params"].strip()
        params = []
        if params_text != "void":
            for piece in params_text.split(","):
                ptype, pname = split_decl(piece)
                check_type(ptype, struct_names, f"{name}({pname})")
                params.append(Param(ptype, pname))
        functions.append(Function(name, restype, tuple(params), clean_doc(m["doc"])))

    # Every declaration must have been understood.
    for keyword, found in (("SLIP_API ", functions), ("typedef enum", enums), ("typedef struct", structs)):
        occurrences = len(re.findall(rf"^\s*{keyword}", text, re.M))
        if occurrences != len(found):
            raise HeaderError(
                f"{occurrences} `{keyword.strip()}` declarations but {len(found)} parsed: "
                "each needs a /** doc comment */ directly above it and the simple form described in the header"
            )
    numeric_defines = len(re.findall(r"^#define\s+SLIP_\w+\s+-?\d+\s*$", text, re.M))
    if numeric_defines != len(constants):
        raise HeaderError("every numeric #define SLIP_* needs a /** doc comment */ directly above it")

    return Header(
        sha256=hashlib.sha256(text.encode()).hexdigest(),
        constants=constants,
        enums=tuple(enums),
        structs=tuple(structs),
        functions=tuple(functions),
    )


def docstring(text: str, indent: str) -> str:
    text = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    body = textwrap.indent(text, indent).lstrip()
    return f'{indent}"""{body}\n{indent}"""' if "\n" in text else f'{indent}"""{body}"""'


def render(header: Header) -> str:
    out: list[str] = []
    emit = out.append
    emit("# GENERATED by codegen/generate_bindings.py from native/include/slipstream.h.")
    emit("# Do not edit: change the header and run `make bindings`.")
    emit('"""Generated mirror of ``native/include/slipstream.h``.')
    emit("")
    emit("Constants, enums and structs of the C ABI; ``lib``, the loaded library, with")
    emit("a ctypes prototype for every function; and a Numba intrinsic for every")
    emit("function, with the C name and argument order, callable from ``@njit`` code")
    emit("(pointer arguments take NumPy arrays of the pointed-to type).")
    emit("Use :mod:`slipstream.native` for the checked Python-level API.")
    emit('"""')
    emit("")
    emit("import ctypes")
    emit("import enum")
    emit("")
    emit("import numpy as np")
    emit("from numba.extending import intrinsic")
    emit("")
    emit("from slipstream import _abi")
    emit("")
    emit(f'HEADER_SHA256 = "{header.sha256}"')
    emit('"""SHA-256 of the header this module was generated from."""')
    emit("")
    for c in header.constants:
        emit(f"{c.name} = {c.value}")
        emit(docstring(c.doc, ""))
        emit("")
    for e in header.enums:
        emit("")
        base = "enum.IntFlag" if e.is_flags else "enum.IntEnum"
        emit(f"class {e.py_name}({base}):")
        emit(docstring(f"{e.doc}\n\nMirrors C ``{e.c_name}``.", "    "))
        emit("")
        prefix = member_prefix([m.name for m in e.members])
        for member in e.members:
            short = member.name.removeprefix(prefix)
            if short[0].isdigit():
                short = "S" + short
            emit(f"    {short} = {member.value}")
            if member.doc:
                emit(docstring(member.doc, "    "))
        emit("")
    for s in header.structs:
        emit("")
        const = s.base.upper() + "_DTYPE"
        fields = ", ".join(f'("{f.name}", _abi.NUMPY_TYPES["{f.ctype}"])' for f in s.fields)
        emit(f"{const} = np.dtype([{fields}], align=True)")
        emit(docstring(f"NumPy structured dtype with the layout of C ``{s.c_name}``: {s.doc}", ""))
        emit("")
        emit("")
        emit(f"class {camel(s.base)}Struct(ctypes.Structure):")
        emit(docstring(f"{s.doc}\n\nMirrors C ``{s.c_name}``.", "    "))
        emit("")
        emit("    _fields_ = [")
        for f in s.fields:
            emit(f'        ("{f.name}", _abi.CTYPES["{f.ctype}"]),  # {f.doc}')
        emit("    ]")
        emit("")
        emit("")
        emit(f'_abi.register_struct("{s.c_name}", {const})')
        emit("")
    emit("")
    emit("FUNCTIONS = {")
    for f in header.functions:
        params = "".join(f'("{p.ctype}", "{p.name}"),' + (" " if i < len(f.params) - 1 else "") for i, p in enumerate(f.params))
        emit(f'    "{f.name}": _abi.Signature("{f.name}", "{f.restype}", ({params})),')
    emit("}")
    emit('"""Signature of every C function, by name."""')
    emit("")
    emit("lib = _abi.load_library(ABI_VERSION, FUNCTIONS.values())")
    emit('"""The loaded libslipstream, as a ``ctypes.CDLL`` with every prototype set."""')
    for f in header.functions:
        names = [p.name for p in f.params]
        emit("")
        emit("")
        emit("@intrinsic")
        emit(f"def {f.name}({', '.join(['typingctx', *names])}):")
        emit(docstring(f"Numba intrinsic calling C ``{f.name}``.\n\n{f.doc}", "    "))
        args = ", ".join(names) + ("," if len(names) == 1 else "")
        emit(f'    return _abi.lower_call(FUNCTIONS["{f.name}"], ({args}))')
    emit("")
    emit("")
    emit("__all__ = [")
    names = (
        ["HEADER_SHA256", "FUNCTIONS", "lib"]
        + [c.name for c in header.constants]
        + [e.py_name for e in header.enums]
        + [n for s in header.structs for n in (s.base.upper() + "_DTYPE", camel(s.base) + "Struct")]
        + [f.name for f in header.functions]
    )
    for name in names:
        emit(f'    "{name}",')
    emit("]")
    return "\n".join(out) + "\n"


def generate() -> str:
    return render(parse_header(HEADER.read_text()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed file is out of date")
    args = parser.parse_args(argv)
    text = generate()
    current = OUTPUT.read_text() if OUTPUT.exists() else ""
    if args.check:
        if current != text:
            print(f"{OUTPUT.relative_to(ROOT)} is out of date: run `make bindings`", file=sys.stderr)
            return 1
        return 0
    if current != text:
        OUTPUT.write_text(text)
        print(f"wrote {OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
