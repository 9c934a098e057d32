"""normkit.cpu_simd_target() names the kernels the library runs: the best
target this CPU has, so that a timing can say what it measured."""

from __future__ import annotations

import normkit


def test_the_cpu_simd_target_is_the_best_this_cpu_has() -> None:
    target = normkit.cpu_simd_target()
    try:
        flags = next(line for line in open("/proc/cpuinfo") if line.startswith("flags")).split()
    except (OSError, StopIteration):
        flags = []
    if {"avx512f", "avx512vl", "avx512dq", "avx512bw"} <= set(flags):
        assert target.startswith("AVX3"), target
    elif {"avx2", "fma", "f16c", "bmi2"} <= set(flags):
        assert target == "AVX2", target
    else:
        assert target, "no target name"
