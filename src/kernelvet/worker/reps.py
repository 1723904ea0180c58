"""The timing engine: timed reps, their clocks, and the outputs of timed calls verified."""

from __future__ import annotations

from typing import Callable, Protocol

import torch

from . import host_copies
from ..metrics import INT_OF_WIDTH
from .bindings import _Bound, _bits_differ


class RepsWorker(Protocol):
    """What the timing engine uses of the worker it runs in (serve.Worker): the primitives bound
    before the candidate existed, the device and its flush buffer, the input sets, the candidate
    and the poison; and five of the worker's steps."""

    bound: _Bound
    device: torch.device
    flush_buf: torch.Tensor | None
    sets: dict[int, list]
    output_arg: int | None
    fn: Callable | None
    poison: dict[str, int]
    pool_wake: torch.Tensor   # CPU: what wake_pool adds to (big enough to be split across the pool)
    reused_storage: bool   # a call returned an earlier output's storage: copy each rep's output

    def _paint_for_call(self, s: int, deep: bool = False) -> None: ...   # poison before a call on set s
    def _guard_bands(self, s: int) -> torch.Tensor | None: ...           # set s's guard elements
    def _spin(self, seconds: float) -> None: ...                         # hold the caller's stream
    def _sync(self) -> None: ...                                         # wait for the device
    def _run_candidate(self, what: str, fn, *args): ...                  # a call; raising is data


def _read(bound: _Bound, x: torch.Tensor) -> None:
    """Every element of `x` read with nothing the size of it allocated: its bits summed in their
    own width (summed into int64, a 16 GiB input was copied at twice its size)."""
    width = INT_OF_WIDTH.get(x.element_size())
    if width is None:   # wider than any integer (complex128): copied
        bound.clone(x)
    else:
        bound.sum(bound.view(x, width), dtype=width)


