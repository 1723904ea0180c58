"""Static half of `library-call`: find where a candidate's source reaches a baseline library op.

The candidate is parsed with `ast`, never imported or run. What counts as "reaching" an op:

* a dotted reference that resolves, through the file's imports (flow-insensitive: any import
  anywhere binds its name for the whole file), simple `x = <module ref>` assignments and
  conventional names (`torch`, `F`, `nn`, `np`, `tl`, ... when the file binds them nowhere), to
  a forbidden op: `torch.mm`, `t.mm`, `F.linear`, `torch.ops.aten.mm.default`. Called or not: a
  bare reference (`functools.partial(torch.mm)`) can be called later.
* dynamic spellings a parse can still see: `getattr(torch, "m" + "m")`, `torch.__dict__["mm"]`,
  `vars(torch)[...]`, `importlib.import_module("torch").mm`, `__import__`, `sys.modules[...]`,
  `operator.attrgetter` / `methodcaller`, `operator.matmul`; strings are constant-folded.
* a method named like a forbidden op on a receiver the scan cannot resolve (`x.mm(y)`, `x.__matmul__`),
  whatever that receiver is, except the candidate's own things: `self.<name>` where the file binds
  that name on a class or on `self`, modules built by `load_inline`/`load` (their C++ is scanned
  as text instead), and modules the file imports: `mykernels.matmul(a, b)` names the module's own
  function, resolved by path like everything imported (what it calls at run time is the aten
  trace's to see).
* the `@` / `@=` operators, and imports of a forbidden op or BLAS module.
* string literals (also constant concatenations) scanned as C/C++ text for cuBLAS/cuBLASLt/cuDNN/
  CUTLASS/rocBLAS/hipBLAS symbols, ATen calls (`at::mm`, `torch::matmul`, `x.mm(` in C++-looking
  text) and link flags (`-lcublas`, `libcublas.so`, `libraries=["cublas"]`). Strings are never
  scanned for Python spellings, except the argument of `eval` / `exec` / `compile`, which is
  scanned as Python (as text when it does not parse). Docstrings and comments are not scanned.

Forbidden sets hold canonical names (see `DEFAULT_FORBIDDEN`); an entry ending in `*` is a prefix
pattern (`cublas*` covers `cublasSgemm`, `cublasLtMatmul` and `cublas-link`).
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

__all__ = ["SourceHit", "DEFAULT_FORBIDDEN", "scan_source", "forbidden_for_aten_ops", "strip_cxx_comments"]


@dataclass(frozen=True)
class SourceHit:
    op: str        # canonical name of what was found, e.g. "torch.mm", "@", "F.linear", "cublasSgemm"
    line: int      # 1-based line in the candidate file
    col: int       # 0-based column (characters)
    text: str      # the source line, stripped, at most 120 chars
    how: str       # "call" | "operator" | "attribute" | "string" | "import"


# --------------------------------------------------------------------------- forbidden sets

_BLAS_PATTERNS = frozenset({"cublas*", "cublasLt*", "cudnn*", "cutlass", "rocblas*", "hipblas*"})

_TORCH_MATMUL = ("matmul", "mm", "bmm", "einsum", "addmm", "addbmm", "baddbmm", "tensordot", "mv", "addmv",
                 "dot", "vdot", "inner", "chain_matmul", "_scaled_mm", "_int_mm", "_addmm_activation")
_ATEN_MATMUL = ("mm", "bmm", "addmm", "matmul", "baddbmm", "addbmm", "linear", "_scaled_mm", "_int_mm", "dot",
                "vdot", "mv", "addmv", "einsum", "tensordot", "inner", "bilinear", "_addmm_activation")
_AT_MATMUL = _ATEN_MATMUL + ("chain_matmul", "linalg_matmul", "linalg_multi_dot", "linalg_vecdot")

_MATMUL_FAMILY = frozenset(
    [f"torch.{n}" for n in _TORCH_MATMUL]
    + [f"aten.{n}" for n in _ATEN_MATMUL]
    + [f"at::{n}" for n in _AT_MATMUL]
    + ["torch.linalg.matmul", "torch.linalg.multi_dot", "torch.linalg.vecdot", "torch.sparse.mm",
       "torch.sparse.addmm", "F.linear", "F.bilinear", "nn.Linear", "nn.Bilinear", "nn.LazyLinear", "@",
       "at::cuda::blas",
       "numpy.dot", "numpy.matmul", "numpy.einsum", "numpy.tensordot", "numpy.inner", "numpy.vdot",
       "numpy.linalg.multi_dot", "scipy.linalg.blas",
       "cupy.matmul", "cupy.dot", "cupy.einsum", "cupy.tensordot", "cupy.inner", "cupy.vdot", "cupy.cublas",
       "cublas-link"]
) | _BLAS_PATTERNS

DEFAULT_FORBIDDEN: frozenset[str] = _MATMUL_FAMILY


def _family(aten: Iterable[str], torch: Iterable[str] = (), f: Iterable[str] = (), nn: Iterable[str] = (),
            extra: Iterable[str] = ()) -> tuple[frozenset[str], frozenset[str]]:
    """(aten op names that select the family, canonical names it forbids)."""
    aten = frozenset(aten)
    names = ({f"aten.{n}" for n in aten} | {f"at::{n}" for n in aten} | {f"torch.{n}" for n in torch}
             | {f"F.{n}" for n in f} | {f"nn.{n}" for n in nn} | set(extra))
    return aten, frozenset(names)


_CONV_OPS = ("convolution", "_convolution", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
             "conv_transpose3d", "cudnn_convolution", "cudnn_convolution_transpose", "convolution_overrideable")
_BN_OPS = ("batch_norm", "native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training",
           "cudnn_batch_norm", "_batch_norm_impl_index")
_SDPA_OPS = ("scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
             "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
             "_flash_attention_forward", "_efficient_attention_forward")

# Heavy aten ops a reference dispatches -> what a source scan forbids for them. Small on purpose.
_FAMILIES = (
    (frozenset(_AT_MATMUL), _MATMUL_FAMILY),
    _family(("softmax", "_softmax"), torch=("softmax", "_softmax", "special.softmax"), f=("softmax",),
            nn=("Softmax",), extra=("cudnn*",)),
    _family(("log_softmax", "_log_softmax"), torch=("log_softmax", "_log_softmax", "special.log_softmax"),
            f=("log_softmax",), nn=("LogSoftmax",), extra=("cudnn*",)),
    _family(_CONV_OPS, torch=_CONV_OPS, f=("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                                            "conv_transpose3d"),
            nn=("Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"),
            extra=("cudnn*", "cutlass")),
    _family(("layer_norm", "native_layer_norm"), torch=("layer_norm", "native_layer_norm"), f=("layer_norm",),
            nn=("LayerNorm",)),
    _family(("group_norm", "native_group_norm"), torch=("group_norm", "native_group_norm"), f=("group_norm",),
            nn=("GroupNorm",)),
    _family(_BN_OPS, torch=_BN_OPS, f=("batch_norm",), nn=("BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
                                                           "SyncBatchNorm"), extra=("cudnn*",)),
    _family(_SDPA_OPS, torch=_SDPA_OPS, f=("scaled_dot_product_attention", "multi_head_attention_forward"),
            nn=("MultiheadAttention",), extra=("cudnn*", "cutlass", "flash_attn*", "xformers*")),
)

_ATEN_PREFIXES = ("torch.ops.aten.", "aten::", "aten.")


def forbidden_for_aten_ops(aten_ops: Iterable[str]) -> frozenset[str]:
    """Canonical source-scan names that cover traced aten ops ("aten::mm", "aten.addmm.default", "mm").

    Known op families map to their whole family (the matmul family is `DEFAULT_FORBIDDEN`); another op
    maps to {"aten.<name>", "torch.<name>"}. An entry that is already a canonical name or pattern
    ("torch.mm", "F.linear", "cublas*") passes through unchanged. Pass only compute ops
    (checks/library_policy.py): a shape op such as "aten::t" would name `x.t()`.
    """
    if isinstance(aten_ops, str):
        aten_ops = [aten_ops]
    out: set[str] = set()
    for raw in aten_ops:
        op = raw.strip()
        prefix = next((p for p in _ATEN_PREFIXES if op.startswith(p)), None)
        if prefix is None and ("." in op or "::" in op or op.endswith("*")):
            out.add(op)
            continue
        name = _strip_inplace(op[len(prefix or ""):].split(".", 1)[0])
        if not name:
            continue
        for keys, names in _FAMILIES:
            if name in keys:
                out |= names
                break
        else:
            out |= {f"aten.{name}", f"torch.{name}"}
    return frozenset(out)


def _matcher(entries: Iterable[str]) -> Callable[[str], bool]:
    if isinstance(entries, str):  # a lone name, not its characters
        entries = [entries]
    entries = frozenset(entries)
    exact = frozenset(e for e in entries if not e.endswith("*"))
    prefixes = tuple(e[:-1] for e in entries if e.endswith("*"))
    return lambda canon: canon in exact or canon.startswith(prefixes)


# --------------------------------------------------------------------------- canonical names

_MATMUL_DUNDERS = frozenset({"__matmul__", "__rmatmul__", "__imatmul__"})
_OPERATOR_MATMUL = frozenset({"matmul", "imatmul", "__matmul__", "__imatmul__"})
_NUMPY_INNER = frozenset({"ndarray", "matrix", "core", "_core"})
_SCIPY_BLAS = frozenset({"blas", "cython_blas", "_fblas", "get_blas_funcs"})
_CUPY_ROOTS = frozenset({"cupy", "cupyx", "cupy_backends"})
_PY_BLAS_SYMBOL = re.compile(r"(?:cublas[A-Z]|cudnn[A-Z]|rocblas_|hipblas)\w*")


def _strip_inplace(name: str) -> str:
    return name[:-1] if name.endswith("_") and not name.endswith("__") and len(name) > 1 else name


def _method_canonical(name: str) -> str:
    """A tensor method's op: `x.addmm_` -> torch.addmm, `x.__matmul__` -> torch.matmul."""
    return "torch.matmul" if name in _MATMUL_DUNDERS else "torch." + _strip_inplace(name)


