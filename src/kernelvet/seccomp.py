"""A seccomp filter for a confined worker (namespaces.py): what namespaces and mounts leave open.

Installed last, after no_new_privs (which lets an unprivileged process install one).
"""

from __future__ import annotations

import ctypes
import os
import platform

_libc = ctypes.CDLL(None, use_errno=True)

# Machine code of the seccomp filter, per architecture: (AUDIT_ARCH, connect's, sendto's and
# io_uring_setup's numbers).
_ARCHES = {"x86_64": (0xC000003E, 42, 44, 425), "aarch64": (0xC00000B7, 203, 206, 425)}
REFUSED = "connect(), sendto() to an address and io_uring refused"


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_SockFilter))]


def no_new_unix_sockets() -> None:
    """A network namespace does not cover Unix sockets bound to paths, nor does a read-only mount:
    a worker could still reach the user's agent, bus or `kernelvet serve` sockets (where its uid
    may). It needs no new connection: its one channel to the judge is connected already. So
    `connect()` and a `sendto()` naming an address fail with ENOENT, as for a socket that is not
    there, and io_uring (which could connect without the syscall) with EPERM. Making a socket is
    allowed: the CUDA driver makes one at start-up (cuInit fails when `socket(AF_UNIX)` is refused,
    measured on the H200), and carries on when nothing answers at the path it tries.
    Not covered: `sendmsg()` with an address (seccomp cannot read the message header), so a
    datagram socket of the host that the worker's uid may write to stays reachable."""
    arch = _ARCHES.get(platform.machine())
    if arch is None:
        raise OSError(f"no seccomp filter for {platform.machine()}")
    audit, nr_connect, nr_sendto, nr_uring = arch
    ld_w_abs, jeq_k, jge_k, ret_k = 0x20, 0x15, 0x35, 0x06
    allow, eperm, enoent = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 2
    prog = [
        (ld_w_abs, 0, 0, 4), (jeq_k, 1, 0, audit), (ret_k, 0, 0, eperm),        # another ABI: refused
        (ld_w_abs, 0, 0, 0), (jge_k, 0, 1, 0x40000000), (ret_k, 0, 0, eperm),   # x32 numbers: refused
        (jeq_k, 0, 1, nr_uring), (ret_k, 0, 0, eperm),
        (jeq_k, 0, 1, nr_connect), (ret_k, 0, 0, enoent),
        (jeq_k, 0, 5, nr_sendto),                                                # sendto: args[4], the address
        (ld_w_abs, 0, 0, 48), (jeq_k, 0, 2, 0), (ld_w_abs, 0, 0, 52), (jeq_k, 1, 0, 0),
        (ret_k, 0, 0, enoent),
        (ret_k, 0, 0, allow),
    ]
    code = (_SockFilter * len(prog))(*[_SockFilter(*ins) for ins in prog])
    fprog = _SockFprog(len(prog), code)
    if _libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:   # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
        raise OSError(f"a seccomp filter: {os.strerror(ctypes.get_errno())}")
