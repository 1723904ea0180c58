"""The judge's input sets drawn ahead on one thread: the same sets as drawn in order, lazily."""

import threading
import time

import pytest
import torch

from kernelvet.draws import Draws


def _draw(key):
    torch.manual_seed(key)
    time.sleep(0.01)   # a yield in the middle: an interleaved draw would change the values
    return torch.randn(64)


def test_sets_are_what_their_seeds_say_in_any_order_of_use():
    want = {key: _draw(key) for key in (1, 2, 3, 4, 5, 9)}   # before: nothing else may draw meanwhile
    d = Draws(_draw, order=[1, 2, 3, 4, 5], ahead=2)
    try:
        for key in (3, 1, 5, 2, 4, 9):   # 9: not in the order, drawn on demand
            assert torch.equal(d[key], want[key])
    finally:
        d.close()


def test_only_a_few_ahead_are_drawn_and_close_stops_the_rest():
    drawn, gate = [], threading.Event()

    def slow(key):
        drawn.append(key)
        if key != 1:
            gate.wait(2)
        return key
    d = Draws(slow, order=[1, 2, 3, 4, 5, 6], ahead=2)
    assert d[1] == 1
    time.sleep(0.05)
    assert drawn == [1, 2]           # 2 runs, 3 waits behind it; 4-6 were never asked for
    gate.set()
    d.close()
    assert drawn in ([1, 2], [1, 2, 3])   # 3 was cancelled unless it had started


def test_draws_started_for_sets_not_needed_after_all_are_dropped():
    """A re-measurement's unseen sets where none was needed, a loop's next attempts once one
    settled: drawn ahead and held, each was a set beside the `ahead` a lean plan counts (9 sets live
    where it counts 6, KernelBench's argmax at 1/16 on the CPU). Asked for after all, drawn again."""
    want = {key: _draw(key) for key in (1, 2, 3)}
    d = Draws(_draw, order=[1, 2, 3], ahead=2)
    try:
        assert torch.equal(d[1], want[1]) and set(d._pending) == {2, 3}
        d.forget([2, 3, 7])
        assert not d._pending
        assert torch.equal(d[3], want[3])
    finally:
        d.close()


def test_a_draws_error_reaches_the_user_of_that_set():
    def bad(key):
        if key == 2:
            raise ValueError("get_inputs() failed")
        return key
    d = Draws(bad, order=[1, 2, 3])
    try:
        assert d[1] == 1
        with pytest.raises(ValueError, match="get_inputs"):
            d[2]
        assert d[3] == 3
    finally:
        d.close()


def test_a_set_drawn_again_must_come_out_as_it_first_did():
    """A set let go and read again is drawn again from its seed: the same set passes, one whose
    generator moved on since (another draw between the seed and the set's) is the harness's
    failure, not a finding against a candidate."""
    from kernelvet.errors import HarnessError
    shifted = []

    def draw(key):
        torch.manual_seed(key)
        if shifted:
            torch.randn(3)
        return [torch.randn(4096), 7]

    d = Draws(draw, order=[1, 2], ahead=0)
    try:
        first = d[1]
        d.pop(1)
        assert torch.equal(d[1][0], first[0])   # drawn again: the same
        d.pop(1)
        shifted.append(True)
        with pytest.raises(HarnessError, match="drawn again"):
            d[1]
        assert d[2][1] == 7   # a set first drawn now sets its own print
    finally:
        d.close()
