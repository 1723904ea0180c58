"""Which of the trace's kernels are the candidate's own: by the binaries its build produced.

A kernel counts as the candidate's only if its name is, exactly, a function symbol of a binary
the candidate's own Triton or extension build produced and its worker loaded: the cubins of the
Triton kernels compiled in the worker, the shared objects its `load_inline`/`load` build loaded
from torch's extension build directory. The judge reads those symbols itself from the bytes
(`elf_functions`); it never takes a name from the source or a substring of a name the candidate
picks, so a never-launched Triton kernel named `gemm` or `nvjet` owns no cuBLAS kernel.

What stays trusted (SECURITY.md): the worker is the candidate's territory, so the set of binaries
it sends is a claim. A candidate can send a binary of its choosing, or give its own kernel the
exact symbol of a vendor kernel it then calls; Kineto's events carry no module identity that would
tell two kernels of one name apart. Both need a candidate that forges on purpose; neither lets a
name the source merely contains count.
"""

from __future__ import annotations

import bisect
import struct

MAX_BINARY_BYTES = 64 << 20   # one binary the judge parses, at most
MAX_SYMBOLS = 200_000


def elf_functions(data: bytes) -> frozenset[str]:
    """Names of the defined function symbols (STT_FUNC) in an ELF64 little-endian file (a cubin or
    a shared object): .symtab and .dynsym. Empty for anything that is not one; never raises."""
    try:
        return frozenset(_elf_functions(memoryview(data)))
    except (struct.error, ValueError, IndexError, UnicodeDecodeError):
        return frozenset()


def _elf_functions(b: memoryview) -> list[str]:
    if len(b) < 64 or bytes(b[:4]) != b"\x7fELF" or b[4] != 2 or b[5] != 1:
        return []
    shoff, = struct.unpack_from("<Q", b, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", b, 0x3A)
    if shentsize < 64 or shnum > 65535 or shoff + shnum * shentsize > len(b):
        return []
    sections = [struct.unpack_from("<IIQQQQIIQQ", b, shoff + i * shentsize) for i in range(shnum)]
    names = []
    for (_name, stype, _flags, _addr, off, size, link, _info, _align, entsize) in sections:
        if stype not in (2, 11) or entsize < 24 or link >= shnum:   # SHT_SYMTAB, SHT_DYNSYM
            continue
        str_off, str_size = sections[link][4], sections[link][5]
        if off + size > len(b) or str_off + str_size > len(b):
            continue
        strtab = bytes(b[str_off:str_off + str_size])
        for i in range(min(size // entsize, MAX_SYMBOLS)):
            st_name, st_info, _other, st_shndx = struct.unpack_from("<IBBH", b, off + i * entsize)
            if st_info & 0xF != 2 or st_shndx == 0 or st_name >= len(strtab):   # STT_FUNC, defined
                continue
            end = strtab.find(b"\0", st_name)
            names.append(strtab[st_name:end if end >= 0 else len(strtab)].decode("utf-8"))
    return names


def demangled(symbols: frozenset[str]) -> frozenset[str]:
    """The symbols and their C++ demangled forms (the profiler's trace shows kernels demangled)."""
    try:
        from torch._C import _demangle
    except ImportError:   # no demangler: mangled names match only `extern "C"` kernels
        return symbols
    out = set(symbols)
    for s in symbols:
        if s.startswith("_Z"):
            try:
                out.add(_demangle(s))
            except Exception:  # noqa: BLE001 - a malformed symbol demangles to nothing
                pass
    return frozenset(out)


NAME_MAX = 300   # the worker sends a trace kernel's name cut to this many characters


def own_symbols(binaries) -> frozenset[str]:
    """Every kernel name the candidate's binaries define (bytes each, as the worker sent them),
    demangled, and cut as the worker cuts the trace's names."""
    out: set[str] = set()
    for data in binaries:
        if len(data) <= MAX_BINARY_BYTES:
            out |= elf_functions(data)
    names = demangled(frozenset(out))
    return names | {n[:NAME_MAX] for n in names}


def device_time(kernels: list[dict], own: frozenset[str], allowed_corr: frozenset[int] = frozenset()) -> dict:
    """The call's kernel time split into own / allowed / other (ns), and the other kernels by time."""
    split = {"own": 0, "allowed": 0, "other": 0}
    others: dict[str, int] = {}
    for k in kernels:
        ns = max(int(k["end_ns"]) - int(k["start_ns"]), 0)
        if k["name"] in own:
            split["own"] += ns
        elif int(k.get("corr", -1)) in allowed_corr:
            split["allowed"] += ns
        else:
            split["other"] += ns
            others[k["name"]] = others.get(k["name"], 0) + ns
    return {**split, "others": sorted(others.items(), key=lambda kv: -kv[1])}


def allowed_launches(cpu_events: list[dict], allowed: frozenset[str]) -> frozenset[int]:
    """Correlation ids of the launches made while an allowed aten op ran (the profiler's CPU events:
    aten ops and runtime launch calls, with start and end). By time, not thread: the profiler numbers
    its ops' threads and CUPTI its launches' differently. A launch from another thread during an
    allowed op counts as allowed; `threads` is the check for work hidden on other threads."""
    if not allowed:
        return frozenset()
    from .library_policy import base_name
    events = [e for e in cpu_events if _well_formed(e)]   # the worker's claims: malformed ones count for nothing
    spans = _merged((e["start_ns"], e["end_ns"]) for e in events
                    if e["kind"] == "op" and base_name(e["name"]) in allowed)
    starts = [a for a, _ in spans]
    out = set()
    for e in events:   # a trace holds tens of thousands of launches: each found among the spans by bisection
        if e["kind"] != "launch":
            continue
        i = bisect.bisect_right(starts, e["start_ns"]) - 1
        if i >= 0 and e["end_ns"] <= spans[i][1]:
            out.add(int(e["corr"]))
    return frozenset(out)


def _merged(spans) -> list[tuple[int, int]]:
    """Time spans as disjoint ones in order (allowed ops nest: aten::conv2d holds aten::convolution)."""
    out: list[list[int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _well_formed(e) -> bool:
    return (isinstance(e, dict) and e.get("kind") in ("op", "launch") and isinstance(e.get("name"), str)
            and all(type(e.get(k)) is int for k in ("tid", "start_ns", "end_ns", "corr")))
