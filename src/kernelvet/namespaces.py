"""A worker's own corner of the machine, without bubblewrap: Linux namespaces, a read-only view of
the file system, an unprivileged uid with no capabilities.

Entered by the launcher's freshly forked (so single-threaded) child, before the candidate exists:

- mount, network and UTS namespaces always; a PID namespace and an IPC namespace for CPU workers.
  A CUDA worker keeps the judge's PID and IPC namespaces, since legacy CUDA IPC handles
  (cudaIpcOpenMemHandle) cannot cross PID namespaces; as root it gets instead its own /proc
  mounted `hidepid=invisible` (it sees only its own uid's processes) and a uid of its own, so
  that it cannot signal, trace or read the judge either way.
- as root: a uid/gid of its own (no supplementary groups, no capabilities, an empty bounding
  set); as any other user: a user namespace that maps the user's own uid, whose capabilities are
  dropped once the mounts are made (the kernel then locks them: a nested namespace cannot undo them).
- everything read-only except the worker's own directory (which holds its compile caches) and a
  private /dev/shm; a /dev of its own (the usual character devices and the GPU's nodes); a /proc
  of its own, read-only. As root, directories the worker's uid could not traverse on the way to
  the Python installation (a toolchain under /root, say) are covered by an empty read-only tmpfs
  through which only those paths are bound back: the rest of them stays out of sight.
- no_new_privs (no setuid or file-capability program gives anything back), dumpable again (its
  own /proc files are its own), a seccomp filter (seccomp.py: no new Unix socket), and the judge
  and launcher are not dumpable (`protect_self`).

With a PID namespace the process tree is launcher -> relay -> init (pid 1) -> worker: the relay
stays in the launcher's namespace and ends as the worker ended (the launcher's exit reports keep
their meaning), the init reaps orphans and, by exiting, makes the kernel kill everything left in
the namespace; the worker itself is not pid 1 (the kernel would shield it from its own signals).
"""

from __future__ import annotations

import ctypes
import glob
import os
import signal
import struct
import sys

from . import seccomp

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x20000, 0x4000000, 0x8000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_MOUNT_ATTR_RDONLY, _AT_RECURSIVE, _AT_FDCWD, _SYS_MOUNT_SETATTR = 1, 0x8000, -100, 442
_PR_SET_DUMPABLE, _PR_CAPBSET_DROP, _PR_SET_NO_NEW_PRIVS = 4, 24, 38
_DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")
UID_BASE = 3_000_000_000      # worker uids: base + the relay's pid (unique among live processes), no passwd entry
SHM_SIZE = "512m"
HOSTNAME = b"kernelvet-worker"


class Unconfinable(OSError):
    """The kernel refused a step of the confinement; the message says which and why."""


