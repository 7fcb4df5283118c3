// fixtures_test.cpp - every torch-made fixture agrees with its torch-made manifest, field by field.
#include <algorithm>
#include <map>

#include "maploc/torch/checkpoint.h"
#include "torch/manifest_view.h"
#include "torch/torch_test_util.h"

namespace maploc::test {
namespace {

using nlohmann::json;

// The manifest fields of a tensor entry that maploc reports (quantizer lists
// of scales/zero points are values, not metadata, and are not compared).
const char* const kTensorFields[] = {"name",          "dtype",    "shape",         "stride",   "storage_offset",
                                     "storage_key",   "location", "requires_grad", "sha256",   "qscheme",
                                     "scale",         "zero_point", "axis"};
const char* const kStorageFields[] = {"key", "dtype", "numel", "nbytes", "location", "sha256", "view_of", "view_offset"};
const char* const kSparseFields[] = {"name", "layout", "dtype", "shape", "requires_grad", "components"};

void compare_entry(const std::string& what, const json& expected, const json& mine, const char* const* fields,
                   std::size_t nfields) {
  for (std::size_t i = 0; i < nfields; ++i) {
    const char* f = fields[i];
    if (!expected.contains(f)) continue;
    INFO(what << " field " << f);
    REQUIRE(mine.contains(f));
    CHECK(mine[f] == expected[f]);
  }
}

template <std::size_t N>
void compare_list(const std::string& what, const json& expected, const json& mine, const char* const (&fields)[N],
                  bool ordered) {
  REQUIRE(expected.is_array());
  json a = expected, b = mine;
  if (!ordered) {
    auto by_name = [](const json& x, const json& y) { return x.value("name", "") < y.value("name", ""); };
    std::sort(a.begin(), a.end(), by_name);
    std::sort(b.begin(), b.end(), by_name);
  }
  CHECK(b.size() == a.size());
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    compare_entry(what + "[" + std::to_string(i) + "] " + a[i].value("name", a[i].value("key", "")), a[i], b[i],
                  fields, N);
  }
}

// Storages by key: the manifest lists them in first-reference order, which
// TorchScript's two pickles make ambiguous; keys are unique per file.
void compare_storages(const json& expected, const json& mine) {
  std::map<std::string, json> by_key;
  for (const auto& s : mine) by_key[s["key"].get<std::string>()] = s;
  CHECK(mine.size() == expected.size());
  for (const auto& e : expected) {
    const auto key = e["key"].get<std::string>();
    INFO("storage " << key);
    REQUIRE(by_key.count(key) == 1);
    compare_entry("storage " + key, e, by_key[key], kStorageFields, std::size(kStorageFields));
  }
}

void compare_summary(const json& m, const ManifestView& v) {
  REQUIRE(v.tensors.size() == m["tensors_count"].get<std::size_t>());
  REQUIRE(v.storages.size() == m["storages_count"].get<std::size_t>());
  CHECK(entries_digest(v.tensors) == m["tensors_digest"].get<std::string>());
  CHECK(entries_digest(v.storages) == m["storages_digest"].get<std::string>());
  // The first and last 50 entries field by field, for readable failures.
  const auto& mt = m["tensors"];
  const std::size_t half = mt.size() / 2;
  for (std::size_t i = 0; i < mt.size(); ++i) {
    const std::size_t j = i < half ? i : v.tensors.size() - (mt.size() - i);
    compare_entry("tensor " + std::to_string(j), mt[i], v.tensors[j], kTensorFields, std::size(kTensorFields));
  }
}

void check_fixture(const json& entry) {
  const std::string file = entry["file"].get<std::string>();
  INFO("fixture " << file);
  const json m = read_json(checkpoints_dir() / entry["manifest"].get<std::string>());
  const auto ckpt = torch::Checkpoint::open(checkpoints_dir() / file);

  CHECK(torch::format_name(ckpt.format()) == m["format"].get<std::string>());
  CHECK(torch::byteorder_name(ckpt.byteorder()) == m["byteorder"].get<std::string>());
  CHECK(ckpt.pickle_protocol() == m["pickle_protocol"].get<int>());
  if (m.contains("unsafe_globals") && m["unsafe_globals"].is_array()) {
    CHECK(json(ckpt.unknown_globals()) == m["unsafe_globals"]);
  }

  const ManifestView v = manifest_view(ckpt);
  if (m.value("summary", false)) {
    compare_summary(m, v);
    return;
  }
  // TorchScript manifests list named_parameters() then named_buffers();
  // maploc names attributes in pickle order, so compare those by name.
  const bool ordered = m["format"] != "torchscript";
  compare_list("tensor", m["tensors"], v.tensors, kTensorFields, ordered);
  compare_storages(m["storages"], v.storages);
  if (m.contains("sparse_tensors")) compare_list("sparse", m["sparse_tensors"], v.sparse, kSparseFields, true);
}

}  // namespace

TEST_CASE("every fixture in index.json agrees with its torch-made manifest", "[torch]") {
  const json index = read_json(checkpoints_dir() / "index.json");
  REQUIRE(index.size() > 0);
  for (const auto& entry : index) {
    DYNAMIC_SECTION(entry["file"].get<std::string>()) { check_fixture(entry); }
  }
}

TEST_CASE("a storage shared by several tensors is one storage", "[torch]") {
  const auto ckpt = torch::Checkpoint::open(checkpoints_dir() / "views_shared.t2x.pt");
  std::map<std::size_t, int> users;
  for (const auto& t : ckpt.tensors()) {
    if (t.storage) ++users[*t.storage];
  }
  CHECK(users.size() == ckpt.storages().size());
  CHECK(std::any_of(users.begin(), users.end(), [](const auto& kv) { return kv.second > 1; }));
}

TEST_CASE("TorchScript tensors are named by attribute path and code/ is never read", "[torch]") {
  const auto ckpt = torch::Checkpoint::open(checkpoints_dir() / "torchscript.t2x.pt");
  CHECK(ckpt.format() == torch::Format::kTorchScript);
  std::vector<std::string> names;
  for (const auto& t : ckpt.tensors()) names.push_back(t.name);
  CHECK(std::find(names.begin(), names.end(), "block.lin.weight") != names.end());
  CHECK(std::find(names.begin(), names.end(), "layers.1.bias") != names.end());
}

TEST_CASE("storage_bytes are the raw record bytes at the reported offset", "[torch]") {
  const auto path = checkpoints_dir() / "protocol2.t2x.pt";
  const auto file = read_file(path);
  const auto ckpt = torch::Checkpoint::open(path);
  for (std::size_t i = 0; i < ckpt.storages().size(); ++i) {
    const auto& s = ckpt.storages()[i];
    const Bytes b = ckpt.storage_bytes(i);
    REQUIRE(b.size() == s.nbytes);
    REQUIRE(s.file_offset + s.nbytes <= file.size());
    CHECK(std::equal(b.data(), b.data() + b.size(), file.begin() + static_cast<std::ptrdiff_t>(s.file_offset)));
  }
}

}  // namespace maploc::test
