"""`kernelvet check | serve | practice | show`. One dispatch table; formatting lives in render.py.

Exit codes: 0 pass, 1 reject, 2 bad usage or bad problem/candidate file, 3 harness error.
A user mistake prints one line, never a traceback.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import sys
import threading
import time

from . import spares
from .errors import HarnessError, UsageError
from .ids import AUDIT_MODES, REUSED_OUTPUT_MODES
from .sandbox import MODES as SANDBOX_MODES
from .report import REPORT_VERSION

EXIT_USAGE, EXIT_HARNESS = 2, 3


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's own errors: one line, exit 2
        raise UsageError(f"{self.prog}: {message}")


def _shape(text: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(x) for x in text.replace("x", ",").split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not dims or any(d <= 0 for d in dims):
        raise argparse.ArgumentTypeError(f"dimensions must be positive, got {text!r}")
    return dims


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not 0 < value <= 86400:  # also rejects nan; inf or huge values overflow the worker's select()
        raise argparse.ArgumentTypeError(f"must be positive and at most 86400 seconds, got {text!r}")
    return value


_SANDBOX_HELP = ("confine the workers: auto = namespaces of their own (unprivileged uid, read-only files, "
                 "no network, own PID namespace), else bubblewrap, else refuse (default); namespaces = "
                 "only those; strict = only bubblewrap; off = run candidates unconfined (recorded in the report)")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="kernelvet", description="Tell a GPU kernel from a prop.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    c = sub.add_parser("check", help="vet one candidate against a problem")
    c.add_argument("candidate", help="candidate file (KernelBench: defines ModelNew)")
    c.add_argument("--ref", required=True, help="KernelBench problem file, GPU MODE task (directory or reference.py), "
                   "or a built-in: matmul, softmax")
    c.add_argument("--shape", type=_shape, help="built-in problems: M,N,K (matmul) or ROWS,COLS (softmax)")
    c.add_argument("--dtype", help="built-in problems: float32 (default), float16, bfloat16")
    c.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N (default auto)")
    c.add_argument("--json", metavar="PATH", help="write the report as JSON")
    c.add_argument("--seed", type=int, help="fixed seed (default: a fresh secret one per run)")
    c.add_argument("--timeout", type=_seconds, default=300.0, help="seconds for the whole candidate (default 300)")
    c.add_argument("--allow", action="append", default=[], metavar="CHECK_ID",
                   help="waive a check (recorded in the report); repeatable")
    _policy_arguments(c)
    c.add_argument("--audit", choices=AUDIT_MODES, default="auto",
                   help="kernel audit with the profiler (CUDA): auto = only for candidates every other check "
                        "passed (default), always, never")
    c.add_argument("--reused-output", choices=REUSED_OUTPUT_MODES, default="allow",
                   help="a call that returns an earlier call's output storage (a static buffer): allow "
                        "(default, recorded by `aliasing`) or reject")
    c.add_argument("--verbose", action="store_true", help="print the phase breakdown and candidate output")
    c.add_argument("--sandbox", choices=SANDBOX_MODES, default="auto", help=_SANDBOX_HELP)
    served = c.add_mutually_exclusive_group()
    served.add_argument("--no-server", action="store_true",
                        help="vet in this process even if a `kernelvet serve` of this version is listening")
    served.add_argument("--serve", action="store_true",
                        help="if no `kernelvet serve` listens, start one in the background (it stops after "
                             "30 idle minutes) and vet in this process: the checks after this one are served")

    v = sub.add_parser("serve", help="keep a judge running: `kernelvet check` then pays no start-up")
    v.add_argument("--socket", help="Unix socket path (default: $KERNELVET_SOCKET, else a per-user path)")
    v.add_argument("--device", default="auto", help="device to keep a worker ready on (default auto)")
    v.add_argument("--sandbox", choices=SANDBOX_MODES, default="auto", help=_SANDBOX_HELP)
    v.add_argument("--idle", type=_seconds, default=1800.0, metavar="SECONDS",
                   help="exit after this long without a request (default 1800)")

    b = sub.add_parser("batch", help="vet many candidates against a problem set; one JSONL record per verdict")
    b.add_argument("--problems", metavar="DIR", help="problem files: a KernelBench tree (levelN/P_Name.py) or a folder")
    b.add_argument("--candidates", metavar="DIR",
                   help="candidate files, named level_L_problem_P_sample_S_kernel.py (KernelBench) or "
                        "under a folder named after their problem file")
    b.add_argument("--manifest", metavar="FILE.jsonl",
                   help='jobs, one {"id", "problem", "candidate"[, "allow", "timeout"]} a line')
    b.add_argument("--out", required=True, metavar="FILE.jsonl", help="results, one record a line, appended")
    b.add_argument("--resume", action="store_true", help="continue --out: skip the ids it already holds")
    b.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N (default auto)")
    b.add_argument("--gpus", metavar="all|0,1,...",
                   help="a judge per GPU of this host, one shared queue (each judge and its workers see only their GPU)")
    b.add_argument("--devices", metavar="cpu,cuda:N,...", help="a pool of the named devices, a judge each (several cpu too)")
    b.add_argument("--engine", choices=("local", "ray"), default="local",
                   help="local: this host's devices (default); ray: a Ray cluster's, an actor per GPU (kernelvet[ray])")
    b.add_argument("--seed", type=int, help="fixed seed for every problem (default: a fresh secret one per problem)")
    b.add_argument("--timeout", type=_seconds, default=300.0, help="seconds per candidate (default 300)")
    b.add_argument("--allow", action="append", default=[], metavar="CHECK_ID",
                   help="waive a check for every job (recorded); repeatable")
    _policy_arguments(b)
    b.add_argument("--audit", choices=AUDIT_MODES, default="auto", help="kernel audit with the profiler (CUDA)")
    b.add_argument("--sandbox", choices=SANDBOX_MODES, default="auto", help=_SANDBOX_HELP)
    b.add_argument("--no-progress", action="store_true", help="no progress bar (the summary still prints)")

    s = sub.add_parser("show", help="render a JSON report")
    s.add_argument("report")

    pr = sub.add_parser("practice", help="run the practice cheats against a naive bench and kernelvet")
    pr.add_argument("patterns", nargs="*", help="pattern numbers 1..10 or names (streams, threads, lazy-eq, "
                    "timers, identity, no-op, garbage, thin-dtype, cache, library), 'harness', or entry names")
    pr.add_argument("--device", default="auto", help="auto | cpu | cuda (default auto)")
    pr.add_argument("--json", metavar="PATH", help="write one row per pattern and cheat as JSON")
    pr.add_argument("--ablate", action="store_true", help="also waive each firing check in turn (the matrix)")
    pr.add_argument("--sandbox", choices=SANDBOX_MODES, default="auto", help=_SANDBOX_HELP)
    return p


def _policy_arguments(parser) -> None:
    """--library-policy and --allow-op, alike for check and batch."""
    parser.add_argument("--library-policy", choices=("own-kernels", "no-reference-ops", "off"), default=None,
                        help="what the candidate must write itself: own-kernels = the bulk of its device time in "
                             "kernels its source builds (default on CUDA), no-reference-ops = none of the ops the "
                             "reference dispatches (default on the CPU), off = no rule (as --allow library-call)")
    parser.add_argument("--allow-op", action="append", default=[], metavar="OP",
                        help="a library op the candidate may call under any policy, e.g. conv2d; repeatable")


def _cmd_check(args) -> int:
    if args.json:
        _check_writable(args.json)  # now, not after a vet of minutes whose report would be lost
    t0 = time.monotonic()
    start = _EarlyStart(args.sandbox, args.device)   # the launcher imports torch while we do
    from .problem import load_problem
    start.marks["torch imported"] = time.monotonic() - t0
    prob = load_problem(args.ref, args.shape, args.dtype)
    from .judge import warm_judge
    from . import render
    render.preload()   # everything rendering will import, before any candidate runs (and while the launcher starts)
    warm_judge(args.device, prob.flops, meta_flops=False)   # while the launcher still imports Triton
    start.marks["judge warmed"] = time.monotonic() - t0
    launcher = start.result()
    start.marks["vet began"] = time.monotonic() - t0
    code = vet_and_render(args, prob, launcher, prepare_next=False)
    if args.verbose:
        start.marks["vet ended"] = time.monotonic() - t0
        steps = ", ".join(f"{k} {v:.2f}" for k, v in launcher.start_steps.items())
        print("start-up, seconds since kernelvet's main began: "
              + ", ".join(f"{k} {v:.2f}" for k, v in sorted(start.marks.items(), key=lambda kv: kv[1]))
              + (f"; the launcher's own steps, seconds each: {steps}" if steps else ""))
    return code


def vet_and_render(args, prob, launcher, *, prepare_next: bool, console=None) -> int:
    """`check` once its problem is loaded and its launcher ready (here, or in `kernelvet serve`)."""
    from . import render
    from .judge import Settings, vet
    try:
        settings = Settings(reused_output=getattr(args, "reused_output", "allow"))
        report = vet(args.candidate, prob, device=args.device, seed=args.seed, timeout=args.timeout,
                     allow=args.allow, audit=args.audit, launcher=launcher, prepare_next=prepare_next,
                     settings=settings, library_policy=args.library_policy, allow_ops=args.allow_op)
    except HarnessError as exc:
        if args.json:  # an `error` verdict is a verdict too: the report says what failed
            _write(args.json, json.dumps({"version": REPORT_VERSION, "verdict": "error", "error": str(exc),
                                          "findings": [], "problem": prob.to_json()}, sort_keys=True, indent=2))
        raise
    if args.json:
        _write(args.json, report.dumps())
    render.report(report, verbose=args.verbose, console=console)
    return report.verdict.exit_code


def _cmd_show(args) -> int:
    from . import render
    try:
        with open(args.report) as fh:
            data = json.load(fh)
    except OSError as exc:
        raise UsageError(f"{args.report}: cannot read: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{args.report}:{exc.lineno}: not a JSON report: {exc.msg}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{args.report}: not a JSON report: not UTF-8 text (byte {exc.start})") from None
    if not isinstance(data, dict) or "verdict" not in data:
        raise UsageError(f"{args.report}: not a kernelvet report: expected a JSON object with a \"verdict\"")
    render.report_json(data)
    return {"pass": 0, "reject": 1}.get(data.get("verdict"), 3)


def _cmd_practice(args) -> int:
    from .practice import runner
    return runner.main(args.patterns, device=args.device, json_path=args.json, ablate=args.ablate,
                       launcher=_launcher(args.sandbox))


class _EarlyStart(threading.Thread):
    """The launcher (a process that imports torch and Triton) and the first worker (CUDA start-up),
    started before this process imports torch itself: the two imports overlap instead of adding up."""

    def __init__(self, sandbox: str, device: str):
        super().__init__(daemon=True, name="kernelvet-early-start")
        self.device, self.error = device, None
        self.t0, self.marks = time.monotonic(), {}
        self.launcher = _launcher(sandbox, wait=False)   # here: the launcher dies with the thread that forked it
        self.start()

    def run(self):
        try:
            self.launcher.wait_ready()
            self.marks["launcher ready"] = time.monotonic() - self.t0
            # Without torch (the main thread may still be importing it): the device as it will most
            # likely resolve. The vet takes the spare only if it resolves to that device.
            device = spares.guess_device(self.device)
            if device is not None:
                spares.prepare(self.launcher, device)
                self.marks["worker asked to prepare"] = time.monotonic() - self.t0
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread by result()
            self.error = exc

    def result(self):
        """The ready launcher; what stopped it, raised here (a spare worker that could not be made
        ready only costs the vet its start-up; a bad --device is the vet's to report)."""
        self.join()
        if self.error is not None and not self.launcher.ready:
            raise self.error
        return self.launcher


def _launcher(sandbox: str, wait: bool = True):
    """The workers' launcher in the asked sandbox mode (`strict` without a working bwrap: UsageError)."""
    from .spawn import shared_launcher
    return shared_launcher(sandbox, wait=wait)


def _check_writable(path: str) -> None:
    parent = os.path.dirname(os.path.abspath(path))
    if not path:
        why = "empty path"
    elif os.path.isdir(path):
        why = "it is a directory"
    elif not os.path.isdir(parent):
        why = f"directory {parent} does not exist"
    elif not os.access(path if os.path.exists(path) else parent, os.W_OK):
        why = "permission denied"
    else:
        return
    raise UsageError(f"--json {path}: cannot write: {why}")


def _write(path: str, text: str) -> None:
    """Atomically, once the verdict is in: a temporary file beside `path`, renamed over it. Whatever
    was at `path` before (a report a candidate forged there, say) is replaced whole, and a reader
    never sees half a report."""
    import stat
    import tempfile
    parent = os.path.dirname(os.path.abspath(path))
    try:
        if os.path.exists(path) and not stat.S_ISREG(os.stat(path).st_mode):   # /dev/stdout, a pipe
            with open(path, "w") as fh:
                fh.write(text + "\n")
            return
        fd, tmp = tempfile.mkstemp(prefix=".kernelvet-report-", dir=parent)
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(text + "\n")
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError as exc:
        raise UsageError(f"--json {path}: cannot write: {exc.strerror}") from None


def _cmd_serve(args) -> int:
    from . import server
    return server.serve(args.socket, device=args.device, sandbox=args.sandbox, idle_s=args.idle)


def _cmd_batch(args) -> int:
    from .batch import runner
    return runner.main(args)


COMMANDS = {"batch": _cmd_batch, "check": _cmd_check, "show": _cmd_show, "practice": _cmd_practice, "serve": _cmd_serve}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)

    def run() -> int:
        args = _parser().parse_args(argv)
        if args.command == "check" and not args.no_server:
            from . import server
            code = server.forward(argv)   # a `kernelvet serve` of this version, if one listens
            if code is not None:
                return code
            if args.serve:   # none of this code: start one for the checks after this one, and vet here
                log = server.start_background(device=args.device, sandbox=args.sandbox)
                print(f"kernelvet: started kernelvet serve in the background (log: {log})" if log else
                      "kernelvet: a kernelvet serve of other code listens (it stops when idle); vetting here",
                      file=sys.stderr)
        return COMMANDS[args.command](args)
    return guarded(run, sys.stderr)


