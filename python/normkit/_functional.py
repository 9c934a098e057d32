"""The array-level API: LayerNorm and RMSNorm on NumPy arrays and PyTorch tensors.

Every function reads its inputs and writes its outputs in place through the
C++ library, without copies. NumPy arrays (and any other DLPack producer, seen
through ``numpy.from_dlpack``) get NumPy outputs; PyTorch tensors are handed
to :mod:`normkit._torch_ops`, which adds autograd and ``torch.compile`` support.

Shapes use one set of names: an activation has shape ``(*lead, *normalized_shape)``;
its ``rows = prod(lead)`` rows of ``D = prod(normalized_shape)`` features are
normalized independently. ``weight`` and ``bias`` have shape ``normalized_shape``;
the statistics ``mean`` and ``rstd`` have shape ``lead``.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Optional, Sequence, Tuple, Union

import numpy as np

from . import _normkit as _C
from ._eps import F32_EPS, F64_EPS

if TYPE_CHECKING:  # pragma: no cover
    import torch

    Array = Union[np.ndarray, torch.Tensor]
else:
    Array = Any

ShapeLike = Union[int, Sequence[int]]

# rms_norm(eps=None): see normkit._eps.
_F32_EPS, _F64_EPS = F32_EPS, F64_EPS

# normkit._torch_ops, imported on the first tensor argument (importing it
# imports torch). The dependency is one-way: _torch_ops never imports this module.
_torch_ops = None
_modules = sys.modules


def _torch_module():
    global _torch_ops
    if _torch_ops is None:
        from . import _torch_ops as ops

        _torch_ops = ops
    return _torch_ops


def _is_tensor(x: object) -> bool:
    # Never import torch just to ask: a tensor argument means it is loaded.
    torch = _modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _as_numpy(fn: str, name: str, x: object) -> np.ndarray:
    """A NumPy view of `x` (zero-copy for DLPack producers)."""
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "__dlpack__"):
        return np.from_dlpack(x)
    raise TypeError(
        f"{fn}: {name} must be an array (a NumPy array, a PyTorch tensor or another DLPack "
        f"producer), got {type(x).__name__}"
    )


def default_rms_eps(dtype: Any) -> float:
    """The eps that ``rms_norm(..., eps=None)`` uses for inputs of `dtype`.

    Parameters
    ----------
    dtype : numpy.dtype or torch.dtype
        The input's element type.

    Returns
    -------
    float
        ``finfo(float64).eps`` for float64 inputs and ``finfo(float32).eps``
        for float32, float16 and bfloat16 ones, the same value
        ``torch.nn.functional.rms_norm`` uses (it takes the epsilon of the type
        it computes in, not of the storage type).
    """
    name = str(dtype)
    name = name[len("torch.") :] if name.startswith("torch.") else np.dtype(dtype).name
    return _F64_EPS if name == "float64" else _F32_EPS


def layer_norm(
    input: Array,
    normalized_shape: ShapeLike,
    weight: Optional[Array] = None,
    bias: Optional[Array] = None,
    eps: float = 1e-5,
    *,
    out: Optional[Array] = None,
    return_stats: bool = False,
) -> Union[Array, Tuple[Array, Array, Array]]:
    """Layer normalization over the trailing dimensions of `input`.

    ``y = (x - mean) / sqrt(var + eps) * weight + bias`` with the population
    variance, row by row, exactly as :func:`torch.nn.functional.layer_norm`.

    Parameters
    ----------
    input : numpy.ndarray or torch.Tensor
        Shape ``(*lead, *normalized_shape)``; float32, float64, float16 or
        bfloat16. The normalized dimensions must be contiguous; the rows may
        be any single stride apart (slices, column blocks, padding).
    normalized_shape : int or sequence of int
        The trailing dimensions to normalize over (``D`` is their product).
    weight, bias : array, optional
        Shape `normalized_shape`; the dtype of `input` or float32. Absent
        means a gain of 1 and a shift of 0.
    eps : float, default 1e-5
        Added to the variance inside the square root; finite and >= 0.
    out : array, optional
        Where to write the result: the shape and dtype of `input`, any row
        stride. May be `input` itself (in-place). Returned as is.
    return_stats : bool, default False
        Also return the per-row ``mean`` and ``rstd = 1/sqrt(var + eps)``
        (shape ``lead``; float64 for float64 inputs, else float32), as
        :func:`layer_norm_backward` needs them.

    Returns
    -------
    array or tuple of arrays
        ``y``, or ``(y, mean, rstd)`` with `return_stats`. A tensor input gives
        tensors and supports autograd and ``torch.compile``.

    Raises
    ------
    TypeError
        An argument is not an array, or has an unsupported element type.
    ValueError
        Shapes, layouts, dtype combinations or `eps` are invalid; nothing is
        written then.
    """
    if _is_tensor(input):
        return (_torch_ops or _torch_module()).layer_norm(input, normalized_shape, weight, bias, eps, out, return_stats)
    x = _as_numpy("layer_norm", "input", input)
    return _C.layer_norm(x, normalized_shape, weight, bias, eps, out, return_stats)


def rms_norm(
    input: Array,
    normalized_shape: ShapeLike,
    weight: Optional[Array] = None,
    eps: Optional[float] = None,
    *,
    weight_offset: float = 0.0,
    out: Optional[Array] = None,
    return_stats: bool = False,
) -> Union[Array, Tuple[Array, Array]]:
    """Root-mean-square normalization over the trailing dimensions of `input`.

    ``y = x / sqrt(mean(x^2) + eps) * (weight_offset + weight)``, row by row,
    exactly as :func:`torch.nn.functional.rms_norm` when `weight_offset` is 0.

    Parameters
    ----------
    input : numpy.ndarray or torch.Tensor
        Shape ``(*lead, *normalized_shape)``; float32, float64, float16 or
        bfloat16. Layout as for :func:`layer_norm`.
    normalized_shape : int or sequence of int
        The trailing dimensions to normalize over.
    weight : array, optional
        Shape `normalized_shape`; the dtype of `input` or float32.
    eps : float, optional
        Added to the mean square. None means :func:`default_rms_eps` of the
        input's dtype, as in PyTorch.
    weight_offset : float, default 0.0
        Added to every weight: 1.0 gives the ``(1 + weight)`` gain of models
        that store zero-centred weights (Gemma). Needs a `weight`.
    out : array, optional
        Where to write the result (shape and dtype of `input`; may be `input`).
    return_stats : bool, default False
        Also return the per-row ``rstd`` (shape ``lead``).

    Returns
    -------
    array or tuple of arrays
        ``y``, or ``(y, rstd)`` with `return_stats`.

    Raises
    ------
    TypeError
        An argument is not an array, or has an unsupported element type.
    ValueError
        Invalid shapes, layouts, dtype combinations or `eps`.
    """
    if _is_tensor(input):
        return (_torch_ops or _torch_module()).rms_norm(
            input, normalized_shape, weight, eps, weight_offset, out, return_stats
        )
    x = _as_numpy("rms_norm", "input", input)
    if eps is None:
        eps = _F64_EPS if x.dtype == np.float64 else _F32_EPS
    return _C.rms_norm(x, normalized_shape, weight, eps, weight_offset, out, return_stats)


def add_layer_norm(
    input: Array,
    residual: Array,
    normalized_shape: ShapeLike,
    weight: Optional[Array] = None,
    bias: Optional[Array] = None,
    eps: float = 1e-5,
    *,
    out: Optional[Array] = None,
    residual_out: Optional[Array] = None,
    return_stats: bool = False,
) -> Tuple[Array, ...]:
    """The pre-norm step ``h = input + residual; y = layer_norm(h)``, fused.

    One pass over memory instead of three: the sum is written once (rounded to
    the residual's dtype) and the norm is taken of that rounded ``h``, so ``y``
    equals ``layer_norm(h)`` exactly as stored.

    Parameters
    ----------
    input : array
        The sublayer output, shape ``(*lead, *normalized_shape)``.
    residual : array
        The residual stream: the shape of `input`, its dtype or float32 (an
        float32 residual stream under 16-bit activations).
    normalized_shape, weight, bias, eps
        As for :func:`layer_norm`.
    out : array, optional
        Where to write ``y`` (the dtype of `input`); may be `input`.
    residual_out : array, optional
        Where to write ``h`` (the dtype of `residual`); may be `residual` or
        `input` (same dtype) for an in-place update of the stream.
    return_stats : bool, default False
        Also return ``mean`` and ``rstd`` of ``h``.

    Returns
    -------
    tuple of arrays
        ``(y, h)``, or ``(y, h, mean, rstd)`` with `return_stats`.

    Raises
    ------
    TypeError, ValueError
        As for :func:`layer_norm`.
    """
    if _is_tensor(input):
        return (_torch_ops or _torch_module()).add_layer_norm(
            input, residual, normalized_shape, weight, bias, eps, out, residual_out, return_stats
        )
    x = _as_numpy("add_layer_norm", "input", input)
    res = _as_numpy("add_layer_norm", "residual", residual)
    return _C.add_layer_norm(x, res, normalized_shape, weight, bias, eps, out, residual_out, return_stats)


def add_rms_norm(
    input: Array,
    residual: Array,
    normalized_shape: ShapeLike,
    weight: Optional[Array] = None,
    eps: Optional[float] = None,
    *,
    weight_offset: float = 0.0,
    out: Optional[Array] = None,
    residual_out: Optional[Array] = None,
    return_stats: bool = False,
) -> Tuple[Array, ...]:
    """The pre-norm step ``h = input + residual; y = rms_norm(h)``, fused.

    Parameters
    ----------
    input, residual, normalized_shape, out, residual_out
        As for :func:`add_layer_norm`.
    weight, eps, weight_offset
        As for :func:`rms_norm`.
    return_stats : bool, default False
        Also return ``rstd`` of ``h``.

    Returns
    -------
    tuple of arrays
        ``(y, h)``, or ``(y, h, rstd)`` with `return_stats`.

    Raises
    ------
    TypeError, ValueError
        As for :func:`rms_norm`.
    """
    if _is_tensor(input):
        return (_torch_ops or _torch_module()).add_rms_norm(
            input, residual, normalized_shape, weight, eps, weight_offset, out, residual_out, return_stats
        )
    x = _as_numpy("add_rms_norm", "input", input)
    res = _as_numpy("add_rms_norm", "residual", residual)
    if eps is None:
        eps = _F64_EPS if x.dtype == np.float64 else _F32_EPS
    return _C.add_rms_norm(x, res, normalized_shape, weight, eps, weight_offset, out, residual_out, return_stats)


def layer_norm_backward(
    grad_output: Array,
    input: Array,
    normalized_shape: ShapeLike,
    mean: Array,
    rstd: Array,
    weight: Optional[Array] = None,
    *,
    output_mask: Sequence[bool] = (True, True, True),
    out: Optional[Array] = None,
) -> Tuple[Optional[Array], Optional[Array], Optional[Array]]:
    """Gradients of :func:`layer_norm`.

    With ``xhat = (x - mean) * rstd`` and ``g = weight * dy``::

        grad_input  = rstd * (g - mean(g) - xhat * mean(g * xhat))   (row means)
        grad_weight = sum over rows of dy * xhat
        grad_bias   = sum over rows of dy

    Parameter gradients are summed over a fixed partition of rows in a fixed
    order: bitwise identical for every thread count.

    Parameters
    ----------
    grad_output : array
        ``dy``, the shape and dtype of `input`.
    input : array
        The forward's input.
    normalized_shape : int or sequence of int
        As in the forward.
    mean, rstd : array
        The statistics the forward returned with ``return_stats=True``.
    weight : array, optional
        The forward's weight.
    output_mask : sequence of 3 bool, default (True, True, True)
        Which of ``(grad_input, grad_weight, grad_bias)`` to return; the
        parameter gradients exist only when `weight` is given. ``grad_input``
        is always computed (it is the kernel's main output).
    out : array, optional
        Where to write ``grad_input``; may be `grad_output`.

    Returns
    -------
    tuple
        ``(grad_input, grad_weight, grad_bias)``; None where not requested.
        Parameter gradients have the weight's dtype.

    Raises
    ------
    TypeError, ValueError
        As for :func:`layer_norm`.
    """
    if _is_tensor(input):
        return (_torch_ops or _torch_module()).layer_norm_backward(
            grad_output, input, normalized_shape, mean, rstd, weight, output_mask, out
        )
    x = _as_numpy("layer_norm_backward", "input", input)
    dx, dw, db = _C.layer_norm_backward(
        grad_output, x, normalized_shape, mean, rstd, weight, None, out, output_mask[1], output_mask[2]
    )
    return (dx if output_mask[0] else None), dw, db


def rms_norm_backward(
    grad_output: Array,
    input: Array,
    normalized_shape: ShapeLike,
    rstd: Array,
    weight: Optional[Array] = None,
    *,
    weight_offset: float = 0.0,
    output_mask: Sequence[bool] = (True, True),
    out: Optional[Array] = None,
) -> Tuple[Optional[Array], Optional[Array]]:
    """Gradients of :func:`rms_norm`.

    With ``xhat = x * rstd`` and ``g = (weight_offset + weight) * dy``::

        grad_input  = rstd * (g - xhat * mean(g * xhat))
        grad_weight = sum over rows of dy * xhat

    Parameters
    ----------
    grad_output, input, normalized_shape, weight, out
        As for :func:`layer_norm_backward`.
    rstd : array
        The forward's ``rstd`` (``return_stats=True``).
    weight_offset : float, default 0.0
        As in the forward.
    output_mask : sequence of 2 bool, default (True, True)
        Which of ``(grad_input, grad_weight)`` to return.

    Returns
    -------
    tuple
        ``(grad_input, grad_weight)``; None where not requested.

    Raises
    ------
    TypeError, ValueError
        As for :func:`rms_norm`.
    """
    if _is_tensor(input):
        return (_torch_ops or _torch_module()).rms_norm_backward(
            grad_output, input, normalized_shape, rstd, weight, weight_offset, output_mask, out
        )
    x = _as_numpy("rms_norm_backward", "input", input)
    dx, dw = _C.rms_norm_backward(grad_output, x, normalized_shape, rstd, weight, weight_offset, out, output_mask[1])
    return (dx if output_mask[0] else None), dw


def add_layer_norm_backward(
    grad_output: Array,
    grad_residual_out: Optional[Array],
    residual_out: Array,
    normalized_shape: ShapeLike,
    mean: Array,
    rstd: Array,
    weight: Optional[Array] = None,
    *,
    output_mask: Sequence[bool] = (True, True, True),
    out: Optional[Array] = None,
) -> Tuple[Optional[Array], Optional[Array], Optional[Array]]:
    """Gradients of :func:`add_layer_norm`.

    ``grad_h = layer_norm_backward(grad_output) + grad_residual_out``, and
    since ``h = input + residual`` it is the gradient of both (convert it to
    the input's dtype when that differs from the residual's).

    Parameters
    ----------
    grad_output : array
        ``dy``: the shape of `residual_out`, the dtype of the forward's input.
    grad_residual_out : array or None
        The gradient reaching ``h`` from downstream (the dtype of ``h``);
        None if ``h`` was not used.
    residual_out : array
        ``h`` as the forward wrote it.
    normalized_shape, mean, rstd, weight
        As for :func:`layer_norm_backward` (statistics of ``h``).
    output_mask : sequence of 3 bool
        Which of ``(grad_h, grad_weight, grad_bias)`` to return.
    out : array, optional
        Where to write ``grad_h``; may be `grad_residual_out`.

    Returns
    -------
    tuple
        ``(grad_h, grad_weight, grad_bias)``; None where not requested.

    Raises
    ------
    TypeError, ValueError
        As for :func:`layer_norm`.
    """
    if _is_tensor(residual_out):
        return (_torch_ops or _torch_module()).add_layer_norm_backward(
            grad_output, grad_residual_out, residual_out, normalized_shape, mean, rstd, weight,
            output_mask, out,
        )
    h = _as_numpy("add_layer_norm_backward", "residual_out", residual_out)
    dh, dw, db = _C.add_layer_norm_backward(
        grad_output, grad_residual_out, h, normalized_shape, mean, rstd, weight, None, out,
        output_mask[1], output_mask[2],
    )
    return (dh if output_mask[0] else None), dw, db


def add_rms_norm_backward(
    grad_output: Array,
    grad_residual_out: Optional[Array],
    residual_out: Array,
    normalized_shape: ShapeLike,
    rstd: Array,
    weight: Optional[Array] = None,
    *,
    weight_offset: float = 0.0,
    output_mask: Sequence[bool] = (True, True),
    out: Optional[Array] = None,
) -> Tuple[Optional[Array], Optional[Array]]:
    """Gradients of :func:`add_rms_norm`.

    Parameters
    ----------
    grad_output, grad_residual_out, residual_out, normalized_shape, out
        As for :func:`add_layer_norm_backward`.
    rstd, weight, weight_offset
        As for :func:`rms_norm_backward`.
    output_mask : sequence of 2 bool
        Which of ``(grad_h, grad_weight)`` to return.

    Returns
    -------
    tuple
        ``(grad_h, grad_weight)``; None where not requested.

    Raises
    ------
    TypeError, ValueError
        As for :func:`rms_norm`.
    """
    if _is_tensor(residual_out):
        return (_torch_ops or _torch_module()).add_rms_norm_backward(
            grad_output, grad_residual_out, residual_out, normalized_shape, rstd, weight,
            weight_offset, output_mask, out,
        )
    h = _as_numpy("add_rms_norm_backward", "residual_out", residual_out)
    dh, dw = _C.add_rms_norm_backward(
        grad_output, grad_residual_out, h, normalized_shape, rstd, weight, weight_offset, out, output_mask[1]
    )
    return (dh if output_mask[0] else None), dw
