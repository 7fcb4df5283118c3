// set_source.cpp - storage bytes of a sharded set: asked of the member file that holds them.
#include "state.h"
#include "storage_source.h"

namespace maploc::torch {

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