class _Reps:
    """Timed reps: paint, spin, flush, one call between events, and the call's output checked
    bitwise against the first output of the same input set (the outputs of timed calls are
    verified, not only those of a separate pass).

    CUDA, the reported clock: reps are queued as `triton.testing.do_bench` queues them, with no
    host sync between them. Under do_bench a call whose host queues it within the device's time
    for the flush and the call runs with work queued behind it, its launches hidden; a call whose
    host is slower (many small launches, threads, work on the host) is timed at the host's pace,
    less the flush's head start.
    So (`rehearse`): a device-bound call gets a lead, a spin before each rep longer than the host
    takes to queue a whole rep (the harness's own work per rep, ~200 us on the H200, would
    otherwise idle the device where do_bench's queue deepens); a host-bound call gets none, and its
    host time shows in the events as it would under do_bench: a lead there would hide up to its
    length of the call's host work per rep.
    Every `sync_every` reps (at most SYNC_EVERY, fewer for long calls) or once the queued outputs
    keep OUTPUTS_HELD_BYTES of storage alive, a device-wide sync; then the events are read and
    the outputs checked, as the caller would see them after a sync. The guard bands are checked on
    the device in stream order, before the next rep's paint. The second clock needs a sync per rep: `drain_rep`.
    """

    SYNC_EVERY = 32
    OUTPUTS_HELD_BYTES = 1 << 30
    LEAD_MAX_S = 2e-3
    REHEARSALS = 6

    def __init__(self, worker: RepsWorker, sync_every: int = SYNC_EVERY, lead_s: float = 0.0,
                 null_like: dict | None = None, saved_on_host: bool = False):
        self.w = worker
        # null reps (the judge's price of a rep's own cost): no candidate call, and in its place an
        # output of the set's shape (`null_like`), so that the rep's work on outputs (the copy of a
        # reused storage, the bitwise check against the first) is priced as the real reps pay it
        self.null_like = null_like
        self.cuda = worker.device.type == "cuda"
        self.sync_every = sync_every
        self.lead_s = lead_s if self.cuda else 0.0
        self.host_bound = False   # `rehearse`: the host queues the call slower than the device runs it
        # CPU: before each rep, one parallel op of the harness's own, so that the intra-op thread
        # pool is awake when the call starts. The unseen rep of a pair is the first of its request,
        # after the worker slept in recv: on a busy host its sleeping pool took 8-16 ms (whole
        # scheduler slices) to wake, the seen rep right after it none, and honest kernels read as
        # remembering answers. Woken alike, both sides of the pair meet the same pool.
        self.wake_pool = False
        # A pair request's carried set, once copied into the seen set's storages, is dropped before
        # the call: a candidate that computes ahead every set the worker holds (read from its
        # frames) would otherwise find the carried copy of a control's seen values at new pointers
        # and pay for it as for new values, so that the control priced its misses away (on the
        # H200 a read-ahead around a Triton GEMM passed so). Never called on, its storage may be
        # reused by a later set.
        self.drop_carried = False
        self.first: dict[int, torch.Tensor] = {}
        # sets whose first output is kept (None: every set's); a set timed once in the request and
        # not sent back (a pair's seen set) has nothing to keep it for: no copy of its output
        self.kept: set[int] | None = None
        self.times, self.order = [], []
        self.synced, self.drains = [], []    # drain_rep: events and drain of synchronised reps
        self.null_drains: list[float] = []   # null_rep: the drains of their twins without the call
        self.pairs: list[list[float]] = []   # [seen rep just before, unseen rep]
        self._saved: dict[int, dict] = {}    # seen set -> its own input values, while unseen ones visit
        self.saved_on_host = saved_on_host   # ... kept in host memory (host_copies.py)
        # A candidate that reuses its output storage overwrites the outputs still queued for
        # checking: from the first reuse seen (in the checked calls or here), each rep's output is
        # copied in stream order right after its call, off the clock, and the overwritten one is
        # left unchecked (`_UNCHECKED`).
        self.copy_outputs = worker.reused_storage
        self.reused_reps = 0
        self._pending_ptrs: dict[int, int] = {}   # storage of an uncopied pending output -> its index
        self.in_place = 0                    # unseen reps run in a seen set's storages
        self.non_tensor = self.shape_mismatches = 0
        self._pending: list[tuple] = []      # ((start, end) or None, seen, set, output) not yet read
        self._held_bytes = 0
        self._spare_events: list = []
        # [reps whose output differed from the first, reps that wrote a guard band]: on the device
        # for CUDA (no host sync per rep), read once at the end
        self._counts = worker.bound.zeros(2, dtype=torch.int64, device=worker.device)
        if self.cuda:
            self._one = (worker.bound.Event(enable_timing=True), worker.bound.Event(enable_timing=True))
            self._nothing = worker.bound.zeros((), dtype=torch.int64, device=worker.device)   # null_rep's addend

    def _before_call(self, s: int, lead: bool = False) -> list:
        """What every rep does before its clock starts: the lead spin (CUDA, if asked: first, so
        that it covers the host's work of this rep), inputs read (pages mapped and TLB warm, seen
        and unseen sets alike), the allocator's blocks and the output buffer painted, L2 flushed.
        The flush comes last, right before the start event, as in do_bench: what the kernel meets
        in L2 is a flush's aftermath, not a spin's idle."""
        w, bound = self.w, self.w.bound
        if self.cuda and lead and self.lead_s:
            w._spin(self.lead_s)
        inputs = w.sets[s]
        for x in inputs:
            if isinstance(x, torch.Tensor):
                # a copy, unless the plan keeps the worker's copies off the device (copies_on_host):
                # there one per rep is a set's worth of the device it does not count, and the small
                # outputs that split its freed block left a 16 GiB pooling input no room
                if self.saved_on_host:
                    _read(bound, x)
                else:
                    bound.clone(x)
        w._paint_for_call(s)
        if self.cuda:
            bound.zero_(w.flush_buf)
        elif self.wake_pool:
            bound.add_(w.pool_wake, 1.0)   # see wake_pool
        return inputs

    @classmethod
    def lead_for(cls, host_s: list[float]) -> float:
        """A spin longer than the host takes (90th percentile, with a margin) to queue what must be
        queued by the time it ends, at most LEAD_MAX_S."""
        if not host_s:
            return 0.0
        return min(1.25 * _p90(host_s) + 10e-6, cls.LEAD_MAX_S)

    def rehearse(self, sets: list[int]) -> None:
        """A few whole reps, untimed, each from an idle device and with the warm-up's lead (which
        covers the call's launches), decide the lead of the timed reps: how long the host takes to
        queue the call, and to queue a whole rep (spin, inputs read, paint, flush, events, the
        call, guard check), against the device time of the flush and the call. A device-bound
        call (its host usually queues it within that time: a Triton launch of ~55 us of host time
        against a 13 us kernel and a 64 us flush on the H200) gets a lead covering a whole rep:
        the device always has more queued work than the host needs to queue the next rep, and the
        queue deepens, as under do_bench (on the H200 kernelvet's host needed ~200 us per rep, and
        a device that waited for it before each rep read a launch-bound torch.mm 5-10% off
        do_bench). A host-bound call gets none: as under do_bench, only the flush runs while its
        launches are queued, and the events read the host's pace."""
        if not self.cuda:
            return
        w, bound = self.w, self.w.bound
        start, end = self._one
        whole, call, device = [], [], []
        for k in range(self.REHEARSALS):
            s = sets[k % len(sets)]
            w._sync()
            t0 = bound.pc()
            out = self._call_between(s, start, end, host_s=call)
            self._check_guards(s)
            if type(out) is torch.Tensor and out.numel():   # as `_own_copy` reads it in every rep
                bound.storage(out).data_ptr()
            whole.append(bound.pc() - t0)
            w._sync()
            device.append(bound.ev_elapsed(start, end) / 1e3)
        self.host_bound = _median(call) > _median(device) + self._flush_s()
        self.lead_s = 0.0 if self.host_bound else self.lead_for(whole)

    def _flush_s(self) -> float:
        """Device time of one L2 flush: the head start do_bench's flush gives a call's launches."""
        w, bound = self.w, self.w.bound
        start, end = self._one
        bound.ev_record(start)
        for _ in range(4):
            bound.zero_(w.flush_buf)
        bound.ev_record(end)
        w._sync()
        return bound.ev_elapsed(start, end) / 4e3

    def _call_between(self, s: int, start, end, lead: bool = True, host_s: list | None = None):
        """One call on set `s` between two events on the caller's stream (CUDA), the device kept
        busy (a spin of `lead_s`, then the flush) until the call's launch is queued. A drain rep
        has no spin: work on an unordered stream would finish inside it, unseen by the drain.
        `host_s`: where to add the host's time queueing the call (`rehearse`)."""
        bound = self.w.bound
        inputs = self._before_call(s, lead=lead)
        bound.ev_record(start)
        t0 = bound.pc() if host_s is not None else 0.0
        out = self._call(s, inputs)
        if host_s is not None:
            host_s.append(bound.pc() - t0)
        bound.ev_record(end)
        return out

    def _call(self, s: int, inputs):
        if self.null_like is None:
            return self.w._run_candidate("timed call", self.w.fn, *inputs)
        like = self.null_like.get(s)
        return None if like is None else self.w.bound.empty(like.shape, dtype=like.dtype, device=like.device)

    def rep(self, s: int, seen: bool, at: int | None = None) -> None:
        """One timed rep on set `s`'s values; `at`: in the storages of that (seen) set instead."""
        w, bound = self.w, self.w.bound
        where = s if at is None else self._place(s, at)
        if self.cuda:
            clock = self._spare_events.pop() if self._spare_events else (
                bound.Event(enable_timing=True), bound.Event(enable_timing=True))
            out = self._call_between(where, *clock)
        else:
            inputs = self._before_call(where)
            t0 = bound.pc_ns()
            out = self._call(where, inputs)
            self._record((bound.pc_ns() - t0) / 1e6, seen, s)   # the host clock is read now
            clock = None
        self._check_guards(where)
        if where != s:
            # Unordered work (a stream the caller never waited on) still reads this set's storages:
            # it finishes on the values it was given before they are put back, so what it computed
            # is judged on them, and the drain clock (streams) is what tells it apart.
            if self.cuda:
                w._sync()
            out = self._restore(where, out)
        out = self._own_copy(out)
        self._pending.append((clock, seen, s, out))
        if type(out) is torch.Tensor:   # what it keeps alive: a view's whole storage (Worker._keep)
            self._held_bytes += self.w.bound.storage(out).nbytes()
        if len(self._pending) >= self.sync_every or self._held_bytes >= self.OUTPUTS_HELD_BYTES:
            self.collect()

    def _own_copy(self, out):
        """The output itself, or (once the candidate has reused an output storage) a copy of it."""
        if type(out) is not torch.Tensor or not out.numel():
            return out
        if self.copy_outputs:
            return self.w.bound.clone(out)
        ptr = self.w.bound.storage(out).data_ptr()
        k = self._pending_ptrs.get(ptr)
        if k is None:
            self._pending_ptrs[ptr] = len(self._pending)
            return out
        clock, seen, s, _ = self._pending[k]
        self._pending[k] = (clock, seen, s, _UNCHECKED)
        self.copy_outputs = True
        self.reused_reps += 1
        return self.w.bound.clone(out)

    def _place(self, u: int, at: int) -> int:
        """Unseen set `u`'s values copied into seen set `at`'s storages (its output buffer left as
        it is), its own values kept to be put back: the unseen rep runs on new values at pointers
        the candidate has seen, so a plan or graph keyed on pointers is replayed, as it would be on
        seen values, while an answer remembered by value is not there. Where the sets differ in
        shape, dtype or non-tensor values, `u` runs in its own storages."""
        w, bound = self.w, self.w.bound
        src, dst = w.sets[u], w.sets[at]
        args = [i for i, x in enumerate(dst) if i != w.output_arg]
        if len(src) != len(dst) or any(
                (type(src[i]) is not type(dst[i])) or (src[i].shape != dst[i].shape or src[i].dtype != dst[i].dtype
                                                       if isinstance(dst[i], torch.Tensor) else src[i] != dst[i])
                for i in args):
            return u
        if at not in self._saved:
            self._saved[at] = {i: host_copies.copy_of(bound, dst[i], self.saved_on_host)
                               for i in args if isinstance(dst[i], torch.Tensor)}
        for i in self._saved[at]:
            bound.copy_(dst[i], src[i])
        self.in_place += 1
        if self.drop_carried:   # the values live on in `at` alone (see drop_carried)
            w.sets.pop(u, None)
            w.out_buffers.pop(u, None)
        return at

    def _restore(self, at: int, out):
        """Set `at`'s own values back, in stream order after the call; an output that shares an
        input's storage is copied first, so that what is verified is what the call returned."""
        w, bound = self.w, self.w.bound
        if type(out) is torch.Tensor and out.numel():
            mine = {bound.storage(w.sets[at][i]).data_ptr() for i in self._saved[at]}
            if bound.storage(out).data_ptr() in mine:
                out = bound.clone(out)
        for i, x in self._saved[at].items():
            host_copies.put_back(bound, w.sets[at][i], x)
        return out

    def collect(self) -> None:
        """Wait for everything the queued reps started, on every stream; read their clocks and check
        their outputs, in the order they ran."""
        if not self._pending:
            return
        bound = self.w.bound
        if self.cuda:
            bound.ev_sync(self._pending[-1][0][1])
            bound.cuda_sync()
        for clock, seen, s, out in self._pending:
            if clock is not None:
                self._record(bound.ev_elapsed(*clock), seen, s)
                self._spare_events.append(clock)
            if out is not _UNCHECKED:
                self._verify(s, out)
        self._pending.clear()
        self._pending_ptrs.clear()
        self._held_bytes = 0

    def _record(self, ms: float, seen: bool, s: int) -> None:
        if seen:
            self.times.append(ms)
            self.order.append(s)
        else:
            self.pairs.append([self.times[-1] if self.times else ms, ms])

    def _verify(self, s: int, out) -> None:
        """Against the first output on the same set, bitwise (counted on the device: no host sync)."""
        bound = self.w.bound
        if type(out) is not torch.Tensor:
            self.non_tensor += 1
        elif s not in self.first:
            if self.kept is None or s in self.kept:
                self.first[s] = bound.clone(out)
        elif out.shape != self.first[s].shape or out.dtype != self.first[s].dtype:
            self.shape_mismatches += 1
        else:
            bound.add_(self._counts[0], _bits_differ(bound, self.first[s], out))

    def _check_guards(self, s: int) -> None:
        """Guard bands still poison, checked in stream order before the next rep's paint refills them."""
        guards = self.w._guard_bands(s)
        if guards is not None:
            bound = self.w.bound
            bound.add_(self._counts[1], bound.any(bound.ne(guards, self.w.poison["word"])))

    def verdicts(self) -> dict:
        counts = [int(c) for c in self._counts.tolist()]
        return {"mismatches": self.shape_mismatches + counts[0], "overruns": counts[1],
                "reused_output_reps": self.reused_reps, "outputs_copied": self.copy_outputs}

    def drain_rep(self, s: int) -> None:
        """Two clocks on one rep, synchronised: the events, then the host time of a device-wide
        sync after the end event completed (work another stream still runs shows there)."""
        bound = self.w.bound
        start, end = self._one
        out = self._call_between(s, start, end, lead=False)
        self.drains.append(self._drain_after(end))
        self.synced.append(bound.ev_elapsed(start, end))
        self._check_guards(s)
        self._verify(s, out)

    def drain_pairs(self, sets: list[int], n: int) -> None:
        """`n` drain reps, each followed at once by its twin without the call (`null_rep`)."""
        for k in range(n):
            self.drain_rep(sets[k % len(sets)])
            self.null_rep(sets[k % len(sets)])

    def null_rep(self, s: int) -> None:
        """A drain rep's twin without the call, run right after it: the same inputs read, paint and
        flush, and between the two events one ordered kernel of the judge's own (a one-element add)
        in place of the call. Its drain is the baseline: a device-wide sync costs some microseconds
        with nothing left to run, and the twins meet the same conditions (with the baselines taken
        after all the drain reps, an honest 3 us `x * 1` read 8.2 us above them in three
        measurements on an H200)."""
        bound = self.w.bound
        start, end = self._one
        self._before_call(s, lead=False)
        bound.ev_record(start)
        bound.add_(self._counts[0], self._nothing)
        bound.ev_record(end)
        self.null_drains.append(self._drain_after(end))

    def _drain_after(self, end) -> float:
        """Host ms of a device-wide sync once `end` has completed: what other streams still run."""
        bound = self.w.bound
        bound.ev_sync(end)
        t0 = bound.pc()
        bound.cuda_sync()
        return (bound.pc() - t0) * 1e3


def _p90(xs: list[float]) -> float:
    return sorted(xs)[int(0.9 * (len(xs) - 1))]


def _median(xs: list[float]) -> float:
    return sorted(xs)[len(xs) // 2]


_UNCHECKED = object()   # a queued output the candidate overwrote by reusing its storage
