"""Session diagnostic (H200): where the CLI's start-up goes. In session 12 the launcher's own
`import torch` took 3.56 s while the CLI's main process imported torch in 2.88 s beside it, and
`import torch` alone took ~3.2 s: is a second import beside the first slower (contention), or is
the launcher's import slower by itself (its environment: no HOME, cwd /, PYTHONPATH, its own
session)?
Runs, each in fresh processes: import torch alone (the user's environment), alone in the
launcher's environment, two at once (both the user's), and `kernelvet check --verbose` (its
start-up marks). Usage: python bench/diag_cli.py OUT.json [ROUNDS]
Session 13, call 1: no contention to speak of (alone 3.6-4.7 s, the launcher's environment 3.5-4.3,
two at once 3.4-4.6 each); the host's pace moved more than any of these.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from kernelvet import spawn
from kernelvet.practice import by_name

_IMPORT = "import time; t = time.monotonic(); import torch; print(time.monotonic() - t)"


def _start(env=None, cwd=None, session=False) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", _IMPORT], env=env, cwd=cwd, start_new_session=session,
                            stdout=subprocess.PIPE, text=True)


def _import_s(procs) -> list[float]:
    return [float(p.communicate()[0].strip().splitlines()[-1]) for p in procs]


def launcher_env() -> dict:
    env = spawn.worker_env()
    env["TMPDIR"] = "/tmp"
    return env


def main() -> None:
    out, rounds = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3
    res = {"cpus": os.cpu_count(), "alone": [], "launcher_env": [], "two_at_once": [], "check": []}
    check = [sys.executable, "-m", "kernelvet", "check", by_name("triton_gemm_ieee").path, "--ref", "matmul",
             "--device", "cuda", "--verbose", "--no-server"]
    for r in range(rounds):
        res["alone"] += _import_s([_start()])
        res["launcher_env"] += _import_s([_start(launcher_env(), "/", True)])
        res["two_at_once"].append(_import_s([_start(), _start()]))
        t0 = time.perf_counter()
        done = subprocess.run(check, capture_output=True, text=True)
        marks = [ln for ln in done.stdout.splitlines() if ln.startswith("start-up")]
        res["check"].append({"wall_s": time.perf_counter() - t0, "rc": done.returncode,
                             "start_up": marks[-1] if marks else done.stderr[-400:]})
        print(r, {k: v[-1] for k, v in res.items() if isinstance(v, list)}, flush=True)
    with open(out, "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
