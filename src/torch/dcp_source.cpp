// dcp_source.cpp - storage bytes of a DCP directory: each tensor assembled from its chunks, no plain range.
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

}  // namespace maploc::torch
