"""sched.py, the judge's witness of a process's time: CPU done on threads that exited before the
second sample still counts."""

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


def test_cpu_of_a_thread_that_exited_between_the_samples_is_counted():
    proc = subprocess.Popen([sys.executable, "-c", _CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        before = sched.sample(proc.pid)
        proc.stdin.write("go\n")
        proc.stdin.flush()
        burned = float(proc.stdout.readline())
        got = sched.between(before, sched.sample(proc.pid))
        proc.stdin.write("end\n")
        proc.stdin.flush()
    finally:
        proc.wait(timeout=30)
    assert got["cpu_s"] >= burned - 3 * sched._TICK_S, (got, burned)
