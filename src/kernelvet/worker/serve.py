"""The worker's request table and its handlers: one socket to the judge, one reply per request."""

from __future__ import annotations

import collections
import ctypes
import gc
import importlib.util
import os
import socket
import sys
import traceback

import torch

from .. import after_return, codec, devices, devshare, lending, outputs, protocol, trace, warm, weights, wire
from ..dispatch_modes import settle
from ..formats.gpumode_data import candidate_call
from ..metrics import INT_OF_WIDTH
from ..problem import dropout_off, load_reference_module
from .bindings import _Bound, _memory_stats, _same_bits, global_state
from .observe import (_AtenTrace, _children, _cpu_event, _materialize, _native_threads, _own_binaries, _type_name,
                      device_census)
from . import host_copies
from .reps import _Reps

_Like = collections.namedtuple("_Like", "shape dtype device")   # what a null rep's output is made like


# Requests the judge may send, each with its fields' kinds (wire.py).
REQUESTS = wire.REQUESTS


class Worker:
    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.bound = _Bound()
        self.state0 = global_state()
        self.fn = None
        self.device = torch.device("cpu")
        self.sets: dict[int, list] = {}
        self.pool_wake = torch.zeros(1 << 17)   # 4 grains of at::parallel_for: every intra-op thread takes part
        self.paint = True
        self.poison: dict[str, int] = {}
        self.out_nbytes = 0
        self.settle_s = 0.05
        self.flush_buf = None
        self.calls = 0
        self.output_arg: int | None = None
        self.task_call = None   # a GPU MODE problem's: how its candidate is imported and called
        self.out_buffers: dict[int, torch.Tensor] = {}   # set -> whole buffer, guard bands included
        self.probe_stream = None
        self.clock_khz = 1_500_000
        self.loop_out = None   # the last judge-clocked loop's output, until the judge fetches it
        self.harness_threads = {t.ident for t in self.bound.enumerate()}   # none of them the candidate's
        self.held: list[tuple[int, torch.Tensor]] = []   # (call index, output) of recent calls, kept alive
        self.reused_storage = False   # a call returned the storage of an earlier output still held
        # the first output of each set in the last timing request: what a null rep returns in its place
        self.timed_like: dict[int, "_Like"] = {}

    # -- plumbing -----------------------------------------------------------------------
    def serve(self) -> None:
        protocol.send(self.sock, "hello", {"pid": os.getpid(), "ppid": os.getppid(),
                                            "torch": torch.__version__, "python": sys.version.split()[0]})
        while True:
            msg = protocol.recv(self.sock, deadline=None, max_blob_bytes=1 << 40, allowed=REQUESTS)
            if msg.type == "bye":
                return
            self._serve_one(msg)
            # Idle, the worker holds nothing of the request: a set it carried (its tensors, copied
            # out of lent buffers) would otherwise be held twice while the judge makes its next
            # float64 reference beside it on the device.
            del msg

    def _serve_one(self, msg) -> None:
        """One request answered; its tensors and the reply's go with this frame."""
        loan = None
        try:
            if msg.body.get("lent"):
                loan = lending.WorkerLoan(msg.body["lent"], self.device)
                msg = loan.decode(msg)
            reply_type, body, blobs = self._answer(msg)
            blobs = loan.encode(blobs) if loan is not None else lending.through_host(blobs)
        except devshare.DeviceShareError as exc:
            reply_type, body, blobs = "failed", {"phase": "lend", "error": str(exc)[:2000], "traceback": ""}, []
        except (torch.OutOfMemoryError, MemoryError) as exc:
            # the harness's own copies and paint, beside what the candidate or reference holds: the
            # request failed for lack of memory, which the judge can say (a problem too large)
            reply_type, body, blobs = "failed", _out_of_memory(msg.type, exc), []
        body["integrity"] = self.integrity()
        try:
            protocol.send(self.sock, reply_type, body, blobs)
        finally:
            if loan is not None:
                loan.close()

    def _answer(self, msg):
        try:
            return getattr(self, "_do_" + msg.type)(msg)
        except _CandidateFailed as exc:
            return "failed", {"phase": msg.type, "error": exc.args[0], "traceback": exc.args[1]}, []

    def integrity(self) -> dict:
        now = global_state()
        # Only what existed before import: a candidate may import more harness modules, harmlessly.
        changed = {k: [v, now.get(k)] for k, v in self.state0.items() if now.get(k) != v}
        moved = self.bound.moved()
        changed.update({f"binding {name}": ["original", "replaced"] for name in moved if not _Bound.is_clock(name)})
        return {"moved": [name for name in moved if _Bound.is_clock(name)],
                "changed": {k: [str(a), str(b)] for k, (a, b) in changed.items()}}

    def _sync(self):
        if self.device.type == "cuda":
            self.bound.cuda_sync()

    def _run_candidate(self, what, fn, *args):
        """Candidate code raises: that is data for the judge, with the candidate's traceback."""
        try:
            return fn(*args)
        except BaseException as exc:  # noqa: BLE001 - SystemExit and friends too
            if isinstance(exc, KeyboardInterrupt):
                raise
            raise _CandidateFailed(*_failure(what, exc)) from None

    # -- requests -----------------------------------------------------------------------
    def _do_load(self, msg):
        b = msg.body
        if torch.device(b["device"]) != self.device or (self.device.type == "cuda" and self.flush_buf is None):
            raise RuntimeError(f"a load for {b['device']} in a worker prepared for {self.device}")
        self.paint = bool(b["paint"])
        self.poison = {k: int(v) for k, v in b["poison"].items()}
        self.out_nbytes = int(b["out_nbytes"])
        self.settle_s = float(b["settle_s"])
        self.output_arg = b.get("output_arg")
        if self.device.type != "cuda" and self.paint:
            _malloc_perturb(self.poison["malloc_byte"])
        init = _decode_values(b["init"], msg.tensors)
        target = b["target"]
        if target["kind"] == "candidate" and self.fn is not None:
            self._forget_reference()
        t0 = self.bound.pc()
        if target["kind"] == "candidate":
            self.candidate_dir = os.path.dirname(os.path.abspath(target["path"]))
            if self.task_call is not None:
                self.task_call.importable()
            module = self._run_candidate("importing the candidate", _import_file, target["path"])
            entry = getattr(module, target["entry"], None)
            if entry is None:
                raise _CandidateFailed(f"candidate defines no {target['entry']} after import", "")
        else:
            entry = load_reference_module(target["spec"]).Model
            self.task_call = candidate_call(target["spec"])
        t1 = self.bound.pc()
        # The judge's fresh weights (secret inputs, see weights.py), before any call
        state = [(str(item["name"]), codec.from_blob(msg.tensors[int(item["t"])])) for item in b.get("state") or []]
        whole = None
        if isinstance(entry, type) and target["kind"] != "candidate" and b.get("whole") is not None:
            # the trusted reference, built without its init, given the judge's every tensor
            values = dict(state)
            values.update((str(item["name"]), codec.from_blob(msg.tensors[int(item["t"])])) for item in b["whole"])
            whole = weights.build_whole(lambda: entry(*init), values, self.device)
        if whole is not None:
            dropout_off(whole)
            self.fn = whole
            handed = {"hook": False, "matched": sorted(name for name, _ in state), "left": []}
        else:
            if isinstance(entry, type):
                def build():
                    torch.manual_seed(int(b["weight_seed"]))
                    model = entry(*init)
                    if isinstance(model, torch.nn.Module):
                        dropout_off(model)
                    return model.to(self.device) if isinstance(model, torch.nn.Module) else model
                self.fn = self._run_candidate("constructing the model", build)
            else:
                self.fn = entry
            handed = self._run_candidate(f"loading the reference's weights ({weights.HOOK} or by name and shape)",
                                         weights.hand_over, self.fn, state, target["kind"] != "candidate")
        if callable(self.fn) and self.task_call is not None and target["kind"] == "candidate":
            self.fn = self.task_call.wrap(self.fn)   # custom_kernel(data), the data rebuilt from the set
        if callable(self.fn):   # tuples, lists and numbers become the one tensor the judge compares
            self.fn = outputs.packing(self.fn)
        self._sync()
        return "loaded", {"import_s": t1 - t0, "build_s": self.bound.pc() - t1, "parameters": handed}, []

    def _start_device(self, flush_bytes: int) -> None:
        """CUDA context, flush buffer and probe stream: now, not inside the candidate's first call."""
        torch.cuda.set_device(self.device)
        torch.zeros(1, device=self.device)
        # SM clock in kHz, for spin kernels that count cycles (read once: not in a timed rep's path)
        self.clock_khz = getattr(torch.cuda.get_device_properties(self.device), "clock_rate", 0) or 1_500_000
        self.flush_buf = self.bound.empty(max(flush_bytes, 1), dtype=torch.uint8, device=self.device)
        self.probe_stream = torch.cuda.Stream(device=self.device)

    def _do_prepare(self, msg):
        """Every worker's first request (a spare's before any vet needs it, its CUDA start-up then
        off every vet's clock): the device started, and described. It has seen no problem and no
        candidate yet, so the judge takes the description (name, L2, ...) and the flush size as its
        own, and needs no CUDA context of its own to learn them."""
        t0 = self.bound.pc()
        if self.calls or self.fn is not None or self.flush_buf is not None:
            raise RuntimeError("prepare is a worker's first request")
        self.device = torch.device(msg.body["device"])
        try:
            info = devices.describe(self.device)
            body = {"device": info, "flush_bytes": devices.flush_bytes(info, float(msg.body["flush_factor"]))}
            if self.device.type == "cuda":
                self._start_device(body["flush_bytes"])
                body["warm_failed"] = warm.warm(self.device)
        except Exception as exc:  # noqa: BLE001 - the judge says the device could not start, and why
            raise _CandidateFailed(f"starting {self.device}: {type(exc).__name__}: {exc}"[:2000],
                                   traceback.format_exc()[-4000:]) from None
        self.state0 = global_state()   # the device's start-up is not the candidate's doing
        return "prepared", {"start_s": self.bound.pc() - t0, **body}, []

    def _forget_reference(self) -> None:
        """The reference ran here first (same process, same clocks, no second CUDA start-up):
        drop it and its inputs, and overwrite every free block it left in the allocator's cache,
        so a candidate that returns `torch.empty` cannot be handed the reference's answer."""
        self.fn = None
        self.sets.clear()
        self.out_buffers.clear()
        self.loop_out = None
        self.held.clear()
        self.reused_storage = False
        self.timed_like.clear()
        gc.collect()
        if self.device.type == "cuda":
            self._sync()
            self._paint(deep=True)
            self._sync()
            self.bound.empty_cache()
        self.calls = 0
        self.state0 = global_state()   # what the trusted reference set up is not the candidate's doing

    def _do_inputs(self, msg):
        self._place_set(int(msg.body["set"]), msg.body["layout"], msg.tensors)
        return "ok", {}, []

    def _place_set(self, s: int, layout: list, blobs) -> None:
        """An input set onto the device. A request that uses a set the candidate has never seen
        carries it itself (`layout`): it exists in this process only once that request runs."""
        values = _decode_values(layout, blobs)
        # A copy even on the CPU: a large blob arrives as a copy-on-write mapping, whose first
        # touch of each page faults, and that would make an unseen set read slower than a seen one.
        # A tensor that came in a lent buffer is this process's own device copy already (lending.py):
        # copied again, a big set would take the device twice over while it is placed.
        placed = [(v if v.device.type == "cuda" and v.device == self.device else v.to(self.device, copy=True))
                  if isinstance(v, torch.Tensor) else v for v in values]
        if self.output_arg is not None and isinstance(placed[self.output_arg], torch.Tensor):
            # The problem passes an output buffer: give it guard bands on both sides, so that a
            # write past either end shows, and keep the whole allocation to paint it.
            out = placed[self.output_arg]
            whole = self.bound.empty(out.numel() + 2 * GUARD, dtype=out.dtype, device=self.device)
            placed[self.output_arg] = whole[GUARD:GUARD + out.numel()].view(out.shape)
            self.bound.copy_(placed[self.output_arg], out)
            self.out_buffers[s] = whole
        self.sets[s] = placed
        self._sync()

    def _paint_for_call(self, s: int, deep: bool = False) -> None:
        """Before a call on set `s`: poison what the allocator will hand out, and the set's output
        buffer (guard bands included), unless painting is off."""
        if not self.paint:
            return
        self._paint(deep=deep)
        whole = self.out_buffers.get(s)
        if whole is not None:
            self.bound.fill_(self.bound.view(whole, INT_OF_WIDTH[whole.element_size()]), self.poison["word"])

    def _guard_bands(self, s: int) -> torch.Tensor | None:
        """The guard elements around set `s`'s output buffer, as integers (poison while unwritten)."""
        whole = self.out_buffers.get(s)
        if whole is None or not self.paint:
            return None
        bits = self.bound.view(whole, INT_OF_WIDTH[whole.element_size()])
        return self.bound.cat([bits[:GUARD], bits[-GUARD:]])

    def _guard_overrun(self, s: int) -> int:
        """Guard elements no longer holding poison: the call wrote outside its output buffer."""
        guards = self._guard_bands(s)
        return 0 if guards is None else int(self.bound.ne(guards, self.poison["word"]).sum().item())

    def _do_overwrite(self, msg):
        """New values into the very same storages (same data_ptr): a pointer-keyed cache goes stale."""
        old = [t for t in self.sets[int(msg.body["set"])] if isinstance(t, torch.Tensor)]
        new = [codec.from_blob(b) for b in msg.tensors]
        ptrs_before = [t.data_ptr() for t in old]
        for dst, src in zip(old, new):
            self.bound.copy_(dst, src)   # across devices as it is: no device copy of the new values beside
        self._sync()
        return "ok", {"same_pointers": ptrs_before == [t.data_ptr() for t in old]}, []

    def _do_lend(self, msg):
        """The judge's probe of lent buffers: its one tensor, back through its one room."""
        return "lent", {}, [codec.to_blob(codec.from_blob(msg.tensors[0]), device_ok=True)] if msg.tensors else []

    def _do_precision(self, msg):
        """Float32 proper: cuDNN's TF32 off (PyTorch's matmuls are off by default), for a problem
        whose TF32 yardstick drifts from float64 beyond what can judge (judge/reference.py). Asked
        before any candidate code runs here; the state the candidate is held to includes it."""
        if getattr(self, "candidate_dir", None) is not None:
            raise RuntimeError("precision is set before a candidate loads")   # never laundering its state
        if msg.body.get("tf32") is False:
            torch.backends.cudnn.allow_tf32 = False
            torch.backends.cuda.matmul.allow_tf32 = False
        self.state0 = global_state()
        return "ok", {}, []

    def _do_release(self, msg):
        # `sets`: input sets the judge will not use again (a big problem's sets sent for one request)
        for s in msg.body.get("sets") or ():
            self.sets.pop(int(s), None)
            self.out_buffers.pop(int(s), None)
            self.timed_like.pop(int(s), None)
        gc.collect()
        if msg.body.get("empty_cache") and self.device.type == "cuda":
            self.bound.empty_cache()   # GPU path: the freed sets' blocks go back to the device
        said = {"census": device_census(self.device, _memory_stats)} if msg.body.get("census") else {}
        return "ok", {"sets_held": len(self.sets), **said}, []

    def _do_call(self, msg):
        """One observed call: threads, type, stability, inputs, and the output itself."""
        s = int(msg.body["set"])
        if "layout" in msg.body:
            self._place_set(s, msg.body["layout"], msg.tensors)
        inputs = self.sets[s]
        on_host = bool(msg.body.get("copies_on_host"))
        before_inputs = [host_copies.copy_of(self.bound, t, on_host)
                         if isinstance(t, torch.Tensor) and i != self.output_arg else None
                         for i, t in enumerate(inputs)]
        self._paint_for_call(s, deep=bool(msg.body.get("deep_paint")))
        self._sync()
        py_before = {t.ident for t in self.bound.enumerate()}
        native_before, kids_before = _native_threads(), _children()
        trace = _AtenTrace() if msg.body.get("trace") else None
        if trace:
            settle(_AtenTrace)   # a compiling candidate must not trace the trace (dispatch_modes)
        t0 = self.bound.pc()
        if trace:
            with trace:
                out = self._run_candidate("calling the candidate", self.fn, *inputs)
        else:
            out = self._run_candidate("calling the candidate", self.fn, *inputs)
        # From return on, whatever the candidate's threads do is work after return (after_return)
        window = after_return.open_window(self._candidate_threads(), self._device_allocs())
        self._sync()
        wall = self.bound.pc() - t0
        py_after = {t.ident for t in self.bound.enumerate()}
        native_after, kids_after = _native_threads(), _children()
        self.calls += 1
        ev = {
            "wall_s": wall, "call_index": self.calls,
            "py_threads_new": len(py_after - py_before), "native_threads": [native_before, native_after],
            "children_new": sorted(set(kids_after) - set(kids_before)),
            "type": _type_name(out), "exact_tensor": type(out) is torch.Tensor,
        }
        if trace:
            ev["aten_ops"] = sorted(trace.ops)
        if ev["exact_tensor"]:
            ev["storage_ptr"] = self.bound.storage(out).data_ptr()
            self._hold(out, ev)
            ev["device"] = str(out.device)
            allocs = self._device_allocs()
            snap = self.bound.clone(out)
            own = self._device_allocs() - allocs if allocs is not None else 0   # the snapshot's, the harness's own
            self._sync()
            self.bound.sleep(self.settle_s)
            self._sync()
            ev["after_return"] = after_return.close_window(window, self._candidate_threads(), self._device_allocs(),
                                                           harness_allocs=own)
            ev["changed_after_return"] = not _same_bits(self.bound, snap, out)
            result = out
        else:
            result = self._run_candidate("converting the output to a tensor", _materialize, out)
            ev["device"] = str(getattr(result, "device", "?"))
        ev["inputs_changed"] = [i for i, (a, b) in enumerate(zip(before_inputs, inputs))
                                if isinstance(a, torch.Tensor) and not host_copies.same_bits(self.bound, a, b)]
        ev["guard_overrun"] = self._guard_overrun(s)
        ev["py_threads_after_settle"] = len({t.ident for t in self.bound.enumerate()} - py_before)
        blob = codec.to_blob(result, device_ok=True)
        return "output", ev, [blob]

    HELD_MAX, HELD_BYTES = 8, 1 << 30

    def _hold(self, out: torch.Tensor, ev: dict) -> None:
        """Keep recent outputs alive, so that the allocator cannot hand their storage out again:
        a call that returns one of them anyway reuses its output storage (a static buffer, as
        CUDA-graph code keeps), and what the caller holds from that call was overwritten."""
        if not out.numel():
            return
        ptr = ev["storage_ptr"]
        earlier = [k for k, t in self.held if self.bound.storage(t).data_ptr() == ptr]
        if earlier:
            ev["same_storage_as_call"] = earlier[-1]
            self.reused_storage = True
        self._keep(out)

    def _keep(self, out: torch.Tensor) -> None:
        # Counted by the storages they keep alive, not their elements: a loss's 0-dim mean may be
        # a view of its whole elementwise buffer (smooth_l1_loss, mse_loss), as large as an input.
        self.held.append((self.calls, out))
        while len(self.held) > self.HELD_MAX or sum(self.bound.storage(t).nbytes() for _, t in self.held) > self.HELD_BYTES:
            self.held.pop(0)

    def _paint_held(self) -> None:
        """Poison the recent outputs the worker keeps alive: a static output buffer the candidate
        returns again holds its last answer, which is no sign that this call's work ran early.
        An output in the storage of a set's input (in-place work) is that input: it keeps its values."""
        inputs = {self.bound.storage(x).data_ptr() for xs in self.sets.values() for x in xs
                  if isinstance(x, torch.Tensor) and x.numel()}
        for _, t in self.held:
            if t.is_floating_point() and t.numel() and t.element_size() == self.poison["width"] \
                    and self.bound.storage(t).data_ptr() not in inputs:
                self.bound.fill_(self.bound.view(t, INT_OF_WIDTH[t.element_size()]), self.poison["word"])

    def _candidate_threads(self) -> set[int]:
        """Native ids of the Python threads alive now that the harness did not start."""
        return {t.native_id for t in self.bound.enumerate() if t.ident not in self.harness_threads and t.native_id}

    def _device_allocs(self) -> int | None:
        """Allocations the caching allocator has made so far (CUDA), for work done while nobody called."""
        if self.device.type != "cuda":
            return None
        return int(_memory_stats(self.device).get("allocation.all.allocated", 0))

    def _paint(self, deep: bool) -> None:
        """Make memory the allocator will hand out hold poison, so `torch.empty` returns it.

        CPU: glibc's perturb byte already poisons every malloc (set at load). CUDA: claim the
        output-sized block (and, deep, every free cached block), fill it with poison, free it.
        """
        if self.device.type != "cuda":
            return
        sizes = [self.out_nbytes] * 2
        if deep:
            for seg in torch.cuda.memory_snapshot():
                sizes += [blk["size"] for blk in seg.get("blocks", []) if blk.get("state") == "inactive"]
        held = []
        for size in sorted(sizes, reverse=True)[:256]:
            width = self.poison["width"]
            n = max(size // width, 1)
            try:
                buf = self.bound.empty(n, dtype=INT_OF_WIDTH[width], device=self.device)
            except torch.OutOfMemoryError:
                # no block of this size to be had: none for the candidate's `torch.empty` either,
                # beyond the cached ones that the smaller sizes still paint
                continue
            self.bound.fill_(buf, self.poison["word"])
            held.append(buf)
        del held

    def _do_time(self, msg):
        """Per-rep timing, the way the reported time is taken; plus the drain clock (streams).

        Warm-up runs for a time budget (as do_bench's), so that compilation, autotuning and the
        device's clock ramp are over. Seen sets rotate; each unseen set (never passed to the
        candidate before) is timed once, spread evenly through the run and paired with the seen
        rep just before it, so that drifting conditions affect both sides of each pair alike.
        On CUDA the timed reps are queued as do_bench queues them (see `_Reps`), then a short
        synchronised run takes the second clock.
        """
        b = msg.body
        if "layout" in b:
            return self._time_unseen(b, msg.tensors)
        sets = [int(s) for s in b["sets"]]
        unseen = [int(s) for s in b.get("unseen", [])]
        reps, min_reps, budget_s = int(b["reps"]), int(b["min_reps"]), float(b["budget_ms"]) / 1e3
        bound = self.bound
        t0 = bound.pc()
        i, host_s = 0, []
        while i < int(b["warmup"]) or (bound.pc() - t0 < float(b.get("warmup_ms", 0)) / 1e3 and i < 10_000):
            t1 = bound.pc()
            self._run_candidate("warm-up call", _null_call if b.get("null") else self.fn,
                                *self.sets[sets[i % len(sets)]])
            host_s.append(bound.pc() - t1)
            i += 1
            if i % 8 == 0:
                self._sync()
        self._sync()
        per_call = max((bound.pc() - t0) / max(i, 1), 1e-6)
        expected = max(min(reps, int(budget_s / per_call)), min_reps)
        spacing = max(1, expected // (len(unseen) + 1))
        # Reps read per sync: up to the judge's reps_per_sync, and few enough that the run ends
        # near its budget (the host stops queueing on its own clock, so one batch may run past it).
        per_sync = int(b.get("reps_per_sync", _Reps.SYNC_EVERY))
        rec = _Reps(self, sync_every=max(1, min(per_sync, int(budget_s / per_call / 4))),
                    lead_s=_Reps.lead_for(host_s), null_like=self.timed_like if b.get("null") else None,
                    saved_on_host=bool(b.get("copies_on_host")))
        rec.rehearse(sets)
        t_begin = bound.pc()
        r = 0
        # Each unseen rep runs in the storages of the seen rep just before it (`_Reps._place`).
        while r < reps and (r < min_reps or bound.pc() - t_begin < budget_s):
            rec.rep(sets[r % len(sets)], seen=True)
            r += 1
            if unseen and r % spacing == 0:
                rec.rep(unseen.pop(0), seen=False, at=sets[(r - 1) % len(sets)])
        while unseen:
            rec.rep(sets[r % len(sets)], seen=True)
            rec.rep(unseen.pop(0), seen=False, at=sets[r % len(sets)])
            r += 1
        rec.collect()
        self.reused_storage = self.reused_storage or rec.copy_outputs
        if not b.get("null"):
            # shapes only: a null rep allocates its own output of that shape (no output kept alive for it)
            self.timed_like.update({s: _Like(tuple(t.shape), t.dtype, t.device) for s, t in rec.first.items()})
        null_drains = []
        if self.device.type == "cuda" and int(b["null_reps"]):
            rec.drain_pairs(sets, int(b["null_reps"]))
            null_drains = rec.null_drains
        body = {"times_ms": rec.times, "drain_ms": rec.drains, "synced_ms": rec.synced, "null_drain_ms": null_drains,
                "order": rec.order, "unseen_pairs": rec.pairs, "non_tensor": rec.non_tensor,
                "warmup_calls": i, "first_sets": sorted(rec.first), "lead_ms": rec.lead_s * 1e3,
                "host_bound": rec.host_bound, "unseen_in_place": rec.in_place,
                **rec.verdicts()}
        return "timed", body, [codec.to_blob(rec.first[s], device_ok=True) for s in sorted(rec.first)]

    def _time_unseen(self, b: dict, blobs):
        """A seen/unseen pair: one rep on the set this request carries, before any other candidate
        code runs in this request (nothing can have been computed from it ahead of its call), then
        one rep on a seen set, under the same conditions. Where it runs in the seen set's storages,
        the carried set itself is dropped before the call (`_Reps.drop_carried`): no call ever ran
        in its storage, so a later set landing there meets no pointer a candidate has seen.
        The reply carries the carried set's output alone: a seen set's right answer is one a
        worker already holds, so its rep's output would prove nothing the judge does not have."""
        k, seen = int(b["unseen"][0]), int(b["sets"][0])
        self._place_set(k, b["layout"], blobs)
        # `null`: the same request with the null function (and outputs of the call's shape) in the
        # calls' place, which the judge's clock prices the pair requests by (checks/pair_clock.py)
        rec = _Reps(self, sync_every=2, lead_s=float(b.get("lead_ms", 0.0)) / 1e3,
                    null_like=self.timed_like if b.get("null") else None, saved_on_host=bool(b.get("copies_on_host")))
        rec.wake_pool = rec.drop_carried = True
        rec.kept = {k}   # the reply's one output (a seen rep's is checked by nothing here)
        # The unseen values run in the seen set's storages (see _Reps._place): a plan or graph keyed
        # on pointers replays there, as on seen values, while an answer remembered by value misses.
        rec.rep(k, seen=False, at=seen)
        rec.rep(seen, seen=True)
        rec.collect()
        pairs = [[rec.times[0], rec.pairs[0][1]]] if rec.times and rec.pairs else []
        sent = [k] if k in rec.first else []
        body = {"times_ms": rec.times, "drain_ms": [], "synced_ms": [], "null_drain_ms": [], "order": rec.order,
                "unseen_pairs": pairs, "non_tensor": rec.non_tensor, "warmup_calls": 0,
                "first_sets": sent, "lead_ms": rec.lead_s * 1e3, "unseen_in_place": rec.in_place,
                **rec.verdicts()}
        return "timed", body, [codec.to_blob(rec.first[s], device_ok=True) for s in sent]

    def _do_probe(self, msg):
        """Was the output computed in the caller stream's order? (CUDA)

        The caller's stream is held in a sleep while the candidate is called, and a stream of the
        harness copies the output before the sleep ends. Work ordered after the caller's stream
        (the stream itself, or side streams that wait on it) cannot have run yet; work launched on
        a stream nobody ordered runs at once, and its finished output is already there.
        """
        s = int(msg.body["set"])
        inputs = self.sets[s]
        on_host = bool(msg.body.get("copies_on_host"))
        before = [host_copies.copy_of(self.bound, x, on_host) for i, x in enumerate(inputs)
                  if isinstance(x, torch.Tensor) and i != self.output_arg]
        # Every free cached block poisoned (deep): the output may land in one that held an earlier
        # output of this problem, whose saturated values (a clamp's bound) read as answers already there
        self._paint_for_call(s, deep=True)
        self._paint_held()
        self._sync()
        bound = self.bound
        sleep_ms = float(msg.body["sleep_ms"])
        self._spin(sleep_ms / 1e3)
        gate = bound.Event()
        bound.ev_record(gate)
        out = self._run_candidate("probed call", self.fn, *inputs)
        if type(out) is not torch.Tensor:
            self._sync()
            return "probed", {"conclusive": False, "why": "output is not a tensor"}, []
        with torch.cuda.stream(self.probe_stream):
            early = bound.clone(out)
            seen = bound.Event()
            bound.ev_record(seen)
        bound.ev_sync(seen)
        conclusive = not gate.query()   # the caller's stream is still asleep: nothing ordered after it ran
        self._sync()
        final = out.detach()
        self._keep(final)   # painted before a second attempt: its storage then holds no answer yet
        # Only elements this call had to change count: an output that aliases an input (in-place
        # work) already holds the input's values there before anything runs.
        mask = torch.isfinite(final) & (final != 0)
        for x in before:
            if x.shape == final.shape and x.dtype == final.dtype:
                mask &= ~host_copies.unchanged(self.bound, x, final)
        same = host_copies.unchanged(self.bound, early, final) & mask
        total = int(mask.sum().item())
        body = {"conclusive": conclusive, "sleep_ms": sleep_ms, "early_fraction": same.sum().item() / max(total, 1),
                "compared": total,
                "why": "" if conclusive else "the call waited for the device (it synchronised), so order cannot be seen"}
        return "probed", body, [codec.to_blob(final, device_ok=True)]

    def _spin(self, seconds: float) -> None:
        """Hold the caller's stream for about `seconds` (a spin kernel counting SM cycles)."""
        self.bound.spin(max(int(seconds * self.clock_khz * 1e3), 1))

    def _do_audit(self, msg):
        """Every kernel, copy and fill the device ran for one call, from the profiler (CUPTI).

        The call is bracketed on the caller's stream by a spin kernel before it (the gate: work
        ordered after the caller's stream cannot start until it ends) and one after it (the end
        marker). The judge classifies the rest: unordered, late, vendor-library, none at all.
        """
        s = int(msg.body["set"])
        inputs = self.sets[s]
        self._paint_for_call(s)
        self._sync()
        ops = bool(msg.body.get("ops"))   # CPU events too: which aten op launched what (allowed ops)
        with self.bound.kernel_trace(cpu=ops) as prof:
            self._spin(float(msg.body["sleep_ms"]) / 1e3)
            self._run_candidate("audited call", self.fn, *inputs)
            self._spin(1e-6)
            self._sync()
            self.bound.sleep(self.settle_s)
            self._sync()
        acts, cpu_events = [], []
        for e in prof.kineto_results.events():
            if "cuda" not in str(e.device_type()).lower():
                if ops:
                    cpu_events += _cpu_event(e)
                continue
            acts.append({"name": e.name()[:300], "stream": int(e.device_resource_id()), "start_ns": int(e.start_ns()),
                         "end_ns": int(e.end_ns()), "corr": int(e.correlation_id())})
        body = trace.encode(acts, cpu_events if ops else None)
        blobs = []
        if msg.body.get("own"):
            found = _own_binaries(getattr(self, "candidate_dir", None))
            body["binaries"] = [{"kind": kind, "name": name} for kind, name, _ in found]
            blobs = [codec.to_blob(torch.frombuffer(bytearray(data), dtype=torch.uint8)) for _, _, data in found]
        return "audited", body, blobs

    def _do_loop(self, msg):
        """N back-to-back calls ending in a device-wide sync; the judge's clock brackets this. The
        last output is kept, and sent only when the judge asks (`fetch`), off the judge's clock:
        copying a large output out is a fixed cost the null loop does not have."""
        if msg.body.get("fetch"):
            out, self.loop_out = self.loop_out, None
            return "looped", {"exact_tensor": out is not None}, [codec.to_blob(out, device_ok=True)] if out is not None else []
        n, s = int(msg.body["n"]), int(msg.body["set"])
        if "layout" in msg.body:   # never seen before this request
            self._place_set(s, msg.body["layout"], msg.tensors)
        inputs = self.sets[s]
        if msg.body.get("null"):
            fn = _null_call
        else:
            fn = self.fn
        out = None
        for _ in range(n):
            out = self._run_candidate("looped call", fn, *inputs)
        self._sync()
        exact = type(out) is torch.Tensor
        if not msg.body.get("null"):
            self.loop_out = out if exact else None
        return "looped", {"exact_tensor": exact}, []

    def _do_integrity(self, msg):
        return "state", {}, []


class _CandidateFailed(Exception):
    """args: (message, traceback text)"""


def _null_call(*args):
    return None


GUARD = 4096   # elements of guard band on each side of a problem-supplied output buffer


def _import_file(path: str):
    spec = importlib.util.spec_from_file_location("candidate", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["candidate"] = module
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec.loader.exec_module(module)
    return module


def _decode_values(layout: list, blobs) -> list:
    """Rebuild a list of tensors and numbers: layout entries are {"t": index} or {"v": number}."""
    out = []
    for item in layout:
        if "t" in item:
            out.append(codec.from_blob(blobs[int(item["t"])]))
        else:
            out.append(item["v"])
    return out


def _malloc_perturb(byte: int) -> None:
    """glibc: fill every malloc'd block with ~byte, and keep blocks up to 32 MiB off mmap (which is zeroed)."""
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(-3, 32 << 20)   # M_MMAP_THRESHOLD
        libc.mallopt(-6, byte)       # M_PERTURB
    except (OSError, AttributeError):
        pass


def _failure(what: str, exc: BaseException) -> tuple[str, str]:
    """A failed reply's error line and traceback, each bounded."""
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-8:])
    return f"{what}: {type(exc).__name__}: {exc}"[:2000], tb[-4000:]


def _out_of_memory(request: str, exc: BaseException) -> dict:
    error, tb = _failure(f"out of memory in the worker while answering {request!r}", exc)
    return {"phase": request, "error": error, "traceback": tb}


def main(fd: int) -> None:
    sock = socket.socket(fileno=fd)
    status = 0
    # Every call here, the reference's and the candidate's, runs as KernelBench runs them: without
    # autograd. With it, a Model's output holds its whole forward's activations while the worker
    # holds the output for checking (KernelBench's level 3 SwinV2: 0.7 GB a call, 11 GB for the
    # outputs of one timing request), and the reference is timed building a graph nobody reads.
    torch.set_grad_enabled(False)
    try:
        Worker(sock).serve()
    except protocol.PeerClosed:
        pass
    except BaseException:   # noqa: BLE001 - whatever it was, said and not lost in os._exit
        traceback.print_exc()
        status = wire.HARNESS_FAILED
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
