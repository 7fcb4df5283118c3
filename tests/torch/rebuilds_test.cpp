// rebuilds_test.cpp - nested and meta tensors (rebuild functions the main matrix lacks) against torch's own view.
#include <catch2/catch.hpp>

#include <cstring>

#include "maploc/torch/checkpoint.h"
#include "maploc/torch/hash.h"
#include "torch/torch_test_util.h"

namespace maploc::test {
namespace {

const torch::Tensor& named(const torch::Checkpoint& c, const std::string& name) {
  for (const auto& t : c.tensors()) {
    if (t.name == name) return t;
  }
  FAIL("no tensor " << name);
  throw;
}

// The int64 values of a component tensor, row-major.
std::vector<std::int64_t> int64_values(const torch::Checkpoint& c, const torch::Tensor& t) {
  REQUIRE(t.dtype == torch::DType::kInt64);
  const auto bytes = torch::contiguous_bytes(c, t);
  std::vector<std::int64_t> out(bytes.size() / 8);
  std::memcpy(out.data(), bytes.data(), out.size() * 8);
  return out;
}

}  // namespace

TEST_CASE("nested and meta tensors read as torch.load gives them", "[torch]") {
  const auto dir = std::filesystem::path(MAPLOC_FIXTURES_DIR) / "rebuilds";
  const auto c = torch::Checkpoint::open(dir / "rebuilds.t2x.pt");
  const auto want = read_json(dir / "rebuilds.t2x.pt.expected.json");

  const auto& nested = named(c, "nested");
  CHECK(nested.kind == torch::TensorKind::kNested);
  CHECK(torch::dtype_name(nested.dtype) == want["nested"]["dtype"].get<std::string>());
  CHECK(torch::tensor_sha256(c, named(c, "nested.buffer")) == want["nested"]["buffer_sha256"].get<std::string>());
  // sizes and strides are [n, rank] tensors; flatten torch's per-part lists to compare.
  std::vector<std::int64_t> sizes, strides;
  for (const auto& s : want["nested"]["sizes"]) sizes.insert(sizes.end(), s.begin(), s.end());
  for (const auto& s : want["nested"]["strides"]) strides.insert(strides.end(), s.begin(), s.end());
  CHECK(int64_values(c, named(c, "nested.sizes")) == sizes);
  CHECK(int64_values(c, named(c, "nested.strides")) == strides);
  CHECK(int64_values(c, named(c, "nested.storage_offsets")) ==
        want["nested"]["storage_offsets"].get<std::vector<std::int64_t>>());

  const auto& meta = named(c, "meta");
  CHECK(meta.kind == torch::TensorKind::kMeta);
  CHECK_FALSE(meta.storage.has_value());
  CHECK(torch::dtype_name(meta.dtype) == want["meta"]["dtype"].get<std::string>());
  CHECK(meta.shape == want["meta"]["shape"].get<std::vector<std::int64_t>>());

  CHECK(torch::tensor_sha256(c, named(c, "plain")) == want["plain"]["sha256"].get<std::string>());
  CHECK(c.unknown_globals() == want["unsafe_globals"].get<std::vector<std::string>>());
}

}  // namespace maploc::test

namespace maploc::test {

TEST_CASE("hashing a caller-built tensor that reaches past its storage is kInvalidArgument, not a stray read",
          "[torch]") {
  const auto c = torch::Checkpoint::open(std::string(MAPLOC_FIXTURES_DIR) + "/checkpoints/gpu_tagged.t113.pt");
  torch::Tensor t = c.tensors().at(0);
  const std::string good = torch::tensor_sha256(c, t);
  CHECK(good.size() == 64);
  const std::uint64_t nbytes = c.storages().at(*t.storage).nbytes;
  t.storage_offset = static_cast<std::int64_t>(nbytes);  // one element past the end
  CHECK(code_of([&] { (void)torch::tensor_sha256(c, t); }) == ErrorCode::kInvalidArgument);
  t = c.tensors().at(0);
  t.stride.clear();  // a rank the size does not have
  CHECK(code_of([&] { (void)torch::contiguous_bytes(c, t); }) == ErrorCode::kInvalidArgument);
  t = c.tensors().at(0);
  t.shape.at(0) = -1;
  CHECK(code_of([&] { (void)torch::tensor_sha256(c, t); }) == ErrorCode::kInvalidArgument);
  CHECK(torch::tensor_sha256(c, c.tensors().at(0)) == good);
}

}  // namespace maploc::test
