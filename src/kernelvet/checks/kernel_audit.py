"""`kernel-audit`: what the device actually ran for one call, from the profiler (CUPTI).

The worker brackets one call on the caller's stream with two spin kernels: a gate before it
(work ordered after the caller's stream cannot start until the gate ends) and an end marker
after it. Every other device activity in the trace is the candidate's (`classify`). Two other
checks take it as one more witness: `streams` (work that ran while the gate held the caller's
stream, or ended after the end marker began) and `library-call` (vendor library kernels:
cuBLAS, cuBLASLt, CUTLASS, cuDNN, rocBLAS... that no source scan or aten trace saw). This check
decides what only the trace can tell:
  - no kernel at all on a CUDA problem (copies and fills only, or nothing);
  - kernels the source defines, none of which ran (a kernel for show beside the real work).
A kernel is the candidate's own by identity, not by name: its name is a function symbol of a
binary the candidate's build loaded (checks/attribution.py, `ev.own_kernels`).
It runs as a second tier by default (`--audit auto`); on an H200 it costs 0.09 s per vet.
"""

from __future__ import annotations

import ast
import re

from ..ids import CheckId
from ..report import Finding, Status
from ..trace import MARKER
from ._common import not_reached

VENDOR = re.compile(r"cublas|nvjet|xmma|cutlass|cudnn|sgemm|hgemm|dgemm|gemv2|gemmSN|gemmk1|_s884|_s1688|_h884|"
                    r"_h1688|ampere_|volta_|turing_|rocblas|hipblas|miopen|Cijk_|magma", re.IGNORECASE)
_NOT_KERNELS = ("Memcpy", "Memset")
_GLOBAL = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?"
                     r"([A-Za-z_]\w*)\s*\(")


def defined_kernels(source: str) -> tuple[str, ...]:
    """Names of the kernels a candidate's source defines: Triton-jitted functions (also under
    autotune/heuristics) and `__global__` functions in inline CUDA strings."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ()
    names = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(_is_jit(d) for d in node.decorator_list):
            names.append(node.name)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "__global__" in node.value:
            names += _GLOBAL.findall(node.value)
    return tuple(dict.fromkeys(names))


def _is_jit(dec: ast.expr) -> bool:
    target = dec.func if isinstance(dec, ast.Call) else dec
    name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
    return name in ("jit", "autotune", "heuristics")


def classify(audit: dict) -> dict | None:
    """The candidate's activities, split by what they show; None when the markers are missing."""
    acts = sorted(audit.get("activities", []), key=lambda a: a["corr"])
    spins = [a for a in acts if MARKER in a["name"]]
    if len(spins) < 2:
        return None
    gate, end = spins[0], spins[-1]
    own = [a for a in acts if a is not gate and a is not end]
    return {
        "caller_stream": gate["stream"],
        "activities": own,
        "kernels": [a for a in own if not a["name"].startswith(_NOT_KERNELS)],
        "unordered": [a for a in own if a["start_ns"] < gate["end_ns"]],
        "late": [a for a in own if a["end_ns"] > end["start_ns"] or a["corr"] > end["corr"]],
    }


def hidden_work(ev) -> str | None:
    """The `streams` witness: activities outside the caller's stream order, in words."""
    c = classify(ev.audit) if ev.audit else None
    if not c or not (c["unordered"] or c["late"]):
        return None
    bad = (c["unordered"] or c["late"])[0]
    what = "ran while the caller's stream was held" if c["unordered"] else "ended after the caller's end marker"
    return (f"the kernel trace shows {len(c['unordered']) + len(c['late'])} device activities outside the caller's "
            f"stream order, e.g. {short(bad['name'])} on stream {bad['stream']} {what}")


def vendor_kernels(ev) -> list[str]:
    """The `library-call` witness: vendor library kernels that ran, other than the candidate's own."""
    c = classify(ev.audit) if ev.audit else None
    if not c:
        return []
    return sorted({a["name"] for a in c["kernels"] if VENDOR.search(a["name"]) and a["name"] not in ev.own_kernels})


def evaluate(ev) -> Finding:
    if ev.device.type != "cuda":
        return Finding(CheckId.KERNEL_AUDIT, Status.SKIP, "no kernel trace on the CPU")
    if ev.audit is None:
        return not_reached(CheckId.KERNEL_AUDIT, "not run (second tier: runs when every other check passed; "
                           "--audit always runs it for every candidate)")
    if ev.audit.get("malformed"):
        return Finding(CheckId.KERNEL_AUDIT, Status.FAIL, f"the worker's trace of the call has {ev.audit['malformed']} "
                       "rows that are not as the trace format says: its account of the call cannot be read",
                       {"malformed": ev.audit["malformed"]})
    c = classify(ev.audit)
    if c is None:
        return Finding(CheckId.KERNEL_AUDIT, Status.FAIL, "the profiler trace lacks the harness's own marker "
                       "kernels around the call: the trace was disturbed", {"activities": len(ev.audit["activities"])})
    names = sorted({a["name"] for a in c["kernels"]})
    own = set(ev.kernels_defined)
    evidence = {"kernels": names[:50], "streams": sorted({a["stream"] for a in c["activities"]}),
                "caller_stream": c["caller_stream"], "defined": sorted(own),
                "own_kernel_symbols": sorted(ev.own_kernels)[:50]}
    if ev.audit.get("dropped"):   # beyond trace.AUDIT_MAX: the latest activities are not in the account
        evidence["left_out"] = ev.audit["dropped"]
    if not c["kernels"]:
        what = ", ".join(sorted({short(a["name"]) for a in c["activities"]})) or "nothing"
        return Finding(CheckId.KERNEL_AUDIT, Status.FAIL,
                       f"no kernel ran on the device during the call (it ran: {what}): the answer was not computed "
                       "there", evidence)
    if own and not any(n in ev.own_kernels for n in names):
        return Finding(CheckId.KERNEL_AUDIT, Status.FAIL,
                       f"the source defines {', '.join(sorted(own))}, but none of them ran (ran: "
                       f"{', '.join(short(n) for n in names[:3])})", evidence)
    return Finding(CheckId.KERNEL_AUDIT, Status.PASS,
                   f"{len(c['kernels'])} kernels ran, "
                   + (f"the source's own among them: {', '.join(short(n) for n in names[:3])}" if own
                      else f"{', '.join(short(n) for n in names[:3])}"), evidence)


def short(name: str) -> str:
    return name if len(name) <= 60 else name[:57] + "..."
