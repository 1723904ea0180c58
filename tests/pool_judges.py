"""Device judges that fail, for the pool's tests: `python pool_judges.py dies-on-first-job` is the
device judge's protocol (kernelvet.batch.devjudge) whose process ends (exit 9) when its first
job arrives, as a judge on a failing device would; `harness-fails` answers every job with a
harness failure, as a device whose workers keep dying does. Neither starts a launcher: each is
ready well before a real judge is, so that it is the first to take a job. `killed-by-kill-jobs`
is a real judge that a job whose id starts with "kill" ends with SIGKILL, as the host's
out-of-memory killer ends a judge that holds too much."""

import sys
import time

from kernelvet.batch import devjudge
from kernelvet.batch.results import Record


def dies(self, job):
    import os
    os._exit(9)


def harness_fails(self, job):
    return Record(id=job.id, problem=job.problem, candidate=job.candidate, verdict="error", fault="harness",
                  error="the worker died before it answered (signal 9)", finished_at=time.time())


def killed_by_kill_jobs(handle):
    def handled(self, job):
        if job.id.startswith("kill"):
            import os
            import signal
            os.kill(os.getpid(), signal.SIGKILL)
        return handle(self, job)
    return handled


if __name__ == "__main__":
    if sys.argv[1] == "killed-by-kill-jobs":
        devjudge.DeviceJudge.handle = killed_by_kill_jobs(devjudge.DeviceJudge.handle)
    else:
        devjudge.DeviceJudge.start = lambda self: "cpu"
        devjudge.DeviceJudge.handle = {"dies-on-first-job": dies, "harness-fails": harness_fails}[sys.argv[1]]
    sys.exit(devjudge.main())
