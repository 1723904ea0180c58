"""sched.py, the judge's witness of a process's time: CPU done on threads that exited before the
second sample still counts."""

import os
import subprocess
import sys

from kernelvet import sched

_CHILD = r"""
import sys, threading, time
burned = []
def work():
    t0 = time.thread_time()
    while time.thread_time() - t0 < 0.3:
        pass
    burned.append(time.thread_time() - t0)
sys.stdin.readline()
t = threading.Thread(target=work)
t.start()
t.join()
time.sleep(0.3)   # the thread is gone from /proc/<pid>/task
print(burned[0], flush=True)
sys.stdin.readline()
"""


def _sampled(child: str) -> tuple[dict, str]:
    """`child` run from its first line in to the first line it prints, between two samples; and that line."""
    proc = subprocess.Popen([sys.executable, "-c", child], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        before = sched.sample(proc.pid)
        proc.stdin.write("go\n")
        proc.stdin.flush()
        said = proc.stdout.readline()
        got = sched.between(before, sched.sample(proc.pid))
        proc.stdin.write("end\n")
        proc.stdin.flush()
    finally:
        proc.wait(timeout=30)
    return got, said


def test_cpu_of_a_thread_that_exited_between_the_samples_is_counted():
    got, said = _sampled(_CHILD)
    burned = float(said)
    assert got["cpu_s"] >= burned - 3 * sched._TICK_S, (got, burned)


def test_the_longest_wait_is_one_threads_not_the_sum():
    """Two threads waiting through the same 5 ms stretched a parallel region by about 5 ms, not 10;
    a thread that started between the samples brings all of its wait."""
    a = sched.Sample(0.0, 1.0, 0.003, 0.001, None, {"1": 0.001, "2": 0.002})
    b = sched.Sample(0.1, 1.1, 0.017, 0.006, None, {"1": 0.006, "2": 0.007, "3": 0.004})
    got = sched.between(a, b)
    assert abs(got["max_thread_wait_s"] - 0.005) < 1e-12 and abs(got["wait_s"] - 0.014) < 1e-12
    assert sched.between(sched.Sample(0.0, None, None, None), b)["max_thread_wait_s"] is None
    live = sched.sample(os.getpid())
    assert live.thread_waits and str(os.getpid()) in live.thread_waits


_SLEEPER = r"""
import sys, time
sys.stdin.readline()
t0 = time.thread_time()
while time.thread_time() - t0 < 0.2:   # runs 0.2 s
    pass
time.sleep(0.4)                         # then is blocked 0.4 s
print("done", flush=True)
sys.stdin.readline()
"""


def test_the_serving_threads_run_time_leaves_out_the_time_it_was_blocked():
    got, _ = _sampled(_SLEEPER)
    assert 0.19 <= got["main_run_s"] + got["main_wait_s"] <= got["judge_s"] - 0.35, got
    assert sched.between(sched.Sample(0.0, None, None, None), sched.Sample(1.0, None, None, None))["main_run_s"] is None