_libc = ctypes.CDLL(None, use_errno=True)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        raise Unconfinable(f"{what}: {os.strerror(ctypes.get_errno())}")


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def _mount(src, target: str, fstype, flags: int, data=None, what: str = "") -> None:
    enc = (lambda s: None if s is None else os.fsencode(s))
    _check(_libc.mount(enc(src), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
           what or f"mount {target}")


def protect_self() -> None:
    """The calling process (judge, launcher) is not dumpable: its /proc files turn root-owned and
    no process of another uid, nor one without CAP_SYS_PTRACE, may read its memory or environment."""
    _libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


def flags_for(cuda: bool, root: bool) -> int:
    flags = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWUTS
    if not cuda or not root:     # as another user, only a PID namespace keeps the judge out of reach
        flags |= CLONE_NEWPID
    if not cuda:
        flags |= CLONE_NEWIPC
    if not root:
        flags |= CLONE_NEWUSER
    return flags


def harness_processes(cuda: bool, root: bool) -> int:
    """Processes of the harness between the launcher's child and the worker (relay excluded)."""
    return 2 if flags_for(cuda, root) & CLONE_NEWPID else 0


def enter(cwd: str, cuda: bool) -> dict:
    """Confine the calling process (single-threaded, freshly forked), and return what it got. With a
    PID namespace this forks twice and returns in the grandchild only (see the module's text)."""
    root = os.geteuid() == 0
    flags = flags_for(cuda, root)
    uid, gid = os.getuid(), os.getgid()
    wuid = wgid = (UID_BASE + os.getpid()) if root else None
    if not root:   # forked from a process that is not dumpable: /proc/self would not be ours to write
        _libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)
    _check(_libc.unshare(flags), "unshare")
    if not root:
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as fh:
                fh.write(text)
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE, what="making mounts private")
    hidden = _reveal_only(_needed_roots(cwd)) if root else []
    _private_dev(cuda)
    if root:
        _known_ids(cwd, wuid, wgid)
    _read_only("/")
    _mount(cwd, cwd, None, _MS_BIND | _MS_REC, what="binding the worker's directory")
    _writable(cwd)
    _mount("tmpfs", "/dev/shm", "tmpfs", _MS_NOSUID | _MS_NODEV, f"size={SHM_SIZE},mode=1777", "a private /dev/shm")
    _libc.sethostname(HOSTNAME, len(HOSTNAME))
    if root:
        os.chown(cwd, wuid, wgid)
    if flags & CLONE_NEWPID:
        _split()                 # returns in the worker only
    proc_opts = None if flags & CLONE_NEWPID else "hidepid=invisible"
    # Read-only only where no CUDA runs: cuInit fails on a read-only /proc (error 304, measured on
    # the H200). A worker of its own uid may write no process's files there but its own.
    proc_ro = 0 if cuda else _MS_RDONLY
    _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC | proc_ro, proc_opts, "a /proc of its own")
    _drop(wuid, wgid)
    names = [n for n, f in (("mount", CLONE_NEWNS), ("pid", CLONE_NEWPID), ("net", CLONE_NEWNET),
                            ("ipc", CLONE_NEWIPC), ("uts", CLONE_NEWUTS), ("user", CLONE_NEWUSER)) if flags & f]
    return {"namespaces": names, "uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(),
            "capabilities": _capabilities(), "no_new_privs": _status_field("NoNewPrivs") == "1",
            "proc": "own pid namespace" if flags & CLONE_NEWPID else "hidepid=invisible", "seccomp": seccomp.REFUSED,
            "writable": [cwd, "/dev/shm"], "hidden": hidden}


# -- the file system ---------------------------------------------------------------------------

def _needed_roots(cwd: str) -> list[str]:
    """What the worker must read: the Python installation and every import path (kernelvet's own
    sources among them), the programs and libraries its environment names (compilers, the CUDA
    toolkit), the way to its own directory. Candidate and problem files are copied into its
    directory by the judge."""
    env = [p for k in ("PATH", "LD_LIBRARY_PATH") for p in os.environ.get(k, "").split(":")]
    env += [os.environ.get(k, "") for k in ("CUDA_HOME", "CUDA_PATH")]
    roots = {os.path.realpath(p) for p in (sys.base_prefix, sys.prefix, sys.exec_prefix, *sys.path, *env,
                                           os.path.dirname(cwd)) if p and os.path.isabs(p)}
    roots = {r for r in roots if os.path.isdir(r) and r != "/" and not r.startswith(cwd + os.sep)}
    return sorted(roots)


def _blocked_ancestor(path: str) -> str | None:
    """The shallowest directory on the way to `path` that others may not traverse."""
    parts = path.strip("/").split("/")
    for i in range(1, len(parts)):
        d = "/" + "/".join(parts[:i])
        if not os.stat(d).st_mode & 0o001:
            return d
    return None


