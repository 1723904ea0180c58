"""Big CUDA tensors in device buffers the judge lends (devshare.py, lending.py), on a CUDA machine."""

import os
import subprocess
import sys
import textwrap

import pytest

from kernelvet import vet
from kernelvet.ids import CheckId
from kernelvet.report import Verdict

from .matrix import failed

pytestmark = pytest.mark.gpu

PROBLEM = '''
import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(8192, 4096)]   # 128 MiB a set


def get_init_inputs():
    return []
'''

ZEROS = '''
import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.zeros_like(x)
'''


def test_a_big_vet_moves_its_tensors_in_lent_device_buffers(tmp_path):
    prob = tmp_path / "problem.py"
    prob.write_text(PROBLEM)
    (tmp_path / "cand.py").write_text(PROBLEM.replace("class Model(", "class ModelNew("))
    (tmp_path / "zeros.py").write_text(ZEROS)
    report = vet(os.fspath(tmp_path / "cand.py"), os.fspath(prob), device="cuda", allow=["library-call"])
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
    assert report.device["transfers"] == "device (CUDA IPC)", report.device
    assert report.device["sets_kept_on"] == "cuda:0", report.device   # drawn there, lent from there
    report = vet(os.fspath(tmp_path / "zeros.py"), os.fspath(prob), device="cuda", allow=["library-call"])
    assert report.device["transfers"] == "device (CUDA IPC)", report.device
    assert CheckId.PRECISION in failed(report), [f.summary for f in report.failed]


HOLDER = textwrap.dedent('''
    import sys, torch
    from kernelvet import devshare
    torch.cuda.init()
    m = devshare.Mapped({"handle": sys.argv[1], "nbytes": int(sys.argv[2])}, torch.device("cuda", 0))
    print("mapped", int((m.raw == 0x33).sum()), flush=True)
    sys.stdin.readline()          # the judge has freed the buffer and filled new memory with 0x5A
    torch.cuda.synchronize()
    print("after", int((m.raw == 0x5A).sum()), int((m.raw == 0x33).sum()), flush=True)
''')


def test_a_mapping_kept_past_its_request_never_reads_later_judge_memory():
    """A worker that keeps its mapping of a lent buffer after the judge freed it: the judge's next
    allocations (lent buffers and its own tensors, filled with a secret) never show through it."""
    import torch
    from kernelvet import devshare
    dev = torch.device("cuda", 0)
    nbytes = 64 << 20
    lent = devshare.Lent(nbytes, dev)
    lent.fill(torch.full((nbytes,), 0x33, dtype=torch.uint8, device=dev))
    torch.cuda.synchronize()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.Popen([sys.executable, "-c", HOLDER, lent.handle, str(lent.size)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=env)
    try:
        first = child.stdout.readline().split()
        assert first == ["mapped", str(nbytes)], first
        lent.close()
        secret = [devshare.Lent(nbytes, dev) for _ in range(8)]
        for s in secret:
            s.fill(torch.full((nbytes,), 0x5A, dtype=torch.uint8, device=dev))
        own = [torch.full((nbytes,), 0x5A, dtype=torch.uint8, device=dev) for _ in range(8)]
        torch.cuda.synchronize()
        child.stdin.write("go\n")
        child.stdin.flush()
        after = child.stdout.readline().split()
        assert after[:2] == ["after", "0"], after
        for s in secret:
            s.close()
        del own
    finally:
        child.kill()
        child.wait()


def test_a_room_copied_to_the_host_holds_what_the_room_held_then():
    """The judge's copy of a room where the device has no room for it (lending._copied): fresh host
    memory through the pinned stage, its bytes those of the room when copied."""
    import torch
    from kernelvet import crossing, devshare
    dev = torch.device("cuda", 0)
    values = torch.randn(3 * crossing.CHUNK + 5, device=dev)   # more than one stage's worth
    lent = devshare.Lent(values.numel() * 4, dev)
    try:
        lent.fill(values)
        got = lent.host_tensor(torch.float32, (values.numel(),))
        lent.raw.zero_()
        torch.cuda.synchronize()
        assert got.device.type == "cpu" and torch.equal(got, values.cpu())
    finally:
        lent.close()
