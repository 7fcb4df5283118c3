// map_location_test.cpp - torch's map_location kinds and maploc's rules, decided without reading bytes.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "maploc/error.h"
#include "maploc/remap/map_location.h"
#include "error_of.h"

namespace maploc::remap {
namespace {

using test::error_of;

// A small checkpoint's storages: tags as torch writes them.
struct Fixture {
  std::vector<std::vector<std::string>> names = {{"fc.weight"}, {"fc.bias"}, {"enc.w", "dec.w"}, {"x"}};
  std::vector<std::string> tags = {"cuda:0", "cuda:1", "cpu", "cuda:7"};
  std::vector<StorageRef> refs() const {
    std::vector<StorageRef> out;
    for (std::size_t i = 0; i < tags.size(); ++i) {
      StorageRef r;
      r.key = i == 0 ? "0" : i == 1 ? "1" : i == 2 ? "2" : "3";
      r.dtype = "float32";
      r.nbytes = 16;
      r.location = tags[i];
      r.tensor_names = names[i];
      out.push_back(r);
    }
    return out;
  }
};

DeviceInventory gpus(int n) { return {n, true, {}, {}}; }
const DeviceInventory kNoCuda{0, false, {}, {}};

std::vector<std::string> spell(const std::vector<Device>& d) {
  std::vector<std::string> out;
  for (const auto& x : d) out.push_back(x.str());
  return out;
}


}  // namespace

TEST_CASE("glob patterns", "[remap]") {
  CHECK(glob_match("cuda:*", "cuda:1"));
  CHECK(glob_match("*", ""));
  CHECK(glob_match("enc*.w", "encoder.layer.w"));
  CHECK_FALSE(glob_match("cuda:*", "cpu"));
  CHECK_FALSE(glob_match("cuda:1", "cuda:10"));
  CHECK(glob_match("a*b*c", "aXbYbc"));
}

TEST_CASE("no mapping sends each storage back to its tag", "[remap]") {
  Fixture f;
  f.tags = {"cuda:0", "cuda:1", "cpu", "cuda"};
  auto refs = f.refs();
  CHECK(spell(decide(refs, MapLocation::none(), gpus(2))) ==
        std::vector<std::string>{"cuda:0", "cuda:1", "cpu", "cuda:0"});
}

TEST_CASE("a CUDA tag on a machine without CUDA is torch's error, with a fix", "[remap]") {
  Fixture f;
  auto refs = f.refs();
  auto e = error_of([&] { decide(refs, MapLocation::none(), kNoCuda); });
  CHECK(e.code() == ErrorCode::kRemapCudaUnavailable);
  CHECK(std::string(e.what()) ==
        "remap: storage '0' of tensor 'fc.weight' is tagged cuda:0 but CUDA is not available "
        "(maploc was built without CUDA); map it, e.g. --map-location cpu");
}

TEST_CASE("a device index that does not exist", "[remap]") {
  Fixture f;
  auto refs = f.refs();
  auto e = error_of([&] { decide(refs, MapLocation::none(), gpus(2)); });
  CHECK(e.code() == ErrorCode::kRemapNoSuchDevice);
  CHECK(std::string(e.what()).find("storage '3' of tensor 'x' is tagged cuda:7 but only 2 CUDA device(s)") !=
        std::string::npos);
}

TEST_CASE("one device for all ignores the tags", "[remap]") {
  Fixture f;
  f.tags = {"cuda:0", "mps", "xpu:0", "cuda:7"};
  auto refs = f.refs();
  CHECK(spell(decide(refs, MapLocation::parse("cpu"), kNoCuda)) ==
        std::vector<std::string>{"cpu", "cpu", "cpu", "cpu"});
  CHECK(spell(decide(refs, MapLocation::parse("cuda:1"), gpus(2))) ==
        std::vector<std::string>{"cuda:1", "cuda:1", "cuda:1", "cuda:1"});
  CHECK(spell(decide(refs, MapLocation::all_to("meta"), kNoCuda)) ==
        std::vector<std::string>{"meta", "meta", "meta", "meta"});
}

TEST_CASE("exact tag tables and wildcards, first match wins", "[remap]") {
  Fixture f;
  auto refs = f.refs();
  CHECK(spell(decide(refs, MapLocation::parse("cuda:1->cuda:0, cuda:7->cuda:0"), gpus(1))) ==
        std::vector<std::string>{"cuda:0", "cuda:0", "cpu", "cuda:0"});
  CHECK(spell(decide(refs, MapLocation::parse("cuda:1->cuda:1,cuda:*->cpu"), gpus(2))) ==
        std::vector<std::string>{"cpu", "cuda:1", "cpu", "cpu"});
  // An exact table leaves other tags to default restore, which fails here.
  CHECK(error_of([&] { decide(refs, MapLocation::parse("cuda:1->cpu"), kNoCuda); }).code() ==
        ErrorCode::kRemapCudaUnavailable);
}

TEST_CASE("auto picks cuda:0 when a GPU is present, else the CPU", "[remap]") {
  Fixture f;
  auto refs = f.refs();
  CHECK(spell(decide(refs, MapLocation::parse("auto"), gpus(4))) ==
        std::vector<std::string>{"cuda:0", "cuda:0", "cuda:0", "cuda:0"});
  CHECK(spell(decide(refs, MapLocation::parse("auto"), kNoCuda)) ==
        std::vector<std::string>{"cpu", "cpu", "cpu", "cpu"});
}

TEST_CASE("unknown tags must be mapped", "[remap]") {
  Fixture f;
  f.tags = {"cpu", "mps", "npu:0", "cpu"};
  auto refs = f.refs();
  auto e = error_of([&] { decide(refs, MapLocation::none(), kNoCuda); });
  CHECK(e.code() == ErrorCode::kRemapUnknownTag);
  CHECK(std::string(e.what()).find("'mps->cpu'") != std::string::npos);
  CHECK(spell(decide(refs, MapLocation::parse("mps->cpu,npu:*->cpu"), kNoCuda)) ==
        std::vector<std::string>{"cpu", "cpu", "cpu", "cpu"});
}

TEST_CASE("name rules place storages by tensor name, conflicts are errors", "[remap]") {
  Fixture f;
  auto refs = f.refs();
  CHECK(spell(decide(refs, MapLocation::parse("name:fc.*->cuda:1,*->cuda:0"), gpus(2))) ==
        std::vector<std::string>{"cuda:1", "cuda:1", "cuda:0", "cuda:0"});
  auto e = error_of([&] { decide(refs, MapLocation::parse("name:enc.*->cuda:0,name:dec.*->cuda:1"), gpus(2)); });
  CHECK(e.code() == ErrorCode::kRemapConflictingRules);
  CHECK(std::string(e.what()).find("tensor 'enc.w'") != std::string::npos);
  CHECK(std::string(e.what()).find("tensor 'dec.w'") != std::string::npos);
  // Rules that agree on a shared storage are fine.
  CHECK(spell(decide(refs, MapLocation::parse("name:enc.*->cpu,name:dec.*->cpu,*->cpu"), kNoCuda))[2] == "cpu");
}

TEST_CASE("a callback sees each storage and may defer to the tag", "[remap]") {
  Fixture f;
  f.tags = {"cuda:0", "cuda:1", "cpu", "cpu"};
  auto refs = f.refs();
  MapLocation m;
  std::vector<std::string> seen;
  m.callback = [&](const StorageRef& s) -> std::optional<std::string> {
    seen.push_back(std::string(s.key) + "@" + std::string(s.location));
    if (s.location == "cuda:1") return "cpu";
    return std::nullopt;
  };
  CHECK(spell(decide(refs, m, gpus(1))) == std::vector<std::string>{"cuda:0", "cpu", "cpu", "cpu"});
  CHECK(seen == std::vector<std::string>{"0@cuda:0", "1@cuda:1", "2@cpu", "3@cpu"});
  m.callback = [](const StorageRef&) -> std::optional<std::string> { return "gpu0"; };
  CHECK(error_of([&] { decide(refs, m, gpus(1)); }).code() == ErrorCode::kRemapBadSpec);
}

TEST_CASE("malformed SPECs name the offending item", "[remap][malformed]") {
  for (const char* spec : {"", " , ", "gpu", "cuda:x", "cuda:1->", "->cpu", "name:fc.*", "cpu,,cuda",
                           "cuda:*->cuda:-1", "cuda:99999999999"}) {
    INFO(spec);
    auto e = error_of([&] { MapLocation::parse(spec); });
    CHECK(e.code() == ErrorCode::kRemapBadSpec);
  }
  auto e = error_of([&] { MapLocation::parse("cuda:*->gpu"); });
  CHECK(std::string(e.what()).find("'cuda:*->gpu'") != std::string::npos);
  // Every comma separates two items: none is empty or blank, and the message says which and where.
  const std::pair<const char*, const char*> empties[] = {{"cpu,", "item 2 '' (at byte 4)"},
                                                         {",cpu", "item 1 '' (at byte 0)"},
                                                         {"cuda:0->cpu,,cuda:1->cpu", "item 2 '' (at byte 12)"},
                                                         {"cpu, ,cpu", "item 2 '' (at byte 4)"},
                                                         {"cuda:*->cpu , ", "item 2 '' (at byte 13)"}};
  for (const auto& [spec, where] : empties) {
    INFO(spec);
    auto err = error_of([&] { MapLocation::parse(spec); });
    CHECK(err.code() == ErrorCode::kRemapBadSpec);
    CHECK(std::string(err.what()).find(where) != std::string::npos);
    CHECK(std::string(err.what()).find("is empty") != std::string::npos);
  }
  CHECK(std::string(error_of([&] { MapLocation::parse("cpu,"); }).what()).find("trailing comma") != std::string::npos);
  CHECK(MapLocation::parse(" cuda:1 -> cpu , cuda:0->cpu ").rules.size() == 2);  // blanks around items are fine
}

}  // namespace maploc::remap
