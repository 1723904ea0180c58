"""Triton's installation hash, remembered across processes.

Triton keys its kernel cache on `triton_key()`: a sha256 of its own sources and of libtriton
(~500 MB), 0.3-0.4 s on an H200 host the first time a process compiles or loads a kernel. The
launcher pays it before forking workers, which is on the cold CLI's critical path. Here the
hash is stored (in Triton's cache directory) beside a fingerprint of the installation (every file under Triton's package:
path, size, mtime), which costs milliseconds to take; while the fingerprint matches, the stored
hash is installed instead of recomputed. Anything changed under the package recomputes it, so the
cache never keys a kernel on a stale installation. (Triton installs a precomputed key the same
way in its own preload workers.)
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import os
import sys

_HOMES = ("triton.runtime.cache", "triton.compiler.compiler")   # where Triton 3.x defines it


def cache_file() -> str:
    """In Triton's own cache directory (the launcher may write there, sandboxed or not; a
    subdirectory no kernel key can name)."""
    base = os.environ.get("TRITON_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".triton", "cache")
    return os.path.join(base, "kernelvet", "triton-key.json")


def _fingerprint(triton) -> str:
    root = os.path.dirname(os.path.abspath(triton.__file__))
    h = hashlib.sha256(f"{triton.__version__}\0{root}\0".encode())
    for d, dirs, files in os.walk(root):
        # bytecode is derived from the sources fingerprinted here, and any process importing
        # Triton may write more of it: leaving it out spares a recompute per new .pyc
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        for name in sorted(files):
            p = os.path.join(d, name)
            try:
                st = os.stat(p)
            except OSError:
                continue
            h.update(f"{os.path.relpath(p, root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def _defining_module():
    for name in _HOMES:
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        if callable(getattr(mod, "triton_key", None)):
            return mod
    return None


def _install(mod, key: str) -> None:
    """`triton_key` answers `key` wherever Triton's modules look it up (imported or not yet)."""
    original, cached = mod.triton_key, functools.lru_cache()(lambda: key)
    cached()   # answered (and counted in cache_info) before any worker forks, as a computed one is
    for name, m in list(sys.modules.items()):
        if (name == "triton" or name.startswith("triton.")) and getattr(m, "triton_key", None) is original:
            m.triton_key = cached


def prepare() -> str:
    """Make `triton_key()` answer at once in this process (and in processes forked from it):
    installed from the stored hash when the installation is unchanged, else computed and stored.
    Returns "stored" or "computed" (or "none" without a Triton that has one)."""
    import triton
    mod = _defining_module()
    if mod is None:
        return "none"
    fingerprint, path = _fingerprint(triton), cache_file()
    try:
        with open(path) as fh:
            saved = json.load(fh)
        if saved.get("fingerprint") == fingerprint and isinstance(saved.get("key"), str):
            _install(mod, saved["key"])
            return "stored"
    except (OSError, ValueError, AttributeError):
        pass
    key = mod.triton_key()
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}"
        with open(tmp, "w") as fh:
            json.dump({"fingerprint": fingerprint, "key": key}, fh)
        os.replace(tmp, path)   # atomic: a concurrent launcher reads the old file or the new one
    except OSError:
        pass   # a read-only home: computed each time, as before
    return "computed"
