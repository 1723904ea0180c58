"""The library policy: what a candidate must write itself, in named levels (`--library-policy`).

  own-kernels       the bulk (OWN_SHARE_MIN) of the call's device time runs in kernels built from
                    the candidate's own source (Triton, load_inline/`__global__`), by the kernel
                    audit's trace and the symbols of the binaries that build produced (see
                    `attribution`). The default on CUDA. The CPU has no kernel trace: there it is
                    judged as no-reference-ops, and the finding says so.
  no-reference-ops  the candidate dispatches none of the compute ops the reference dispatched
                    (KernelBench's rule; the default on the CPU). Views, allocation, fills and
                    copies/casts are not compute. Pointwise ops (by their aten tag) are the
                    problem's work only where it has no other: an activation's relu is forbidden,
                    but the bias add and relu after a convolution are its epilogue, glue the CPU
                    can write no other way, so only the convolution is. A reference that
                    contracts (matmul, convolution, attention) forbids every library contraction:
                    a matmul written as a 1x1 convolution is still the library's contraction.
  off               no library rule: the same as `--allow library-call`.

`--allow-op OP` (repeatable) and a problem file's `ALLOWED_OPS` permit named library ops (and
their family: `conv2d` permits the convolution ops) under every level; their device time counts
as allowed. Everything here is judge-side data: names and sets, no candidate code.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Iterable

LEVELS = ("own-kernels", "no-reference-ops", "off")
# The bulk: at least this share of the call's device time (less allowed ops' time) in the
# candidate's own kernels. An honest fused kernel spends a few percent in PyTorch's glue
# (an output allocation's fill, a cast, a transpose copy); a library call in disguise spends
# most of its time outside the candidate's kernels. 0.8 leaves honest glue 20% of the time.
OWN_SHARE_MIN = 0.8


def default_level(device_type: str) -> str:
    return "own-kernels" if device_type == "cuda" else "no-reference-ops"


def parse_level(text: str | None, device_type: str) -> str:
    """A level named by the user (None: the device's default); ValueError names the valid ones."""
    if text is None or text == "auto":
        return default_level(device_type)
    if text not in LEVELS:
        raise ValueError(f"unknown library policy {text!r}; valid: {', '.join(LEVELS)}")
    return text


@dataclasses.dataclass(frozen=True)
class Policy:
    level: str                               # one of LEVELS, as it applies (off when library-call is waived)
    judged_as: str                           # the level whose rule decides on this device
    allowed_ops: frozenset[str] = frozenset()   # aten names (no namespace) permitted by --allow-op / ALLOWED_OPS
    named_ops: tuple[str, ...] = ()          # the ops as the user and the problem named them

    @property
    def needs_trace(self) -> bool:
        """Whether the rule needs the kernel audit's trace (own-kernels on CUDA)."""
        return self.judged_as == "own-kernels"

    def to_json(self) -> dict:
        return {"level": self.level, "judged_as": self.judged_as, "allowed_ops": list(self.named_ops),
                "own_share_min": OWN_SHARE_MIN if self.judged_as == "own-kernels" else None}


def make_policy(level: str, device_type: str, named_ops: Iterable[str] = ()) -> Policy:
    named = tuple(dict.fromkeys(str(o).strip() for o in named_ops if str(o).strip()))
    judged = level if level != "own-kernels" or device_type == "cuda" else "no-reference-ops"
    return Policy(level, judged, frozenset(n for op in named for n in family_of(op)), named)


# --------------------------------------------------------------------------- op names and families

def base_name(op: str) -> str:
    """ "aten::relu_.default", "torch.ops.aten.mm", "F.conv2d", "relu_" -> "relu"; "conv2d" -> "conv2d"."""
    op = op.strip()
    for prefix in ("torch.ops.aten.", "torch.nn.functional.", "torch.", "aten::", "aten.", "at::", "F.", "nn."):
        if op.startswith(prefix):
            op = op[len(prefix):]
            break
    op = op.split(".", 1)[0]
    if op.endswith("_") and not op.endswith("__") and len(op) > 1:
        op = op[:-1]
    return op


_MATMUL = frozenset({"mm", "bmm", "addmm", "matmul", "baddbmm", "addbmm", "linear", "_scaled_mm", "_int_mm",
                     "dot", "vdot", "mv", "addmv", "einsum", "tensordot", "inner", "bilinear", "_addmm_activation",
                     "addr", "outer", "ger", "chain_matmul", "linalg_multi_dot", "linalg_vecdot", "_mm_activation",
                     "mkldnn_linear", "_mkldnn_linear", "fbgemm_linear_fp16_weight"})
_CONV = frozenset({"convolution", "_convolution", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                   "conv_transpose3d", "cudnn_convolution", "cudnn_convolution_transpose", "convolution_overrideable",
                   "mkldnn_convolution", "_nnpack_spatial_convolution", "slow_conv2d", "_slow_conv2d_forward",
                   "slow_conv3d", "slow_conv3d_forward", "slow_conv_transpose2d", "slow_conv_transpose3d",
                   "thnn_conv2d", "_conv_depthwise2d", "conv_depthwise3d", "miopen_convolution", "conv_tbc",
                   "cudnn_convolution_relu", "cudnn_convolution_add_relu", "_convolution_mode"})
_ATTENTION = frozenset({"scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
                        "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
                        "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_attention_math",
                        "_flash_attention_forward", "_efficient_attention_forward", "_fused_sdp_choice",
                        "_native_multi_head_attention", "_transformer_encoder_layer_fwd"})
# Families: ops that are one computation under different names (a problem's `softmax` is also its
# `_softmax`). The contractions together are one family more (see `forbidden_ops`).
_FAMILIES = (
    _MATMUL, _CONV, _ATTENTION,
    frozenset({"softmax", "_softmax", "special_softmax"}),
    frozenset({"log_softmax", "_log_softmax", "special_log_softmax"}),
    frozenset({"layer_norm", "native_layer_norm"}),
    frozenset({"group_norm", "native_group_norm"}),
    frozenset({"batch_norm", "native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training",
               "cudnn_batch_norm", "_batch_norm_impl_index", "_native_batch_norm_legit_functional",
               "miopen_batch_norm", "_batch_norm_with_update", "_batch_norm_no_update"}),
    frozenset({"rms_norm", "_fused_rms_norm"}),
    frozenset({"max_pool1d", "max_pool2d", "max_pool3d", "max_pool2d_with_indices", "max_pool3d_with_indices",
               "max_pool1d_with_indices", "mkldnn_max_pool2d", "mkldnn_max_pool3d", "quantized_max_pool2d"}),
    frozenset({"avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d", "adaptive_avg_pool2d",
               "adaptive_avg_pool3d", "_adaptive_avg_pool2d", "_adaptive_avg_pool3d", "mkldnn_adaptive_avg_pool2d"}),
    frozenset({"cumsum", "_cumsum", "cumsum_"}),
    frozenset({"cumprod", "_cumprod"}),
    frozenset({"argmax", "max"}), frozenset({"argmin", "min"}),
    frozenset({"sum", "_sum", "nansum"}), frozenset({"mean", "nanmean"}),
    frozenset({"mse_loss", "_mse_loss"}), frozenset({"nll_loss", "nll_loss_forward", "nll_loss2d", "nll_loss2d_forward",
                                                     "nll_loss_nd", "cross_entropy_loss"}),
    frozenset({"gelu", "_gelu"}), frozenset({"silu", "_silu"}),
)
CONTRACTIONS = _MATMUL | _CONV | _ATTENTION


@functools.lru_cache(maxsize=None)
def family_of(op: str) -> frozenset[str]:
    """The aten names that are `op`'s computation (itself included)."""
    name = base_name(op)
    out = {name}
    for fam in _FAMILIES:
        if name in fam:
            out |= fam
    return frozenset(out)


# Ops that compute nothing: views, allocation, fills, copies and casts. Named here where the
# schema does not say it (a view's alias annotation and a factory's missing tensor argument do).
_NOT_COMPUTE = frozenset({
    "view", "_unsafe_view", "reshape", "_reshape_alias", "t", "transpose", "permute", "expand", "expand_as",
    "squeeze", "unsqueeze", "select", "slice", "narrow", "as_strided", "alias", "detach", "split", "split_with_sizes",
    "chunk", "unbind", "unflatten", "flatten", "view_as", "numpy_T", "contiguous", "clone", "copy", "copy_",
    "_copy_from", "_copy_from_and_resize", "_to_copy", "to", "type_as", "lift", "lift_fresh", "lift_fresh_copy",
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like", "new_zeros",
    "ones", "ones_like", "new_ones", "full", "full_like", "new_full", "fill", "fill_", "zero", "zero_", "resize",
    "resize_", "resize_as_", "set_", "item", "_local_scalar_dense", "scalar_tensor", "arange", "_has_compatible_shallow_copy_type",
    "result_type", "is_nonzero", "size", "stride", "sym_size", "sym_stride", "dim", "_assert_async",
    "_assert_tensor_metadata", "record_stream", "_to_dense", "pin_memory", "_pin_memory", "diagonal", "movedim",
    "moveaxis", "swapaxes", "swapdims", "unfold", "view_as_real", "view_as_complex", "real", "imag",
})


@functools.lru_cache(maxsize=None)
def is_compute(op: str) -> bool:
    """Whether a traced aten op ("aten::mm") computes, rather than views, allocates, fills or copies."""
    name = base_name(op)
    if not name or name in _NOT_COMPUTE or name.endswith("_copy"):   # view_copy variants: copies
        return False
    try:
        import torch
        packet = getattr(torch.ops.aten, name)
        overloads = [getattr(packet, o) for o in packet.overloads()]
    except (AttributeError, RuntimeError, ImportError):
        return True   # an op the schema registry does not know: counted, never waved through
    if overloads and all(o.is_view for o in overloads):
        return False
    if overloads and all(not any(_is_tensor_arg(a) for a in o._schema.arguments) for o in overloads):
        return False   # a factory (no tensor in): allocation, or a random draw
    return True


@functools.lru_cache(maxsize=None)
def is_pointwise(op: str) -> bool:
    """Whether aten tags an op pointwise (elementwise: add, mul, relu, where, exp...)."""
    try:
        import torch
        packet = getattr(torch.ops.aten, base_name(op))
        return any(torch.Tag.pointwise in getattr(packet, o).tags for o in packet.overloads())
    except (AttributeError, RuntimeError, ImportError):
        return False


def _is_tensor_arg(arg) -> bool:
    """A tensor the op reads (an `out=` tensor is where it writes)."""
    return "Tensor" in str(arg.type) and not getattr(arg, "is_out", False)


def reference_compute_ops(aten_ops: Iterable[str]) -> frozenset[str]:
    """The compute ops (base names) among what the reference dispatched that are its work: all of
    them for a pointwise problem, else the ones that are not pointwise (the rest is epilogue)."""
    ops = frozenset(base_name(op) for op in aten_ops if is_compute(op))
    heavy = frozenset(op for op in ops if not is_pointwise(op))
    return heavy or ops


def forbidden_ops(reference_ops: Iterable[str], policy: Policy) -> frozenset[str]:
    """Aten base names the candidate may not dispatch under no-reference-ops: the reference's compute
    ops and their families, every library contraction if the reference contracts, less what the
    policy allows."""
    ref = reference_compute_ops(reference_ops)
    out: set[str] = set()
    for op in ref:
        out |= family_of(op)
    if out & CONTRACTIONS:
        out |= CONTRACTIONS
    return frozenset(out - policy.allowed_ops)


def dispatched_forbidden(dispatched: Iterable[str], forbidden: frozenset[str]) -> list[str]:
    return sorted({base_name(op) for op in dispatched} & forbidden)


# Source-scan names that reach code below the dispatcher (its trace cannot see them): BLAS and DNN
# symbols and link flags, numpy/scipy/cupy, ATen's backend kernels called directly from C++.
_BELOW = ("cublas", "cudnn", "cutlass", "rocblas", "hipblas", "flash_attn", "xformers", "numpy.", "scipy.",
          "cupy.", "at::cuda::blas", "at::native", "blas-symbol")


def below_dispatcher(canonical: str) -> bool:
    return canonical.startswith(_BELOW)
