"""Comparison helpers shared by the tasks of this directory, named as GPU MODE's tasks name theirs
(a task's checker calls `make_match_reference`; kernelvet reads the tolerance from that call)."""

import torch


def allclose_report(received, expected, rtol=1e-05, atol=1e-08):
    """'' when every element is within atol + rtol * |expected|, else what differs."""
    if received.shape != expected.shape:
        return f"shape {tuple(received.shape)} is not {tuple(expected.shape)}"
    bad = (received.double() - expected.double()).abs() > atol + rtol * expected.double().abs()
    return f"{int(bad.sum())} elements differ" if bool(bad.any()) else ""


def make_match_reference(reference, **kwargs):
    def check(data, output):
        return allclose_report(output, reference(data), **kwargs)
    return check
