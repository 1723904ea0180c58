"""The worker's numbers are claims: candidates that rewrite the worker from inside it (its own
classes' methods, found through the interpreter, or the input sets it holds, found through the
stack) are rejected by what the judge measures itself, and the next vet on the same launcher is
unaffected."""

import pytest

from kernelvet import spawn, vet
from kernelvet.ids import CheckId
from kernelvet.report import Status, Verdict

from .candidates import MATMUL_HEADER, honest_matmul
from .test_hostile import assert_judge_healthy


@pytest.fixture(scope="module")
def launcher():
    launcher = spawn.Launcher()
    yield launcher
    launcher.close()


# The worker's module, reached the way a candidate reaches it: through the garbage collector's
# list of live objects (its Worker instance), not by a name of the harness's.
FIND_WORKER = """
import gc, sys
_worker = next(o for o in gc.get_objects() if type(o).__name__ == "Worker" and hasattr(o, "sets"))
_kw = sys.modules[type(_worker).__module__]
"""

# The per-rep recorder, swapped: every time it is handed is recorded 300x shorter.
SHRINK_RECORDER = FIND_WORKER + """
_real_record = _kw._Reps._record
def _record(self, ms, seen, s):
    return _real_record(self, ms / 300, seen, s)
_kw._Reps._record = _record
"""

# The judge-clocked loop, swapped: no call at all while the judge's clock runs; the one output
# the judge fetches afterwards is computed then, off its clock.
SKIP_LOOP = FIND_WORKER + """
def _do_loop(self, msg):
    if msg.body.get("fetch"):
        out = self.fn(*self.loop_set) if getattr(self, "loop_set", None) else None
        return "looped", {"exact_tensor": out is not None}, [_kw.codec.to_blob(out)] if out is not None else []
    if "layout" in msg.body:
        self._place_set(int(msg.body["set"]), msg.body["layout"], msg.tensors)
    if not msg.body.get("null"):
        self.loop_set = self.sets[int(msg.body["set"])]
    return "looped", {"exact_tensor": True}, []
_kw.Worker._do_loop = _do_loop
"""

# Walk up the stack into the worker, compute an answer for every input set it holds, and answer
# each later call on one of them from memory (keyed by the storages and a sample of their values,
# so inputs overwritten in place are computed anew).
PRECOMPUTE = """
import sys
_answers = {}
def _key(A, B):
    return (A.data_ptr(), B.data_ptr(), float(A[0, :8].sum()), float(B[-1, -8:].sum()))
def _product(A, B):
    out = torch.zeros(A.shape[0], B.shape[1])
    for k in range(0, A.shape[1], 32):
        out += (A[:, k:k + 32, None] * B[None, k:k + 32, :]).sum(1)
    return out
def _precompute():
    f = sys._getframe(2)
    while f is not None:
        held = getattr(f.f_locals.get("self"), "sets", None)
        if isinstance(held, dict):
            for vals in list(held.values()):
                if len(vals) == 2 and _key(*vals) not in _answers:
                    _answers[_key(*vals)] = _product(*vals)
            return
        f = f.f_back
class ModelNew(nn.Module):
    def forward(self, A, B):
        _precompute()
        hit = _answers.get(_key(A, B))
        return hit.clone() if hit is not None else _product(A, B)
"""


def _write(write, name, text):
    return write(f"{name}.py", MATMUL_HEADER + text)


def test_a_recorder_that_shrinks_its_times_fails_timers_by_the_requests_duration(launcher, write):
    path = _write(write, "shrink", SHRINK_RECORDER + honest_matmul())
    report = vet(path, "matmul", device="cpu", timeout=120, launcher=launcher)
    timers = report.finding(CheckId.TIMERS)
    assert report.verdict is Verdict.REJECT and timers.status is Status.FAIL, report.dumps()
    assert any(r["says"] == "disagrees" for r in timers.evidence["requests"]), timers.evidence
    assert_judge_healthy(launcher)


def test_a_loop_that_skips_its_calls_fails_timers_from_below(launcher, write):
    path = _write(write, "skip", SKIP_LOOP + honest_matmul())
    report = vet(path, "matmul", device="cpu", timeout=120, launcher=launcher)
    timers = report.finding(CheckId.TIMERS)
    assert report.verdict is Verdict.REJECT and timers.status is Status.FAIL, report.dumps()
    assert all(a["skipped"] for a in timers.evidence["attempts"]), timers.evidence["attempts"]
    assert "did not run its calls" in timers.summary
    assert_judge_healthy(launcher)


def test_inputs_read_ahead_from_the_workers_frames_cannot_include_unseen_ones(launcher, write):
    """Every set the worker holds is answered ahead; the unseen sets, each inside the one request
    that times it, are not there to be read before their call, and come out slow (caching)."""
    path = _write(write, "precompute", PRECOMPUTE)
    report = vet(path, "matmul", device="cpu", timeout=120, launcher=launcher)
    caching = report.finding(CheckId.CACHING)
    assert report.verdict is Verdict.REJECT and caching.status is Status.FAIL, report.dumps()
    assert "remembers answers" in caching.summary
    assert_judge_healthy(launcher)
