# Sourced by the scripts that run normkit, after scripts/setup.sh.
# Debian 12's OpenBLAS (0.3.21) picks its kernels by CPU model, and on a CPU
# newer than it (an Intel Xeon of family 6, model 207, for one) it falls back
# to its generic Prescott (SSE3) kernels: the model's matrix products then run
# several times slower, which moves every timing of a training step (`normkit
# profile`, the lab's runtime_arithmetic; docs/lab.md measures it). Where it
# fell back on a CPU with AVX-512 or AVX2, this names the nearest core it has
# for that CPU's instructions. A core the user set (OPENBLAS_CORETYPE) is kept.
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
  openblas_core=$(python3 -c '
import ctypes
lib = ctypes.CDLL("libopenblas.so.0")
lib.openblas_get_corename.restype = ctypes.c_char_p
print(lib.openblas_get_corename().decode())' 2>/dev/null || true)
  if [ "$openblas_core" = Prescott ]; then
    cpu_flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2 || true) "
    case "$cpu_flags" in
      *" avx512_bf16 "*) export OPENBLAS_CORETYPE=COOPERLAKE ;;
      *" avx512f "*) export OPENBLAS_CORETYPE=SKYLAKEX ;;
      *" avx2 "*) export OPENBLAS_CORETYPE=HASWELL ;;
    esac
    if [ -n "${OPENBLAS_CORETYPE:-}" ]; then
      echo "OpenBLAS does not know this CPU and would run its generic kernels; OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE"
    fi
    unset cpu_flags
  fi
  unset openblas_core
fi
