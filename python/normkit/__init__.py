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
    "cuda_device_count",
    "library_version",
    "cpu_simd_target",
    "set_output_cache_limit",
    "empty_output_cache",
    "output_cache_info",
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
        The current setting (see :func:`set_num_threads`); 1 in a process
        forked after normkit ran threaded (GNU OpenMP cannot start threads
        there), such as a data-loader worker.
    """
    return _normkit.num_threads()


def cuda_device_count() -> int:
    """The number of CUDA devices normkit can run on.

    Returns
    -------
    int
        0 when this build has no CUDA backend (it is built where ``nvcc`` is
        found), or the machine no driver or GPU. CUDA tensors on a device
        normkit can use run there, on PyTorch's current stream.
    """
    return _normkit.cuda_device_count()


def set_output_cache_limit(nbytes: int) -> None:
    """Set how many bytes of freed outputs normkit keeps for reuse.

    An output the caller does not pass (``out=None``) is a new array on every
    call. One of 1 MiB or more comes from normkit's output cache: a block
    whose array has been freed is kept and handed to the next output of
    about its size, so that a training loop does not map and fault in fresh
    pages every step (for a 32 MiB output that costs several times the norm
    itself). Freed blocks beyond the limit are returned to the system,
    least recently freed first.

    Parameters
    ----------
    nbytes : int
        The most freed bytes kept; ``0`` turns the cache off (outputs are
        then allocated by the input's framework, as smaller ones always
        are). The initial limit is ``NORMKIT_OUTPUT_CACHE_BYTES`` from the
        environment, or 1 GiB. Process-wide.
    """
    n = int(nbytes)
    if n < 0:
        raise ValueError(f"set_output_cache_limit: nbytes must be >= 0, got {n}")
    _normkit.set_output_cache_limit(n)


def empty_output_cache() -> None:
    """Return every freed block the output cache keeps to the system.

    Arrays still alive keep their memory; their blocks are kept again (within
    the limit) when they are freed.
    """
    _normkit.empty_output_cache()


def output_cache_info() -> dict:
    """The state of the output cache (see :func:`set_output_cache_limit`).

    Returns
    -------
    dict
        ``limit_bytes``; ``cached_bytes`` and ``cached_blocks``, kept for
        reuse; ``live_bytes`` and ``live_blocks``, held by arrays now;
        ``hits`` and ``misses``, the outputs served from a kept block and
        from a new one since the process started. Blocks are whole 2 MiB
        units.
    """
    return dict(_normkit.output_cache_info())


def library_version() -> str:
    """The version of the compiled C++ library inside this package.

    Returns
    -------
    str
        ``"MAJOR.MINOR.PATCH"``.
    """
    return _normkit.version()


def cpu_simd_target() -> str:
    """The SIMD target the CPU kernels run on this machine.

    The library holds its kernels for several instruction sets and picks the
    best this CPU supports when first called; timings taken on two machines
    compare the kernels only when this names the same target on both.

    Returns
    -------
    str
        Google Highway's name of the target, e.g. ``"AVX3_ZEN4"`` (AVX-512
        on AMD Zen 4) or ``"AVX2"``.
    """
    return _normkit.cpu_simd_target()


__version__: str = library_version()
