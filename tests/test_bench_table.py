"""bench/gpu_bench.py's derived numbers: which do_bench runs were host-bound, and the ratio to the
others (the results tables are rendered from recorded runs by this code)."""

import importlib.util
import os
import sys

import pytest

pytest.importorskip("triton")
_BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "bench")
sys.path.insert(0, _BENCH)   # as when gpu_bench.py runs as a script: its siblings import by name
try:
    import dobench_process
    _spec = importlib.util.spec_from_file_location("gpu_bench", os.path.join(_BENCH, "gpu_bench.py"))
    gpu_bench = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(gpu_bench)
finally:
    sys.path.remove(_BENCH)


def _row(do_bench_us, gaps_us, kernelvet_us, flush_us=61.5):
    ms = lambda xs: [x / 1e3 for x in xs]   # noqa: E731
    return {"kernel": "triton_gemm_ieee", "shape": [256, 256, 256],
            "do_bench_ms": sorted(ms(do_bench_us))[1], "kernelvet_ms": sorted(ms(kernelvet_us))[1],
            "do_bench_ref_ms": 0.0119, "kernelvet_ref_ms": 0.0116, "ratio": 0.0, "ref_ratio": 0.0,
            "runs": {"do_bench": ms(do_bench_us), "kernelvet": ms(kernelvet_us)},
            "do_bench_host_gap_us": gaps_us, "do_bench_flush_us": flush_us}


def test_a_run_paced_slower_than_flush_plus_kernel_is_host_bound():
    # a recorded H200 run: paces 87 and 84 us against 61.5 + 12.9 us; 70 us is not
    r = _row([17.70, 15.55, 12.99], [87, 84, 70], [12.22, 12.86, 12.86])
    assert gpu_bench._paced_by_device(r["runs"]["do_bench"], r["do_bench_host_gap_us"], 61.5,
                                      r["runs"]["kernelvet"]) == [12.99 / 1e3]
    assert gpu_bench._host_bound_cells(r) == "2 of 3 | 0.990"


def test_no_clean_run_and_no_recorded_pace_say_so():
    assert gpu_bench._host_bound_cells(_row([17.7, 15.6, 16.0], [90, 95, 99], [12.2, 12.9, 12.9])) == "3 of 3 | -"
    old = _row([12.9, 13.3, 12.7], [0, 0, 0], [12.3, 12.9, 12.8])
    del old["do_bench_host_gap_us"]
    assert gpu_bench._host_bound_cells(old) == "- | -"
    table = gpu_bench.table({"device": "H200", "date": "d", "torch": "t", "triton": "x", "python": "p",
                             "timing": [old], "latency": [], "cli": []})
    assert "| - | - |" in table


def test_pinning_holds_only_inside_and_restores_the_affinity(monkeypatch):
    before = os.sched_getaffinity(0)
    core = min(before)
    monkeypatch.setattr(dobench_process, "PIN_CPU", core)
    with dobench_process.pinned():
        assert os.sched_getaffinity(0) == {core}
    assert os.sched_getaffinity(0) == before


def test_a_flush_per_run_judges_each_run_by_its_own():
    # do_bench's flush is measured in its own process after each of its runs
    r = _row([17.70, 13.2, 12.99], [80, 80, 70], [12.22, 12.86, 12.86], flush_us=[60.0, 70.0, 60.0])
    assert gpu_bench._host_bound_cells(r) == f"1 of 3 | {12.86 / ((13.2 + 12.99) / 2):.3f}"


def test_rounds_past_the_third_count_on_both_sides():
    # two host-bound runs in three: two more rounds gave do_bench its third run not host-bound
    r = _row([17.70, 15.55, 12.99, 13.10, 12.80], [87, 84, 70, 66, 58], [12.22, 12.86, 12.86, 12.50, 12.70])
    assert gpu_bench._host_bound_cells(r) == f"2 of 5 | {12.70 / 12.99:.3f}"


def test_do_bench_against_itself_is_tabled_per_process():
    procs = [{"triton": [0.0122, 0.0124, 0.0125], "torch": [0.0117, 0.0118, 0.0119]},
             {"triton": [0.0137, 0.0138, 0.0132], "torch": [0.0128, 0.0127, 0.0129]},
             {"error": "CUDA error"}]
    row = {"shape": [256, 256, 256], "processes": procs, "triton_spread": 0.0137 / 0.0124,
           "torch_spread": 0.0128 / 0.0118}
    table = gpu_bench.table({"device": "H200", "date": "d", "torch": "t", "triton": "x", "python": "p",
                             "timing": [], "latency": [], "cli": [], "processes": [row]})
    assert "| 256x256x256 | 12.40, 13.70 | 1.105 | 11.80, 12.80 | 1.085 |" in table


