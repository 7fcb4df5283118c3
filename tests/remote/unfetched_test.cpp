// unfetched_test.cpp - no silent zeros: bytes of a checkpoint read by URL that the opener did not fetch, read through
// every public accessor that returns storage bytes, are the file's bytes (docs/remote.md, "Bytes never fetched").
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "maploc/torch/checkpoint.h"
#include "maploc/torch/hash.h"
#include "remote/remote_checks.h"

using namespace maploc;

namespace {

using test::kFixtures;

// Stored zips large enough that opening them by URL leaves their storages unfetched, then one
// file of each other layout (small: the opener's requests cover them, the bytes must still agree).
const char* const kLarge[] = {"checkpoints/shufflenet_v2_x0_5.t113.pt", "checkpoints/large_storages.t113.pt"};
const char* const kSmall[] = {"checkpoints/deflated.t2x.pt",       "checkpoints/views_shared.t2x.pt",
                              "checkpoints/torchscript.t2x.pt",    "checkpoints/dtypes_legacy.t113.pt",
                              "checkpoints/tar_format.hand.pt",    "safetensors/dtypes.safetensors"};

std::vector<std::uint8_t> copy(const Bytes& b) { return {b.data(), b.data() + b.size()}; }

// A fresh open by URL for each accessor, so that each reads bytes no other accessor fetched.
torch::Checkpoint open_remote(const std::string& f) {
  torch::Options o = test::with_retries(2);
  auto c = torch::Checkpoint::open(test::fixture_server().url("ok", f), o);
  REQUIRE(c.remote_transfer().has_value());
  return c;
}

// Bytes of the storages of `f` that hold a non-zero byte: a zero-filled answer cannot equal them.
std::size_t nonzero_storages(const torch::Checkpoint& local) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < local.storages().size(); ++i) {
    const Bytes b = local.storage_bytes(i);
    if (std::any_of(b.data(), b.data() + b.size(), [](std::uint8_t x) { return x != 0; })) ++n;
  }
  return n;
}

void check_every_accessor(const std::string& f, bool unfetched) {
  INFO(f);
  const auto local = torch::Checkpoint::open(kFixtures + "/" + f);
  const auto& storages = local.storages();
  CHECK(nonzero_storages(local) > 0);
  if (unfetched) {
    // What the opener read is the structure, not the storages: what follows reads unfetched bytes.
    const auto c = open_remote(f);
    CHECK(c.remote_transfer()->bytes_read < c.remote_transfer()->object_bytes / 2);
  }
  SECTION("storage_bytes by index and by Storage") {
    const auto c = open_remote(f);
    for (std::size_t i = 0; i < storages.size(); ++i) {
      INFO("storage " << i);
      CHECK(copy(c.storage_bytes(i)) == copy(local.storage_bytes(i)));
    }
    const auto d = open_remote(f);
    for (std::size_t i = 0; i < d.storages().size(); ++i) {
      CHECK(copy(d.storage_bytes(d.storages()[i])) == copy(local.storage_bytes(i)));
    }
  }
  SECTION("storage_file_range: never a range of a file that is not on disk") {
    const auto c = open_remote(f);
    for (std::size_t i = 0; i < storages.size(); ++i) CHECK_FALSE(c.storage_file_range(i).has_value());
  }
  SECTION("remote_range and RangeSource::read") {
    const auto c = open_remote(f);
    for (std::size_t i = 0; i < storages.size(); ++i) {
      const auto r = c.remote_range(i);
      if (!r) continue;
      INFO("storage " << i);
      std::vector<std::uint8_t> out(r->length);
      r->source->read(r->offset, r->length, out.data());
      CHECK(out == copy(local.storage_bytes(i)));
    }
  }
  SECTION("tensor_sha256 and contiguous_bytes") {
    const auto c = open_remote(f);
    CHECK(test::hashes(c) == test::hashes(local));
    const auto d = open_remote(f);
    for (std::size_t t = 0; t < d.tensors().size(); ++t) {
      if (!d.tensors()[t].storage) continue;
      CHECK(torch::contiguous_bytes(d, d.tensors()[t]) == torch::contiguous_bytes(local, local.tensors()[t]));
    }
  }
  SECTION("archive()->read of every record") {
    const auto c = open_remote(f);
    REQUIRE((c.archive() == nullptr) == (local.archive() == nullptr));
    if (c.archive() == nullptr) return;
    for (const auto& rec : c.archive()->records()) {
      INFO(rec.name);
      CHECK(copy(c.archive()->read(rec)) == copy(local.archive()->read(*local.archive()->find(rec.name))));
    }
  }
  SECTION("object_pickle") {
    const auto c = open_remote(f);
    if (c.format() != torch::Format::kZip && c.format() != torch::Format::kTorchScript &&
        c.format() != torch::Format::kLegacy) {
      return;
    }
    const auto mine = c.object_pickle();
    const auto theirs = local.object_pickle();
    CHECK(mine.start == theirs.start);
    CHECK(copy(mine.stream) == copy(theirs.stream));
  }
}

}  // namespace

TEST_CASE("unfetched storage bytes read by URL through every accessor are the file's, never zeros", "[remote]") {
  for (const char* f : kLarge) {
    DYNAMIC_SECTION(f) { check_every_accessor(f, true); }
  }
}

TEST_CASE("storage bytes of every layout read by URL through every accessor are the file's", "[remote]") {
  for (const char* f : kSmall) {
    DYNAMIC_SECTION(f) { check_every_accessor(f, false); }
  }
}
