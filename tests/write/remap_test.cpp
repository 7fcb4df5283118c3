// remap_test.cpp - every fixture written back as a torch archive tagged cpu reads back to the manifest's hashes.
#include <catch2/catch.hpp>

#include "maploc/pickle/machine.h"
#include "pickle/writer.h"
#include "maploc/torch/hash.h"
#include "maploc/torch/safetensors.h"
#include "maploc/torch/write.h"
#include "maploc/torch/write_set.h"
#include "write/write_test_util.h"

using namespace maploc;
using nlohmann::json;

namespace {

std::vector<std::string> all_cpu(const torch::Checkpoint& c) { return std::vector<std::string>(c.storages().size(), "cpu"); }

}  // namespace

TEST_CASE("remap of every fixture round-trips to the manifest's hashes", "[torch][remap]") {
  test::TempDir dir("remap");
  std::size_t files = 0, tensors = 0;
  for (const auto& entry : test::checkpoint_index()) {
    const std::string file = entry["file"];
    CAPTURE(file);
    const auto in = torch::Checkpoint::open(test::checkpoints_dir() / file);
    const json manifest = test::read_json(test::checkpoints_dir() / entry["manifest"].get<std::string>());
    torch::ArchiveOptions o;
    o.locations = all_cpu(in);
    const auto out_path = dir.path / (file + ".pt");
    torch::save_archive(in, out_path, o);
    const auto out = torch::Checkpoint::open(out_path);
    CHECK(out.format() == torch::Format::kZip);
    for (const auto& s : out.storages()) CHECK(s.location == "cpu");
    for (const auto& r : out.archive()->records()) CHECK(r.data_offset % 64 == 0);
    const auto got = test::hashes_of(out);
    for (const auto& t : manifest["tensors"]) {
      const std::string name = t["name"];
      CAPTURE(name);
      auto it = got.find(name);
      REQUIRE(it != got.end());
      CHECK(it->second == t["sha256"].get<std::string>());
      ++tensors;
    }
    // Same tensors, same names, same geometry as the input (the dict layout keeps dense ones only).
    if (in.format() == torch::Format::kZip || in.format() == torch::Format::kLegacy) {
      CHECK(test::hashes_of(in) == got);
      CHECK(in.unknown_globals() == out.unknown_globals());
    }
    ++files;
  }
  CHECK(files >= 50);
  CHECK(tensors > 500);
}

TEST_CASE("remap keeps tags no rule names and only rewrites the pid's location", "[torch][remap]") {
  test::TempDir dir("tags");
  const auto in = torch::Checkpoint::open(test::checkpoints_dir() / "device_tags.t113.pt");
  torch::ArchiveOptions o;
  o.locations.resize(in.storages().size());
  std::size_t changed = 0;
  for (std::size_t i = 0; i < in.storages().size(); ++i) {
    if (in.storages()[i].location.rfind("cuda", 0) == 0) {
      o.locations[i] = "cuda:0";
      ++changed;
    }
  }
  REQUIRE(changed > 0);
  torch::save_archive(in, dir.path / "out.pt", o);
  const auto out = torch::Checkpoint::open(dir.path / "out.pt");
  REQUIRE(out.storages().size() == in.storages().size());
  for (std::size_t i = 0; i < in.storages().size(); ++i) {
    const auto& before = in.storages()[i].location;
    CHECK(out.storages()[i].location == (before.rfind("cuda", 0) == 0 ? "cuda:0" : before));
    CHECK(out.storages()[i].key == in.storages()[i].key);
  }
  // Everything in data.pkl but the tags is the same value tree: written
  // again with every tag blanked, the two pickles are byte-identical.
  auto blanked = [](const torch::Checkpoint& c) {
    const auto span = c.object_pickle();
    pickle::Options po;
    po.start_offset = span.start;
    const auto tree = pickle::run(span.stream, po);
    pickle::WriteOptions wo;
    wo.persistent = [](const pickle::Value& node, pickle::Emitter& e) {
      const auto& pid = node.persistent_id();
      e.mark();
      for (std::size_t i = 0; i < pid.size(); ++i) {
        if (i == 3) {
          e.str("-");
        } else {
          e.value(pid[i]);
        }
      }
      e.tuple_from_mark();
      e.persid();
    };
    return pickle::write(tree.root(), wo);
  };
  CHECK(blanked(in) == blanked(out));
}

TEST_CASE("pickle writer: write(run(x)) is a fixpoint and keeps shared nodes shared", "[pickle]") {
  for (const char* file : {"nested_training.t113.pt", "module_whole.t2x.pt", "protocol4.t2x.pt", "tied_weights.t113.pt",
                           "objects_numpy.t113.pt", "legacy_state_dict.t113.pt"}) {
    CAPTURE(file);
    const auto path = test::checkpoints_dir() / file;
    if (!std::filesystem::exists(path)) continue;
    const auto c = torch::Checkpoint::open(path);
    const auto span = c.object_pickle();
    pickle::Options po;
    po.start_offset = span.start;
    po.allow_trailing = true;
    const auto first = pickle::run(span.stream, po);
    const auto once = pickle::write(first.root());
    const auto second = pickle::run(std::span<const std::uint8_t>(once));
    const auto twice = pickle::write(second.root());
    CHECK(once == twice);
  }
}