def _with_spin_led(r, ms, host_bound=0):
    r.update(do_bench_paced_ms=sorted(ms)[1] / 1e3, do_bench_paced_host_bound=host_bound,
             paced_ratio=r["kernelvet_ms"] / (sorted(ms)[1] / 1e3), ratio=r["kernelvet_ms"] / r["do_bench_ms"],
             do_bench_paced={"ms": [x / 1e3 for x in ms], "host_gap_us": [95, 99, 101], "flush_us": [262] * 3})
    return r


def test_issue_4_compares_with_do_bench_unless_one_of_its_first_three_runs_was_host_bound():
    paced = _with_spin_led(_row([12.67, 12.77, 12.77], [47, 62, 57], [12.77, 12.9, 12.9]), [12.8, 12.7, 12.9])
    assert gpu_bench.compared(paced) == (pytest.approx(12.9 / 12.77), "do_bench")
    bound = _with_spin_led(_row([17.70, 15.55, 12.99], [87, 84, 70], [12.22, 12.86, 12.86]), [12.8, 12.7, 12.9])
    assert gpu_bench.compared(bound) == (pytest.approx(12.86 / 12.8), "spin-led do_bench")
    table = gpu_bench.table({"device": "H200", "date": "d", "torch": "t", "triton": "x", "python": "p",
                             "timing": [paced, bound], "latency": [], "cli": []})
    assert f"| **{12.9 / 12.77:.3f}** |" in table and f"| **{12.86 / 12.8:.3f}** (spin-led do_bench) |" in table


def test_the_torch_reference_is_compared_by_the_same_rule():
    r = _with_spin_led(_row([17.70, 15.55, 12.99], [47, 52, 57], [12.22, 12.86, 12.86]), [12.8, 12.7, 12.9])
    r["runs"].update(do_bench_ref=[0.0125, 0.0123, 0.0124], kernelvet_ref=[0.0120, 0.0120, 0.0121])
    r.update(ref_ratio=0.0120 / 0.0124, ref_paced_ratio=0.0120 / 0.0121, do_bench_ref_paced_ms=0.0121,
             do_bench_ref_host_gap_us=[40, 45, 50])
    assert gpu_bench.compared(r, ref=True) == (pytest.approx(0.0120 / 0.0124), "do_bench")
    r["do_bench_ref_host_gap_us"] = [40, 95, 50]   # one of three behind 61.5 us of flush + 12 us
    assert gpu_bench.compared(r, ref=True) == (pytest.approx(0.0120 / 0.0121), "spin-led do_bench")
    del r["do_bench_ref_host_gap_us"]   # older results did not record the reference's pace
    assert gpu_bench.compared(r, ref=True) == (pytest.approx(0.0120 / 0.0124), "do_bench")


def test_the_spin_led_cells_name_its_own_host_bound_runs():
    r = _with_spin_led(_row([17.70, 15.55, 12.99], [87, 84, 70], [12.22, 12.86, 12.86]), [12.8, 12.7, 12.9], 1)
    assert gpu_bench._paced_cells(r) == f"0.0128 | {12.86 / 12.8:.3f} (1 of 3 runs host-bound)"


def test_the_spin_lead_patches_tritons_driver_only_inside(monkeypatch):
    import triton
    import torch

    class Driver:   # (no GPU here: Triton has no active driver to patch, torch no device to spin)
        def clear_cache(self, cache):
            cache.append("zeroed")

    spins = []
    monkeypatch.setattr(triton.runtime.driver, "_active", Driver())
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: type("P", (), {"clock_rate": 1_000_000}))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "_sleep", spins.append)
    drv, cache = triton.runtime.driver.active, []
    with dobench_process.spin_lead():
        drv.clear_cache(cache)
    drv.clear_cache(cache)
    assert spins == [dobench_process.LEAD_US * 1000] and cache == ["zeroed", "zeroed"]   # 1 GHz: 1000 cycles a us
    assert "clear_cache" not in vars(drv)
