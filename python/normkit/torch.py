"""Drop-in PyTorch modules backed by normkit's kernels.

:class:`LayerNorm` and :class:`RMSNorm` subclass ``torch.nn.LayerNorm`` and
``torch.nn.RMSNorm``: same constructor arguments, parameters, ``state_dict``
keys and ``repr``, so a checkpoint loads into either, ``isinstance`` checks
(weight-decay exclusion, FSDP wrap policies) still match, and only
``forward`` changes. :class:`FusedAddLayerNorm` and :class:`FusedAddRMSNorm`
compute the pre-norm step ``h = x + residual; y = norm(h)`` in one pass.
:func:`replace_norms` swaps the modules of an existing model in place.

Importing this module registers the ``torch.ops.normkit.*`` operators that
``torch.compile`` uses (see :mod:`normkit._torch_ops`).

Inputs whose rows cannot be viewed with one row stride (a transposed or
broadcast tensor) are copied to a contiguous tensor first, as PyTorch's own
modules accept any layout; the array API (:func:`normkit.layer_norm`) never
copies and raises instead.
"""

from __future__ import annotations

from typing import Optional, Tuple, Union

import torch
from torch import Tensor

from . import _torch_ops as _ops

__all__ = ["LayerNorm", "RMSNorm", "FusedAddLayerNorm", "FusedAddRMSNorm", "replace_norms"]

_ShapeLike = Union[int, Tuple[int, ...], torch.Size]


class LayerNorm(torch.nn.LayerNorm):
    """``torch.nn.LayerNorm`` computed by normkit.

    Parameters
    ----------
    normalized_shape : int or tuple of int
        The trailing dimensions to normalize over.
    eps : float, default 1e-5
        Added to the variance inside the square root.
    elementwise_affine : bool, default True
        Learn a per-feature ``weight`` (initialised to 1) and ``bias`` (0).
    bias : bool, default True
        Learn the ``bias`` (with `elementwise_affine`).
    device, dtype : optional
        Where and in which dtype to create the parameters. float32 parameters
        with bfloat16/float16 activations are supported without conversion;
        the output has the input's dtype.
    """

    def forward(self, input: Tensor) -> Tensor:
        """Normalize `input` over its trailing ``normalized_shape`` dimensions.

        Parameters
        ----------
        input : torch.Tensor
            Shape ``(*, *normalized_shape)``, on the CPU.

        Returns
        -------
        torch.Tensor
            The shape and dtype of `input`.
        """
        x = _ops.as_rows(input, self.normalized_shape)
        return _ops.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps, None, False)


class RMSNorm(torch.nn.RMSNorm):
    """``torch.nn.RMSNorm`` computed by normkit.

    Parameters
    ----------
    normalized_shape : int or tuple of int
        The trailing dimensions to normalize over.
    eps : float, optional
        Added to the mean square; None means the machine epsilon of the
        computation type, as in PyTorch (:func:`normkit.default_rms_eps`).
    elementwise_affine : bool, default True
        Learn a per-feature ``weight``.
    device, dtype : optional
        Where and in which dtype to create the parameters.
    weight_offset : float, default 0.0 (keyword only)
        The gain is ``weight_offset + weight``; 1.0 matches models that store
        zero-centred weights (Gemma). The weight is initialised to
        ``1 - weight_offset`` so that a fresh module's gain is 1.
    """

    def __init__(
        self,
        normalized_shape: _ShapeLike,
        eps: Optional[float] = None,
        elementwise_affine: bool = True,
        device=None,
        dtype=None,
        *,
        weight_offset: float = 0.0,
    ) -> None:
        self.weight_offset = float(weight_offset)
        super().__init__(normalized_shape, eps, elementwise_affine, device, dtype)
        if self.weight_offset != 0.0 and not elementwise_affine:
            raise ValueError("RMSNorm: weight_offset needs elementwise_affine=True (a weight to offset)")

    def reset_parameters(self) -> None:
        """Initialise the weight so that the gain ``weight_offset + weight`` is 1."""
        if self.weight is not None:
            torch.nn.init.constant_(self.weight, 1.0 - getattr(self, "weight_offset", 0.0))

    def extra_repr(self) -> str:
        s = super().extra_repr()
        return s + (f", weight_offset={self.weight_offset}" if self.weight_offset != 0.0 else "")

    def forward(self, input: Tensor) -> Tensor:
        """Normalize `input` over its trailing ``normalized_shape`` dimensions.

        Parameters
        ----------
        input : torch.Tensor
            Shape ``(*, *normalized_shape)``, on the CPU.

        Returns
        -------
        torch.Tensor
            The shape and dtype of `input`.
        """
        x = _ops.as_rows(input, self.normalized_shape)
        return _ops.rms_norm(x, self.normalized_shape, self.weight, self.eps, self.weight_offset, None, False)