def _canonical(path: str) -> str:
    """Canonical op name of a fully qualified dotted path (`torch.nn.functional.linear` -> F.linear)."""
    parts = path.split(".")
    root, n = parts[0], len(parts)
    if root == "torch" and n >= 3:
        head, second = parts[1], parts[2]
        if head == "ops" and second == "aten" and n >= 4:
            return "aten." + _strip_inplace(parts[3])   # overloads (.default, .out) dropped
        if head == "nn" and second == "functional" and n >= 4:
            return "F." + parts[3]
        if head == "_C" and second == "_nn" and n >= 4:
            return "F." + parts[3]
        if head == "_C" and second == "_VariableFunctions" and n >= 4:
            return "torch." + parts[3]
        if head == "functional":                        # torch.functional.einsum is torch.einsum
            return "torch." + second
        if head == "Tensor":
            return _method_canonical(second)
        if head == "nn" and n == 3:
            return "nn." + second
        if head == "nn" and second == "modules" and n >= 5:
            return "nn." + parts[4]
        if head in ("linalg", "special", "sparse", "fft"):
            return ".".join(parts[:3])
        return path
    if root == "numpy" and n >= 3 and parts[1] in _NUMPY_INNER:
        return "numpy." + parts[-1]
    if root == "scipy" and n >= 3 and parts[1] == "linalg" and parts[2] in _SCIPY_BLAS:
        return "scipy.linalg.blas"
    if root in _CUPY_ROOTS and any("cublas" in p or p == "blas" for p in parts[1:]):
        return "cupy.cublas"
    if root == "operator" and n == 2 and parts[1] in _OPERATOR_MATMUL:
        return "@"
    return path


