// Uses normkit through find_package(normkit): checks one LayerNorm row.
#include <normkit/normkit.hpp>

#include <cmath>
#include <cstdio>

int main() {
  float x[4] = {1, 2, 3, 4}, y[4];
  normkit::layer_norm(normkit::matrix(&x[0], 1, 4), {}, {}, 1e-5, normkit::matrix(&y[0], 1, 4));
  const bool ok = std::abs(y[0] + 1.34164f) < 1e-4f && std::abs(y[3] - 1.34164f) < 1e-4f;
  std::printf("normkit %s: layer_norm(1,2,3,4) = %.5f %.5f %.5f %.5f %s\n", normkit::version(), y[0], y[1], y[2],
              y[3], ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