TEST_CASE("tied tensors stay on one storage after remap", "[torch][remap]") {
  test::TempDir dir("tied");
  for (const auto& entry : test::checkpoint_index()) {
    const std::string file = entry["file"];
    const auto in = torch::Checkpoint::open(test::checkpoints_dir() / file);
    std::map<std::size_t, std::size_t> users;
    for (const auto& t : in.tensors()) {
      if (t.storage) ++users[*t.storage];
    }
    if (std::none_of(users.begin(), users.end(), [](const auto& kv) { return kv.second > 1; })) continue;
    if (in.format() != torch::Format::kZip) continue;
    CAPTURE(file);
    torch::save_archive(in, dir.path / "t.pt", {});
    const auto out = torch::Checkpoint::open(dir.path / "t.pt");
    REQUIRE(out.tensors().size() == in.tensors().size());
    for (std::size_t i = 0; i < in.tensors().size(); ++i) CHECK(in.tensors()[i].storage == out.tensors()[i].storage);
  }
}

TEST_CASE("pickle writer refuses an external handle without a callback", "[pickle][malformed]") {
  CHECK(test::code_of([] { pickle::write(pickle::Value::external(7)); }) == ErrorCode::kPickleUnwritable);
  pickle::WriteOptions bad;
  bad.protocol = 1;
  CHECK(test::code_of([&] { pickle::write(pickle::Value(), bad); }) == ErrorCode::kInvalidArgument);
  // Scalars round-trip through the machine.
  for (const auto& v : {pickle::Value::integer(-5), pickle::Value::integer(1ll << 40), pickle::Value::real(2.5),
                        pickle::Value::boolean(true), pickle::Value()}) {
    const auto bytes = pickle::write(v);
    const auto back = pickle::run(std::span<const std::uint8_t>(bytes));
    CHECK(pickle::write(back.root()) == bytes);
  }
}

TEST_CASE("writing reports progress: non-decreasing, ending at the total", "[torch][remap]") {
  test::TempDir dir("progress");
  const auto in = torch::Checkpoint::open(test::checkpoints_dir() / "nested_training.t113.pt");
  std::vector<std::pair<std::uint64_t, std::uint64_t>> calls;
  torch::ArchiveOptions o;
  o.progress = [&](std::uint64_t done, std::uint64_t total) { calls.emplace_back(done, total); };
  const auto report = torch::save_archive(in, dir.path / "out.pt", o);
  REQUIRE_FALSE(calls.empty());
  for (std::size_t i = 1; i < calls.size(); ++i) CHECK(calls[i].first >= calls[i - 1].first);
  CHECK(calls.back().first == calls.back().second);
  CHECK(calls.back().second == report.data_bytes);

  calls.clear();
  torch::SafetensorsOptions so;
  so.progress = o.progress;
  const auto st = torch::save_safetensors(in, dir.path / "out.safetensors", so);
  REQUIRE_FALSE(calls.empty());
  CHECK(calls.back().first == calls.back().second);
  CHECK(calls.back().second == st.data_bytes);
}

TEST_CASE("remap into shards keeps every tensor: wrapper subclasses and jagged tensors whole, with state",
          "[torch][remap]") {
  test::TempDir dir("shards");
  std::size_t files = 0;
  for (const auto& entry : test::checkpoint_index()) {
    const std::string file = entry["file"];
    CAPTURE(file);
    const auto in = torch::Checkpoint::open(test::checkpoints_dir() / file);
    torch::SetWriteOptions o;
    o.safetensors = false;
    o.max_shard_bytes = 200;  // several shards for most fixtures
    o.archive.locations = all_cpu(in);
    const auto out_dir = dir.path / file;
    const auto report = torch::save_set(in, out_dir, o);
    const auto out = torch::Checkpoint::open(report.index);
    // Every tensor maploc lists in the input, by name and hash (inner tensors and parts again
    // listed under their names: they travel inside the entry that holds them).
    CHECK(test::hashes_of(in) == test::hashes_of(out));
    // A wrapper subclass, a jagged tensor, a tensor subclass with state: its rebuild call is in the
    // shard (the classes of modules and other objects are not: shards hold tensors only).
    const auto& og = out.unknown_globals();
    for (const auto& g : og) {
      CAPTURE(g);
      CHECK(std::find(in.unknown_globals().begin(), in.unknown_globals().end(), g) != in.unknown_globals().end());
    }
    for (const auto& g : in.unknown_globals()) {
      if (g.find("Tensor") == std::string::npos && g.find("_rebuild_njt") == std::string::npos &&
          g != "__main__.Tagged") {
        continue;
      }
      CAPTURE(g);
      CHECK(std::find(og.begin(), og.end(), g) != og.end());
    }
    ++files;
  }
  CHECK(files >= 50);

  // The holder and what it holds land in one shard, and the index names only the holder.
  const auto in = torch::Checkpoint::open(test::checkpoints_dir() / "torchao_int8wo.t2x.pt");
  torch::SetWriteOptions o;
  o.safetensors = false;
  o.max_shard_bytes = 1;  // every entry in a shard of its own
  const auto report = torch::save_set(in, dir.path / "int8", o);
  const json index = test::read_json(report.index);
  CHECK(index["weight_map"].size() == 2);  // 0.weight (holding qdata, scale, zero_point) and 0.bias
  CHECK(index["weight_map"].contains("0.weight"));
  CHECK_FALSE(index["weight_map"].contains("0.weight.qdata"));
  const auto out = torch::Checkpoint::open(report.index);
  std::map<std::string, const torch::Tensor*> by_name;
  for (const auto& t : out.tensors()) by_name[t.name] = &t;
  REQUIRE(by_name.count("0.weight.qdata") == 1);
  REQUIRE(by_name.at("0.weight.qdata")->held_by.has_value());
  CHECK(out.tensors()[*by_name.at("0.weight.qdata")->held_by].name == "0.weight");
  CHECK(by_name.at("0.weight")->kind == torch::TensorKind::kWrapperSubclass);
  CHECK(out.member_of_storage(*by_name.at("0.weight.qdata")->storage) ==
        out.member_of_storage(*by_name.at("0.weight.scale")->storage));
}
