"""The next vet's worker, started ahead: its device start-up (CUDA context, flush buffer, cuBLAS,
Triton; 1.0-1.4 s a worker on an H200 in `kernelvet batch`) then falls off the vet's clock.

A vet of a problem the device holds with room to spare starts it during its own candidate phase
(`start_early`), beside the candidate's import and checked calls, and waits for it (`ready`)
before its first device clock; otherwise a vet starts it as it ends (`after_vet`), and a vet that
follows at once, as in a batch, waits for the rest of it.

Torch-free, so that the CLI can ask for a spare the moment its launcher is ready, while its own
`import torch` may still be running. A device here is its text as `devices.resolve` gives it
("cpu", "cuda:N"). Every worker's first request is `prepare`; its answer (the device's
description, see worker/serve.py) stays unread until the vet that takes the worker reads it.
"""

from __future__ import annotations

import os
import threading
import time

from . import spawn

FLUSH_FACTOR = 2.0        # L2 flush buffer, in multiples of the device's L2 (judge.Settings' default)
SPARE_FOR = ("cuda",)     # device types worth a spare (a CPU worker starts in milliseconds)
_CLOSE_WAIT_S = 0.05      # a worker's graceful exit (off the clock, but a vet right after waits for it); then killed

_spares: dict[int, tuple] = {}                     # launcher -> (worker, device, flush factor)
_lock = threading.Lock()
_coming: dict[int, threading.Thread] = {}          # launcher -> the thread ending its last vet (`after_vet`)
_early: dict[int, threading.Thread] = {}           # launcher -> the thread starting a spare during a vet (`start_early`)
READY_WAIT_S = 30.0       # how long a vet waits for an early spare's device before its clocks run; then it is ended


def guess_device(device: str) -> str | None:
    """`device` as `devices.resolve` would most likely give it, without importing torch: "cuda:N"
    for an explicit CUDA device, and for `auto` where an NVIDIA driver is present and devices are
    visible; None otherwise. A wrong guess costs one worker's start, never a wrong vet: a vet
    takes a spare only for the device it resolved itself."""
    if device == "auto":
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        return "cuda:0" if os.path.exists("/dev/nvidiactl") and visible not in ("", "-1") else None
    if device == "cuda":
        return "cuda:0"
    kind, _, index = device.partition(":")
    return device if kind == "cuda" and index.isdigit() else None


def _device_type(device: str) -> str:
    return device.partition(":")[0]


def take(launcher, device: str, flush_factor: float, deadline: float) -> spawn.WorkerHandle:
    """A fresh worker for a vet on `device`, its `prepared` answer unread (the judge works while it
    gets ready): the spare made ready after the last vet on this launcher, if it was made for this
    device and flush size (its CUDA start-up is then already paid), else a new one, asked to
    prepare now."""
    wait_after_vet(launcher)
    with _lock:
        spare = _spares.pop(id(launcher), None)
    if spare is not None:
        w, sdev, sfactor = spare
        if sdev == device and sfactor == flush_factor and launcher.alive() and not w.gone():
            w.deadline = deadline
            return w
        w.close()
        w.cleanup()
    return _started(launcher, device, flush_factor, deadline)


def _started(launcher, device: str, flush_factor: float, deadline: float) -> spawn.WorkerHandle:
    """A new worker, greeted and asked to prepare `device` (its answer left unread)."""
    w = spawn.WorkerHandle(launcher, deadline, device=device)
    w.hello()
    w.send_only("prepare", {"device": device, "flush_factor": flush_factor})
    return w


def prepare(launcher, device: str, flush_factor: float = FLUSH_FACTOR) -> None:
    """Start the next vet's worker on `device` now, if its type is worth a spare."""
    if _device_type(device) not in SPARE_FOR or not launcher.alive():
        return
    try:
        w = _started(launcher, device, flush_factor, time.monotonic() + 600.0)
    except (RuntimeError, OSError, spawn.WorkerEnded):
        return
    with _lock:
        old = _spares.pop(id(launcher), None)
        _spares[id(launcher)] = (w, device, flush_factor)
    if old is not None:
        old[0].close()
        old[0].cleanup()


def start_early(launcher, device: str, flush_factor: float) -> bool:
    """During a vet, before its device clocks run: the next vet's worker starts now, on a thread,
    its device start-up (~1.2 s a vet on the H200, on the next vet's clock when started as a vet
    ends) overlapping this vet's candidate import and checked calls; `ready` waits for it before
    the clocks. Only where no spare is there or coming; whether one was started."""
    if _device_type(device) not in SPARE_FOR or not launcher.alive():
        return False
    with _lock:
        key = id(launcher)
        if key in _spares or key in _coming or key in _early:
            return False
        t = threading.Thread(target=prepare, args=(launcher, device, flush_factor), daemon=True,
                             name="kernelvet-early-spare")
        _early[key] = t
    t.start()
    return True


def ready(launcher, timeout: float = READY_WAIT_S) -> None:
    """Until the spare `start_early` started has its device ready (its `prepared` answer read, kept
    for the vet that takes it): nothing of its start-up runs while this vet's device clocks do. One
    that is not ready within `timeout`, or failed, is ended; the next vet starts its own."""
    with _lock:
        t = _early.pop(id(launcher), None)
    if t is None:
        return
    t.join()
    with _lock:
        spare = _spares.get(id(launcher))
    if spare is None:
        return
    w = spare[0]
    try:
        w.read_prepared(timeout)
    except (spawn.WorkerEnded, spawn.CandidateRaised, OSError):
        with _lock:
            if _spares.get(id(launcher)) is spare:
                del _spares[id(launcher)]
        w.close()
        w.cleanup()


def _has_spare(launcher, device: str, flush_factor: float) -> bool:
    with _lock:
        spare = _spares.get(id(launcher))
    return spare is not None and spare[1] == device and spare[2] == flush_factor


def after_vet(launcher, ending, device: str, flush_factor: float, prepare_next: bool) -> None:
    """Off the vet's clock, on a thread: the next vet's worker starts (CUDA), and the worker that
    served this vet ends. The vet returns its report now; the next vet waits for the thread
    before it takes a worker, so nothing of the old worker still runs on the device when it
    starts timing. The spare is forked first: its CUDA start-up overlaps the old context's
    teardown (a graceful exit lets the driver release it; killed if it takes longer)."""
    spare = prepare_next and _device_type(device) in SPARE_FOR and launcher.alive()
    if ending is None and not spare:
        return

    def run(before, early):
        for t in (before, early):
            if t is not None:
                t.join()
        if spare and not _has_spare(launcher, device, flush_factor):   # else started during the vet
            prepare(launcher, device, flush_factor)
        if ending is not None:
            try:
                ending.close(wait=_CLOSE_WAIT_S)
            except (OSError, ValueError):   # the launcher was closed meanwhile (interpreter exit, its
                ending.kill()               # socket gone): it killed the worker
            ending.cleanup()

    with _lock:
        before, early = _coming.get(id(launcher)), _early.pop(id(launcher), None)
        t = threading.Thread(target=run, args=(before, early), daemon=True, name="kernelvet-after-vet")
        _coming[id(launcher)] = t
    t.start()


def wait_after_vet(launcher) -> None:
    """Until the last vet's worker has ended and its spare is started (see `after_vet`,
    `start_early`)."""
    with _lock:
        threads = (_coming.pop(id(launcher), None), _early.pop(id(launcher), None))
    for t in threads:
        if t is not None:
            t.join()
