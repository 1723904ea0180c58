"""The worker's window after a call returns: CPU counted there is work done after return, never
work a thread did before it that the kernel had not yet accounted."""

import hashlib
import queue
import threading
import time

from kernelvet import after_return


def test_a_threads_cpu_time_is_read_as_of_now():
    """A running thread's account in schedstat lags until the next tick or switch; its CPU clock
    is brought up to date when read, so it is always ahead of what the thread itself read before."""
    tid = threading.get_native_id()
    for _ in range(20):
        before = time.thread_time_ns()
        assert after_return.thread_cpu_ns()[tid] > before


def test_a_pool_thread_busy_until_return_counts_no_work_after_it():
    """A thread hashing (without the GIL) until the call returns, then idle on its queue: the
    window opened at return counts at most the chunk it was on, not the unaccounted time before."""
    stop, idle, jobs = threading.Event(), threading.Event(), queue.Queue()
    chunk = bytes(1 << 14)

    def pool_thread():
        while jobs.get() is not None:
            while not stop.is_set():
                hashlib.sha256(chunk).digest()
            idle.set()
    t = threading.Thread(target=pool_thread, daemon=True)
    t.start()
    try:
        worst = 0.0
        for _ in range(10):
            idle.clear()
            stop.clear()
            jobs.put(1)
            time.sleep(0.02)
            stop.set()                      # the call returns here
            win = after_return.open_window({t.native_id}, None)
            assert idle.wait(5)
            time.sleep(0.01)                # the settle
            seen = after_return.close_window(win, {t.native_id}, None)
            worst = max(worst, seen["cpu_ms"])
        assert worst < 1.0, worst
    finally:
        stop.set()
        jobs.put(None)
        t.join(5)