# Roots whose dotted paths are authoritative: `tl.dot` is Triton's, not a tensor method. Under any
# other root (a third-party or relative import) a member named like an op is treated as that op.
_TRUSTED_ROOTS = frozenset({"torch", "numpy", "scipy", "cupy", "cupyx", "cupy_backends", "triton", "operator",
                            "builtins", "importlib", "sys", "functools", "math", "os", "typing", "ctypes",
                            "inspect", "itertools", "collections"})
# What these names mean when the file binds them nowhere (candidates often lean on star imports).
_CONVENTIONAL = {"torch": "torch", "F": "torch.nn.functional", "nn": "torch.nn", "np": "numpy",
                 "numpy": "numpy", "scipy": "scipy", "cupy": "cupy", "cp": "cupy", "cupyx": "cupyx",
                 "triton": "triton", "tl": "triton.language", "operator": "operator", "importlib": "importlib",
                 "sys": "sys", "builtins": "builtins", "functools": "functools", "inspect": "inspect"}
# Attribute hops that keep pointing at the same callable: `x.mm.__call__(y)` is `x.mm(y)`.
_TRANSPARENT = frozenset({"__call__", "__func__", "__wrapped__", "__get__"})
_SELF_NAMES = frozenset({"self", "cls"})

_GETATTR = frozenset({"getattr", "builtins.getattr", "inspect.getattr_static"})
_VARS = frozenset({"vars", "builtins.vars"})
_ATTRGETTER = frozenset({"operator.attrgetter"})
_METHODCALLER = frozenset({"operator.methodcaller"})
_IMPORT_MODULE = frozenset({"importlib.import_module"})
_DUNDER_IMPORT = frozenset({"__import__", "builtins.__import__"})
_EVALS = frozenset({"eval", "exec", "compile", "builtins.eval", "builtins.exec", "builtins.compile"})

# --------------------------------------------------------------------------- C/C++ text patterns

_CXX_SYMBOL = re.compile(r"\b(?:cublas[A-Z]\w*|cudnn[A-Z]\w*|rocblas_\w+|hipblas\w+)")
_CUTLASS = re.compile(r"\bcutlass(?:::|/)")
# BLAS entry points by the standard's names (Fortran `sgemm_`, CBLAS `cblas_sgemm`) and MKL/oneDNN's:
# reached through ctypes (libtorch exports its BLAS), they run below the dispatcher, where no trace sees.
_BLAS_SYMBOL = re.compile(r"\b(?:cblas_[a-z]\w*|(?:[sdcz](?:gemm|gemv|ger|symm|symv|syrk|syr2k|trmm|trsm|trmv|axpy|"
                          r"dot|scal|gemm3m)|[cz]dot[cu]|[sd]sdot)_|mkl_\w*(?:gemm|blas)\w*|dnnl_\w+)(?!\w)")
_ATEN_CXX = re.compile(r"\b(?:at|torch)::((?:\w+::)*)(\w+)")
_LINK = re.compile(r"(?<![\w-])-l(cublas|cudnn|rocblas|hipblas)\w*"
                   r"|\blib(cublas|cudnn|rocblas|hipblas)\w*\.(?:so|dll|dylib)")
_LIB_NAME = re.compile(r"(?:lib)?(cublas|cudnn|rocblas|hipblas)(?:Lt)?(?:\.so[.\d]*)?")
_CXX_METHOD = re.compile(r"(?:\.|->)\s*([A-Za-z_]\w*)\s*\(")
_LOOKS_CXX = re.compile(r"#\s*include|::|->|[;{}]")  # gate for `x.mm(`: prose like "torch.mm(a, b)" is not C++
_DOTTED = re.compile(r"\b[A-Za-z_]\w*(?:\s*\.\s*[A-Za-z_]\w*)+")


_BACKEND_NS = frozenset({"native", "cpu", "cuda", "meta", "mps", "compositeexplicitautograd",
                         "compositeimplicitautograd", "compositeexplicitautogradnonfunctional"})


def _aten_cxx_canonical(namespaces: str, name: str) -> str:
    ns = [p for p in namespaces.split("::") if p]
    if ns[:1] == ["_ops"] and len(ns) >= 2:              # at::_ops::mm::call(...)
        name = ns[1]
    elif ns[:1] == ["native"] or (ns[:1] and ns[0] in _BACKEND_NS and len(ns) == 1 and _is_aten_op(name)):
        return "at::native"                              # at::native::mm, at::cpu::mm: past the dispatcher
    elif ns[:1] == ["cuda"] and (ns[1:2] == ["blas"] or "blas" in name.lower()):
        return "at::cuda::blas"                          # at::cuda::blas::gemm, getCurrentCUDABlasHandle
    for suffix in ("_out", "_symint"):                   # at::mm_out(out, a, b) is at::mm
        if name.endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
    return "at::" + _strip_inplace(name)


