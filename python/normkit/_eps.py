"""The eps ``rms_norm(eps=None)`` uses, shared by the array API and the PyTorch layer.

It is the machine epsilon of the type the statistics are computed in, as
PyTorch does (``at::opmath_type``): float64 for float64 inputs, float32 for
everything else, float16 and bfloat16 included. This module imports nothing
of normkit's, so both :mod:`normkit._functional` and :mod:`normkit._torch_ops`
can depend on it without depending on each other.
"""

F32_EPS = 1.1920928955078125e-07  # 2**-23, numpy.finfo(numpy.float32).eps
F64_EPS = 2.220446049250313e-16  # 2**-52, numpy.finfo(numpy.float64).eps
