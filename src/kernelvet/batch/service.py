"""`JudgePool`: the device pool kept up for jobs that keep coming (a reward function's), each job
answered through a future. The same device judges, queue and retries as a batch (pool.py); only
the queue is open-ended and the records go to their callers instead of a file."""

from __future__ import annotations

import concurrent.futures
import threading
import time

from .engine import VetOptions
from .jobs import Job
from .pool import PoolEngine, Slot, _Queue, _Task
from .results import Record


class JudgePool:
    """Warm device judges shared by every thread of the process: `submit(job)` is a future of its
    record. Thread-safe; `close()` stops the judges (their vets in flight are ended)."""

    def __init__(self, options: VetOptions, slots: list[Slot]):
        self.engine = PoolEngine(options, slots)
        self._jobs = _Queue([], open_ended=True)
        self._procs: dict = {}
        self._waiting: dict[str, concurrent.futures.Future] = {}
        self._lock = threading.Lock()
        self._threads = self.engine.start(self._jobs, self, self._procs)

    @property
    def alive(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    def submit(self, job: Job) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            if job.id in self._waiting:
                raise ValueError(f"job id {job.id!r} is already waiting")
            self._waiting[job.id] = future
        if not self.alive:   # every device is out: an answer now, not at the caller's timeout
            self.put(self.engine._unplaced(_Task(job)))
        else:
            self._jobs.put(_Task(job))
        return future

    def cancel(self, job_id: str) -> None:
        """The caller stopped waiting: a job still queued is dropped (one in a vet ends at its own
        timeout, and its record is let go)."""
        self._jobs.cancel(job_id)
        with self._lock:
            self._waiting.pop(job_id, None)

    def put(self, record: Record) -> None:   # where the slots' threads hand each record
        with self._lock:
            future = self._waiting.pop(record.id, None)
        if future is not None and not future.done():
            future.set_result(record)

    def close(self) -> None:
        self._jobs.stop()
        for p in list(self._procs.values()):
            p.stop(interrupt=True)
        deadline = time.monotonic() + 30
        for t in self._threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        with self._lock:
            waiting, self._waiting = self._waiting, {}
        for job_id, future in waiting.items():
            if not future.done():
                future.set_result(Record(id=job_id, problem="", candidate="", verdict="error", fault="harness",
                                         error="the judge pool was closed", finished_at=time.time()))