def _reveal_only(roots: list[str]) -> list[str]:
    """Cover each directory that blocks the worker's way to a needed root with an empty tmpfs, and
    bind the roots back through it (by descriptor: the tmpfs hides their old path). Returns the
    covered directories."""
    covered: dict[str, list[str]] = {}
    for r in roots:
        a = _blocked_ancestor(r)
        if a is not None:
            covered.setdefault(a, []).append(r)
    for top, inner in covered.items():
        keep = [r for r in inner if not any(r != o and r.startswith(o + os.sep) for o in inner)]
        fds = [(r, os.open(r, os.O_PATH | os.O_DIRECTORY)) for r in keep]
        _mount("tmpfs", top, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0755,size=64k", f"covering {top}")
        for r, fd in fds:
            os.makedirs(r, mode=0o755, exist_ok=True)
            _mount(f"/proc/self/fd/{fd}", r, None, _MS_BIND | _MS_REC, what=f"binding {r} back")
            os.close(fd)
    return sorted(covered)


def _known_ids(cwd: str, uid: int, gid: int) -> None:
    """/etc/passwd and /etc/group that name the worker's uid and gid (tools that look the user up,
    `getpass.getuser()` among them, fail on an unknown uid): the host's files plus one line each,
    bound over them in the worker's view only."""
    lines = {"passwd": f"kernelvet-worker:x:{uid}:{gid}:kernelvet worker:{cwd}:/usr/sbin/nologin\n",
             "group": f"kernelvet-worker:x:{gid}:\n"}
    etc = os.path.join(cwd, ".etc")
    os.mkdir(etc, 0o755)
    for name, line in lines.items():
        try:
            with open(f"/etc/{name}") as fh:
                text = fh.read()
        except OSError:
            continue
        path = os.path.join(etc, name)
        with open(path, "w") as fh:
            fh.write(text + ("" if text.endswith("\n") or not text else "\n") + line)
        os.chmod(path, 0o644)
        _mount(path, f"/etc/{name}", None, _MS_BIND, what=f"binding /etc/{name}")


def _private_dev(cuda: bool) -> None:
    """A tmpfs /dev with the usual character devices and the GPU's nodes, bound from the real one."""
    nodes = [f"/dev/{n}" for n in _DEV_NODES if os.path.exists(f"/dev/{n}")]
    nodes += sorted(glob.glob("/dev/nvidia*")) + (["/dev/dri"] if os.path.isdir("/dev/dri") else [])
    fds = [(n, os.open(n, os.O_PATH)) for n in nodes]
    _mount("tmpfs", "/dev", "tmpfs", _MS_NOSUID, "mode=0755,size=64k", "a /dev of its own")
    for n, fd in fds:
        if os.path.isdir(f"/proc/self/fd/{fd}"):
            os.makedirs(n, exist_ok=True)
        else:
            os.close(os.open(n, os.O_CREAT | os.O_WRONLY, 0o644))
        _mount(f"/proc/self/fd/{fd}", n, None, _MS_BIND | _MS_REC, what=f"binding {n}")
        os.close(fd)
    os.mkdir("/dev/shm", 0o1777)
    for name, to in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                     ("stderr", "/proc/self/fd/2")):
        os.symlink(to, f"/dev/{name}")


def _read_only(path: str) -> None:
    attr = _MountAttr(_MOUNT_ATTR_RDONLY, 0, 0, 0)
    if _libc.syscall(_SYS_MOUNT_SETATTR, _AT_FDCWD, os.fsencode(path), _AT_RECURSIVE,
                     ctypes.byref(attr), ctypes.sizeof(attr)) == 0:
        return
    # Kernels before 5.12: remount every mount point read-only, deepest last.
    with open("/proc/self/mountinfo") as fh:
        points = [line.split()[4].encode().decode("unicode_escape") for line in fh]
    for point in points:
        if point == path or point.startswith(path.rstrip("/") + "/"):
            flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY
            st = os.statvfs(point)
            flags |= (_MS_NOSUID if st.f_flag & os.ST_NOSUID else 0) | (_MS_NODEV if st.f_flag & os.ST_NODEV else 0) \
                | (_MS_NOEXEC if st.f_flag & os.ST_NOEXEC else 0)
            _mount(None, point, None, flags, what=f"read-only {point}")


def _writable(path: str) -> None:
    attr = _MountAttr(0, _MOUNT_ATTR_RDONLY, 0, 0)
    if _libc.syscall(_SYS_MOUNT_SETATTR, _AT_FDCWD, os.fsencode(path), 0, ctypes.byref(attr), ctypes.sizeof(attr)) == 0:
        return
    _mount(None, path, None, _MS_REMOUNT | _MS_BIND | _MS_NOSUID | _MS_NODEV, what=f"read-write {path}")


