// set_source.cpp - storage bytes of a sharded set and a DCP directory: asked of the member that holds them, or assembled from chunks.
#include "dcp.h"
#include "state.h"
#include "storage_source.h"

namespace maploc::torch {
namespace {

class DcpSource final : public StorageSource {
 public:
  DcpSource(std::shared_ptr<const DcpLayout> layout, const std::vector<Storage>& storages)
      : layout_(std::move(layout)), storages_(storages) {}

  Bytes bytes(std::size_t i) const override { return assemble_dcp(*layout_, storages_[i], i); }
  std::optional<FileRange> file_range(std::size_t) const override { return std::nullopt; }
  std::optional<RemoteRange> remote_range(std::size_t) const override { return std::nullopt; }
  void prefetch(std::span<const std::size_t>) const override {}  // DCP directories are local

 private:
  std::shared_ptr<const DcpLayout> layout_;
  const std::vector<Storage>& storages_;
};

}  // namespace

std::unique_ptr<StorageSource> dcp_source(std::shared_ptr<const DcpLayout> layout,
                                          const std::vector<Storage>& storages) {
  return std::make_unique<DcpSource>(std::move(layout), storages);
}

std::size_t SetSource::add_member(Checkpoint c) {
  members_.push_back(std::move(c));
  return members_.size() - 1;
}

Bytes SetSource::bytes(std::size_t i) const { return members_[member_of_[i]].storage_bytes(local_[i]); }

std::optional<FileRange> SetSource::file_range(std::size_t i) const {
  return members_[member_of_[i]].storage_file_range(local_[i]);
}

std::optional<RemoteRange> SetSource::remote_range(std::size_t i) const {
  return members_[member_of_[i]].remote_range(local_[i]);
}

void SetSource::prefetch(std::span<const std::size_t> indexes) const {
  // A set read by URL: each shard fetches its own storages, with its own requests in flight.
  std::vector<std::vector<std::size_t>> per(members_.size());
  for (std::size_t i : indexes) {
    if (i < member_of_.size()) per[member_of_[i]].push_back(local_[i]);
  }
  for (std::size_t m = 0; m < per.size(); ++m) {
    if (!per[m].empty()) members_[m].prefetch(per[m]);
  }
}

}  // namespace maploc::torch
