// file_offset_test.cpp - storage_file_offset(i) is storage_file_range(i) in the checkpoint's own file, on every fixture.
#include <algorithm>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "maploc/torch/checkpoint.h"
#include "torch/torch_test_util.h"

namespace maploc::test {

// The loader asks storage_file_offset of every storage (no path made) and preads the storage from
// there; storage_file_range is the same answer with its file named. They may not drift apart, and
// the file's bytes at the offset must be the storage's (read here with an ifstream, not through
// maploc): an offset where the range is in another file (a set member's), or a wrong one, would
// load the wrong bytes.
TEST_CASE("storage_file_offset equals storage_file_range's offset in the checkpoint's own file", "[torch]") {
  std::size_t offsets = 0, elsewhere = 0;
  const std::size_t opened = for_each_fixture_that_opens([&](const auto& p, const torch::Checkpoint& checkpoint) {
    const torch::Checkpoint* c = &checkpoint;
    for (std::size_t i = 0; i < c->storages().size(); ++i) {
      const auto range = c->storage_file_range(i);
      const auto offset = c->storage_file_offset(i);
      std::optional<std::uint64_t> expect;
      if (range && range->path == c->path()) expect = range->offset;
      if (range && range->path != c->path()) ++elsewhere;
      INFO(p.string() << " storage " << i);
      CHECK(offset == expect);
      offsets += offset.has_value();
      if (!offset) continue;
      const Bytes raw = c->storage_bytes(i);
      std::vector<char> on_disk(raw.size());
      std::ifstream in(c->path(), std::ios::binary);
      in.seekg(static_cast<std::streamoff>(*offset));
      in.read(on_disk.data(), static_cast<std::streamsize>(on_disk.size()));
      CHECK(in.gcount() == static_cast<std::streamsize>(on_disk.size()));
      CHECK(std::equal(on_disk.begin(), on_disk.end(), raw.data(), raw.data() + raw.size(),
                       [](char a, std::uint8_t b) { return static_cast<std::uint8_t>(a) == b; }));
    }
    CHECK_FALSE(c->storage_file_offset(c->storages().size()).has_value());
  });
  WARN(opened << " fixtures opened, " << offsets << " storages at an offset of their own file, " << elsewhere
              << " in a set member's file");
  CHECK(opened > 100);
  CHECK(offsets > 1000);
  CHECK(elsewhere > 0);  // the sets among the fixtures: their members' ranges are not the index's
}

}  // namespace maploc::test
