// normkit model — the one matrix product the model uses, on CBLAS.
#pragma once

#include <cstdint>
#include <string>

namespace normkit::model {

// Row-major C (M, N) = alpha·op(A)·op(B) + beta·C, where op(A) is (M, K) and
// op(B) is (K, N); trans_a / trans_b take the stored matrix transposed.
// lda, ldb, ldc are the stored matrices' row strides. f32 calls cblas_sgemm,
// f64 cblas_dgemm.
template <class T>
void gemm(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, T alpha,
          const T* A, std::int64_t lda, const T* B, std::int64_t ldb, T beta, T* C, std::int64_t ldc);

// How many threads OpenBLAS may use (n >= 1), and may use now.
void set_blas_threads(int n);
int blas_threads();

// The kernels OpenBLAS chose for this CPU (openblas_get_corename, e.g.
// "Cooperlake"). "Prescott" on a CPU with AVX2 or AVX-512 is its generic
// fallback for a CPU it does not know: the products then run several times
// slower than the CPU allows (scripts/openblas-core.sh, docs/lab.md).
std::string blas_core();

// Whether blas_core() is that fallback on a CPU with AVX2 or AVX-512.
bool blas_core_is_fallback();

}  // namespace normkit::model
