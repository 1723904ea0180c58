"""`PoolEngine`: one judge per device of a host (`kernelvet batch --gpus all|0,1,...`), fed from
one shared queue of jobs, its records streamed back to the one runner (the same JSONL, resume and
progress bar as on one device).

Each device's judge is a process of its own (devjudge.py) that sees only its device: a judge's
CUDA context and its draws are per process, and CUDA_VISIBLE_DEVICES in its environment is what
its launcher and workers inherit. Jobs go out one at a time; a device keeps to the problem it has
open (its reference made once on that device, reused) while that problem has jobs left, and a
free device takes a problem no device is on before it joins one already open elsewhere.

A device's judge process that dies in a vet (a signal: the host's out-of-memory killer's SIGKILL;
an exit) is started afresh on the same device for the jobs after it: a run of thousands does not
end with one judge. The job it was vetting is vetted again on another device, once, if the pool
has another; else it is an `error` record saying how the judge died. A device is taken out of the
pool when its fresh judge does not start, when its judges die in vets of `max_deaths` problems in
a row with no vet finished between (deaths in one problem's vets count once: a problem too big
for the host kills every candidate's judge, a broken device every problem's), when its device no
longer computes (the judge's probe after a harness failure), or when vets of `max_harness` problems
in a row fail in the harness (workers that keep dying; one problem's failures count once, as its
deaths do). The jobs it held then (the one in flight,
the held run of harness failures) are vetted again on another device, once, the reason in each
record's `retried`; a job whose second device is taken out too, or that no device is left to
take, gets an `error` record that says why. Nothing is lost and nothing written twice: a record
reaches the file only through the runner, and only once per job.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from typing import Iterable, Iterator

from ..errors import UsageError
from .engine import VetOptions
from .jobs import Job, ProblemGroup
from .results import Record

MAX_HARNESS_IN_A_ROW = 3
MAX_DEATHS_IN_A_ROW = 3   # problems whose vets killed a device's judge, with no vet finished between
_STOP_GRACE_S = 20.0   # a stopped device judge's time to end its vet's worker before it is killed


@dataclasses.dataclass(frozen=True)
class Slot:
    """One device of the pool: its name in records, the device its judge is given, the
    environment that makes it the only one that judge sees, and the command that starts it."""

    name: str
    device: str
    env: tuple[tuple[str, str], ...] = ()
    argv: tuple[str, ...] = (sys.executable, "-m", "kernelvet.batch.devjudge")


def gpu_slots(spec: str, count=None) -> list[Slot]:
    """`--gpus all` or `--gpus 0,2,...`: one slot per GPU, each judge seeing only its own. The
    indices are those this process sees (under CUDA_VISIBLE_DEVICES, its entries in order)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    seen = [v.strip() for v in visible.split(",") if v.strip()] if visible is not None else None
    if count is None:
        count = _cuda_count
    total = len(seen) if seen is not None else count()
    if spec.strip() == "all":
        indices = list(range(total))
    else:
        try:
            indices = [int(x) for x in spec.split(",") if x.strip()]
        except ValueError:
            raise UsageError(f"--gpus {spec}: expected 'all' or comma-separated GPU indices (0,1,...)") from None
        if len(set(indices)) != len(indices):
            raise UsageError(f"--gpus {spec}: a GPU is named twice")
    if not indices:
        raise UsageError(f"--gpus {spec}: no GPU visible here" if spec.strip() == "all" else f"--gpus {spec}: no GPU named")
    bad = [i for i in indices if not 0 <= i < total]
    if bad:
        raise UsageError(f"--gpus {spec}: GPU {bad[0]} does not exist here ({total} visible)")
    return [Slot(f"cuda:{i}", "cuda", (("CUDA_VISIBLE_DEVICES", seen[i] if seen is not None else str(i)),))
            for i in indices]


def device_slots(spec: str, count=None) -> list[Slot]:
    """`--devices cpu,cpu,cuda:1,...`: a pool of named devices, each a judge of its own (several
    `cpu` ones share the host: a pool on one machine without a GPU, as its tests run it)."""
    names = [x.strip() for x in spec.split(",") if x.strip()]
    if not names:
        raise UsageError(f"--devices {spec}: no device named")
    slots = []
    for n, name in enumerate(names):
        if name == "cpu":
            slots.append(Slot(f"cpu:{n}", "cpu", (("CUDA_VISIBLE_DEVICES", ""),)))
        elif name.startswith("cuda:") and name[5:].isdigit():
            slots.append(dataclasses.replace(gpu_slots(name[5:], count)[0], name=f"{name}#{n}"))
        else:
            raise UsageError(f"--devices {spec}: {name!r} is not cpu or cuda:N")
    return slots


