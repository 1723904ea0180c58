"""driver_context: the CLI judge's CUDA context, made by the driver beside `import torch`."""

import ctypes
import os
import subprocess
import sys

import pytest

from kernelvet.driver_context import DriverContext, _index
from kernelvet.practice import by_name


@pytest.mark.parametrize("device, index", [("auto", 0), ("cuda", 0), ("cuda:3", 3), ("cpu", None),
                                           ("cuda:", None), ("cuda:-1", None), ("cuda:x", None), ("tpu", None)])
def test_only_a_cuda_device_names_an_index(device, index):
    assert _index(device) == index


def test_not_a_cuda_device_leaves_it_to_torch():
    ctx = DriverContext("cpu")
    ctx.join(5)
    assert ctx.ended is not None and ctx.why == "not a CUDA device"


def _driver() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


@pytest.mark.skipif(_driver(), reason="a CUDA driver is installed here")
def test_without_a_driver_it_says_so():
    ctx = DriverContext("auto")
    ctx.join(5)
    assert ctx.why == "no CUDA driver (libcuda.so.1)"


@pytest.mark.gpu
def test_torch_runs_on_the_context_the_driver_made():
    # made beside the import, as the CLI does; then torch and a Triton kernel use it
    code = ("from kernelvet.driver_context import DriverContext\n"
            "ctx = DriverContext('cuda')\n"
            "import torch\n"
            "from kernelvet.practice import kernels\n"
            "ctx.join()\n"
            "assert ctx.why is None, ctx.why\n"
            "a = torch.ones(64, 64, device='cuda')\n"
            "assert float(kernels.matmul(a, a, ieee=True).sum()) == 64.0 ** 3\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.gpu
def test_the_cli_makes_its_context_beside_the_import(tmp_path):
    cmd = [sys.executable, "-m", "kernelvet", "check", by_name("triton_gemm_ieee").path, "--ref", "matmul",
           "--device", "cuda", "--verbose", "--no-server", "--json", str(tmp_path / "r.json")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    start_up = [ln for ln in done.stdout.splitlines() if ln.startswith("start-up")][-1]
    assert "CUDA context made (driver)" in start_up, start_up
