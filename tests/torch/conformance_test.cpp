// conformance_test.cpp - the checkpoints of PyTorch's own test suite (fixtures/conformance/pytorch).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "maploc/torch/checkpoint.h"
#include "maploc/torch/hash.h"
#include "torch/torch_test_util.h"

namespace maploc::test {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

void flatten(const json& v, std::vector<json>& out, bool complex) {
  if (v.is_array() && !(complex && v.size() == 2 && v[0].is_number())) {
    for (const auto& e : v) flatten(e, out, complex);
  } else {
    out.push_back(v);
  }
}

double half_to_double(std::uint16_t h) {
  const int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exp == 0) return sign * std::ldexp(mant, -24);
  if (exp == 31) return mant ? NAN : sign * INFINITY;
  return sign * std::ldexp(mant + 1024, exp - 25);
}

// Element i of little-endian contiguous bytes as JSON, like the manifest writes it.
json element(const std::vector<std::uint8_t>& b, torch::DType d, std::size_t i) {
  using torch::DType;
  auto load = [&](std::size_t off, auto zero) {
    decltype(zero) v;
    std::memcpy(&v, b.data() + off, sizeof v);
    return v;
  };
  switch (d) {
    case DType::kFloat64: return load(i * 8, 0.0);
    case DType::kFloat32: return static_cast<double>(load(i * 4, 0.0f));
    case DType::kFloat16: return half_to_double(load(i * 2, std::uint16_t{}));
    case DType::kBFloat16: {
      const std::uint32_t bits = std::uint32_t{load(i * 2, std::uint16_t{})} << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return static_cast<double>(f);
    }
    case DType::kComplex64: return json::array({static_cast<double>(load(i * 8, 0.0f)), static_cast<double>(load(i * 8 + 4, 0.0f))});
    case DType::kComplex128: return json::array({load(i * 16, 0.0), load(i * 16 + 8, 0.0)});
    case DType::kInt64: return load(i * 8, std::int64_t{});
    case DType::kInt32: return load(i * 4, std::int32_t{});
    case DType::kInt16: return load(i * 2, std::int16_t{});
    case DType::kInt8: return load(i, std::int8_t{});
    case DType::kUInt8: return load(i, std::uint8_t{});
    case DType::kBool: return b[i] != 0;
    default: return nullptr;
  }
}

void check_values(const torch::Checkpoint& c, const torch::Tensor& t, const json& values) {
  std::vector<json> want;
  const bool complex = t.dtype == torch::DType::kComplex64 || t.dtype == torch::DType::kComplex128;
  flatten(values, want, complex);
  const auto bytes = torch::contiguous_bytes(c, t);
  REQUIRE(want.size() == t.numel());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("element " << i);
    CHECK(element(bytes, t.dtype, i) == want[i]);
  }
}

void check_tensor(const torch::Checkpoint& c, const torch::Tensor& t, const json& m, bool as_big) {
  CHECK(torch::dtype_name(t.dtype) == m["dtype"].get<std::string>());
  CHECK(json(t.shape) == m["shape"]);
  CHECK(json(t.stride) == m["stride"]);
  CHECK(t.storage_offset == m["storage_offset"].get<std::int64_t>());
  CHECK(t.requires_grad == m["requires_grad"].get<bool>());
  REQUIRE(t.storage);
  const auto& s = c.storages()[*t.storage];
  CHECK(s.key == m["storage_key"].get<std::string>());
  CHECK(s.location == m["storage_location"].get<std::string>());
  CHECK(s.numel == m["storage_numel"].get<std::uint64_t>());
  const Bytes raw = c.storage_bytes(*t.storage);
  std::string hex;
  for (auto byte : raw.span()) {
    char buf[3];
    std::snprintf(buf, sizeof buf, "%02x", byte);
    hex += buf;
  }
  CHECK(hex == m["storage_bytes_hex"].get<std::string>());
  // Without a record the default is little-endian, as torch >= 2.2 reads it.
  const bool le_reading = !c.has_byteorder_record() && !as_big;
  check_values(c, t, le_reading && m.contains("values_if_data_read_as_little_endian")
                         ? m["values_if_data_read_as_little_endian"]
                         : m["values"]);
}

void check_zip_file(const fs::path& dir, const json& f, bool as_big) {
  torch::Options o;
  if (as_big) o.default_byteorder = torch::ByteOrder::kBig;
  const auto c = torch::Checkpoint::open(dir / f["file"].get<std::string>(), o);
  CHECK(c.format() == torch::Format::kZip);
  const auto br = f["byteorder_record"];
  CHECK(c.has_byteorder_record() == !br.is_null());
  if (!br.is_null()) CHECK(torch::byteorder_name(c.byteorder()) == br.get<std::string>());
  if (f.contains("tensor")) {
    REQUIRE(c.tensors().size() == 1);
    check_tensor(c, c.tensors()[0], f["tensor"], as_big);
  } else {
    const auto& sd = f["state_dict"];
    REQUIRE(c.tensors().size() == sd.size());
    for (const auto& t : c.tensors()) {
      INFO(t.name);
      REQUIRE(sd.contains(t.name));
      check_tensor(c, t, sd[t.name], as_big);
    }
  }
}

void check_legacy_file(const fs::path& dir, const json& f) {
  const auto c = torch::Checkpoint::open(dir / f["file"].get<std::string>());
  CHECK(c.format() == torch::Format::kLegacy);
  for (const auto& s : f["storages"]) {
    const auto it = std::find_if(c.storages().begin(), c.storages().end(),
                                 [&](const torch::Storage& x) { return x.key == s["key"].get<std::string>(); });
    REQUIRE(it != c.storages().end());
    CHECK(torch::dtype_name(it->dtype) == s["dtype"].get<std::string>());
    CHECK(it->numel == s["count"].get<std::uint64_t>());
    CHECK(it->file_offset == s["data_offset"].get<std::uint64_t>());
  }
  for (const auto& pid : f.value("persistent_ids", json::array())) {
    if (pid["view_metadata"].is_null()) continue;
    const auto& vm = pid["view_metadata"];
    const auto it = std::find_if(c.storages().begin(), c.storages().end(), [&](const torch::Storage& x) {
      return x.key == vm["view_key"].get<std::string>();
    });
    REQUIRE(it != c.storages().end());
    REQUIRE(it->view_of);
    CHECK(c.storages()[*it->view_of].key == pid["root_key"].get<std::string>());
    CHECK(it->view_offset == vm["offset"].get<std::uint64_t>());
    CHECK(it->numel == vm["size"].get<std::uint64_t>());
  }
  for (const auto& t : c.tensors()) {
    if (t.kind != torch::TensorKind::kDense) continue;
    CHECK(torch::contiguous_bytes(c, t).size() == t.numel() * torch::element_size(t.dtype));
  }
}

}  // namespace

TEST_CASE("PyTorch's own test checkpoints read as their manifest says", "[torch]") {
  const fs::path dir = MAPLOC_CONFORMANCE_DIR;
  REQUIRE(fs::exists(dir / "manifest.json"));  // committed: missing is a failure
  const json m = read_json(dir / "manifest.json");
  std::size_t checked = 0;
  for (const auto& f : m["files"]) {
    const auto name = f["file"].get<std::string>();
    DYNAMIC_SECTION(name) {
      if (f["group"] == "legacy") {
        check_legacy_file(dir, f);
      } else {
        check_zip_file(dir, f, false);
        if (f["byteorder_record"].is_null() && f["data_endianness"] == "big") check_zip_file(dir, f, true);
      }
    }
    ++checked;
  }
  CHECK(checked == 56);
}

}  // namespace maploc::test