def _cuda_count() -> int:
    import torch
    return torch.cuda.device_count()


@dataclasses.dataclass
class _Task:
    job: Job
    retried: str | None = None     # why this is its second vet
    not_on: str | None = None      # the slot it must not go back to


class _Queue:
    """The shared jobs, by problem. A slot takes the next job of the problem it has open; else of
    a problem no slot is on; else of the problem with the most jobs left. A slot waits while it
    has nothing to take but another slot, still vetting, may hand a job back; an open-ended queue
    (a service's: jobs keep coming) keeps its slots waiting until it is stopped."""

    def __init__(self, groups: Iterable[ProblemGroup], *, open_ended: bool = False):
        self.open_ended = open_ended
        self._pending: dict[str, collections.deque[_Task]] = collections.OrderedDict(
            (g.problem, collections.deque(_Task(j) for j in g.jobs)) for g in groups)
        self._on: dict[str, str | None] = {}      # slot -> the problem it has open
        self._busy: set[str] = set()
        self._cv = threading.Condition()
        self.stopped = False

    def take(self, slot: str) -> _Task | None:
        with self._cv:
            while True:
                if self.stopped:
                    return None
                task = self._pick(slot)
                if task is not None:
                    self._busy.add(slot)
                    return task
                if not self.open_ended and not (self._busy - {slot}):
                    return None
                self._cv.wait(0.5)

    def put(self, task: _Task) -> None:
        with self._cv:
            self._pending.setdefault(task.job.problem, collections.deque()).append(task)
            self._cv.notify_all()

    def cancel(self, job_id: str) -> bool:
        """A job not yet taken, removed; False if a slot has it (or it is done)."""
        with self._cv:
            for problem, tasks in list(self._pending.items()):
                for t in tasks:
                    if t.job.id == job_id:
                        tasks.remove(t)
                        if not tasks:
                            del self._pending[problem]
                        return True
            return False

    def _pick(self, slot: str) -> _Task | None:
        def first_for(problem):
            tasks = self._pending.get(problem) or ()
            for t in tasks:
                if t.not_on != slot:
                    tasks.remove(t)
                    if not tasks:
                        del self._pending[problem]
                    return t
            return None

        current = self._on.get(slot)
        if current in self._pending:
            task = first_for(current)
            if task is not None:
                return task
        open_elsewhere = {p for s, p in self._on.items() if s != slot}
        order = sorted(self._pending, key=lambda p: (p in open_elsewhere, -len(self._pending[p])
                                                      if p in open_elsewhere else 0))
        for problem in order:
            task = first_for(problem)
            if task is not None:
                self._on[slot] = problem
                return task
        return None

    def done(self, slot: str) -> None:
        with self._cv:
            self._busy.discard(slot)
            self._cv.notify_all()

    def give_back(self, slot: str, tasks: list[_Task]) -> None:
        with self._cv:
            for t in tasks:
                self._pending.setdefault(t.job.problem, collections.deque()).appendleft(t)
            self._on.pop(slot, None)
            self._busy.discard(slot)
            self._cv.notify_all()

    def leftover(self) -> list[_Task]:
        with self._cv:
            tasks = [t for ts in self._pending.values() for t in ts]
            self._pending.clear()
            return tasks

    def stop(self) -> None:
        with self._cv:
            self.stopped = True
            self._cv.notify_all()


class JudgeGone(Exception):
    """The slot is out of the pool, for this reason."""


class JudgeDied(JudgeGone):
    """The judge's process ended (a signal, an exit): a fresh one may take the jobs after it."""


_SIGNAL_HINTS = {int(signal.SIGKILL): " (SIGKILL: on Linux most often the out-of-memory killer, the host's memory spent)"}


