"""One device's judge in a pool (`kernelvet batch --gpus`): a process of its own, started by
pool.py with only its device visible (CUDA_VISIBLE_DEVICES in its environment, which its launcher
and every worker inherit), so that its CUDA context, its draws and its workers are its device's.

It speaks JSON lines with the pool: the first line in is `{"options": VetOptions}`, answered by
`{"ready": DEVICE}` once the launcher and the judge are warm (or `{"fatal": REASON}`); then each
`{"job": Job}` is answered by `{"record": Record}`. The problem of the last job stays open (its
reference made once on this device and reused) until a job of another problem comes. After a
record the harness failed, a CUDA judge probes its device; a device that no longer computes is
`{"poisoned": REASON}` and the process ends. End of input, SIGINT or SIGTERM: the vet in flight
is stopped (its worker ended) and the process exits.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys

from .engine import OpenProblem, VetOptions, vet_job  # noqa: F401 - vet_job: what a job runs through
from .jobs import Job


def job_from_json(d: dict) -> Job:
    return Job(id=d["id"], problem=d["problem"], candidate=d["candidate"], allow=tuple(d.get("allow") or ()),
               timeout=d.get("timeout"))


def options_from_json(d: dict) -> VetOptions:
    fields = {f.name for f in dataclasses.fields(VetOptions)}
    kw = {k: v for k, v in d.items() if k in fields}
    kw["allow"] = tuple(kw.get("allow") or ())
    kw["allow_ops"] = tuple(kw.get("allow_ops") or ())
    return VetOptions(**kw)


def probe(device: str) -> str | None:
    """None if the device still computes and synchronises; else why not."""
    import torch
    if not str(device).startswith("cuda") and not (device == "auto" and torch.cuda.is_available()):
        return None
    try:
        x = torch.arange(4, device="cuda", dtype=torch.float32)
        torch.cuda.synchronize()
        if float((x * 2).sum().item()) != 12.0:
            return "the device computed 2*(0+1+2+3) wrong"
    except Exception as exc:  # noqa: BLE001 - a sticky CUDA error is what this looks for
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return None


class DeviceJudge:
    """The loop over one device's jobs; `handle` is one job in, one record out."""

    def __init__(self, options: VetOptions):
        from .engine import LocalEngine
        self.options = options
        self._engine = LocalEngine(options)
        self._open: OpenProblem | None = None

    def start(self) -> str:
        from .. import devices
        self._engine.start()
        return str(devices.resolve(self.options.device))

    def handle(self, job: Job):
        if self._open is None or self._open.name != job.problem:
            self.close()
            self._open = OpenProblem(job.problem, self.options)
        return self._open.vet(job, self._engine._launcher)

    def close(self) -> None:
        if self._open is not None:
            self._open.close()
            self._open = None


def serve(lines_in, send) -> int:
    """The protocol above over `lines_in` (an iterator of lines) and `send(dict)`."""
    from ..errors import HarnessError, UsageError
    first = next(lines_in, None)
    if first is None:
        return 0
    options = options_from_json(json.loads(first)["options"])
    judge = DeviceJudge(options)
    try:
        device = judge.start()
    except (UsageError, HarnessError, RuntimeError, OSError) as exc:
        send({"fatal": f"{type(exc).__name__}: {exc}".splitlines()[0]})
        return 3
    send({"ready": device})
    try:
        for line in lines_in:
            if not line.strip():
                continue
            record = judge.handle(job_from_json(json.loads(line)["job"]))
            send({"record": record.to_json()})
            if record.fault == "harness":
                why = probe(options.device)
                if why is not None:
                    send({"poisoned": why})
                    return 3
    finally:
        judge.close()
    return 0


def main() -> int:
    # The protocol owns the stdout it was given; anything else printed goes to stderr.
    proto = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    signal.signal(signal.SIGTERM, signal.default_int_handler)

    def send(msg: dict) -> None:
        proto.write(json.dumps(msg, allow_nan=False, default=str) + "\n")
        proto.flush()

    try:
        return serve(iter(sys.stdin.readline, ""), send)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:   # the pool went away
        return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    import atexit
    atexit._run_exitfuncs()   # the launcher stopped, its directory removed
    os._exit(code)