class FusedAddLayerNorm(LayerNorm):
    """The pre-norm step ``h = input + residual; y = layer_norm(h)`` in one pass.

    Constructor arguments, parameters and ``state_dict`` keys are those of
    ``torch.nn.LayerNorm``. In a pre-norm block::

        y, residual = norm(branch_output, residual)   # residual <- residual + branch_output
    """

    def forward(self, input: Tensor, residual: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        """Add `residual` to `input` and normalize the sum.

        Parameters
        ----------
        input : torch.Tensor
            Shape ``(*, *normalized_shape)``.
        residual : torch.Tensor, optional
            The residual stream: the shape of `input`, its dtype or float32.
            None (the first block) means ``h = input``.

        Returns
        -------
        tuple of torch.Tensor
            ``(y, h)``: the normalized sum (dtype of `input`) and the new
            residual stream ``h = input + residual`` (dtype of `residual`).
        """
        ns = self.normalized_shape
        if residual is None:
            return super().forward(input), input
        x, res = _ops.as_rows(input, ns), _ops.as_rows(residual, ns)
        return _ops.add_layer_norm(x, res, ns, self.weight, self.bias, self.eps, None, None, False)


class FusedAddRMSNorm(RMSNorm):
    """The pre-norm step ``h = input + residual; y = rms_norm(h)`` in one pass.

    Constructor arguments, parameters and ``state_dict`` keys are those of
    ``torch.nn.RMSNorm`` (plus the keyword-only ``weight_offset`` of
    :class:`RMSNorm`).
    """

    def forward(self, input: Tensor, residual: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        """Add `residual` to `input` and normalize the sum.

        Parameters
        ----------
        input : torch.Tensor
            Shape ``(*, *normalized_shape)``.
        residual : torch.Tensor, optional
            The residual stream: the shape of `input`, its dtype or float32.
            None (the first block) means ``h = input``.

        Returns
        -------
        tuple of torch.Tensor
            ``(y, h)`` as for :meth:`FusedAddLayerNorm.forward`.
        """
        ns = self.normalized_shape
        if residual is None:
            return super().forward(input), input
        x, res = _ops.as_rows(input, ns), _ops.as_rows(residual, ns)
        return _ops.add_rms_norm(x, res, ns, self.weight, self.eps, self.weight_offset, None, None, False)


def replace_norms(model: torch.nn.Module) -> torch.nn.Module:
    """Swap every ``torch.nn.LayerNorm`` / ``torch.nn.RMSNorm`` in `model` for normkit's.

    The new modules share the old ones' ``Parameter`` objects, so weights,
    ``requires_grad``, devices, an optimizer that already holds them and the
    ``state_dict`` all stay as they were; the train/eval mode is kept.
    Only modules whose type is exactly the torch class are replaced
    (subclasses may override ``forward``).

    Parameters
    ----------
    model : torch.nn.Module
        Modified in place.

    Returns
    -------
    torch.nn.Module
        `model` (a bare ``nn.LayerNorm``/``nn.RMSNorm`` passed as `model`
        itself is returned as its replacement).
    """

    def convert(m: torch.nn.Module) -> Optional[torch.nn.Module]:
        if type(m) is torch.nn.LayerNorm:
            new = LayerNorm(m.normalized_shape, m.eps, elementwise_affine=False)
            new.weight, new.bias = m.weight, m.bias
        elif type(m) is torch.nn.RMSNorm:
            new = RMSNorm(m.normalized_shape, m.eps, elementwise_affine=False)
            new.weight = m.weight
        else:
            return None
        new.elementwise_affine = m.elementwise_affine
        new.train(m.training)
        return new

    top = convert(model)
    if top is not None:
        return top
    for parent in model.modules():
        for name, child in list(parent.named_children()):
            new = convert(child)
            if new is not None:
                setattr(parent, name, new)
    return model
