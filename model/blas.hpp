// normkit model — the one matrix product the model uses, on CBLAS.
#pragma once

#include <cstdint>

namespace normkit::model {

// Row-major C (M, N) = alpha·op(A)·op(B) + beta·C, where op(A) is (M, K) and
// op(B) is (K, N); trans_a / trans_b take the stored matrix transposed.
// lda, ldb, ldc are the stored matrices' row strides. f32 calls cblas_sgemm,
// f64 cblas_dgemm.
template <class T>
void gemm(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, T alpha,
          const T* A, std::int64_t lda, const T* B, std::int64_t ldb, T beta, T* C, std::int64_t ldc);

// How many threads OpenBLAS may use (n >= 1).
void set_blas_threads(int n);

}  // namespace normkit::model
