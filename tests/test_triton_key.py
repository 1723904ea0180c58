"""triton_key.prepare: Triton's installation hash stored across processes, trusted only while the
installation's fingerprint matches. Each case runs in a fresh process (Triton caches the hash
per process) with its own TRITON_CACHE_DIR."""

import json
import os

import pytest

from .test_worker_bits import in_a_fresh_process

pytest.importorskip("triton")

_PREPARE = """
import json, sys
from kernelvet import triton_key
how = triton_key.prepare()
mod = triton_key._defining_module()
print(json.dumps({"how": how, "key": mod.triton_key(), "file": triton_key.cache_file()}))
"""
_TRUE_KEY = """
import json
from kernelvet import triton_key
print(json.dumps({"key": triton_key._defining_module().triton_key()}))
"""


def _run(code: str, cache_dir: str) -> dict:
    return json.loads(in_a_fresh_process(code, TRITON_CACHE_DIR=cache_dir).strip().splitlines()[-1])


@pytest.fixture(scope="module")
def true_key(tmp_path_factory):
    return _run(_TRUE_KEY, str(tmp_path_factory.mktemp("plain")))["key"]


def test_computed_once_then_stored(tmp_path, true_key):
    first = _run(_PREPARE, str(tmp_path))
    assert first["how"] == "computed" and first["key"] == true_key
    assert os.path.dirname(first["file"]) == str(tmp_path / "kernelvet")
    again = _run(_PREPARE, str(tmp_path))
    assert again["how"] == "stored" and again["key"] == true_key


def test_the_stored_hash_is_what_triton_then_answers(tmp_path):
    """Installed wherever Triton looks the hash up (so a matching fingerprint is all it trusts)."""
    _run(_PREPARE, str(tmp_path))
    path = tmp_path / "kernelvet" / "triton-key.json"
    saved = json.loads(path.read_text())
    path.write_text(json.dumps({"fingerprint": saved["fingerprint"], "key": "planted"}))
    got = _run(_PREPARE + "\nimport triton.runtime.jit, triton.compiler\n"
               "mods = [m for n, m in sys.modules.items() if n.startswith('triton') and hasattr(m, 'triton_key')]\n"
               "assert mods and all(m.triton_key() == 'planted' for m in mods), mods\n", str(tmp_path))
    assert got["how"] == "stored" and got["key"] == "planted"


@pytest.mark.parametrize("content", [
    json.dumps({"fingerprint": "an installation since changed", "key": "stale"}),
    "not json",
    json.dumps(["a list"]),
])
def test_a_stale_or_broken_store_is_recomputed(tmp_path, true_key, content):
    (tmp_path / "kernelvet").mkdir()
    (tmp_path / "kernelvet" / "triton-key.json").write_text(content)
    got = _run(_PREPARE, str(tmp_path))
    assert got["how"] == "computed" and got["key"] == true_key
    assert json.loads((tmp_path / "kernelvet" / "triton-key.json").read_text())["key"] == true_key


def test_an_unwritable_cache_dir_still_computes(tmp_path, true_key):
    blocked = tmp_path / "file-not-dir"
    blocked.write_text("")
    got = _run(_PREPARE, str(blocked))
    assert got["how"] == "computed" and got["key"] == true_key


def test_a_cli_check_never_imports_triton_in_the_judge(tmp_path):
    """The judge runs no Triton code (its workers do); importing Triton for the report's version
    alone cost a cold CLI's vet 0.3 s on the H200's host. The version is still reported."""
    report = str(tmp_path / "report.json")
    got = _run(f"""
import importlib.metadata, json, sys
from kernelvet import cli
from kernelvet.practice import by_name
code = cli.main(["check", by_name("broadcast_matmul").path, "--ref", "matmul", "--device", "cpu", "--json", {report!r}])
print(json.dumps({{"code": code, "imported": "triton" in sys.modules, "installed": importlib.metadata.version("triton"),
                  "reported": json.load(open({report!r}))["versions"].get("triton")}}))
""", str(tmp_path))
    assert got["code"] == 0 and not got["imported"], got
    assert got["reported"] == got["installed"], got


@pytest.mark.gpu
def test_a_cuda_worker_starts_with_tritons_installation_hash_paid(tmp_path):
    """The launcher hashes Triton's installation, or installs the hash it stored, before it forks
    (0.3-0.4 s that each worker's first kernel would otherwise pay); a CUDA worker finds the answer
    cached, whichever way the launcher got it."""
    from kernelvet import vet
    from kernelvet.practice import by_name
    from kernelvet.report import Verdict
    honest = by_name("triton_gemm_ieee")
    path = tmp_path / "key.py"
    path.write_text(open(honest.path).read() + "\nimport triton.runtime.cache as _c\n"
                    "print('KEYS', _c.triton_key.cache_info().currsize, flush=True)\n")
    report = vet(str(path), honest.problem_ref, device="cuda")
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
    assert "KEYS 1" in report.candidate_output, report.candidate_output
