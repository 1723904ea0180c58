import os
import socket

import pytest
import torch


# The CLI asks a `kernelvet serve` first: tests must never reach one the developer left running.
os.environ["KERNELVET_SOCKET"] = os.path.join(os.path.dirname(__file__), ".no-such-server", "serve.sock")


def pytest_collection_modifyitems(config, items):
    """GPU tests run only where CUDA is; elsewhere they are skipped, with the reason."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (run `pytest -m gpu` on the GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def pair():
    """Two connected Unix sockets, for what crosses the judge-worker wire."""
    a, b = socket.socketpair()
    yield a, b
    a.close()
    b.close()


@pytest.fixture(scope="session")
def practice_dir():
    from kernelvet import practice
    return practice.HERE


@pytest.fixture
def write(tmp_path):
    """Write a small file into the test's temp dir and return its path."""
    def _write(name: str, text: str) -> str:
        path = tmp_path / name
        path.write_text(text)
        return os.fspath(path)
    return _write
