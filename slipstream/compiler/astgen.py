"""Small constructors of Python AST nodes, so that generating code reads
like the code it generates.  A custom :class:`~slipstream.compiler.Node`
builds its statements with these and the expressions its
:class:`~slipstream.compiler.EmitContext` hands it::

    from slipstream.compiler import astgen as A
    A.assign(ctx.target, A.call(ctx.code(), ctx.value(), ctx.key()))
    # v3 = op3(v2, sample_key(seed, epoch, draw, ...))
"""

from __future__ import annotations

import ast
from typing import Any


def name(identifier: str) -> ast.Name:
    """A variable read: ``identifier``."""
    return ast.Name(id=identifier, ctx=ast.Load())


def store(identifier: str) -> ast.Name:
    """A variable written (an assignment's target)."""
    return ast.Name(id=identifier, ctx=ast.Store())


def const(value: Any) -> ast.Constant:
    """A literal: a number, a string, None."""
    return ast.Constant(value=value)


def call(func: ast.expr | str, *args: ast.expr) -> ast.Call:
    """``func(*args)``; ``func`` an expression (``ctx.code(node)``) or a name."""
    return ast.Call(func=name(func) if isinstance(func, str) else func, args=list(args), keywords=[])


def index(value: ast.expr, item: ast.expr) -> ast.Subscript:
    """``value[item]``."""
    return ast.Subscript(value=value, slice=item, ctx=ast.Load())


def span(value: ast.expr, lower: ast.expr | None, upper: ast.expr | None) -> ast.Subscript:
    """``value[lower:upper]``."""
    return ast.Subscript(value=value, slice=ast.Slice(lower=lower, upper=upper), ctx=ast.Load())


def assign(target: str, value: ast.expr) -> ast.Assign:
    """``target = value`` (a node assigns its value to ``ctx.target``)."""
    return ast.Assign(targets=[store(target)], value=value, lineno=0)


def assign_item(container: ast.expr, item: ast.expr, value: ast.expr) -> ast.Assign:
    """``container[item] = value``."""
    return ast.Assign(targets=[ast.Subscript(value=container, slice=item, ctx=ast.Store())], value=value, lineno=0)


def add(left: ast.expr, right: ast.expr) -> ast.BinOp:
    """``left + right``."""
    return ast.BinOp(left=left, op=ast.Add(), right=right)


def sub(left: ast.expr, right: ast.expr) -> ast.BinOp:
    """``left - right``."""
    return ast.BinOp(left=left, op=ast.Sub(), right=right)


def less(left: ast.expr, right: ast.expr) -> ast.Compare:
    """``left < right``."""
    return ast.Compare(left=left, ops=[ast.Lt()], comparators=[right])


def if_else(test: ast.expr, body: list[ast.stmt], orelse: list[ast.stmt]) -> ast.If:
    """``if test: body else: orelse``."""
    return ast.If(test=test, body=body, orelse=orelse)


def for_range(target: str, iterator: ast.expr, body: list[ast.stmt]) -> ast.For:
    """``for target in iterator: body``."""
    return ast.For(target=store(target), iter=iterator, body=body, orelse=[], lineno=0)


def while_loop(test: ast.expr, body: list[ast.stmt]) -> ast.While:
    """``while test: body``."""
    return ast.While(test=test, body=body, orelse=[], lineno=0)


def function(fn_name: str, params: list[str], body: list[ast.stmt]) -> ast.FunctionDef:
    """``def fn_name(*params): body`` (the generator's stage functions)."""
    arguments = ast.arguments(
        posonlyargs=[], args=[ast.arg(arg=p) for p in params], vararg=None, kwonlyargs=[], kw_defaults=[],
        kwarg=None, defaults=[],
    )
    return ast.FunctionDef(name=fn_name, args=arguments, body=body or [ast.Pass()], decorator_list=[],
                           returns=None, lineno=0)


def tuple_of(values: list[ast.expr]) -> ast.Tuple:
    """``(values...,)``: a tuple expression."""
    return ast.Tuple(elts=list(values), ctx=ast.Load())


def ret(values: list[ast.expr]) -> ast.Return:
    """``return (values...)``."""
    return ast.Return(value=ast.Tuple(elts=values, ctx=ast.Load()))


def unparse(tree: ast.Module) -> str:
    """Source text of a module."""
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"
