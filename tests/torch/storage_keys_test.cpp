// storage_keys_test.cpp - storage keys find their records whether torch counted them ("0", "1", ...) or not.
#include <algorithm>
#include <string>
#include <vector>

#include "torch/torch_test_util.h"

namespace maploc::test {
namespace {

// Renames a record in its local header and in the central directory: every
// "/<from>" followed by a byte that is not a digit (so "data/1" leaves "data/10" alone).
void rename_record(Buffer& b, const std::string& from, const std::string& to) {
  REQUIRE(from.size() == to.size());
  const std::string needle = "/" + from;
  int renamed = 0;
  for (auto it = b.begin(); (it = std::search(it, b.end(), needle.begin(), needle.end())) != b.end(); ++it) {
    const auto after = it + static_cast<std::ptrdiff_t>(needle.size());
    if (after != b.end() && *after >= '0' && *after <= '9') continue;
    std::copy(to.begin(), to.end(), it + 1);
    ++renamed;
  }
  REQUIRE(renamed == 2);
}

// Renames storage `from` to `to` (same length): its key in data.pkl (the
// BINUNICODE that first names it) and its record.
Buffer with_storage_renamed(Buffer b, const std::string& from, const std::string& to) {
  const std::string head = "X" + std::string(1, static_cast<char>(from.size())) + std::string(3, '\0');
  patch(b, head + from, head + to);
  rename_record(b, "data/" + from, "data/" + to);
  return b;
}

// Storage bytes of every tensor, by name.
std::vector<std::pair<std::string, std::vector<std::uint8_t>>> tensor_bytes(const torch::Checkpoint& ck) {
  std::vector<std::pair<std::string, std::vector<std::uint8_t>>> out;
  for (const auto& t : ck.tensors()) {
    REQUIRE(t.storage);
    const Bytes raw = ck.storage_bytes(ck.storages()[*t.storage]);
    out.emplace_back(t.name, std::vector<std::uint8_t>(raw.data(), raw.data() + raw.size()));
  }
  return out;
}

}  // namespace

// protocol2.t2x.pt: w and w_t share storage '0', b has storage '1'; torch counted both keys.
TEST_CASE("storage keys that torch did not count still find their records, shared or not", "[torch]") {
  const Buffer good = read_file(checkpoints_dir() / "protocol2.t2x.pt");
  const auto expected = tensor_bytes(open_bytes(good));
  REQUIRE(expected.size() == 3);

  SECTION("the first key is not a count: every key is looked up by name") {
    const auto ck = open_bytes(with_storage_renamed(good, "0", "k"));
    CHECK(tensor_bytes(ck) == expected);
    REQUIRE(ck.storages().size() == 2);
    CHECK(ck.storages()[0].key == "k");
    CHECK(*ck.tensors()[0].storage == *ck.tensors()[1].storage);  // w and w_t still share
  }
  SECTION("a key that is not a count after counted ones") {
    const auto ck = open_bytes(with_storage_renamed(good, "1", "k"));
    CHECK(tensor_bytes(ck) == expected);
    CHECK(ck.storages()[1].key == "k");
  }
  SECTION("a counted key whose record is missing names the storage and the record") {
    Buffer b = good;
    rename_record(b, "data/1", "data/x");
    try {
      open_bytes(b);
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::kTorchStorageMissing);
      CHECK_THAT(e.what(), Catch::Contains("storage '1'") && Catch::Contains("protocol2.t2x/data/1'"));
    }
  }
}

// Storage '01' (record data/01) is not storage '1': torch never writes a
// leading zero, and reading one as a count would share or swap their bytes.
TEST_CASE("a key with a leading zero is not a counted storage", "[torch]") {
  const Buffer good = read_file(checkpoints_dir() / "many_small_20k.t113.pt");
  const auto expected = tensor_bytes(open_bytes(good));
  const auto ck = open_bytes(with_storage_renamed(good, "10", "01"));
  REQUIRE(ck.storages().size() == 20000);
  CHECK(ck.storages()[10].key == "01");
  CHECK(ck.storages()[1].key == "1");
  CHECK(tensor_bytes(ck) == expected);
}

}  // namespace maploc::test
