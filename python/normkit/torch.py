"""Drop-in PyTorch modules backed by normkit's kernels.

:class:`LayerNorm` and :class:`RMSNorm` subclass ``torch.nn.LayerNorm`` and
``torch.nn.RMSNorm``: same constructor arguments, parameters, ``state_dict``
keys and ``repr``, so a checkpoint loads into either, ``isinstance`` checks
(weight-decay exclusion, FSDP wrap policies) still match, and only
``forward`` changes. :class:`FusedAddLayerNorm` and :class:`FusedAddRMSNorm`
compute the pre-norm step ``h = x + residual; y = norm(h)`` in one pass.
:func:`replace_norms` swaps the norm modules of an existing model in place —
``torch.nn`` ones and those of other libraries (Hugging Face ``LlamaRMSNorm``,
``GemmaRMSNorm``, ``T5LayerNorm``, …) — after checking on a probe input that
normkit's module computes what the old one did (:mod:`normkit._swap`).

Importing this module registers the ``torch.ops.normkit.*`` operators that
``torch.compile`` uses (see :mod:`normkit._torch_ops`).

Inputs whose rows cannot be viewed with one row stride (a transposed or
broadcast tensor) are copied to a contiguous tensor first, as PyTorch's own
modules accept any layout; the array API (:func:`normkit.layer_norm`) never
copies and raises instead.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from . import _torch_ops as _ops
from ._swap import OUTPUT_DTYPE_RULES, describe, match

__all__ = [
    "LayerNorm",
    "RMSNorm",
    "FusedAddLayerNorm",
    "FusedAddRMSNorm",
    "MatchedLayerNorm",
    "MatchedRMSNorm",
    "NormSwap",
    "SwapReport",
    "replace_norms",
]

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


def _param_for(p: Optional[Tensor], x: Tensor) -> Optional[Tensor]:
    # normkit takes parameters in the input's dtype or float32; a 16-bit
    # weight with a float32 (or another 16-bit) input is widened, exactly.
    if p is None or p.dtype == x.dtype or p.dtype == torch.float32:
        return p
    return p.float()


class MatchedLayerNorm(LayerNorm):
    """:class:`LayerNorm` with parameters of any float dtype and a chosen output dtype.

    What :func:`replace_norms` puts in place of a LayerNorm-like module that
    is not a ``torch.nn.LayerNorm``. Parameters as for :class:`LayerNorm`, plus
    the keyword-only `output_dtype`: ``"input"``, ``"promote"`` (the wider of
    the input's and the weight's dtype) or ``"weight"``. The kernel computes
    in float32 and rounds once to the input's dtype; the cast to the output
    dtype follows.
    """

    def __init__(self, *args, output_dtype: str = "input", **kwargs) -> None:
        if output_dtype not in OUTPUT_DTYPE_RULES:
            raise ValueError(f"MatchedLayerNorm: output_dtype must be one of {sorted(OUTPUT_DTYPE_RULES)}, got {output_dtype!r}")
        self.output_dtype = output_dtype
        super().__init__(*args, **kwargs)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", output_dtype={self.output_dtype!r}"

    def forward(self, input: Tensor) -> Tensor:
        """Normalize `input`; the result has the dtype `output_dtype` names."""
        ns = self.normalized_shape
        x = _ops.as_rows(input, ns)
        y = _ops.layer_norm(x, ns, _param_for(self.weight, x), _param_for(self.bias, x), self.eps, None, False)
        w_dtype = self.weight.dtype if self.weight is not None else input.dtype
        return y.to(OUTPUT_DTYPE_RULES[self.output_dtype](input.dtype, w_dtype))


class MatchedRMSNorm(RMSNorm):
    """:class:`RMSNorm` with parameters of any float dtype and a chosen output dtype.

    What :func:`replace_norms` puts in place of an RMSNorm-like module that is
    not a ``torch.nn.RMSNorm`` (``LlamaRMSNorm``: ``output_dtype="promote"``;
    ``GemmaRMSNorm``: ``weight_offset=1``, ``"input"``; ``T5LayerNorm``:
    ``"weight"``). Parameters as for :class:`RMSNorm`, plus `output_dtype` as
    for :class:`MatchedLayerNorm`.
    """

    def __init__(self, *args, output_dtype: str = "input", **kwargs) -> None:
        if output_dtype not in OUTPUT_DTYPE_RULES:
            raise ValueError(f"MatchedRMSNorm: output_dtype must be one of {sorted(OUTPUT_DTYPE_RULES)}, got {output_dtype!r}")
        self.output_dtype = output_dtype
        super().__init__(*args, **kwargs)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", output_dtype={self.output_dtype!r}"

    def forward(self, input: Tensor) -> Tensor:
        """Normalize `input`; the result has the dtype `output_dtype` names."""
        ns = self.normalized_shape
        x = _ops.as_rows(input, ns)
        y = _ops.rms_norm(x, ns, _param_for(self.weight, x), self.eps, self.weight_offset, None, False)
        w_dtype = self.weight.dtype if self.weight is not None else input.dtype
        return y.to(OUTPUT_DTYPE_RULES[self.output_dtype](input.dtype, w_dtype))


@dataclasses.dataclass(frozen=True)
class NormSwap:
    """What :func:`replace_norms` did with one norm-like module.

    Attributes
    ----------
    name : str
        The module's qualified name in the model (``""`` for the model itself).
    module : str
        The original module's class name.
    swapped : bool
        Whether it was replaced.
    replacement : str
        The new module's ``repr`` (empty when not swapped).
    reason : str
        Why it was swapped (what the probe matched) or left alone.
    margin : float
        For a swapped module, the largest difference between it and its
        replacement on the probes, as a fraction of the tolerance (below 1);
        NaN otherwise.
    """

    name: str
    module: str
    swapped: bool
    replacement: str
    reason: str
    margin: float = math.nan


class SwapReport(List[NormSwap]):
    """The records of :func:`replace_norms`, one per norm-like module, in model order.

    ``report.model`` is the model (or the replacement of a bare norm module);
    ``str(report)`` is a table for a person.
    """

    model: torch.nn.Module

    @property
    def swapped(self) -> List[NormSwap]:
        return [r for r in self if r.swapped]

    @property
    def left_alone(self) -> List[NormSwap]:
        return [r for r in self if not r.swapped]

    def __str__(self) -> str:
        lines = [f"replace_norms: {len(self.swapped)} swapped, {len(self.left_alone)} left alone"]
        # Modules of one class with one outcome are one line: a 32-layer model
        # has 65 identical RMSNorm records.
        groups: Dict[Tuple[str, bool, str, str], List[NormSwap]] = {}
        for r in self:
            groups.setdefault((r.module, r.swapped, r.replacement, r.reason), []).append(r)
        for (module, swapped, replacement, reason), rs in groups.items():
            first = rs[0].name or "<model>"
            where = first if len(rs) == 1 else f"{len(rs)} modules, e.g. {first}"
            verdict = f"-> {replacement}" if swapped else "left alone"
            margin = f" (largest difference {max(r.margin for r in rs):.2f} of the tolerance)" if swapped else ""
            lines.append(f"  {module} ({where}) {verdict}: {reason}{margin}")
        return "\n".join(lines)


def replace_norms(model: torch.nn.Module) -> SwapReport:
    """Swap the norm modules of `model` for normkit's, each one checked first.

    A module is a candidate when it has no children, its parameters are a
    ``weight`` of shape ``(D,)`` (or ``normalized_shape``) and optionally a
    ``bias`` of the same shape, and it has an ``eps`` or ``variance_epsilon``
    attribute: ``torch.nn.LayerNorm`` and ``torch.nn.RMSNorm``, and the norm
    classes of other libraries such as Hugging Face's ``LlamaRMSNorm``,
    ``Qwen2RMSNorm``, ``GemmaRMSNorm`` (gain ``1 + weight``) or
    ``T5LayerNorm``. Each candidate is run on probe inputs in float32 and
    bfloat16 with random parameters, forward and backward, and replaced only
    if one of normkit's modules (LayerNorm, RMSNorm, RMSNorm with
    ``weight_offset=1``; the output dtype rule read off the module) gives the
    same output dtype and the same output and gradients within a tolerance
    derived from the dtypes and ``D`` (:mod:`normkit._swap`).

    ``torch.nn.LayerNorm`` / ``torch.nn.RMSNorm`` become :class:`LayerNorm` /
    :class:`RMSNorm`; other classes :class:`MatchedLayerNorm` /
    :class:`MatchedRMSNorm`. The new modules share the old ones'
    ``Parameter`` objects, so weights, ``requires_grad``, devices, an
    optimizer that already holds them and the ``state_dict`` keys stay as
    they were; the train/eval mode is kept, and a ``variance_epsilon``
    attribute is copied for code that reads it. Hooks are not carried over.

    Parameters
    ----------
    model : torch.nn.Module
        Modified in place.

    Returns
    -------
    SwapReport
        One :class:`NormSwap` per norm-like module (candidates, and modules
        whose class name contains "Norm"), swapped or not and why;
        ``report.model`` is `model`, or the replacement when `model` itself
        is a norm module. ``print(report)`` shows a summary.
    """
    report = SwapReport()
    done: Dict[int, Optional[torch.nn.Module]] = {}  # a module reached twice is judged once

    def convert(name: str, m: torch.nn.Module) -> Optional[torch.nn.Module]:
        if id(m) not in done:
            done[id(m)] = judge(name, m)
        return done[id(m)]

    def judge(name: str, m: torch.nn.Module) -> Optional[torch.nn.Module]:
        if isinstance(m, (LayerNorm, RMSNorm)):
            return None  # already normkit's
        cand = describe(m)
        if isinstance(cand, str):
            if "norm" in type(m).__name__.lower():
                report.append(NormSwap(name, type(m).__name__, False, "", cand))
            return None
        exact_torch = type(m) in (torch.nn.LayerNorm, torch.nn.RMSNorm)

        def build(kind: str, weight_offset: float, rule: str) -> torch.nn.Module:
            affine = cand.weight is not None
            if exact_torch:
                cls = LayerNorm if kind == "layer_norm" else RMSNorm
                kw = {}
            else:
                cls = MatchedLayerNorm if kind == "layer_norm" else MatchedRMSNorm
                kw = {"output_dtype": rule}
            if kind == "rms_norm":
                kw["weight_offset"] = weight_offset
            else:
                kw["bias"] = cand.bias is not None
            # Then given the old module's own Parameter objects in place of
            # the fresh ones: no copy, and the optimizer's references hold.
            new = cls(cand.normalized_shape, cand.eps, elementwise_affine=affine, **kw)
            new.weight = cand.weight
            if kind == "layer_norm":
                new.bias = cand.bias
            return new

        new, reason, margin = match(m, cand, build, normkit_dtype_rules=("input",) if exact_torch else None)
        if new is None:
            report.append(NormSwap(name, type(m).__name__, False, "", reason))
            return None
        if hasattr(m, "variance_epsilon"):
            new.variance_epsilon = m.variance_epsilon
        new.train(m.training)
        report.append(NormSwap(name, type(m).__name__, True, repr(new), reason, margin))
        return new

    top = convert("", model)
    report.model = top if top is not None else model
    if top is not None:
        return report
    # In model order; a module reached by several paths is replaced on each.
    for path, child in list(model.named_modules(remove_duplicate=False))[1:]:
        new = convert(path, child)
        if new is not None:
            parent, _, attr = path.rpartition(".")
            setattr(model.get_submodule(parent), attr, new)
    return report
