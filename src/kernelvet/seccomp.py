"""A seccomp filter for a confined worker (namespaces.py): what namespaces and mounts leave open.

Installed last, after no_new_privs (which lets an unprivileged process install one).
"""

from __future__ import annotations

import ctypes
import os
import platform

_libc = ctypes.CDLL(None, use_errno=True)

# Machine code of the seccomp filter, per architecture: (AUDIT_ARCH, socket's number, io_uring_setup's).
_ARCHES = {"x86_64": (0xC000003E, 41, 425), "aarch64": (0xC00000B7, 198, 425)}
REFUSED = "socket(AF_UNIX) and io_uring refused"


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_SockFilter))]


def no_new_unix_sockets() -> None:
    """A network namespace does not cover Unix sockets bound to paths, nor does a read-only mount:
    a worker could still connect to the user's agent, bus or `kernelvet serve` sockets (where its
    uid may). It needs none: its one channel to the judge is open already. So `socket(AF_UNIX)`
    fails with EPERM, and so does io_uring (which could connect without the syscall);
    socketpair (multiprocessing's pipes) still works."""
    arch = _ARCHES.get(platform.machine())
    if arch is None:
        raise OSError(f"no seccomp filter for {platform.machine()}")
    audit, nr_socket, nr_uring = arch
    ld_w_abs, jeq_k, jge_k, ret_k = 0x20, 0x15, 0x35, 0x06
    allow, eperm = 0x7FFF0000, 0x00050000 | 1
    prog = [
        (ld_w_abs, 0, 0, 4), (jeq_k, 1, 0, audit), (ret_k, 0, 0, eperm),        # another ABI: refused
        (ld_w_abs, 0, 0, 0), (jge_k, 0, 1, 0x40000000), (ret_k, 0, 0, eperm),   # x32 numbers: refused
        (jeq_k, 0, 1, nr_uring), (ret_k, 0, 0, eperm),
        (jeq_k, 0, 3, nr_socket), (ld_w_abs, 0, 0, 16), (jeq_k, 0, 1, 1), (ret_k, 0, 0, eperm),  # args[0] == AF_UNIX
        (ret_k, 0, 0, allow),
    ]
    code = (_SockFilter * len(prog))(*[_SockFilter(*ins) for ins in prog])
    fprog = _SockFprog(len(prog), code)
    if _libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:   # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
        raise OSError(f"a seccomp filter: {os.strerror(ctypes.get_errno())}")
