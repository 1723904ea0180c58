"""The naive bench's fork server (naive.py --serve) and the runner's end of it (runner.NaiveBench):
verdicts as the one-process bench gave them, deadlines, a candidate that kills the server, and
nothing a candidate starts outliving its request."""

import json
import os
import signal
import subprocess
import sys

import pytest

from kernelvet import reaper
from kernelvet.practice import by_name
from kernelvet.practice.runner import NaiveBench


def _ask(bench: NaiveBench, name: str, limit: float = 20) -> dict:
    e = by_name(name)
    return bench.run(e.path, e.problem_ref, "cpu", limit)


def _gone(pid: int) -> bool:
    state = reaper.table().get(pid)
    return state is None or state[1] == "Z"


def test_verdicts_and_deadlines_on_one_server():
    with NaiveBench() as bench:
        assert _ask(bench, "copy_input")["believed"] is True
        server = bench.proc.pid
        assert _ask(bench, "hang_forever", limit=1) == {"believed": None, "speedup": None,
                                                        "note": "hung past 1 s: no verdict"}
        forged = _ask(bench, "forged_stdout")   # its stdout goes nowhere; its exit 0 is no verdict
        assert forged["believed"] is None and forged["note"].startswith("no verdict (exit 0)")
        assert _ask(bench, "torch_mm")["believed"] is True
        assert bench.proc.pid == server   # the server enforced the deadline and lived on


def test_a_candidate_that_kills_the_server_costs_one_verdict():
    with NaiveBench() as bench:
        children = []
        message = bench._message

        def spy(deadline):
            msg = message(deadline)
            if isinstance(msg, dict) and "child" in msg:
                children.append(msg["child"])
            return msg

        bench._message = spy
        got = _ask(bench, "kill_parent")
        assert got["believed"] is None and "the bench process was killed (SIGKILL)" in got["note"]
        assert bench.proc is None and not reaper.session(children[0])   # its sleeping child went too
        assert _ask(bench, "copy_input")["believed"] is True   # a fresh server
        assert len(children) == 2


@pytest.fixture
def server():
    proc = subprocess.Popen([sys.executable, "-m", "kernelvet.practice.naive", "--serve"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
    yield proc
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _serve(proc, candidate: str, problem: str) -> tuple[int, dict]:
    proc.stdin.write(json.dumps({"candidate": candidate, "problem": problem, "device": "cpu",
                                 "timeout": 20}).encode() + b"\n")
    proc.stdin.flush()
    child = json.loads(proc.stdout.readline())["child"]
    return child, json.loads(proc.stdout.readline())


def test_nothing_a_candidate_starts_outlives_its_request(server, write, tmp_path):
    e = by_name("lurking_process")
    child, got = _serve(server, e.path, e.problem_ref)
    assert got["believed"] is True and not reaper.session(child)
    # One in the child's group, one in a group of its own, one in a session of its own: the last
    # is found by the sweep of what is re-parented to the server (a child subreaper).
    pids = tmp_path / "pids"
    escaper = write("escaper.py", f"""
import os, subprocess, sys
from torch import nn
kids = []
class ModelNew(nn.Module):
    def forward(self, A, B):
        if not kids:
            sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
            kids.extend([subprocess.Popen(sleep), subprocess.Popen(sleep, preexec_fn=os.setpgrp),
                         subprocess.Popen(sleep, start_new_session=True)])
            with open({str(pids)!r}, "w") as fh:
                fh.write(" ".join(str(k.pid) for k in kids))
        return A @ B
""")
    child, got = _serve(server, escaper, "matmul")
    assert got["believed"] is True and not reaper.session(child)
    started = [int(p) for p in pids.read_text().split()]
    assert len(started) == 3 and all(_gone(p) for p in started)
    assert _serve(server, e.path, e.problem_ref)[1]["believed"] is True   # the server is still fine
