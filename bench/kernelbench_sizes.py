"""How much memory each KernelBench problem needs, from its shapes alone (no tensor allocated).

    python bench/kernelbench_sizes.py [--kernelbench .kernelbench/KernelBench] [--levels 1 2 3] [--out DIR]
        [--device-gib 139.8] [--host-gib 128]

For every problem file the shapes and dtypes of one input set (`get_inputs()`), the reference
Model's weights and the reference's outputs come from one run with `torch.device("meta")` as the
default device around `get_init_inputs()`, `get_inputs()`, `Model(...)` and the forward (shapes
propagate, nothing is computed or allocated); where an op has no meta kernel, from one run under
FakeTensorMode. A problem where neither works is listed with both reasons. The same run counts
the forward's own peak of live intermediate tensors (what the reference needs beside its inputs).

The table: bytes of one input set, of the outputs (at the output's dtype), of the weights; the
estimate of a vet's device memory kernelvet used to refuse problems by (`sizes.ProblemSize.
device_need`: 10 input sets, 16 float64 outputs, the weights twice), the footprint of the plan a
vet of that problem now follows on the device and on the host (`sizes.footprint`, under the
holding `sizes.holding` chooses for the device), and whether that fits an H200 (its device, and
90% of its host: `sizes.host_fits`).
Where no holding fits, the reference's float64 forward on two rows of values drawn for those shapes
says whether its references may be made in slices of rows (`batch_rows` in sizes.json).
`--out DIR` writes sizes.json (every number) and sizes.md (the table).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # its siblings, by name

import kernelbench_sweep  # noqa: E402

from kernelvet import sizes  # noqa: E402
from kernelvet.errors import UsageError  # noqa: E402
from kernelvet.formats import kernelbench  # noqa: E402

DEFAULT_KERNELBENCH = os.path.join(".kernelbench", "KernelBench")
H200_DEVICE_BYTES = 150_119_792_640   # torch.cuda.get_device_properties(...).total_memory on an H200 (139.8 GiB)
H200_HOST_BYTES = 128 << 30


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    shape: tuple[int, ...]
    dtype: str

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.numel * _itemsize(self.dtype)


@dataclasses.dataclass(frozen=True)
class Shapes:
    """One problem's tensors, as one shape-only run saw them; `error` instead where none worked."""

    path: str
    how: str | None = None                    # "meta" or "fake"
    inputs: tuple[TensorSpec, ...] = ()       # one input set (tensors only)
    weights: tuple[TensorSpec, ...] = ()      # parameters and buffers of the reference Model
    outputs: tuple[TensorSpec, ...] = ()      # the reference's output leaves
    forward_peak: int | None = None           # bytes of intermediates live at once in the forward (meta runs)
    forward_peak64: int | None = None         # the same with floating tensors at 8 bytes (the float64 reference)
    error: str | None = None

    def size(self) -> sizes.ProblemSize:
        return sizes.ProblemSize(
            input_bytes=sum(t.nbytes for t in self.inputs),
            largest_input=max((t.numel for t in self.inputs), default=0),
            output_elements=sum(t.numel for t in self.outputs),
            weight_bytes=sum(t.nbytes for t in self.weights),
            largest_weight=max((t.numel for t in self.weights), default=0),
            output_itemsize=max((_itemsize(t.dtype) for t in self.outputs), default=4),
            forward_bytes64=self.forward_peak64 or 0)


def _itemsize(dtype: str) -> int:
    return torch.empty((), dtype=getattr(torch, dtype)).element_size()


def _spec(t: torch.Tensor) -> TensorSpec:
    return TensorSpec(tuple(int(d) for d in t.shape), str(t.dtype).removeprefix("torch."))


def _leaves(out) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for x in out for t in _leaves(x)]
    if isinstance(out, (bool, int, float)):   # a number travels as a 0-dim tensor
        return [torch.empty((), dtype=torch.float32 if isinstance(out, float) else torch.int64, device="meta")]
    return []