def _is_aten_op(name: str) -> bool:
    """`at::cuda::mm` is ATen's CUDA kernel for mm; `at::cuda::getCurrentCUDAStream` is no op."""
    try:
        import torch
        return hasattr(torch.ops.aten, _strip_inplace(name.removesuffix("_out")))
    except Exception:  # noqa: BLE001 - no registry to ask: count it as an op
        return True


_CXX_LEXEME = re.compile(r'R"([^()\\\s]{0,16})\((?:.|\n)*?\)\1"'   # raw string literal
                         r'|"(?:\\.|[^"\\\n])*"'                        # string literal
                         r"|'(?:\\.|[^'\\\n])*'"                        # character literal
                         r"|//(?:\\\n|[^\n])*"                          # line comment (a trailing \ continues it)
                         r"|/\*(?:.|\n)*?(?:\*/|$)")                       # block comment


def strip_cxx_comments(text: str) -> str:
    """C/C++ text with its comments blanked (newlines kept, so offsets and lines stay): a comment
    saying "same result as at::matmul" calls nothing. String and character literals are kept."""
    def blank(m: re.Match) -> str:
        got = m.group(0)
        if got.startswith(("//", "/*")):
            return "".join(c if c == "\n" else " " for c in got)
        return got
    return _CXX_LEXEME.sub(blank, text)


def _cxx_matches(text: str) -> Iterator[tuple[int, str, str]]:
    """(offset, matched text, canonical op) for every C/C++ library reference in a string."""
    for m in _CXX_SYMBOL.finditer(text):
        yield m.start(), m.group(0), m.group(0)
    for m in _CUTLASS.finditer(text):
        yield m.start(), m.group(0), "cutlass"
    for m in _BLAS_SYMBOL.finditer(text):
        yield m.start(), m.group(0), "blas-symbol"
    for m in _ATEN_CXX.finditer(text):
        yield m.start(), m.group(0), _aten_cxx_canonical(m.group(1), m.group(2))
    for m in _LINK.finditer(text):
        yield m.start(), m.group(0), f"{m.group(1) or m.group(2)}-link"
    stripped = text.strip()
    if (m := _LIB_NAME.fullmatch(stripped)) is not None:
        yield text.find(stripped), stripped, f"{m.group(1)}-link"
    if _LOOKS_CXX.search(text):
        for m in _CXX_METHOD.finditer(text):
            yield m.start(1), m.group(1), "at::" + _strip_inplace(m.group(1))


# --------------------------------------------------------------------------- constant folding

_MAX_FOLD = 1 << 20          # longest string the folder will build ("a" * 10**12 must not)
_MAX_EVAL_DEPTH = 4          # eval("eval('...')") nesting followed
_MAX_ALIASES = 8             # dotted paths remembered per name
_STR_METHODS = frozenset({"lower", "upper", "strip", "lstrip", "rstrip", "casefold", "swapcase", "title",
                          "capitalize"})


def _flatten_add(node: ast.expr) -> list[ast.expr]:
    """Operands of a chain of `+`, left to right, without recursion (chains can be thousands long)."""
    out, stack = [], [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, ast.BinOp) and isinstance(cur.op, ast.Add):
            stack += [cur.right, cur.left]
        else:
            out.append(cur)
    return out


def _int_const(node: ast.expr) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _int_const(node.operand)
        return None if v is None else -v
    return None


@dataclass(frozen=True)
class _Ref:
    paths: tuple[str, ...]    # fully qualified dotted paths it may name; () if the receiver is unknown
    hit: str | None           # canonical forbidden op it reaches, if any
    members: int              # member accesses in the chain (0: a bare name or an imported module)


