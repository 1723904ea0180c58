"""KernelBench format: the problem defines `Model`, `get_inputs()`, `get_init_inputs()`;
the candidate defines `ModelNew` (same constructor and forward signature as `Model`).

The reference file is trusted user code and runs in the judge. The candidate file is only
parsed here: it runs in the worker, never in the judge.
"""

from __future__ import annotations

import ast
import codecs
import io
import os
import tokenize
import traceback
import types

from ..errors import MachineOutOfMemory, UsageError

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
        text = raw.decode("utf-8-sig")  # a byte-order mark is no part of the code
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise UsageError(f"{path}:{line}: {what} file is not UTF-8 text (byte {exc.start})") from None
    _check_encoding(raw, path, what)
    return text


def _check_encoding(raw: bytes, path: str, what: str) -> None:
    """The judge reads the file as UTF-8; Python would honour a coding declaration. They must agree,
    or the code the judge scans is not the code the worker runs (`# coding: utf-7` hides lines)."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError as exc:
        raise UsageError(f"{path}: {what} file has a bad encoding declaration: {exc}") from None
    if codecs.lookup(encoding).name not in ("utf-8", "utf-8-sig"):
        line = next((i for i, text in enumerate(raw.splitlines()[:2], 1) if b"coding" in text), None)
        raise UsageError(f"{at(path, line)}: {what} file declares encoding {encoding}; "
                         "only UTF-8 source is supported")


def parse(source: str, path: str, what: str) -> ast.Module:
    """The AST, after a compile that runs nothing: errors such as `return` outside a function
    pass the parser and surface only there."""
    try:
        tree = ast.parse(source, filename=path)
        compile(tree, path, "exec", dont_inherit=True)
        return tree
    except SyntaxError as exc:
        col = f":{exc.offset}" if exc.lineno and exc.offset else ""
        raise UsageError(f"{at(path, exc.lineno)}{col}: {what} has a syntax error: {exc.msg}") from None
    except ValueError as exc:  # e.g. null bytes
        raise UsageError(f"{path}: {what} cannot be parsed: {exc}") from None


def top_level_bindings(body: list[ast.stmt]):
    """(name, node) for each name a module body binds at top level, in order; blocks that run at
    import time (if / try / with) are looked into, function and class bodies are not."""
    for node in body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        yield name.id, node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                yield (alias.asname or alias.name.split(".")[0]), node
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            for block in (node.body, getattr(node, "orelse", []), getattr(node, "finalbody", []),
                          *(h.body for h in getattr(node, "handlers", []))):
                yield from top_level_bindings(block)


def top_level_names(tree: ast.Module) -> list[str]:
    return list(dict.fromkeys(name for name, _ in top_level_bindings(tree.body)))


# Values that can never be called: a candidate binding its entry to one of these is malformed.
_NOT_CALLABLE = {ast.Constant: None, ast.List: "list", ast.Tuple: "tuple", ast.Dict: "dict", ast.Set: "set",
                 ast.JoinedStr: "str", ast.ListComp: "list", ast.DictComp: "dict", ast.SetComp: "set"}


def candidate_entry(path: str, source: str) -> str:
    """Which entry point the candidate defines, decided from its AST alone."""
    tree = parse(source, path, "candidate")
    bound = dict(top_level_bindings(tree.body))   # the last binding of each name wins, as at import
    for entry in CANDIDATE_ENTRIES:
        if entry in bound:
            _check_callable(path, entry, bound[entry])
            return entry
    defined = ", ".join(n for n, node in bound.items()  # imports are no part of what it defines
                        if not n.startswith("_") and not isinstance(node, (ast.Import, ast.ImportFrom))) or "nothing"
    raise UsageError(f"{path}: candidate defines no ModelNew (nor a kernel function); it defines: {defined}")


def _check_callable(path: str, entry: str, node: ast.stmt) -> None:
    value = getattr(node, "value", None) if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
    if type(value) in _NOT_CALLABLE:
        kind = f"a {_NOT_CALLABLE[type(value)]}" if _NOT_CALLABLE[type(value)] else a_kind(value.value)
        raise UsageError(f"{at(path, node.lineno)}: {entry} must be a class (or a callable), "
                         f"but the candidate binds it to {kind}")


def load_reference(path: str) -> types.ModuleType:
    """Execute a trusted KernelBench reference file and check its shape."""
    source = read_source(path, "problem")
    code = compile(parse(source, path, "problem"), path, "exec")
    module = types.ModuleType("kernelvet_reference")
    module.__file__ = os.path.abspath(path)
    try:
        exec(code, module.__dict__)
    except (Exception, SystemExit) as exc:  # the problem's own failure: say where, in one line
        raise UsageError(f"{at(path, user_line(exc, path))}: importing the problem failed: "
                         f"{type(exc).__name__}: {exc}") from None
    missing = [n for n in REQUIRED if not hasattr(module, n)]
    if missing:
        defined = ", ".join(n for n in vars(module) if not n.startswith("_") and n not in ("torch", "nn", "F"))
        if len(missing) == len(REQUIRED):   # no part of either format: say both
            raise UsageError(f"{path}: neither a KernelBench problem ({', '.join(REQUIRED)}) nor a GPU MODE task "
                             f"(ref_kernel, generate_input); it defines: {defined or 'nothing'}")
        raise UsageError(f"{path}: problem file must define {', '.join(REQUIRED)}; missing "
                         f"{', '.join(missing)}; it defines: {defined or 'nothing'}")
    for name in REQUIRED:
        if not callable(getattr(module, name)):
            kind = "a class" if name == "Model" else "a function"
            raise UsageError(f"{path}: problem file's {name} must be {kind}, got {a_kind(getattr(module, name))}")
    return module


def user_line(exc: BaseException, path: str) -> int | None:
    """The last traceback line that lies in the user's file (None when none does)."""
    target = os.path.abspath(path)
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if os.path.abspath(frame.filename) == target:
            line = frame.lineno
    return line


def def_line(fn, path: str) -> int | None:
    """The line where `fn` is defined, if that is in the user's file."""
    code = getattr(fn, "__code__", None)
    if code is None or os.path.abspath(code.co_filename) != os.path.abspath(path):
        return None
    return code.co_firstlineno


def a_kind(x) -> str:
    """What `x` is, for a message: 'None', 'a tuple', 'an int'."""
    if x is None:
        return "None"
    name = type(x).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def at(path: str, line: int | None) -> str:
    """`path:line`, or the path alone where no line is known."""
    return f"{path}:{line}" if line else path


def call_user(fn, path: str, what: str):
    """Call a problem-file function; its failure is a UsageError naming file and line."""
    try:
        return fn()
    except (Exception, SystemExit) as exc:
        if _out_of_memory(exc):   # the machine's limit, not a mistake in the file
            raise MachineOutOfMemory(f"{os.path.basename(path)}: {what} ran out of memory ({type(exc).__name__}); "
                                     "this machine has too little memory for the problem's sizes") from None
        raise UsageError(f"{at(path, user_line(exc, path))}: {what} failed: {type(exc).__name__}: {exc}") from None


def _out_of_memory(exc: BaseException) -> bool:
    from ..sizes import is_out_of_memory
    return is_out_of_memory(exc)
