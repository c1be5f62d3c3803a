"""No module of slipstream imports, directly or through others, a module
that imports it back: every import statement counts, those inside
functions too (a deferred import hides a cycle, it does not remove it).

    python tests/test_import_cycles.py      # prints the cycles, if any
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "slipstream"


def module_files(package: Path = PACKAGE) -> dict[str, Path]:
    """Dotted module name -> source file, for every module of the package."""
    files = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return files


def imported_modules(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that module ``name`` imports anywhere in it
    (``from package import module`` names the module), and the packages
    above them whose ``__init__`` that runs."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's own package upwards
                package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
    ancestors = {".".join(name.split(".")[:k]) for k in range(1, name.count(".") + 1)}
    # importing a module first runs the packages above it, unless they are this module's own
    packages = {".".join(module.split(".")[:k]) for module in found for k in range(1, module.count(".") + 1)}
    return {module for module in found | (packages - ancestors) if module in modules and module != name}


def cycles(modules: dict[str, Path]) -> list[list[str]]:
    """The groups of modules that import each other in a cycle (strongly
    connected components of more than one module, Tarjan's algorithm)."""
    graph = {name: sorted(imported_modules(name, path, modules)) for name, path in modules.items()}
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for other in graph[module]:
            if other not in order:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], order[other])
        if low[module] == order[module]:
            group = []
            while not group or group[-1] != module:
                group.append(stack.pop())
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return found


def test_no_module_is_in_an_import_cycle():
    modules = module_files()
    assert len(modules) > 60 and "slipstream.compiler.codegen" in modules
    assert "slipstream.compiler.graph" in imported_modules("slipstream.compiler.codegen",
                                                          modules["slipstream.compiler.codegen"], modules)
    assert cycles(modules) == []


def test_the_check_finds_a_cycle_hidden_in_a_function(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg import b\n")
    (package / "b.py").write_text("def late():\n    from pkg.a import thing\n")
    (package / "c.py").write_text("import pkg.a\n")
    assert cycles(module_files(package)) == [["pkg.a", "pkg.b"]]


if __name__ == "__main__":
    found = cycles(module_files())
    for group in found:
        print("cycle:", " <-> ".join(group))
    print(f"{len(found)} import cycles among {len(module_files())} modules of slipstream")
    sys.exit(1 if found else 0)
