// Hostile views: sizes no memory could hold, passed with a null pointer —
// the library must answer with normkit::Error and not compute anything from
// them that overflows (undefined behaviour, caught by the UBSan build).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "buffers.hpp"
#include "normkit/ops.hpp"

namespace normkit::test {
namespace {

TEST(Hostile, NullDataWithOverflowingElementCount) {
  Array y(DType::f32, 4, 16);
  const std::int64_t big = std::int64_t{1} << 62;
  for (auto [rows, cols] : {std::pair{big, std::int64_t{3} << 20}, std::pair{std::numeric_limits<std::int64_t>::max(),
                                                                              std::numeric_limits<std::int64_t>::max()}}) {
    const ConstMatrix x{nullptr, DType::f32, rows, cols, cols, Device::cpu};
    try {
      rms_norm(x, {}, 1e-5, y.mat());
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("rms_norm: x has a null data pointer but " + std::to_string(rows) + " x " +
                                           std::to_string(cols) + " elements"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace normkit::test
