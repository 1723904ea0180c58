"""`--engine ray`: the device pool across a Ray cluster. Each device's judge is a Ray actor
(`num_gpus=1`: Ray gives it one GPU and sets CUDA_VISIBLE_DEVICES, which its launcher and workers
inherit) running the same device judge as a local pool's process (devjudge.DeviceJudge); the
queue, the placement, the retries and the records are pool.py's, on the driver. Ray is optional
(`pip install kernelvet[ray]`); nothing else imports it.

The cluster is Ray's: `ray.init()` joins the one RAY_ADDRESS names (`ray start --head` on one
host, `ray start --address=HEAD:6379` on the others), or starts a local one. Every node needs
kernelvet and the problem and candidate files at the same paths (a shared file system).
"""

from __future__ import annotations

import dataclasses

from ..errors import UsageError
from .engine import VetOptions
from .jobs import Job
from .pool import JudgeGone, PoolEngine


@dataclasses.dataclass(frozen=True)
class RaySlot:
    """One actor of the pool: its name in records, the device its judge is given, and what it
    asks of Ray."""

    name: str
    device: str
    num_gpus: float = 0.0
    num_cpus: float = 1.0


def _ray():
    try:
        import ray
    except ImportError:
        raise UsageError("--engine ray needs Ray: pip install 'kernelvet[ray]'") from None
    if not ray.is_initialized():
        ray.init(ignore_reinit_error=True, include_dashboard=False, log_to_driver=False)
    return ray


def ray_slots(gpus: str | None, devices: str | None) -> list[RaySlot]:
    """`--gpus all` (every GPU of the cluster) or `--gpus N` (that many), an actor each; or
    `--devices cpu,cpu,...`, CPU actors (a cluster without GPUs, as the tests run it)."""
    if devices:
        names = [x.strip() for x in devices.split(",") if x.strip()]
        bad = [n for n in names if n != "cpu"]
        if bad or not names:
            raise UsageError(f"--engine ray --devices {devices}: only cpu devices are named; GPUs are --gpus all|N")
        return [RaySlot(f"ray-cpu:{i}", "cpu") for i in range(len(names))]
    spec = (gpus or "all").strip()
    if spec == "all":
        count = int(_ray().cluster_resources().get("GPU", 0))
        if count == 0:
            raise UsageError("--engine ray --gpus all: the Ray cluster has no GPU")
    elif spec.isdigit() and int(spec) > 0:
        count = int(spec)
    else:
        raise UsageError(f"--engine ray --gpus {spec}: expected 'all' or a number of GPUs (Ray places them)")
    return [RaySlot(f"ray-gpu:{i}", "cuda", num_gpus=1.0) for i in range(count)]


class _JudgeActor:
    """Runs in a Ray worker process: one device's judge."""

    def __init__(self, options: dict):
        from .devjudge import DeviceJudge, options_from_json
        self.judge = DeviceJudge(options_from_json(options))
        self.device = options.get("device", "auto")

    def start(self) -> str:
        import socket
        return f"{self.judge.start()}@{socket.gethostname()}"

    def vet(self, job: dict) -> dict:
        from .devjudge import job_from_json, probe
        record = self.judge.handle(job_from_json(job))
        poisoned = probe(self.device) if record.fault == "harness" else None
        return {"record": record.to_json(), "poisoned": poisoned}


class RayJudge:
    """A device judge as a Ray actor, answering what pool.py asks of a judge."""

    def __init__(self, slot: RaySlot, options: VetOptions):
        ray = _ray()
        self.slot, self._poisoned = slot, None
        actor = ray.remote(num_gpus=slot.num_gpus, num_cpus=slot.num_cpus, max_restarts=0)(_JudgeActor)
        self.actor = actor.remote(dataclasses.asdict(dataclasses.replace(options, device=slot.device)))

    def _get(self, ref):
        ray = _ray()
        try:
            return ray.get(ref)
        except ray.exceptions.RayError as exc:   # the actor died, or its call raised
            first = str(exc).strip().splitlines()
            raise JudgeGone(f"the Ray judge {self.slot.name}: {type(exc).__name__}: {first[0] if first else ''}"[:500]) from None

    def ready(self) -> str:
        return self._get(self.actor.start.remote())

    def vet(self, job: Job) -> dict:
        if self._poisoned:
            raise JudgeGone(f"the device of {self.slot.name} stopped computing: {self._poisoned}")
        reply = self._get(self.actor.vet.remote(job.to_json()))
        self._poisoned = reply.get("poisoned")
        return reply["record"]

    def stop(self, interrupt: bool = False) -> None:
        ray = _ray()
        try:
            if interrupt:
                ray.kill(self.actor)
            else:
                self.actor.__ray_terminate__.remote()
        except Exception:  # noqa: BLE001 - an actor already gone is stopped
            pass


def ray_engine(options: VetOptions, *, gpus: str | None = None, devices: str | None = None) -> PoolEngine:
    return PoolEngine(options, ray_slots(gpus, devices), judge=RayJudge)
