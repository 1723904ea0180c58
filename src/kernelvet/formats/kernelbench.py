"""KernelBench format: the problem defines `Model`, `get_inputs()`, `get_init_inputs()`;
the candidate defines `ModelNew` (same constructor and forward signature as `Model`).

The reference file is trusted user code and runs in the judge. The candidate file is only
parsed here: it runs in the worker, never in the judge.
"""

from __future__ import annotations

import ast
import os
import traceback
import types

from ..errors import UsageError

REQUIRED = ("Model", "get_inputs", "get_init_inputs")
CANDIDATE_ENTRIES = ("ModelNew", "kernel")


def read_source(path: str, what: str) -> str:
    if not os.path.exists(path):
        raise UsageError(f"{path}: {what} file not found")
    if not os.path.isfile(path):
        raise UsageError(f"{path}: {what} is not a file")
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read {what} file: {exc.strerror}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: {what} file is not UTF-8 text (byte {exc.start})") from None


def parse(source: str, path: str, what: str) -> ast.Module:
    try:
        return ast.parse(source, filename=path)
    except SyntaxError as exc:
        raise UsageError(f"{path}:{exc.lineno}: {what} has a syntax error: {exc.msg}") from None
    except ValueError as exc:  # e.g. null bytes
        raise UsageError(f"{path}: {what} cannot be parsed: {exc}") from None


def top_level_names(tree: ast.Module) -> list[str]:
    names = []
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
    return names


def candidate_entry(path: str, source: str) -> str:
    """Which entry point the candidate defines, decided from its AST alone."""
    tree = parse(source, path, "candidate")
    names = top_level_names(tree)
    for entry in CANDIDATE_ENTRIES:
        if entry in names:
            return entry
    defined = ", ".join(n for n in names if not n.startswith("_")) or "nothing"
    raise UsageError(f"{path}: candidate defines no ModelNew (nor a kernel function); it defines: {defined}")


def load_reference(path: str) -> types.ModuleType:
    """Execute a trusted KernelBench reference file and check its shape."""
    source = read_source(path, "problem")
    code = compile(parse(source, path, "problem"), path, "exec")
    module = types.ModuleType("kernelvet_reference")
    module.__file__ = os.path.abspath(path)
    try:
        exec(code, module.__dict__)
    except (Exception, SystemExit) as exc:  # the problem's own failure: say where, in one line
        raise UsageError(f"{path}:{_user_line(exc, path)}: importing the problem failed: "
                         f"{type(exc).__name__}: {exc}") from None
    missing = [n for n in REQUIRED if not callable(getattr(module, n, None))]
    if missing:
        defined = ", ".join(n for n in vars(module) if not n.startswith("_") and n not in ("torch", "nn", "F"))
        raise UsageError(f"{path}: problem file must define {', '.join(REQUIRED)}; missing "
                         f"{', '.join(missing)}; it defines: {defined or 'nothing'}")
    return module


def _user_line(exc: BaseException, path: str) -> str:
    """The last traceback line that lies in the user's file, as text ('?' when none does)."""
    target = os.path.abspath(path)
    line = "?"
    for frame in traceback.extract_tb(exc.__traceback__):
        if os.path.abspath(frame.filename) == target:
            line = str(frame.lineno)
    return line


def call_user(fn, path: str, what: str):
    """Call a problem-file function; its failure is a UsageError naming file and line."""
    try:
        return fn()
    except (Exception, SystemExit) as exc:
        raise UsageError(f"{path}:{_user_line(exc, path)}: {what} failed: {type(exc).__name__}: {exc}") from None
