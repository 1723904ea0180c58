"""The tolerance a GPU MODE task checks with, read from its `check_implementation`.

Tasks compare with a known helper: `make_match_reference(ref_kernel, rtol=..., atol=...)`,
`verbose_allclose(output, expected, rtol=..., atol=...)`, `torch.allclose`, or exactly with
`verbose_allequal` / `torch.equal`. The call's constant `rtol` and `atol` are read from the
source (never by running the checker); where the call leaves them out, the helper's own defaults
are read from its signature. A tolerance the checker computes at check time (from the data's
size, say) cannot be read: the problem then keeps the default bound of its output dtype.

The task's bound is element-wise, |out - ref| <= atol + rtol |ref|; kernelvet's is norm-wise,
||out - ref64|| / ||ref64||. At the unit scale the tasks draw their data at, the element-wise
bound in norm form is rtol + atol: that is the problem's tolerance."""

from __future__ import annotations

import ast
import dataclasses
import inspect

CLOSE = ("make_match_reference", "match_reference", "verbose_allclose", "allclose", "isclose", "assert_close",
         "assert_allclose")
EQUAL = ("verbose_allequal", "equal", "assert_equal", "array_equal")
_TORCH_DEFAULTS = {"allclose": (1e-5, 1e-8), "isclose": (1e-5, 1e-8)}


@dataclasses.dataclass(frozen=True)
class Declared:
    tolerance: float | None   # the norm-wise bound, None where it cannot be read
    source: str               # where it came from, for the report


def read(tree: ast.Module, namespace: dict) -> Declared:
    node = _checker(tree)
    if node is None:
        return Declared(None, "no check_implementation: the dtype's default bound")
    calls = [c for c in ast.walk(node) if isinstance(c, ast.Call) and _name(c.func) in CLOSE + EQUAL]
    if not calls and isinstance(node, ast.FunctionDef):   # a checker that calls a helper of the same file
        called = {_name(c.func) for c in ast.walk(node) if isinstance(c, ast.Call)}
        for fn in tree.body:
            if isinstance(fn, ast.FunctionDef) and fn.name in called:
                calls += [c for c in ast.walk(fn) if isinstance(c, ast.Call) and _name(c.func) in CLOSE + EQUAL]
    if not calls:
        return Declared(None, "check_implementation calls no known comparison: the dtype's default bound")
    found = []
    for call in calls:
        name = _name(call.func)
        if name in EQUAL:
            found.append((0.0, f"{name}: exact"))
            continue
        got = _rtol_atol(call, name, namespace)
        if got is None:
            return Declared(None, f"{name} at line {call.lineno}: its rtol and atol cannot be read (computed at "
                                  "check time?): the dtype's default bound")
        found.append((got[0] + got[1], f"{name}(rtol={got[0]:g}, atol={got[1]:g})"))
    loosest = max(found)
    return Declared(loosest[0], f"check_implementation: {loosest[1]}")


def _checker(tree: ast.Module):
    """The top-level binding of `check_implementation` (the last one, as at import)."""
    from .kernelbench import top_level_bindings
    return dict(top_level_bindings(tree.body)).get("check_implementation")


def _name(func) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _rtol_atol(call: ast.Call, name: str, namespace: dict) -> tuple[float, float] | None:
    given = {}
    for kw in call.keywords:
        if kw.arg in ("rtol", "atol"):
            try:
                value = ast.literal_eval(kw.value)
            except ValueError:
                value = _arith(kw.value)
            if type(value) not in (int, float) or value < 0:
                return None
            given[kw.arg] = float(value)
    if len(given) < 2:
        defaults = _defaults(namespace.get(name), set()) or _TORCH_DEFAULTS.get(name)
        if defaults is None:
            return None
        given = {"rtol": defaults[0], "atol": defaults[1], **given}
    return given["rtol"], given["atol"]


def _arith(node):
    """A constant expression such as `2 * 1e-3` or `1e-2 / 4` (no names, no calls)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Div, ast.Add, ast.Sub)):
        a, b = _arith(node.left), _arith(node.right)
        if a is None or b is None:
            return None
        return {ast.Mult: a * b, ast.Add: a + b, ast.Sub: a - b}.get(type(node.op), a / b if b else None)
    try:
        value = ast.literal_eval(node)
    except ValueError:
        return None
    return value if type(value) in (int, float) else None


def _defaults(fn, seen: set) -> tuple[float, float] | None:
    """A helper's default rtol and atol: its own, or (a helper that forwards **kwargs, as
    make_match_reference does) those of the first function it refers to that has them."""
    if not callable(fn) or id(fn) in seen:
        return None
    seen.add(id(fn))
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return None
    r, a = params.get("rtol"), params.get("atol")
    if r is not None and a is not None and type(r.default) in (int, float) and type(a.default) in (int, float):
        return float(r.default), float(a.default)
    scope = getattr(fn, "__globals__", {})
    for name in _names_used(getattr(fn, "__code__", None)):
        got = _defaults(scope.get(name), seen)
        if got is not None:
            return got
    return None


def _names_used(code) -> list[str]:
    """The global names a function's code refers to, its nested functions' included, in order."""
    if code is None:
        return []
    names = list(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names += _names_used(const)
    return list(dict.fromkeys(names))