class _Scanner:
    """One parsed source. `parent` is set for code found in an eval/exec string: it runs in the
    candidate's globals, so names it does not bind resolve in the parent."""

    def __init__(self, source: str, tree: ast.AST, forbidden: Callable[[str], bool],
                 parent: _Scanner | None = None, depth: int = 0):
        self._lines = re.split(r"\r\n|\r|\n", source)
        self._forbidden = forbidden
        self._parent = parent
        self._depth = depth
        self._hits: list[SourceHit] = []
        self._internal: set[ast.AST] = set()       # nodes already judged as part of an enclosing chain
        self._strings_done: set[ast.AST] = set()   # string nodes already scanned (or not to scan)
        self._callees: set[ast.AST] = set()
        self._aliases: dict[str, set[str]] = {}
        self._stars: list[str] = []
        self._bound: Counter[str] = Counter()
        self._assigns: dict[str, list[ast.expr]] = {}
        self._pairs: list[tuple[ast.expr, ast.expr]] = []
        self._own_attrs: set[str] = set()
        self._ext_names: set[str] = set()
        self._ext_attrs: set[str] = set()
        self._callee_memo: dict[ast.AST, frozenset[str]] = {}   # chained calls would otherwise go exponential
        self._fold_memo: dict[str, str | None] = {}
        self._tree = tree
        self._collect(tree)
        self._resolve_assigned_aliases()
        self._find_extensions()

    # ----------------------------------------------------------------- pass 1: bindings

    def _collect(self, tree: ast.AST) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                self._callees.add(node.func)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                body = node.body
                if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                        and isinstance(body[0].value.value, str):
                    self._strings_done.add(body[0].value)   # docstrings are prose
            if isinstance(node, ast.ClassDef):
                for stmt in node.body:
                    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        self._own_attrs.add(stmt.name)
                    for t in self._targets(stmt):
                        if isinstance(t, ast.Name):
                            self._own_attrs.add(t.id)
            if isinstance(node, ast.Import):
                for a in node.names:
                    name = a.asname or a.name.split(".")[0]
                    self._aliases.setdefault(name, set()).add(a.name if a.asname else name)
                    self._bound[name] += 1
            elif isinstance(node, ast.ImportFrom):
                base = self._from_base(node)
                for a in node.names:
                    if a.name == "*":
                        self._stars.append(base)
                        continue
                    name = a.asname or a.name
                    self._aliases.setdefault(name, set()).add(f"{base}.{a.name}" if base else a.name)
                    self._bound[name] += 1
            elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                self._bound[node.id] += 1
            elif isinstance(node, ast.arg):
                self._bound[node.arg] += 1
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self._bound[node.name] += 1
            elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
                self._bound[node.name] += 1
            elif isinstance(node, ast.MatchMapping) and node.rest:
                self._bound[node.rest] += 1
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                    and isinstance(node.value, ast.Name) and node.value.id in _SELF_NAMES:
                self._own_attrs.add(node.attr)
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                for t in self._targets(node):
                    self._pair(t, node.value)
        for target, value in self._pairs:
            if isinstance(target, ast.Name):
                self._assigns.setdefault(target.id, []).append(value)

    @staticmethod
    def _targets(stmt: ast.AST) -> list[ast.expr]:
        if isinstance(stmt, ast.Assign):
            return list(stmt.targets)
        if isinstance(stmt, (ast.AnnAssign, ast.NamedExpr)):
            return [stmt.target]
        return []

    def _pair(self, target: ast.expr, value: ast.expr) -> None:
        if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) \
                and len(target.elts) == len(value.elts):
            for t, v in zip(target.elts, value.elts):
                self._pair(t, v)
        elif isinstance(target, (ast.Name, ast.Attribute)):
            self._pairs.append((target, value))

    @staticmethod
    def _from_base(node: ast.ImportFrom) -> str:
        return "." * node.level + (node.module or "")

    def _resolve_assigned_aliases(self) -> None:
        """`t = torch`, `F = torch.nn.functional`, `m = importlib.import_module("torch")` alias modules too."""
        for _ in range(8):
            changed = False
            for name, values in self._assigns.items():
                for value in values:
                    ref = self._safe_ref(value)
                    known = self._aliases.setdefault(name, set())
                    for p in ref.paths if ref else ():
                        if p not in known and len(known) < _MAX_ALIASES:
                            known.add(p)
                            changed = True
                            self._callee_memo.clear()
                if not self._aliases.get(name):
                    self._aliases.pop(name, None)
            if not changed:
                return

    def _find_extensions(self) -> None:
        """Names/attributes holding a `load_inline`/`load` module: calling into them is the candidate's own C++."""
        for _ in range(4):
            before = len(self._ext_names) + len(self._ext_attrs)
            for target, value in self._pairs:
                if not (self._is_ext_call(value) or isinstance(value, ast.Name) and value.id in self._ext_names):
                    continue
                if isinstance(target, ast.Name):
                    self._ext_names.add(target.id)
                else:
                    self._ext_attrs.add(target.attr)
            if len(self._ext_names) + len(self._ext_attrs) == before:
                return

    def _is_ext_call(self, node: ast.AST) -> bool:
        if not isinstance(node, ast.Call):
            return False
        return any(c.endswith("load_inline") or c.endswith("cpp_extension.load") for c in self._callee(node.func))

    # ----------------------------------------------------------------- name resolution

    def _name_paths(self, name: str) -> tuple[str, ...]:
        if name in self._aliases:
            return tuple(sorted(self._aliases[name]))
        if name in self._bound:
            return ()
        if self._parent is not None:
            return self._parent._name_paths(name)
        if name in _CONVENTIONAL:
            return (_CONVENTIONAL[name],)
        return tuple(f"{m}.{name}" for m in self._stars)

    def _callee(self, func: ast.expr) -> frozenset[str]:
        """What a call's function may be: its name and the dotted paths it resolves to."""
        if func not in self._callee_memo:
            if isinstance(func, ast.Name):
                self._callee_memo[func] = frozenset({func.id, *self._name_paths(func.id)})
            else:
                ref = self._safe_ref(func)
                self._callee_memo[func] = frozenset(ref.paths) if ref else frozenset()
        return self._callee_memo[func]

    def _single_value(self, name: str) -> ast.expr | None:
        """The value of a name bound exactly once, by a plain assignment (flow-insensitive constants)."""
        values = self._assigns.get(name)
        if values is not None:
            return values[0] if self._bound[name] == 1 and len(values) == 1 else None
        if name not in self._bound and self._parent is not None:
            return self._parent._single_value(name)
        return None

    def _fold(self, node: ast.AST, names: bool = True, _seen: frozenset[str] = frozenset()) -> str | None:
        """Constant value of a string expression, or None. `names`: follow names assigned once."""
        if isinstance(node, ast.Constant):
            return node.value if isinstance(node.value, str) else None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            parts = []
            for operand in _flatten_add(node):
                s = self._fold(operand, names, _seen)
                if s is None:
                    return None
                parts.append(s)
            out = "".join(parts)
            return out if len(out) <= _MAX_FOLD else None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            for s_node, n_node in ((node.left, node.right), (node.right, node.left)):
                n = _int_const(n_node)
                if n is not None:
                    s = self._fold(s_node, names, _seen)
                    if s is not None and len(s) * max(n, 0) <= _MAX_FOLD:
                        return s * n
            return None
        if isinstance(node, ast.JoinedStr):
            parts = []
            for v in node.values:
                if isinstance(v, ast.FormattedValue):   # only f"{'m'}" style: no conversion, no spec
                    s = self._fold(v.value, names, _seen) if v.conversion == -1 and v.format_spec is None else None
                else:
                    s = self._fold(v, names, _seen)
                if s is None:
                    return None
                parts.append(s)
            return "".join(parts)
        if isinstance(node, ast.Call):
            return self._fold_call(node, names, _seen)
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
            s = self._fold(node.value, names, _seen)
            bounds = [None if b is None else _int_const(b) for b in (node.slice.lower, node.slice.upper,
                                                                       node.slice.step)]
            given = [b for b in (node.slice.lower, node.slice.upper, node.slice.step) if b is not None]
            if s is None or len([b for b in bounds if b is not None]) != len(given) or bounds[2] == 0:
                return None
            return s[slice(*bounds)]
        if names and isinstance(node, ast.Name) and node.id not in _seen:
            if node.id not in self._fold_memo:   # only cycles are cut by _seen, so one value per name
                value = self._single_value(node.id)
                self._fold_memo[node.id] = None if value is None else self._fold(value, names, _seen | {node.id})
            return self._fold_memo[node.id]
        return None

    def _fold_call(self, node: ast.Call, names: bool, seen: frozenset[str]) -> str | None:
        func = node.func
        if node.keywords:
            return None
        if isinstance(func, ast.Attribute) and func.attr == "join":
            if isinstance(func.value, ast.Name) and func.value.id == "str" and len(node.args) == 2:
                sep_node, items = node.args                    # str.join(sep, items)
            elif len(node.args) == 1:
                sep_node, items = func.value, node.args[0]     # sep.join(items)
            else:
                return None
            sep = self._fold(sep_node, names, seen)
            if sep is None or not isinstance(items, (ast.List, ast.Tuple)):
                return None
            parts = [self._fold(e, names, seen) for e in items.elts]
            if any(p is None for p in parts):
                return None
            out = sep.join(parts)  # type: ignore[arg-type]
            return out if len(out) <= _MAX_FOLD else None
        if isinstance(func, ast.Attribute) and func.attr in _STR_METHODS and not node.args:
            s = self._fold(func.value, names, seen)
            return None if s is None else getattr(s, func.attr)()
        if isinstance(func, ast.Name) and func.id == "chr" and len(node.args) == 1:
            n = _int_const(node.args[0])
            return chr(n) if n is not None and 0 <= n < 0x110000 else None
        return None

    # ----------------------------------------------------------------- reference chains

    def _step(self, node: ast.AST) -> tuple[ast.expr | None, list[str]] | None:
        """One member access: (receiver, member names), or None if `node` is not one."""
        if isinstance(node, ast.Attribute):
            return node.value, [node.attr]
        if isinstance(node, ast.Subscript):
            key = self._fold(node.slice)
            value = node.value
            if key is None:
                return None
            if isinstance(value, ast.Attribute) and value.attr == "__dict__":
                return value.value, [key]                                          # torch.__dict__["mm"]
            if isinstance(value, ast.Call) and len(value.args) == 1 and self._callee(value.func) & _VARS:
                return value.args[0], [key]                                        # vars(torch)["mm"]
            return None
        if not isinstance(node, ast.Call):
            return None
        func, args = node.func, node.args
        callee = self._callee(func)
        if len(args) >= 2 and callee & _GETATTR:
            key = self._fold(args[1])
            return (args[0], [key]) if key is not None else None                  # getattr(torch, "mm")
        if isinstance(func, ast.Attribute) and func.attr in ("__getattribute__", "__getattr__"):
            if len(args) == 1 and (key := self._fold(args[0])) is not None:
                return func.value, [key]                                           # torch.__getattribute__("mm")
            if len(args) == 2 and (key := self._fold(args[1])) is not None:
                return args[0], [key]                                              # object.__getattribute__(t, "mm")
            return None
        if isinstance(func, ast.Call) and len(func.args) == 1 and len(args) == 1 \
                and self._callee(func.func) & _ATTRGETTER:
            key = self._fold(func.args[0])
            return (args[0], key.split(".")) if key else None                     # attrgetter("mm")(torch)
        if args and callee & _METHODCALLER:
            key = self._fold(args[0])
            return (None, [key]) if key else None                                 # methodcaller("mm", b)
        return None

    def _root(self, node: ast.AST | None) -> tuple[tuple[str, ...], str | None]:
        """(paths, hit) for what a chain starts from: a name, an imported module, or unknown."""
        if isinstance(node, ast.Name):
            paths = self._name_paths(node.id)
            return paths, self._name_hit(paths)
        if isinstance(node, ast.Call) and node.args and (mod := self._fold(node.args[0])):
            callee = self._callee(node.func)
            if callee & _IMPORT_MODULE:
                return (mod,), self._module_hit(mod)
            if callee & _DUNDER_IMPORT:   # returns the top package unless fromlist is given: allow both
                paths = tuple(dict.fromkeys((mod, mod.split(".")[0])))
                return paths, self._module_hit(mod)
        if isinstance(node, ast.Subscript) and (mod := self._fold(node.slice)):
            ref = self._ref(node.value, mark=False)
            if ref and "sys.modules" in ref.paths:
                return (mod,), self._module_hit(mod)
        return (), None

    def _ref(self, node: ast.AST, mark: bool = True) -> _Ref | None:
        """Resolve a reference expression; None if `node` is neither a name nor a member access.

        With `mark`, the chain's inner nodes are recorded so the walk does not judge them again."""
        steps: list[tuple[ast.expr | None, list[str]]] = []
        cur: ast.AST | None = node
        chain = []
        while cur is not None and (step := self._step(cur)) is not None:
            chain.append(cur)
            steps.append(step)
            cur = step[0]
        paths, hit = self._root(cur)
        if not steps and not paths:
            return None
        if mark:
            self._internal.update(chain)
            if paths and cur is not None:
                self._internal.add(cur)
        members: list[tuple[str, ast.expr | None, tuple[str, ...]]] = []   # (name, receiver, receiver paths)
        for receiver, names in reversed(steps):
            for i, name in enumerate(names):
                members.append((name, receiver if i == 0 else None, paths))
                if paths:
                    paths = tuple(f"{p}.{name}" for p in paths)
                    hit = hit or self._first_forbidden(_canonical(p) for p in paths)
                hit = hit or self._symbol_hit(name)
        return _Ref(paths, hit or self._method_hit(members), len(members))

    def _method_hit(self, members: list[tuple[str, ast.expr | None, tuple[str, ...]]]) -> str | None:
        """The last member, if its receiver is unknown (or untrusted) and it is named like a forbidden op."""
        idx = len(members) - 1
        while idx > 0 and members[idx][0] in _TRANSPARENT:
            idx -= 1
        if idx < 0:
            return None
        name, receiver, receiver_paths = members[idx]
        if receiver_paths:  # resolved through an import: decided by its path, not by its name
            return None
        if receiver is not None and self._is_own(receiver, name):
            return None
        canon = _method_canonical(name)
        return canon if self._forbidden(canon) else None

    def _is_own(self, receiver: ast.expr, name: str) -> bool:
        """The candidate's own callable: `self.matmul(...)` with `matmul` bound in the file, or an extension."""
        if isinstance(receiver, ast.Name):
            return receiver.id in self._ext_names or (receiver.id in _SELF_NAMES and name in self._own_attrs)
        if isinstance(receiver, ast.Attribute):
            return receiver.attr in self._ext_attrs
        return self._is_ext_call(receiver)

    def _first_forbidden(self, canons: Iterable[str]) -> str | None:
        return next((c for c in canons if self._forbidden(c)), None)

    def _symbol_hit(self, name: str) -> str | None:
        """A member named like a C BLAS symbol (`lib.cublasSgemm_v2` through ctypes)."""
        return name if _PY_BLAS_SYMBOL.fullmatch(name) and self._forbidden(name) else None

    def _module_hit(self, path: str) -> str | None:
        parts = path.split(".")
        return self._first_forbidden(_canonical(".".join(parts[:i])) for i in range(1, len(parts) + 1))

    def _name_hit(self, paths: tuple[str, ...]) -> str | None:
        """What a bare name bound by an import reaches (`from torch import mm as foo`)."""
        for p in paths:
            last = p.rsplit(".", 1)[-1]
            hit = self._module_hit(p) or self._symbol_hit(last)
            if hit is None and p.split(".")[0] not in _TRUSTED_ROOTS and "." in p:
                canon = _method_canonical(last)
                hit = canon if self._forbidden(canon) else None
            if hit:
                return hit
        return None

    def _safe_ref(self, node: ast.AST) -> _Ref | None:
        try:
            return self._ref(node, mark=False)
        except RecursionError:   # absurdly deep expression: nothing to resolve
            return None

    # ----------------------------------------------------------------- pass 2: the walk

    def scan(self) -> list[SourceHit]:
        for node in ast.walk(self._tree):   # breadth-first: a chain is judged whole before its parts
            try:
                self._visit(node)
            except RecursionError:
                continue
        return self._hits

    def _visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            self._add_op("@", node.left, node.right, "@")
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.MatMult):
            self._add_op("@", node.target, node.value, "@=")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            self._visit_import(node)
        elif isinstance(node, ast.Attribute) and _BLAS_SYMBOL.fullmatch(node.attr):   # lib.sgemm_ (ctypes)
            self._add("blas-symbol", node.end_lineno, self._col(node.end_lineno, node.end_col_offset) - len(node.attr),
                      "attribute")
        if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript, ast.Call)) and node not in self._internal \
                and isinstance(getattr(node, "ctx", None), (ast.Load, type(None))):
            ref = self._ref(node)
            if ref and ref.hit:
                if node in self._callees:
                    how = "call"
                elif ref.members == 0 and not isinstance(node, ast.Name):
                    how = "import"       # importlib.import_module("scipy.linalg.blas"), sys.modules[...]
                else:
                    how = "attribute"
                self._add(ref.hit, node.lineno, self._col(node.lineno, node.col_offset), how)
        if isinstance(node, ast.Call):
            self._visit_eval(node)
        self._visit_string(node)

    def _visit_import(self, node: ast.Import | ast.ImportFrom) -> None:
        for a in node.names:
            if isinstance(node, ast.Import):
                hit = self._module_hit(a.name)
            elif a.name == "*":
                continue
            else:
                base = self._from_base(node)
                hit = self._name_hit((f"{base}.{a.name}" if base else a.name,))
            if hit:
                line = getattr(a, "lineno", node.lineno)
                self._add(hit, line, self._col(line, getattr(a, "col_offset", node.col_offset)), "import")

    def _visit_eval(self, node: ast.Call) -> None:
        """eval/exec/compile of a constant string: scan it as Python (as text if it does not parse)."""
        if not node.args or not self._callee(node.func) & _EVALS:
            return
        code = self._fold(node.args[0])
        if code is None:
            return
        self._strings_done.update(ast.walk(node.args[0]))
        where = node.lineno, self._col(node.lineno, node.col_offset)
        if self._depth >= _MAX_EVAL_DEPTH:
            return
        try:
            inner = _Scanner(code, ast.parse(code), self._forbidden, parent=self, depth=self._depth + 1)
            found = [(h.op, h.how) for h in inner.scan()]
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            found = self._text_hits(code)
        for op, how in found:
            self._add(op, *where, how)

    def _text_hits(self, code: str) -> list[tuple[str, str]]:
        found = []
        for m in _DOTTED.finditer(code):
            try:
                expr = ast.parse(re.sub(r"\s+", "", m.group(0)), mode="eval").body
            except SyntaxError:
                continue
            ref = self._safe_ref(expr)
            if ref and ref.hit:
                found.append((ref.hit, "string"))
        found += [(canon, "string") for _, _, canon in _cxx_matches(code) if self._forbidden(canon)]
        return found

    def _visit_string(self, node: ast.AST) -> None:
        if node in self._strings_done:
            return
        if isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, bytes):
                value = value.decode("latin-1")
            if isinstance(value, str):
                self._scan_text(value, node, node)
            return
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            self._visit_concat(node)
        elif isinstance(node, (ast.BinOp, ast.JoinedStr, ast.Call, ast.Subscript)):
            text = self._fold(node, names=False)   # names are scanned where they are assigned
            if text is not None:
                self._scan_text(text, node, node)
                self._strings_done.update(ast.walk(node))

    def _visit_concat(self, node: ast.BinOp) -> None:
        """Scan each run of constant operands of a `+` chain as one string: "cublas" + "Sgemm"."""
        operands = _flatten_add(node)
        stack: list[ast.AST] = [node]
        while stack:   # the chain's inner `+` nodes are handled here, not on their own
            cur = stack.pop()
            if isinstance(cur, ast.BinOp) and isinstance(cur.op, ast.Add):
                self._strings_done.add(cur)
                stack += [cur.left, cur.right]
        run: list[tuple[ast.expr, str]] = []
        for operand in operands + [None]:
            text = None if operand is None else self._fold(operand, names=False)
            if text is not None:
                run.append((operand, text))
                continue
            if len(run) >= 2:
                self._scan_text("".join(t for _, t in run), run[0][0], run[-1][0])
                for o, _ in run:
                    self._strings_done.update(ast.walk(o))
            run = []

    def _scan_text(self, text: str, first: ast.AST, last: ast.AST) -> None:
        for offset, matched, canon in _cxx_matches(strip_cxx_comments(text)):
            if not self._forbidden(canon):
                continue
            line = min(max(first.lineno + text.count("\n", 0, offset), first.lineno), last.end_lineno)
            col = self._line(line).find(matched)
            if col < 0:
                col = self._col(line, first.col_offset) if line == first.lineno else 0
            self._add(canon, line, col, "string")

    # ----------------------------------------------------------------- positions and output

    def _line(self, line: int) -> str:
        return self._lines[line - 1] if 0 < line <= len(self._lines) else ""

    def _col(self, line: int, byte_col: int) -> int:
        """ast columns count UTF-8 bytes; report characters."""
        return len(self._line(line).encode("utf-8")[:byte_col].decode("utf-8", "ignore"))

    def _add_op(self, op: str, left: ast.AST, right: ast.AST, token: str) -> None:
        """The AST has no position for an operator: find its token between the operands."""
        for line in range(left.end_lineno, right.lineno + 1):
            raw = self._line(line).encode("utf-8")
            start = left.end_col_offset if line == left.end_lineno else 0
            end = right.col_offset if line == right.lineno else len(raw)
            i = raw[start:end].split(b"#", 1)[0].find(token.encode())
            if i >= 0:
                self._add(op, line, self._col(line, start + i), "operator")
                return
        self._add(op, left.lineno, self._col(left.lineno, left.col_offset), "operator")

    def _add(self, op: str, line: int, col: int, how: str) -> None:
        if self._forbidden(op):
            self._hits.append(SourceHit(op, line, col, self._line(line).strip()[:120], how))


def scan_source(source: str, forbidden: Iterable[str] = DEFAULT_FORBIDDEN,
                filename: str = "<candidate>") -> list[SourceHit]:
    """Return every place the source reaches a forbidden op; sorted by (line, col); never raises on valid Python.
    Raises SyntaxError (let it propagate) on invalid Python."""
    try:
        tree = ast.parse(source, filename=filename)
    except (ValueError, RecursionError, MemoryError) as exc:   # null bytes; nesting CPython cannot build
        raise SyntaxError(f"{filename}: cannot parse: {exc}") from exc
    hits = _Scanner(source, tree, _matcher(forbidden)).scan()
    return sorted(set(hits), key=lambda h: (h.line, h.col, h.op, h.how))
