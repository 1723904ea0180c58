"""How big a problem is, from what the judge itself computed: the message limits a worker must
keep to, and whether the problem fits the device at all.

No fixed cap: a worker's message may carry at most what the problem's own outputs can take
(every output counted at the widest dtype, 8 bytes, and at least as large as the largest input
or weight, so that a candidate returning a tensor of the wrong shape is judged wrong, not cut
off), times MARGIN, times the outputs that message carries. A worker announcing more is a
protocol violation: no honest worker of this problem can need it.
"""

from __future__ import annotations

import dataclasses

import torch

MARGIN = 2               # slack on the largest tensor a message of this problem may carry
WIDEST = 8               # bytes per element of the widest dtype the protocol carries
FLOOR_BYTES = 1 << 20    # tiny problems: a message may always carry this much

# Input sets a worker holds at once while it vets a candidate (warm-up, fresh sets, the ordering
# probe's, the unseen sets: see the judge's plan) and outputs it keeps beside them (one per set,
# the timing run's first outputs, a batch of timed outputs): for `fits`.
SETS_HELD = 10
OUTPUTS_HELD = 16


@dataclasses.dataclass(frozen=True)
class ProblemSize:
    """One input set, the reference's outputs and its weights, in elements and bytes."""

    input_bytes: int          # one input set, as drawn
    largest_input: int        # elements of its largest tensor
    output_elements: int      # the reference's outputs, all of them
    weight_bytes: int         # parameters and buffers of the reference Model
    largest_weight: int       # elements of its largest parameter or buffer

    @property
    def output_bytes(self) -> int:
        return self.output_elements * WIDEST

    @property
    def per_output(self) -> int:
        """Bytes one output of a message may take, at most."""
        return MARGIN * WIDEST * max(self.output_elements, self.largest_input, self.largest_weight, 1)

    def message_limit(self, outputs: int) -> int:
        """Tensor bytes a worker's message carrying `outputs` outputs may announce."""
        return max(FLOOR_BYTES, outputs * self.per_output)

    def device_need(self) -> int:
        """Bytes of device memory a vet of this problem needs, about (the candidate's own scratch
        memory not counted): input sets and outputs held by the worker, the weights twice
        (reference, then candidate), and the judge's float64 references when it judges there."""
        return SETS_HELD * self.input_bytes + OUTPUTS_HELD * self.output_bytes + 2 * self.weight_bytes

    def describe(self) -> str:
        return (f"one input set {_gib(self.input_bytes)}, outputs {_gib(self.output_bytes)} (float64), "
                f"weights {_gib(self.weight_bytes)}")


def measure(inputs: list, outputs, model: torch.nn.Module | None) -> ProblemSize:
    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    weights = list(model.parameters()) + list(model.buffers()) if model is not None else []
    return ProblemSize(
        input_bytes=sum(x.numel() * x.element_size() for x in tensors),
        largest_input=max((x.numel() for x in tensors), default=0),
        output_elements=sum(x.numel() for x in _leaves(outputs)),
        weight_bytes=sum(x.numel() * x.element_size() for x in weights),
        largest_weight=max((x.numel() for x in weights), default=0),
    )


def _leaves(out) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for x in out for t in _leaves(x)]
    return []


def fits(size: ProblemSize, memory_bytes: int | None, what: str = "the device's") -> str | None:
    """None if a problem of `size` fits a device of `memory_bytes`, else why not, in one line."""
    if not memory_bytes:
        return None
    need = size.device_need()
    if need <= memory_bytes:
        return None
    return (f"the problem needs about {_gib(need)} of device memory ({SETS_HELD} input sets and "
            f"{OUTPUTS_HELD} outputs held at once; {size.describe()}), more than {what} {_gib(memory_bytes)}")


def largest_fitting_set(memory_bytes: int, output_to_input: float = 1.0) -> int:
    """The largest input set (bytes) that fits `memory_bytes`, for outputs `output_to_input` times
    the input set's float32 size and no weights (the docs quote this)."""
    per_input_byte = SETS_HELD + OUTPUTS_HELD * output_to_input * WIDEST / 4
    return int(memory_bytes // per_input_byte)


def _gib(n: int) -> str:
    if n < 1 << 30:
        return f"{n / (1 << 20):.1f} MiB"
    return f"{n / (1 << 30):.1f} GiB"


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether `exc` says the machine ran out of memory (host or device), not that the code is wrong."""
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and ("out of memory" in text.lower() or "DefaultCPUAllocator" in text
                                              and "not enough memory" in text)