def _run(mod, how: str, path: str) -> Shapes:
    torch.manual_seed(0)
    if how == "meta":
        ctx, live = torch.device("meta"), sizes.LiveBytes()
    else:
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.fx.experimental.symbolic_shapes import ShapeEnv
        ctx, live = FakeTensorMode(allow_non_fake_inputs=True, shape_env=ShapeEnv()), None
    with ctx, torch.no_grad():
        init = mod.get_init_inputs()
        drawn = list(mod.get_inputs())   # numbers included: the forward takes them as they are
        inputs = [x for x in drawn if isinstance(x, torch.Tensor)]
        model = mod.Model(*init)
        weights = list(model.parameters()) + list(model.buffers()) if isinstance(model, torch.nn.Module) else []
        if live is not None:
            with live:
                out = model(*drawn)
        else:
            out = model(*drawn)
        outs = _leaves(out)
    return Shapes(path=path, how=how, inputs=tuple(map(_spec, inputs)), weights=tuple(map(_spec, weights)),
                  outputs=tuple(map(_spec, outs)), forward_peak=live.peak if live else None,
                  forward_peak64=live.peak64 if live else None)


def shapes(path: str) -> Shapes:
    """The problem's tensors from a shape-only run: meta first, FakeTensorMode where meta fails."""
    try:
        mod = kernelbench.load_reference(path)
    except UsageError as exc:
        return Shapes(path=path, error=str(exc))
    errors = []
    for how in ("meta", "fake"):
        try:
            return _run(mod, how, path)
        except Exception as exc:  # noqa: BLE001 - an op without a meta kernel: the next way, else the reason
            errors.append(f"{how}: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}")
    return Shapes(path=path, error="; ".join(errors))


def problems(kernelbench_dir: str, levels) -> list[tuple[int, int, str]]:
    """(level, number, path) of every problem of `levels`, as the sweep finds them."""
    return kernelbench_sweep.problems(kernelbench_dir, list(levels), None)


def row(level: int, number: int, path: str, device_bytes: int = H200_DEVICE_BYTES,
        host_bytes: int = H200_HOST_BYTES) -> dict:
    """One problem's line of the table (JSON-able)."""
    sh = shapes(path)
    out = {"level": level, "number": number, "problem": os.path.basename(path), "how": sh.how, "error": sh.error}
    if sh.error:
        return out
    size = sh.size()
    rows = []   # the rows it may be cut into, asked only where nothing leaner fits

    def batch_rows() -> int:
        if not rows:
            rows.append(_rows(path))
        return rows[0]
    hold = sizes.holding(size, device_bytes, host_bytes, rows=batch_rows, copies_on_host=True)
    # on CUDA the device draws the sets, and keeps them where the plan still fits with them
    hold = sizes.with_sets_on_device(size, hold, device_bytes, host_bytes, rows=batch_rows)
    foot = sizes.footprint(size, hold)
    full = sizes.footprint(size, sizes.Holding())   # what the plan held before it had a lean holding
    out.update({
        "inputs": [[list(t.shape), t.dtype] for t in sh.inputs],
        "outputs": [[list(t.shape), t.dtype] for t in sh.outputs],
        "input_set_bytes": size.input_bytes, "output_bytes": size.output_elements * size.output_itemsize,
        "output64_bytes": size.output_bytes, "weight_bytes": size.weight_bytes,
        "forward_peak_bytes": sh.forward_peak, "forward_peak64_bytes": sh.forward_peak64,
        "old_estimate_bytes": size.device_need(),
        "holding": dataclasses.asdict(hold), "batch_rows": rows[0] if rows else None,
        "device_bytes": foot.device, "host_bytes": foot.host,
        "device_terms": foot.device_terms, "host_terms": foot.host_terms,
        "reference_alone_bytes": sizes.reference_alone(size),
        "full_plan_device_bytes": full.device, "full_plan_host_bytes": full.host,
        "full_plan_fits": full.device <= device_bytes and full.host <= host_bytes,
        "old_fits_device": size.device_need() <= device_bytes,
        "fits_device": foot.device <= device_bytes, "fits_host": sizes.host_fits(size, host_bytes, hold=hold) is None,
        "comfortable": sizes.reference_alone(size) <= device_bytes // 2,
    })
    return out