class _DeviceJudgeProcess:
    """A slot's judge process and its JSON-lines pipe; its stderr's last lines kept for the reason
    it died. What the pool asks of a device's judge, whatever runs it: `ready()` (its device's
    name), `vet(job)` (the record, as JSON), `stop(interrupt)`; a judge that is gone raises JudgeGone."""

    def __init__(self, slot: Slot, options: VetOptions):
        self.slot = slot
        env = {**os.environ, **dict(slot.env)}
        here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)   # this code, not another
        self.proc = subprocess.Popen(list(slot.argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env, text=True, bufsize=1,
                                     start_new_session=True)   # the pool stops it: a Ctrl-C is the pool's
        self.tail: collections.deque[str] = collections.deque(maxlen=20)
        threading.Thread(target=self._drain, daemon=True).start()
        self.send({"options": dataclasses.asdict(dataclasses.replace(options, device=slot.device))})

    def ready(self) -> str:
        reply = self.receive()
        if "ready" not in reply:
            raise JudgeGone(f"the device judge on {self.slot.name} did not start: {reply.get('fatal', reply)}")
        return str(reply["ready"])

    def vet(self, job: Job) -> dict:
        try:
            self.send({"job": job.to_json()})
        except JudgeDied:
            pass   # what it said before it ended is still in the pipe (a poisoned device says so)
        reply = self.receive()
        if "record" not in reply:
            raise JudgeGone(f"the device judge on {self.slot.name}: {reply.get('poisoned') or reply.get('fatal') or reply}")
        return reply["record"]

    def _drain(self) -> None:
        for line in self.proc.stderr:
            self.tail.append(line.rstrip("\n"))

    def send(self, msg: dict) -> None:
        try:
            self.proc.stdin.write(json.dumps(msg) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            raise JudgeDied(self.died()) from None

    def receive(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise JudgeDied(self.died())
        try:
            return json.loads(line)
        except ValueError:
            raise JudgeGone(f"the device judge on {self.slot.name} wrote a line that is not JSON: {line[:120]!r}") from None

    def died(self) -> str:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        time.sleep(0.05)   # the last of its stderr
        last = next((line for line in reversed(self.tail) if line.strip()), "")
        how = (f"was killed by signal {-code}{_SIGNAL_HINTS.get(-code, '')}" if code is not None and code < 0 else
               f"exited with code {code}" if code is not None else "stopped answering")
        return f"the device judge on {self.slot.name} {how}" + (f": {last.strip()[:300]}" if last else "")

    def stop(self, interrupt: bool = False) -> None:
        """End of input, then SIGINT (its vet in flight stops and ends its worker; at once when the
        run is interrupted), then SIGKILL."""
        if self.proc.poll() is None:
            steps = [self._close_stdin, lambda: self.proc.send_signal(signal.SIGINT)]
            for step in (steps[::-1] if interrupt else steps):
                try:
                    step()
                    self.proc.wait(timeout=_STOP_GRACE_S / 2)
                    break
                except (subprocess.TimeoutExpired, OSError, ValueError):
                    continue
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except (OSError, ValueError):
                pass

    def _close_stdin(self) -> None:
        self.proc.stdin.close()


class PoolEngine:
    """Several devices of one host, a judge each, one queue (see the module's doc)."""

    def __init__(self, options: VetOptions, slots: list, *, max_harness: int = MAX_HARNESS_IN_A_ROW,
                 max_deaths: int = MAX_DEATHS_IN_A_ROW, judge=_DeviceJudgeProcess):
        if not slots:
            raise UsageError("a device pool needs at least one device")
        names = [s.name for s in slots]
        if len(set(names)) != len(names):
            raise UsageError(f"a device is named twice in the pool: {names}")
        self.options, self.slots, self.max_harness, self.max_deaths = options, list(slots), max_harness, max_deaths
        self.judge = judge   # (slot, options) -> a device's judge (see _DeviceJudgeProcess)
        self.out_of_pool: dict[str, str] = {}    # slot -> why it was taken out

    def run(self, groups: Iterable[ProblemGroup]) -> Iterator[Record]:
        jobs = _Queue(groups)
        landed: queue.Queue = queue.Queue()
        procs: dict[str, _DeviceJudgeProcess] = {}
        threads = self.start(jobs, landed, procs)
        finished = False
        try:
            while True:
                try:
                    record = landed.get(timeout=0.2)
                except queue.Empty:
                    if not any(t.is_alive() for t in threads) and landed.empty():
                        break
                    continue
                yield record
            for task in jobs.leftover():   # every device that could take these is out
                yield self._unplaced(task)
            finished = True
        finally:
            jobs.stop()
            for p in list(procs.values()):
                p.stop(interrupt=not finished)
            for t in threads:
                t.join(timeout=_STOP_GRACE_S)

    def start(self, jobs: _Queue, landed, procs: dict) -> list[threading.Thread]:
        """A thread per slot, each starting its device judge and feeding it from `jobs`; every
        record goes to `landed.put`."""
        threads = [threading.Thread(target=self._drive, args=(s, jobs, landed, procs), daemon=True,
                                    name=f"kernelvet-pool-{s.name}") for s in self.slots]
        for t in threads:
            t.start()
        return threads

    def _unplaced(self, task: _Task) -> Record:
        why = "; ".join(f"{s}: {r}" for s, r in self.out_of_pool.items()) or "no device in the pool"
        return Record(id=task.job.id, problem=task.job.problem, candidate=task.job.candidate, verdict="error",
                      fault="harness", error=f"not vetted: no device of the pool is left to take it ({why})",
                      allow=tuple(dict.fromkeys((*self.options.allow, *task.job.allow))),
                      retried=task.retried, finished_at=time.time())

    def _take_out(self, slot: Slot, reason: str, back: list[_Task], jobs: _Queue, landed: queue.Queue) -> None:
        """`slot` out of the pool; the jobs it held vetted again elsewhere, once."""
        self.out_of_pool[slot.name] = reason
        again = []
        for t in back:
            if t.retried is None:
                again.append(_Task(t.job, retried=f"{slot.name} taken out of the pool: {reason}", not_on=slot.name))
            else:
                landed.put(dataclasses.replace(self._unplaced(t), slot=slot.name, error=(
                    f"vetted on two devices, both taken out of the pool: first {t.retried}; then {reason}")))
        jobs.give_back(slot.name, again)

    def _drive(self, slot: Slot, jobs: _Queue, landed: queue.Queue, procs: dict) -> None:
        held: list[tuple[_Task, Record]] = []    # a run of harness failures, held until it breaks
        died_in: list[str] = []                  # problems whose vets killed this slot's judge, in a row
        task = None
        try:
            proc = procs[slot.name] = self.judge(slot, self.options)
            proc.ready()
            while True:
                task = jobs.take(slot.name)
                if task is None:
                    break
                try:
                    reply = proc.vet(task.job)
                except JudgeDied as exc:
                    if jobs.stopped:   # the run was stopped: the vet in flight is no verdict
                        task = None
                        break
                    for _, r in held:   # the device is not out: they stand
                        landed.put(r)
                    held.clear()
                    task, dead = None, task   # recorded or put back here: never again by a take-out
                    self._after_death(slot, dead, str(exc), jobs, landed)
                    if dead.job.problem not in died_in:   # one problem's deaths count once
                        died_in.append(dead.job.problem)
                    if len(died_in) >= self.max_deaths:
                        raise JudgeGone(f"its judges died in vets of {len(died_in)} problems in a row (last: {exc})")
                    procs[slot.name].stop()
                    proc = procs[slot.name] = self.judge(slot, self.options)
                    proc.ready()   # a fresh judge that does not start: out, as at the start
                    jobs.done(slot.name)
                    continue
                died_in.clear()
                record = dataclasses.replace(Record.from_json(reply), slot=slot.name, retried=task.retried)
                if record.fault == "harness" and task.retried is None:
                    held.append((task, record))
                    # one problem's failures count once: a problem its own reference fails (ill-conditioned,
                    # too big) fails every candidate's vet; a device that fails them all, every problem's
                    problems = len({t.job.problem for t, _ in held})
                    if problems >= self.max_harness:
                        task = None
                        raise JudgeGone(f"vets of {problems} problems in a row on {slot.name} failed in the harness "
                                        f"(last: {record.error or record.failed})")
                elif record.fault == "harness":   # a second vet's failure is final; the run goes on
                    landed.put(record)
                else:
                    for _, r in held:
                        landed.put(r)
                    held.clear()
                    landed.put(record)
                task = None
                jobs.done(slot.name)   # held jobs go back only from a vet's outcome: busy means in a vet
            for _, r in held:
                landed.put(r)
            held.clear()
        except JudgeGone as exc:
            if not jobs.stopped:
                self._take_out(slot, str(exc), [t for t, _ in held] + ([task] if task else []), jobs, landed)
        except Exception as exc:  # noqa: BLE001 - one device's failure must not end the others' run
            if not jobs.stopped:
                self._take_out(slot, f"internal error on {slot.name}: {type(exc).__name__}: {exc}",
                               [t for t, _ in held] + ([task] if task else []), jobs, landed)
        finally:
            jobs.done(slot.name)
            p = procs.get(slot.name)
            if p is not None:
                p.stop()

    def _after_death(self, slot: Slot, task: _Task, why: str, jobs: _Queue, landed) -> None:
        """The job `slot`'s judge died vetting: vetted again on another device of the pool, once,
        else an error record that says how the judge died."""
        others = [s.name for s in self.slots if s.name != slot.name and s.name not in self.out_of_pool]
        if task.retried is None and others:
            jobs.put(_Task(task.job, retried=f"its judge on {slot.name} died in the vet: {why}", not_on=slot.name))
        else:
            landed.put(dataclasses.replace(self._unplaced(task), slot=slot.name, error=(
                f"not vetted: {why}" + (f" (its second vet; first {task.retried})" if task.retried else ""))))