# -- processes and credentials -----------------------------------------------------------------

def _split() -> None:
    """relay -> init (pid 1) -> worker; returns in the worker. Each dies with its parent."""
    r, w = os.pipe()
    init = os.fork()
    if init:
        os.close(w)
        _relay(init, r)
    os.close(r)
    _die_with_parent()
    worker = os.fork()
    if worker:
        _init(worker, w)
    os.close(w)
    _die_with_parent()
    os.setsid()          # its own group: the judge kills the worker's group by its pid


def _relay(init: int, r: int) -> None:
    """End as the worker ended: its exit status, or its signal (raised on ourselves)."""
    _close_others(r)
    try:
        os.waitpid(init, 0)
    except ChildProcessError:
        pass
    data = os.read(r, 4)
    status = struct.unpack("i", data)[0] if len(data) == 4 else 70 << 8
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 70)


def _init(worker: int, w: int) -> None:
    """pid 1 of the namespace: reap everything until the worker ends, pass its status on, exit
    (and so the kernel kills whatever is left in the namespace)."""
    _close_others(w)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            status = 70 << 8
            break
        except InterruptedError:
            continue
        if pid == worker:
            break
    os.write(w, struct.pack("i", status))
    os._exit(0)


def _close_others(keep: int) -> None:
    # Not by listing /proc/self/fd: the worker mounts its own /proc in the mount namespace it shares
    # with the relay, in which the relay has no pid (its /proc/self would vanish under it).
    os.closerange(3, keep)
    os.closerange(keep + 1, os.sysconf("SC_OPEN_MAX"))


def _die_with_parent() -> None:
    _libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)   # PR_SET_PDEATHSIG


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _drop(uid: int | None, gid: int | None) -> None:
    """No capabilities now or ever (empty bounding set, no_new_privs); as root, another uid and gid."""
    for cap in range(64):
        if _libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == 22:
            break                                      # EINVAL: past the last capability
    if uid is not None:
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    hdr, data = _CapHeader(0x20080522, 0), (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(hdr), data), "dropping capabilities")
    _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    _libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)          # a uid change cleared it; its own files, its own
    seccomp.no_new_unix_sockets()


def _status_field(name: str) -> str | None:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(name + ":"):
                return line.split(":", 1)[1].strip()
    return None


def _capabilities() -> str:
    return ",".join(f"{k}={_status_field(k)}" for k in ("CapEff", "CapPrm", "CapBnd"))


# -- probing -----------------------------------------------------------------------------------

def probe(cuda: bool = False, timeout_s: float = 20.0) -> str | None:
    """Why this machine cannot confine a worker this way, or None: the whole sequence, tried in a
    forked child on an empty directory."""
    import tempfile
    import time
    cwd = tempfile.mkdtemp(prefix="kernelvet-probe-")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.setsid()
            _die_with_parent()
            took = enter(cwd, cuda)
            try:
                os.close(os.open(os.path.join(os.path.dirname(cwd), f".kernelvet-probe-{os.getpid()}"),
                                 os.O_CREAT | os.O_WRONLY, 0o600))
                why = b"the confined process can still write outside its directory"
            except OSError:
                why = b"ok" if took["uid"] != 0 else b"the confined process still runs as root"
            os.write(w, why)
            os._exit(0)
        except BaseException as exc:  # noqa: BLE001 - reported to the parent, in words
            try:
                os.write(w, f"{type(exc).__name__}: {exc}".encode()[:500])
            finally:
                os._exit(1)
    os.close(w)
    deadline, out = time.monotonic() + timeout_s, b""
    import select
    while time.monotonic() < deadline:
        ready, _, _ = select.select([r], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        chunk = os.read(r, 512)
        if not chunk:
            break
        out += chunk
    os.close(r)
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
    os.waitpid(pid, 0)
    try:
        os.rmdir(cwd)
    except OSError:
        pass
    return None if out == b"ok" else (out.decode(errors="replace") or "the confinement probe did not answer")