def judge_host_memory() -> None:
    """The judge's big host tensors (a problem judged on the host moves sets, references and
    outputs of GiBs each) in transparent huge pages: PyTorch's CPU allocator advises them so
    when THP_MEM_ALLOC_ENABLE is set before torch loads. Fresh 1 GiB copies ran at 12 GB/s
    against 3 GB/s in 4 KiB pages (torch 2.13 CPU, 2 cores). Workers do not inherit it
    (`spawn.worker_env`): a candidate's memory is as it would be anywhere. A user's own
    THP_MEM_ALLOC_ENABLE=0 stands."""
    os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")


def entry() -> None:
    """The `kernelvet` command: `main()`, then the exit handlers (the launcher stopped, its
    directory removed) and out, without the interpreter tearing down torch's modules and the
    judge's CUDA context one object at a time (0.3-0.5 s that nothing needs)."""
    judge_host_memory()
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:   # a reader that went away (`| head`): nothing more can reach it
        pass
    atexit._run_exitfuncs()
    os._exit(code)


def guarded(run, err) -> int:
    """`run()`'s exit code; a user mistake or a harness failure as one line on `err`, never a traceback."""
    try:
        return run()
    except UsageError as exc:
        print(f"kernelvet: error: {exc}", file=err)
        return EXIT_USAGE
    except HarnessError as exc:
        print(f"kernelvet: harness error: {exc}", file=err)
        return EXIT_HARNESS
    except KeyboardInterrupt:
        print("kernelvet: interrupted", file=err)
        return 130


if __name__ == "__main__":
    entry()
