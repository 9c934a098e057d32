#include "model/blas.hpp"

#include <cblas.h>

namespace normkit::model {

namespace {

CBLAS_TRANSPOSE op(bool t) { return t ? CblasTrans : CblasNoTrans; }
blasint n32(std::int64_t v) { return static_cast<blasint>(v); }

}  // namespace

template <>
void gemm<float>(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, float alpha,
                 const float* A, std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C,
                 std::int64_t ldc) {
  cblas_sgemm(CblasRowMajor, op(trans_a), op(trans_b), n32(M), n32(N), n32(K), alpha, A, n32(lda), B,
              n32(ldb), beta, C, n32(ldc));
}

template <>
void gemm<double>(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, double alpha,
                  const double* A, std::int64_t lda, const double* B, std::int64_t ldb, double beta,
                  double* C, std::int64_t ldc) {
  cblas_dgemm(CblasRowMajor, op(trans_a), op(trans_b), n32(M), n32(N), n32(K), alpha, A, n32(lda), B,
              n32(ldb), beta, C, n32(ldc));
}

void set_blas_threads(int n) { openblas_set_num_threads(n); }

int blas_threads() { return openblas_get_num_threads(); }

std::string blas_core() {
  const char* name = openblas_get_corename();
  return name ? name : "unknown";
}

bool blas_core_is_fallback() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return blas_core() == "Prescott" && (__builtin_cpu_supports("avx2") || __builtin_cpu_supports("avx512f"));
#else
  return false;  // Prescott is an x86 core
#endif
}

}  // namespace normkit::model
