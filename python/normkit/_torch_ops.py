"""PyTorch integration: autograd, torch.compile and the ``torch.ops.normkit`` operators.

Two routes lead to the same C++ kernels:

* Eager mode calls the kernels directly; when a gradient is needed,
  LayerNorm and RMSNorm of contiguous CPU tensors go through C++ autograd
  functions (``normkit._torch_autograd``, when the package was built against
  the running PyTorch), everything else through a ``torch.autograd.Function``.
  This is the fast route: the dispatcher of a
  ``torch.library.custom_op`` costs ~9 µs per forward and ~50 µs per
  forward+backward on this machine's CPU (measured with an empty op body),
  more than the kernels themselves take for a decode-sized input.
* Under ``torch.compile`` / ``torch.export`` (``torch.compiler.is_compiling()``)
  the functions call the custom operators ``torch.ops.normkit.*`` instead.
  They have fake (meta) implementations and registered autograd formulas, so
  a compiled model has no graph breaks, and they pass
  ``torch.library.opcheck``.

Tests check that the two routes give bitwise-identical results.

Layouts: the array API never copies and rejects an input whose rows no single
stride reaches. Gradients arriving from autograd (``grad_output``) and inputs
of the custom operators are not under the caller's control, so those are made
contiguous when (and only when) they cannot be viewed as ``(rows, D)``.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from . import _normkit as _C
from ._eps import F32_EPS as _F32_EPS, F64_EPS as _F64_EPS

try:
    # LayerNorm and RMSNorm as C++ autograd functions (python/torch_autograd):
    # the engine builds and runs their nodes without Python.
    # Compiled against one PyTorch's C++ ABI, so used only under that one.
    from . import _torch_autograd as _N

    if _N.torch_version != torch.__version__:
        _N = None
except ImportError:  # built without PyTorch (an isolated pip build), or its libraries differ
    _N = None

if not hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
    # The binding views tensors and creates its tensor outputs through this
    # API; without it, outputs would come back as NumPy arrays.
    raise ImportError(
        f"normkit's PyTorch support needs PyTorch >= 2.10 (the DLPack C exchange API); found {torch.__version__}"
    )

ShapeLike = Union[int, Sequence[int]]

_is_compiling = torch.compiler.is_compiling
_plain = (torch.Tensor, torch.nn.Parameter)
_grad_enabled = torch.is_grad_enabled
_bump_version = torch.autograd.graph.increment_version
_contiguous = torch.contiguous_format


def _shape_list(normalized_shape: ShapeLike) -> List[int]:
    return [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)


def _stat_dtype(x: Tensor) -> torch.dtype:
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def as_rows(t: Tensor, normalized_shape: ShapeLike) -> Tensor:
    """`t` itself if the kernels can take it as ``(rows, D)``, else a contiguous copy.

    The rule is the binding's (python/src/rows_view.hpp), asked through
    ``_normkit.needs_copy``: contiguous normalized dimensions, and leading
    dimensions that one row stride ``>= D`` reaches (slices of rows, column
    blocks and padded rows qualify; transposes and broadcasts do not).
    Tensors bound for the ``torch.ops.normkit`` operators (while compiling;
    subclasses) are passed on as they are: the operators apply this to the
    plain tensors they run on.
    """
    if t.is_contiguous() or _through_dispatcher(t) or not _C.needs_copy(t, normalized_shape):
        return t
    return t.contiguous()


def _no_autograd_out(fn: str) -> None:
    raise ValueError(
        f"{fn}: out= arguments do not support automatic differentiation, but an argument "
        "requires grad; call it under torch.no_grad() or drop out="
    )


# ---------------------------------------------------------------------------
# Eager autograd: torch.autograd.Function around the kernels. The binding
# allocates every output (a C call through the DLPack exchange API).
#
# What a single-row call costs outside the kernels is mostly this layer, so
# it is kept lean: the statistics ride on ctx as attributes (they are the
# Function's own intermediates, never seen by the caller unless
# return_stats, in which case they are also non-differentiable outputs), and
# double backward is refused up front instead of through
# @once_differentiable (~3 µs per call).


def _refuse_double_backward() -> None:
    # The engine runs a backward with grad mode on only for create_graph=True.
    if _grad_enabled():
        raise RuntimeError(
            "normkit: double backward is not supported (the gradient of a normkit gradient); "
            "call backward/grad without create_graph=True"
        )


class _LayerNormFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, normalized_shape, weight, bias, eps, return_stats):
        y, mean, rstd = _C.layer_norm(x, normalized_shape, weight, bias, eps, None, True)
        ctx.save_for_backward(x, weight, bias)
        ctx.stats, ctx.normalized_shape = (mean, rstd), normalized_shape
        if not return_stats:
            return y
        ctx.mark_non_differentiable(mean, rstd)
        return y, mean, rstd

    @staticmethod
    def backward(ctx, dy, *_stats_grads):
        _refuse_double_backward()
        x, weight, bias = ctx.saved_tensors
        mean, rstd = ctx.stats
        need_x, _, need_w, need_b, _, _ = ctx.needs_input_grad
        ns = ctx.normalized_shape
        dx, dw, db = _C.layer_norm_backward(as_rows(dy, ns), x, ns, mean, rstd, weight, bias, None, need_w, need_b)
        return (dx if need_x else None), None, dw, db, None, None


class _RMSNormFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, normalized_shape, weight, eps, weight_offset, return_stats):
        y, rstd = _C.rms_norm(x, normalized_shape, weight, eps, weight_offset, None, True)
        ctx.save_for_backward(x, weight)
        ctx.rstd, ctx.normalized_shape, ctx.weight_offset = rstd, normalized_shape, weight_offset
        if not return_stats:
            return y
        ctx.mark_non_differentiable(rstd)
        return y, rstd

    @staticmethod
    def backward(ctx, dy, *_stats_grads):
        _refuse_double_backward()
        x, weight = ctx.saved_tensors
        need_x, _, need_w, _, _, _ = ctx.needs_input_grad
        ns = ctx.normalized_shape
        dx, dw = _C.rms_norm_backward(as_rows(dy, ns), x, ns, ctx.rstd, weight, ctx.weight_offset, None, need_w)
        return (dx if need_x else None), None, dw, None, None, None


class _AddLayerNormFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, residual, normalized_shape, weight, bias, eps, return_stats):
        y, h, mean, rstd = _C.add_layer_norm(x, residual, normalized_shape, weight, bias, eps, None, None, True)
        ctx.save_for_backward(h, weight, bias)
        ctx.stats, ctx.normalized_shape, ctx.x_dtype = (mean, rstd), normalized_shape, x.dtype
        ctx.set_materialize_grads(False)  # an unused h costs no zero-filled gradient
        if not return_stats:
            return y, h
        ctx.mark_non_differentiable(mean, rstd)
        return y, h, mean, rstd

    @staticmethod
    def backward(ctx, dy, dh_out, *_stats_grads):
        _refuse_double_backward()
        h, weight, bias = ctx.saved_tensors
        mean, rstd = ctx.stats
        need_x, need_res, _, need_w, need_b, _, _ = ctx.needs_input_grad
        ns = ctx.normalized_shape
        if dy is None:  # only h was used downstream: the norm contributes nothing
            dy = torch.zeros(h.shape, dtype=ctx.x_dtype)
        if dh_out is not None:
            dh_out = as_rows(dh_out, ns)
        dh, dw, db = _C.add_layer_norm_backward(as_rows(dy, ns), dh_out, h, ns, mean, rstd, weight, bias, None,
                                                need_w, need_b)
        dx = dh.to(ctx.x_dtype) if need_x else None
        return dx, (dh if need_res else None), None, dw, db, None, None


class _AddRMSNormFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, residual, normalized_shape, weight, eps, weight_offset, return_stats):
        y, h, rstd = _C.add_rms_norm(x, residual, normalized_shape, weight, eps, weight_offset, None, None, True)
        ctx.save_for_backward(h, weight)
        ctx.rstd, ctx.normalized_shape, ctx.x_dtype, ctx.weight_offset = rstd, normalized_shape, x.dtype, weight_offset
        ctx.set_materialize_grads(False)
        if not return_stats:
            return y, h
        ctx.mark_non_differentiable(rstd)
        return y, h, rstd

    @staticmethod
    def backward(ctx, dy, dh_out, *_stats_grads):
        _refuse_double_backward()
        h, weight = ctx.saved_tensors
        need_x, need_res, _, need_w, _, _, _ = ctx.needs_input_grad
        ns = ctx.normalized_shape
        if dy is None:
            dy = torch.zeros(h.shape, dtype=ctx.x_dtype)
        if dh_out is not None:
            dh_out = as_rows(dh_out, ns)
        dh, dw = _C.add_rms_norm_backward(as_rows(dy, ns), dh_out, h, ns, ctx.rstd, weight, ctx.weight_offset, None,
                                          need_w)
        dx = dh.to(ctx.x_dtype) if need_x else None
        return dx, (dh if need_res else None), None, dw, None, None, None


# ---------------------------------------------------------------------------
# Custom operators for torch.compile / torch.export. Outputs are new,
# contiguous tensors (custom operators must not return views of inputs), as
# the fake implementations describe; a parameter gradient that was not asked
# for is an empty tensor (custom operators cannot return None).

_OPT = Optional[Tensor]


def _empty(x: Tensor) -> Tensor:
    return x.new_empty(0)


def _fake_like(t: Tensor) -> Tensor:
    return torch.empty_like(t, memory_format=_contiguous)


def _fake_param_grad(p: Optional[Tensor], alt: Optional[Tensor], want: bool, x: Tensor) -> Tensor:
    proto = p if p is not None else alt
    return _fake_like(proto) if (want and proto is not None) else _empty(x)


def _fake_stats(x: Tensor, normalized_shape: Sequence[int]) -> Tensor:
    return x.new_empty(x.shape[: x.dim() - len(normalized_shape)], dtype=_stat_dtype(x))


@torch.library.custom_op("normkit::layer_norm", mutates_args=())
def _layer_norm_op(
    input: Tensor, normalized_shape: Sequence[int], weight: _OPT, bias: _OPT, eps: float
) -> Tuple[Tensor, Tensor, Tensor]:
    return _C.layer_norm(as_rows(input, normalized_shape), normalized_shape, weight, bias, eps, None, True)


@_layer_norm_op.register_fake
def _(input, normalized_shape, weight, bias, eps):
    return _fake_like(input), _fake_stats(input, normalized_shape), _fake_stats(input, normalized_shape)


@torch.library.custom_op("normkit::layer_norm_backward", mutates_args=())
def _layer_norm_backward_op(
    grad_output: Tensor,
    input: Tensor,
    normalized_shape: Sequence[int],
    mean: Tensor,
    rstd: Tensor,
    weight: _OPT,
    bias: _OPT,
    output_mask: Sequence[bool],
) -> Tuple[Tensor, Tensor, Tensor]:
    ns = normalized_shape
    x = as_rows(input, ns)
    dx, dw, db = _C.layer_norm_backward(
        as_rows(grad_output, ns), x, ns, mean, rstd, weight, bias, None, output_mask[1], output_mask[2]
    )
    return dx, (dw if dw is not None else _empty(x)), (db if db is not None else _empty(x))


@_layer_norm_backward_op.register_fake
def _(grad_output, input, normalized_shape, mean, rstd, weight, bias, output_mask):
    return (
        _fake_like(input),
        _fake_param_grad(weight, weight, output_mask[1], input),
        _fake_param_grad(bias, weight, output_mask[2], input),
    )


def _layer_norm_setup(ctx, inputs, output):
    input, normalized_shape, weight, bias, _ = inputs
    _, mean, rstd = output
    ctx.save_for_backward(input, weight, bias, mean, rstd)
    ctx.normalized_shape = normalized_shape


def _layer_norm_autograd(ctx, dy, _dmean, _drstd):
    input, weight, bias, mean, rstd = ctx.saved_tensors
    need_x, _, need_w, need_b, _ = ctx.needs_input_grad
    dx, dw, db = torch.ops.normkit.layer_norm_backward(
        dy, input, ctx.normalized_shape, mean, rstd, weight, bias, [need_x, need_w, need_b]
    )
    return (dx if need_x else None), None, (dw if need_w else None), (db if need_b else None), None


_layer_norm_op.register_autograd(_layer_norm_autograd, setup_context=_layer_norm_setup)


@torch.library.custom_op("normkit::rms_norm", mutates_args=())
def _rms_norm_op(
    input: Tensor, normalized_shape: Sequence[int], weight: _OPT, eps: float, weight_offset: float
) -> Tuple[Tensor, Tensor]:
    return _C.rms_norm(as_rows(input, normalized_shape), normalized_shape, weight, eps, weight_offset, None, True)


@_rms_norm_op.register_fake
def _(input, normalized_shape, weight, eps, weight_offset):
    return _fake_like(input), _fake_stats(input, normalized_shape)


@torch.library.custom_op("normkit::rms_norm_backward", mutates_args=())
def _rms_norm_backward_op(
    grad_output: Tensor,
    input: Tensor,
    normalized_shape: Sequence[int],
    rstd: Tensor,
    weight: _OPT,
    weight_offset: float,
    output_mask: Sequence[bool],
) -> Tuple[Tensor, Tensor]:
    ns = normalized_shape
    x = as_rows(input, ns)
    dx, dw = _C.rms_norm_backward(as_rows(grad_output, ns), x, ns, rstd, weight, weight_offset, None, output_mask[1])
    return dx, (dw if dw is not None else _empty(x))


@_rms_norm_backward_op.register_fake
def _(grad_output, input, normalized_shape, rstd, weight, weight_offset, output_mask):
    return _fake_like(input), _fake_param_grad(weight, weight, output_mask[1], input)


def _rms_norm_setup(ctx, inputs, output):
    input, normalized_shape, weight, _, weight_offset = inputs
    ctx.save_for_backward(input, weight, output[1])
    ctx.normalized_shape, ctx.weight_offset = normalized_shape, weight_offset


def _rms_norm_autograd(ctx, dy, _drstd):
    input, weight, rstd = ctx.saved_tensors
    need_x, _, need_w, _, _ = ctx.needs_input_grad
    dx, dw = torch.ops.normkit.rms_norm_backward(
        dy, input, ctx.normalized_shape, rstd, weight, ctx.weight_offset, [need_x, need_w]
    )
    return (dx if need_x else None), None, (dw if need_w else None), None, None


_rms_norm_op.register_autograd(_rms_norm_autograd, setup_context=_rms_norm_setup)


@torch.library.custom_op("normkit::add_layer_norm", mutates_args=())
def _add_layer_norm_op(
    input: Tensor, residual: Tensor, normalized_shape: Sequence[int], weight: _OPT, bias: _OPT, eps: float
) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    ns = normalized_shape
    return _C.add_layer_norm(as_rows(input, ns), as_rows(residual, ns), ns, weight, bias, eps, None, None, True)


@_add_layer_norm_op.register_fake
def _(input, residual, normalized_shape, weight, bias, eps):
    return (
        _fake_like(input),
        _fake_like(residual),
        _fake_stats(input, normalized_shape),
        _fake_stats(input, normalized_shape),
    )


@torch.library.custom_op("normkit::add_layer_norm_backward", mutates_args=())
def _add_layer_norm_backward_op(
    grad_output: Tensor,
    grad_residual_out: _OPT,
    residual_out: Tensor,
    normalized_shape: Sequence[int],
    mean: Tensor,
    rstd: Tensor,
    weight: _OPT,
    bias: _OPT,
    output_mask: Sequence[bool],
) -> Tuple[Tensor, Tensor, Tensor]:
    ns = normalized_shape
    h = as_rows(residual_out, ns)
    dh_out = as_rows(grad_residual_out, ns) if grad_residual_out is not None else None
    dh, dw, db = _C.add_layer_norm_backward(
        as_rows(grad_output, ns), dh_out, h, ns, mean, rstd, weight, bias, None, output_mask[1], output_mask[2]
    )
    return dh, (dw if dw is not None else _empty(h)), (db if db is not None else _empty(h))


@_add_layer_norm_backward_op.register_fake
def _(grad_output, grad_residual_out, residual_out, normalized_shape, mean, rstd, weight, bias, output_mask):
    return (
        _fake_like(residual_out),
        _fake_param_grad(weight, weight, output_mask[1], residual_out),
        _fake_param_grad(bias, weight, output_mask[2], residual_out),
    )


def _add_layer_norm_setup(ctx, inputs, output):
    input, _, normalized_shape, weight, bias, _ = inputs
    _, h, mean, rstd = output
    ctx.save_for_backward(h, weight, bias, mean, rstd)
    ctx.normalized_shape, ctx.x_dtype = normalized_shape, input.dtype


def _add_layer_norm_autograd(ctx, dy, dh_out, _dmean, _drstd):
    h, weight, bias, mean, rstd = ctx.saved_tensors
    need_x, need_res, _, need_w, need_b, _ = ctx.needs_input_grad
    dh, dw, db = torch.ops.normkit.add_layer_norm_backward(
        dy, dh_out, h, ctx.normalized_shape, mean, rstd, weight, bias, [True, need_w, need_b]
    )
    return (
        dh.to(ctx.x_dtype) if need_x else None,
        dh if need_res else None,
        None,
        dw if need_w else None,
        db if need_b else None,
        None,
    )


_add_layer_norm_op.register_autograd(_add_layer_norm_autograd, setup_context=_add_layer_norm_setup)


@torch.library.custom_op("normkit::add_rms_norm", mutates_args=())
def _add_rms_norm_op(
    input: Tensor,
    residual: Tensor,
    normalized_shape: Sequence[int],
    weight: _OPT,
    eps: float,
    weight_offset: float,
) -> Tuple[Tensor, Tensor, Tensor]:
    ns = normalized_shape
    return _C.add_rms_norm(as_rows(input, ns), as_rows(residual, ns), ns, weight, eps, weight_offset, None, None, True)


@_add_rms_norm_op.register_fake
def _(input, residual, normalized_shape, weight, eps, weight_offset):
    return _fake_like(input), _fake_like(residual), _fake_stats(input, normalized_shape)


@torch.library.custom_op("normkit::add_rms_norm_backward", mutates_args=())
def _add_rms_norm_backward_op(
    grad_output: Tensor,
    grad_residual_out: _OPT,
    residual_out: Tensor,
    normalized_shape: Sequence[int],
    rstd: Tensor,
    weight: _OPT,
    weight_offset: float,
    output_mask: Sequence[bool],
) -> Tuple[Tensor, Tensor]:
    ns = normalized_shape
    h = as_rows(residual_out, ns)
    dh_out = as_rows(grad_residual_out, ns) if grad_residual_out is not None else None
    dh, dw = _C.add_rms_norm_backward(
        as_rows(grad_output, ns), dh_out, h, ns, rstd, weight, weight_offset, None, output_mask[1]
    )
    return dh, (dw if dw is not None else _empty(h))


@_add_rms_norm_backward_op.register_fake
def _(grad_output, grad_residual_out, residual_out, normalized_shape, rstd, weight, weight_offset, output_mask):
    return _fake_like(residual_out), _fake_param_grad(weight, weight, output_mask[1], residual_out)


def _add_rms_norm_setup(ctx, inputs, output):
    input, _, normalized_shape, weight, _, weight_offset = inputs
    ctx.save_for_backward(output[1], weight, output[2])
    ctx.normalized_shape, ctx.x_dtype, ctx.weight_offset = normalized_shape, input.dtype, weight_offset


def _add_rms_norm_autograd(ctx, dy, dh_out, _drstd):
    h, weight, rstd = ctx.saved_tensors
    need_x, need_res, _, need_w, _, _ = ctx.needs_input_grad
    dh, dw = torch.ops.normkit.add_rms_norm_backward(
        dy, dh_out, h, ctx.normalized_shape, rstd, weight, ctx.weight_offset, [True, need_w]
    )
    return dh.to(ctx.x_dtype) if need_x else None, dh if need_res else None, None, dw if need_w else None, None, None


_add_rms_norm_op.register_autograd(_add_rms_norm_autograd, setup_context=_add_rms_norm_setup)


# ---------------------------------------------------------------------------
# The entry points normkit's array API hands tensors to. Argument semantics
# are documented there (normkit._functional). The common case is: not
# compiling, no autograd; every check below costs tens to hundreds of
# nanoseconds, which is what a single-row call spends outside the kernel, so
# they are inlined.


def _through_dispatcher(x: Tensor) -> bool:
    """True when a call must go through the torch.ops.normkit operators:
    while compiling, and for tensor subclasses (FakeTensor, DTensor, wrapper
    subclasses with __torch_dispatch__), which have no storage of their own
    for the kernels to read but know how to run an operator."""
    return type(x) not in _plain or _is_compiling()


def _native(fn, input, normalized_shape, *args):
    """The C++ autograd function's result, or None where it does not apply
    (other devices and layouts, arguments it cannot convert, anything the
    library would refuse): the Python Function then takes the call and
    reports what is wrong."""
    try:
        return fn(input, _shape_list(normalized_shape), *args)
    except TypeError:
        return None


def layer_norm(input, normalized_shape, weight, bias, eps, out, return_stats):
    if _through_dispatcher(input):
        y, mean, rstd = torch.ops.normkit.layer_norm(input, _shape_list(normalized_shape), weight, bias, eps)
        if out is not None:
            y = out.copy_(y)
        return (y, mean, rstd) if return_stats else y
    if _grad_enabled() and (
        input.requires_grad
        or (weight is not None and weight.requires_grad)
        or (bias is not None and bias.requires_grad)
    ):
        if out is not None:
            _no_autograd_out("layer_norm")
        if _N is not None:
            r = _native(_N.layer_norm, input, normalized_shape, weight, bias, eps, return_stats)
            if r is not None:
                return r
        return _LayerNormFn.apply(input, normalized_shape, weight, bias, eps, return_stats)
    r = _C.layer_norm(input, normalized_shape, weight, bias, eps, out, return_stats)
    if out is not None:
        _bump_version(out)  # autograd must see the write, as with any in-place op
    return r


def rms_norm(input, normalized_shape, weight, eps, weight_offset, out, return_stats):
    if eps is None:
        eps = _F64_EPS if input.dtype == torch.float64 else _F32_EPS
    if _through_dispatcher(input):
        y, rstd = torch.ops.normkit.rms_norm(input, _shape_list(normalized_shape), weight, eps, weight_offset)
        if out is not None:
            y = out.copy_(y)
        return (y, rstd) if return_stats else y
    if _grad_enabled() and (input.requires_grad or (weight is not None and weight.requires_grad)):
        if out is not None:
            _no_autograd_out("rms_norm")
        if _N is not None:
            r = _native(_N.rms_norm, input, normalized_shape, weight, eps, weight_offset, return_stats)
            if r is not None:
                return r
        return _RMSNormFn.apply(input, normalized_shape, weight, eps, weight_offset, return_stats)
    r = _C.rms_norm(input, normalized_shape, weight, eps, weight_offset, out, return_stats)
    if out is not None:
        _bump_version(out)
    return r


def add_layer_norm(input, residual, normalized_shape, weight, bias, eps, out, residual_out, return_stats):
    if _through_dispatcher(input):
        y, h, mean, rstd = torch.ops.normkit.add_layer_norm(
            input, residual, _shape_list(normalized_shape), weight, bias, eps
        )
        if out is not None:
            y = out.copy_(y)
        if residual_out is not None:
            h = residual_out.copy_(h)
        return (y, h, mean, rstd) if return_stats else (y, h)
    if _grad_enabled() and (
        input.requires_grad
        or residual.requires_grad
        or (weight is not None and weight.requires_grad)
        or (bias is not None and bias.requires_grad)
    ):
        if out is not None or residual_out is not None:
            _no_autograd_out("add_layer_norm")
        return _AddLayerNormFn.apply(input, residual, normalized_shape, weight, bias, eps, return_stats)
    r = _C.add_layer_norm(input, residual, normalized_shape, weight, bias, eps, out, residual_out, return_stats)
    if out is not None:
        _bump_version(out)
    if residual_out is not None:
        _bump_version(residual_out)
    return r


def add_rms_norm(input, residual, normalized_shape, weight, eps, weight_offset, out, residual_out, return_stats):
    if eps is None:
        eps = _F64_EPS if input.dtype == torch.float64 else _F32_EPS
    if _through_dispatcher(input):
        y, h, rstd = torch.ops.normkit.add_rms_norm(
            input, residual, _shape_list(normalized_shape), weight, eps, weight_offset
        )
        if out is not None:
            y = out.copy_(y)
        if residual_out is not None:
            h = residual_out.copy_(h)
        return (y, h, rstd) if return_stats else (y, h)
    if _grad_enabled() and (
        input.requires_grad or residual.requires_grad or (weight is not None and weight.requires_grad)
    ):
        if out is not None or residual_out is not None:
            _no_autograd_out("add_rms_norm")
        return _AddRMSNormFn.apply(input, residual, normalized_shape, weight, eps, weight_offset, return_stats)
    r = _C.add_rms_norm(input, residual, normalized_shape, weight, eps, weight_offset, out, residual_out, return_stats)
    if out is not None:
        _bump_version(out)
    if residual_out is not None:
        _bump_version(residual_out)
    return r


# The backward functions of the array API on tensors: plain kernel calls (they
# are the gradient formulas, not differentiable themselves).


def layer_norm_backward(grad_output, input, normalized_shape, mean, rstd, weight, output_mask, out):
    dx, dw, db = _C.layer_norm_backward(
        grad_output, input, normalized_shape, mean, rstd, weight, None, out, output_mask[1], output_mask[2]
    )
    if out is not None:
        _bump_version(out)
    return (dx if output_mask[0] else None), dw, db


def rms_norm_backward(grad_output, input, normalized_shape, rstd, weight, weight_offset, output_mask, out):
    dx, dw = _C.rms_norm_backward(grad_output, input, normalized_shape, rstd, weight, weight_offset, out, output_mask[1])
    if out is not None:
        _bump_version(out)
    return (dx if output_mask[0] else None), dw


def add_layer_norm_backward(
    grad_output, grad_residual_out, residual_out, normalized_shape, mean, rstd, weight, output_mask, out
):
    dh, dw, db = _C.add_layer_norm_backward(
        grad_output, grad_residual_out, residual_out, normalized_shape, mean, rstd, weight, None, out,
        output_mask[1], output_mask[2],
    )
    if out is not None:
        _bump_version(out)
    return (dh if output_mask[0] else None), dw, db


def add_rms_norm_backward(
    grad_output, grad_residual_out, residual_out, normalized_shape, rstd, weight, weight_offset, output_mask, out
):
    dh, dw = _C.add_rms_norm_backward(
        grad_output, grad_residual_out, residual_out, normalized_shape, rstd, weight, weight_offset, out, output_mask[1]
    )
    if out is not None:
        _bump_version(out)
    return (dh if output_mask[0] else None), dw
