// remote_reads.cpp - readers that stream a URL checkpoint's storages to their destinations.
#include "remote_reads.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>

namespace maploc::remap::detail {
namespace {

// Storages under this size are fetched with their neighbours (a request costs a round trip).
constexpr std::uint64_t kSmall = std::uint64_t{1} << 20;
// One request of neighbouring small storages spans at most this much of the object...
constexpr std::uint64_t kGroupSpan = std::uint64_t{8} << 20;
// ...and skips at most this much between two of them (zip local headers, alignment).
constexpr std::uint64_t kGroupGap = std::uint64_t{64} << 10;

// Neighbouring small storages: one request, its bytes kept until each storage has taken its own.
class Group {
 public:
  Group(std::shared_ptr<const RangeSource> source, std::uint64_t offset)
      : source_(std::move(source)), offset_(offset) {}
  void add(std::uint64_t end, std::uint64_t n) {
    end_ = end;
    remaining_ += n;
  }
  std::uint64_t offset() const { return offset_; }
  std::uint64_t end() const { return end_; }

  // Copies n bytes at `at` (relative to the object) into out, fetching the group first.
  void take(std::uint64_t at, std::uint64_t n, std::uint8_t* out) {
    const std::lock_guard lock(mutex_);
    if (bytes_.empty() && end_ > offset_) {
      std::vector<std::uint8_t> bytes(end_ - offset_);
      source_->read(offset_, bytes.size(), bytes.data());  // a failure leaves it to the next reader to retry
      bytes_ = std::move(bytes);
    }
    std::memcpy(out, bytes_.data() + (at - offset_), n);
    remaining_ -= std::min(remaining_, n);
    if (remaining_ == 0) std::vector<std::uint8_t>().swap(bytes_);  // every storage has its bytes
  }

 private:
  std::shared_ptr<const RangeSource> source_;
  std::uint64_t offset_ = 0, end_ = 0, remaining_ = 0;
  std::mutex mutex_;
  std::vector<std::uint8_t> bytes_;
};

}  // namespace

RemoteReads remote_reads(const torch::Checkpoint& checkpoint, const std::vector<bool>& wanted) {
  const std::size_t count = checkpoint.storages().size();
  RemoteReads out;
  out.readers.resize(count);
  std::vector<std::pair<torch::RemoteRange, std::size_t>> small;
  for (std::size_t i = 0; i < count; ++i) {
    std::optional<torch::RemoteRange> r;
    if (i < wanted.size() && wanted[i]) r = checkpoint.remote_range(i);
    if (!r) {
      out.others.push_back(i);
      continue;
    }
    out.parallel = std::max(out.parallel, r->source->read_parallel());
    if (r->length == 0) {
      out.readers[i] = [](std::uint64_t, std::uint64_t, std::uint8_t*) {};
    } else if (r->length >= kSmall) {
      out.readers[i] = [source = r->source, at = r->offset](std::uint64_t off, std::uint64_t n, std::uint8_t* dst) {
        source->read(at + off, n, dst);
      };
    } else {
      small.emplace_back(std::move(*r), i);
    }
  }
  // Small storages in the object's order (a set's shards one after the other), grouped.
  std::sort(small.begin(), small.end(), [](const auto& a, const auto& b) {
    return a.first.source != b.first.source ? a.first.source.get() < b.first.source.get()
                                            : a.first.offset < b.first.offset;
  });
  std::shared_ptr<Group> group;
  const RangeSource* group_source = nullptr;
  for (auto& [range, i] : small) {
    const std::uint64_t end = range.offset + range.length;
    if (!group || group_source != range.source.get() || range.offset < group->end() ||
        range.offset - group->end() > kGroupGap || end - group->offset() > kGroupSpan) {
      group = std::make_shared<Group>(range.source, range.offset);
      group_source = range.source.get();
    }
    group->add(end, range.length);
    out.readers[i] = [group, at = range.offset](std::uint64_t off, std::uint64_t n, std::uint8_t* dst) {
      group->take(at + off, n, dst);
    };
  }
  return out;
}

}  // namespace maploc::remap::detail