def _rows(path: str) -> int:
    """The rows the reference's batch may be cut into (judge.row_slices.batch_rows, on two rows of
    values drawn in [0, 1) for get_inputs()'s shapes, in float64 on the host); 1 where it may not."""
    from kernelvet.judge.row_slices import batch_rows
    from kernelvet.problem import load_problem
    try:
        prob = load_problem(path)
        shapes = prob.meta_inputs()
        return batch_rows(prob.build_model(prob.init_inputs(), 0), shapes, torch.device("cpu")) if shapes else 1
    except Exception:  # noqa: BLE001 - a problem that cannot be built here: made whole
        return 1


def _gib(n) -> str:
    return "-" if n is None else f"{n / (1 << 30):.2f}"


def table(rows: list[dict]) -> str:
    head = ("| problem | input set GiB | outputs GiB | weights GiB | old estimate GiB | old fits | holding "
            "| device GiB | host GiB | fits device | fits host |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
    lines = []
    for r in rows:
        name = f"L{r['level']} {r['problem']}"
        if r.get("error"):
            lines.append(f"| {name} | no shapes: {r['error'][:160]} | | | | | | | | | |")
            continue
        lines.append(f"| {name} | {_gib(r['input_set_bytes'])} | {_gib(r['output_bytes'])} | {_gib(r['weight_bytes'])} "
                     f"| {_gib(r['old_estimate_bytes'])} | {'yes' if r['old_fits_device'] else 'no'} "
                     f"| {sizes.Holding(**r['holding']).describe()} | {_gib(r['device_bytes'])} | {_gib(r['host_bytes'])} "
                     f"| {'yes' if r['fits_device'] else 'no'} | {'yes' if r['fits_host'] else 'no'} |")
    return head + "\n".join(lines) + "\n"


def summary(rows: list[dict]) -> dict:
    ok = [r for r in rows if not r.get("error")]
    return {
        "problems": len(rows), "no_shapes": [r["problem"] for r in rows if r.get("error")],
        "old_refused": sum(not r["old_fits_device"] for r in ok),
        "old_refused_level1": sum(not r["old_fits_device"] for r in ok if r["level"] == 1),
        "fit": sum(r["fits_device"] and r["fits_host"] for r in ok),
        "full_plan_fit": sum(r["full_plan_fits"] for r in ok),
        "lean": sum(r["holding"]["lean"] for r in ok),
        "sets_on_device": sum(r["holding"]["sets_on_device"] for r in ok),
        "sets_through_the_host": [f"level{r['level']}/{r['problem']}" for r in ok if not r["holding"]["sets_on_device"]],
        "do_not_fit": [f"level{r['level']}/{r['problem']}" for r in ok if not (r["fits_device"] and r["fits_host"])],
        "comfortable_but_not_fit": [f"level{r['level']}/{r['problem']}" for r in ok
                                    if r["comfortable"] and not (r["fits_device"] and r["fits_host"])],
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernelbench", default=DEFAULT_KERNELBENCH)
    ap.add_argument("--levels", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--device-gib", type=float, default=H200_DEVICE_BYTES / (1 << 30))
    ap.add_argument("--host-gib", type=float, default=H200_HOST_BYTES / (1 << 30))
    ap.add_argument("--out", help="folder for sizes.json and sizes.md")
    args = ap.parse_args(argv)
    dev, host = int(args.device_gib * (1 << 30)), int(args.host_gib * (1 << 30))
    rows = [row(level, number, path, dev, host) for level, number, path in problems(args.kernelbench, args.levels)]
    text = table(rows)
    summ = summary(rows)
    print(text)
    print(json.dumps(summ, indent=1))
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "sizes.json"), "w") as fh:
            json.dump({"device_bytes": dev, "host_bytes": host, "summary": summ, "problems": rows}, fh, indent=1)
        with open(os.path.join(args.out, "sizes.md"), "w") as fh:
            fh.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
