"""One model answer to one score: the code out of the answer, the problem out of the ground
truth, a vet on the process's shared judge pool (batch/service.py: a warm judge per device, each
seeing only its device), and the verdict through the reward shape. Every path returns a score:
no code, a problem that cannot be found, a failed judge, and no verdict within the timeout are
scores too (with the reason in the details).

Problems: `ground_truth` is a path (a KernelBench file, or any file or folder `kernelvet check
--ref` takes), a built-in problem's name (`matmul`), or a problem's source text (written once to a
private folder, named by its bytes, so that every answer to one problem lands on the same problem
and a device keeps its reference). Candidates are written to the same private folder, one file
each, removed once scored.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import os
import shutil
import tempfile
import threading
import time
import uuid

from .. import problems as builtin_problems
from ..errors import UsageError
from ..formats.gpumode import split_ref
from .answer import compiles, extract_code
from .shape import RewardShape

DEFAULT_TIMEOUT_S = 300.0
_SOURCE_MARKS = ("def get_inputs", "class Model", "def ref_kernel", "def generate_input")


@dataclasses.dataclass(frozen=True)
class ScorerConfig:
    """What the process-wide judges are: their devices (`gpus` "all"/"0,1"; or `devices`
    "cpu,cuda:1"; neither: every GPU if there is one, else the CPU), sandbox and audit modes, the
    waivers, library policy and allowed library ops every vet gets, the default timeout and reward
    shape."""

    gpus: str | None = None
    devices: str | None = None
    sandbox: str = "auto"
    audit: str = "auto"
    allow: tuple[str, ...] = ()
    library_policy: str | None = None   # None: the device's default (own-kernels on CUDA)
    allow_ops: tuple[str, ...] = ()
    timeout: float = DEFAULT_TIMEOUT_S
    shape: RewardShape = RewardShape()

    @classmethod
    def from_env(cls) -> "ScorerConfig":
        env = os.environ
        return cls(gpus=env.get("KERNELVET_REWARD_GPUS") or None, devices=env.get("KERNELVET_REWARD_DEVICES") or None,
                   sandbox=env.get("KERNELVET_REWARD_SANDBOX", "auto"),
                   timeout=float(env.get("KERNELVET_REWARD_TIMEOUT", DEFAULT_TIMEOUT_S)))


class Scorer:
    def __init__(self, config: ScorerConfig):
        self.config = config
        self._pool = None
        self._lock = threading.Lock()
        self._dir = tempfile.mkdtemp(prefix="kernelvet-reward-")   # 0700: this user's alone

    def _judges(self):
        with self._lock:
            if self._pool is None or not self._pool.alive:
                from ..batch.engine import VetOptions
                from ..batch.pool import device_slots, gpu_slots
                from ..batch.service import JudgePool
                c = self.config
                if c.gpus:
                    slots = gpu_slots(c.gpus)
                elif c.devices:
                    slots = device_slots(c.devices)
                else:
                    slots = gpu_slots("all") if _has_cuda() else device_slots("cpu")
                if self._pool is not None:
                    self._pool.close()
                self._pool = JudgePool(VetOptions(audit=c.audit, sandbox=c.sandbox, allow=c.allow,
                                                  timeout=c.timeout, library_policy=c.library_policy,
                                                  allow_ops=c.allow_ops), slots)
            return self._pool

    def score(self, answer: str, ground_truth, options: dict | None = None) -> dict:
        t0 = time.monotonic()
        options = dict(options or {})
        try:
            shape = RewardShape.of(options.pop("shape", None) or self.config.shape)
            timeout = float(options.pop("timeout", self.config.timeout))
            allow = tuple(options.pop("allow", ()))
            if options:
                raise UsageError(f"extra_info['kernelvet']: unknown option {sorted(options)[0]!r} "
                                 "(known: allow, shape, timeout)")
        except (UsageError, TypeError, ValueError) as exc:
            return _details(RewardShape().error, "invalid", error=f"{exc}", fault="caller", t0=t0)
        code = extract_code(answer)
        if code is None:
            return _details(shape.no_code, "no-code", error="no fenced python block in the answer", t0=t0)
        if not compiles(code):
            return _details(shape.no_code, "no-code", error="the answer's code does not compile", t0=t0)
        try:
            problem = self._problem(ground_truth)
        except UsageError as exc:
            return _details(shape.error, "invalid", error=str(exc), fault="problem", compiled=True, t0=t0)
        from ..batch.jobs import Job
        job_id = uuid.uuid4().hex
        candidate = os.path.join(self._dir, f"candidate_{job_id}.py")
        with open(candidate, "w", encoding="utf-8") as fh:
            fh.write(code)
        try:
            pool = self._judges()
            future = pool.submit(Job(id=job_id, problem=problem, candidate=candidate, allow=allow, timeout=timeout))
            try:
                record = future.result(timeout=max(0.0, timeout - (time.monotonic() - t0)))
            except concurrent.futures.TimeoutError:
                pool.cancel(job_id)
                return _details(shape.error, "timeout", error=f"no verdict within {timeout:g} s", compiled=True, t0=t0)
        finally:   # a vet still in flight after a timeout has read it, or its record is let go
            try:
                os.unlink(candidate)
            except OSError:
                pass
        return _from_record(record, shape, t0)

    def _problem(self, ground_truth) -> str:
        if isinstance(ground_truth, dict):   # {"problem": ...}, as a dataset row may hold it
            ground_truth = ground_truth.get("problem") or ground_truth.get("ref") or ground_truth.get("source")
        if not isinstance(ground_truth, str) or not ground_truth.strip():
            raise UsageError("ground_truth names no problem (expected a path, a built-in name or the problem's source)")
        text = ground_truth
        on_disk = "\n" not in text and os.path.exists(split_ref(text)[0])   # a GPU MODE task may name a case
        if on_disk or ("\n" not in text and text in builtin_problems.BUILTIN):
            return os.path.abspath(text) if on_disk else text
        if any(mark in text for mark in _SOURCE_MARKS):
            path = os.path.join(self._dir, f"problem_{hashlib.sha256(text.encode()).hexdigest()[:24]}.py")
            if not os.path.exists(path):
                tmp = f"{path}.{uuid.uuid4().hex}"
                with open(tmp, "w", encoding="utf-8") as fh:
                    fh.write(text)
                os.replace(tmp, path)
            return path
        raise UsageError(f"ground_truth {text[:80]!r} is no file, built-in problem or problem source")

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None
        shutil.rmtree(self._dir, ignore_errors=True)


def _has_cuda() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001 - no CUDA is an answer, not an error
        return False


# the reward's detail fields, all but two by keyword
def _details(score: float, verdict: str, *, error=None, fault=None, compiled=False, t0: float,
             failed: str = "", speedup=None, slot=None) -> dict:
    return {"score": float(score), "verdict": verdict, "failed": failed, "speedup": speedup, "error": error,
            "fault": fault, "compiled": compiled, "slot": slot, "vet_s": round(time.monotonic() - t0, 3)}


def _from_record(record, shape: RewardShape, t0: float) -> dict:
    failed = ",".join(c for c, _ in record.failed)
    speedup = (record.timing or {}).get("speedup")
    if (record.timing or {}).get("vouched") is False:
        speedup = None   # a time the judge's clocks did not bound earns no speed reward
    if record.verdict == "pass":
        score = shape.on_pass(speedup)
    elif record.verdict == "reject" or (record.verdict == "invalid" and record.fault == "candidate"):
        score = shape.format
    else:
        score = shape.error
    return _details(score, record.verdict, error=record.error, fault=record.fault, compiled=True, t0=t0,
                    failed=failed, speedup=speedup, slot=record.slot)
