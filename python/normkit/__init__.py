"""normkit: fast, verified LayerNorm and RMSNorm for CPUs.

The array API works on NumPy arrays (float32, float64, float16, and bfloat16
through ml_dtypes) and PyTorch CPU tensors, without copying them::

    import numpy as np, normkit
    x = np.random.randn(8, 4096).astype(np.float32)
    y = normkit.rms_norm(x, 4096, weight=np.ones(4096, np.float32), eps=1e-6)

On tensors the functions support autograd and ``torch.compile``; drop-in
modules live in :mod:`normkit.torch`. Errors from the library arrive as
``ValueError`` (bad shapes, dtype combinations, eps, overlapping outputs) or
``TypeError`` (not an array, unsupported element type), and nothing is
written when one is raised.
"""

from __future__ import annotations

from . import _normkit
from ._functional import (
    add_layer_norm,
    add_layer_norm_backward,
    add_rms_norm,
    add_rms_norm_backward,
    default_rms_eps,
    layer_norm,
    layer_norm_backward,
    rms_norm,
    rms_norm_backward,
)

__all__ = [
    "layer_norm",
    "rms_norm",
    "add_layer_norm",
    "add_rms_norm",
    "layer_norm_backward",
    "rms_norm_backward",
    "add_layer_norm_backward",
    "add_rms_norm_backward",
    "default_rms_eps",
    "set_num_threads",
    "get_num_threads",
    "library_version",
    "__version__",
]


def set_num_threads(n: int) -> None:
    """Set the maximum number of threads normkit's kernels use.

    Parameters
    ----------
    n : int
        The thread count; ``n <= 0`` restores the default (OpenMP's:
        ``OMP_NUM_THREADS`` or the number of cores). Process-wide; results
        are bitwise identical for every thread count.
    """
    _normkit.set_num_threads(int(n))


def get_num_threads() -> int:
    """The maximum number of threads normkit's kernels use (>= 1).

    Returns
    -------
    int
        The current setting (see :func:`set_num_threads`).
    """
    return _normkit.num_threads()


def library_version() -> str:
    """The version of the compiled C++ library inside this package.

    Returns
    -------
    str
        ``"MAJOR.MINOR.PATCH"``.
    """
    return _normkit.version()


__version__: str = library_version()
