// dtype_test.cpp - the dtype table: names round-trip, element sizes, storage class names.
#include <catch2/catch.hpp>

#include "maploc/torch/checkpoint.h"
#include "maploc/torch/dtype.h"

namespace maploc::torch {

TEST_CASE("every dtype name round-trips", "[torch]") {
  for (std::size_t i = 0; i < kDTypeCount; ++i) {
    const auto d = static_cast<DType>(i);
    CHECK(dtype_from_name(dtype_name(d)) == d);
    CHECK(element_size(d) >= 1);
    CHECK(element_size(d) % swap_unit(d) == 0);
  }
  CHECK(dtype_from_name("torch.float32") == DType::kFloat32);
  CHECK_FALSE(dtype_from_name("float31"));
}

TEST_CASE("element sizes follow torch._utils._element_size", "[torch]") {
  CHECK(element_size(DType::kComplex32) == 4);
  CHECK(swap_unit(DType::kComplex32) == 2);
  CHECK(element_size(DType::kComplex128) == 16);
  CHECK(swap_unit(DType::kComplex128) == 8);
  CHECK(element_size(DType::kFloat4_e2m1fn_x2) == 1);
  CHECK(element_size(DType::kBits16) == 2);
}

TEST_CASE("storage class names: Python, C++ and untyped", "[torch]") {
  CHECK(dtype_from_storage_type("torch", "FloatStorage") == DType::kFloat32);
  CHECK(dtype_from_storage_type("torch", "ComplexHalfStorage") == DType::kComplex32);
  CHECK(dtype_from_storage_type("torch", "Float8_e5m2Storage") == DType::kFloat8_e5m2);
  CHECK(dtype_from_storage_type("torch", "UInt16Storage") == DType::kUInt16);
  CHECK(dtype_from_storage_type("torch.storage", "UntypedStorage") == DType::kUInt8);
  CHECK_FALSE(dtype_from_storage_type("torch", "FloutStorage"));
  CHECK_FALSE(dtype_from_storage_type("os", "FloatStorage"));
}

}  // namespace maploc::torch
