#include <normkit/normkit.hpp>
#include <cstdio>
#include <vector>

int main() {
  const std::int64_t rows = 2, D = 4;
  std::vector<float> x = {1, 2, 3, 4, 2, 2, 4, 4}, y(rows * D), rstd(rows);
  std::vector<float> weight(D, 1.0f);
  normkit::rms_norm(normkit::matrix(x.data(), rows, D), normkit::vector(weight.data(), D),
                    1e-6, normkit::matrix(y.data(), rows, D), normkit::vector(rstd.data(), rows));
  std::printf("%.3f %.3f %.3f %.3f\n", y[0], y[1], y[2], y[3]);  // 0.365 0.730 1.095 1.461
}
