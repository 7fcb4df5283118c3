// zip_source.cpp - storage bytes of a zip archive: stored records viewed in place, deflated ones inflated, views sliced.
#include <algorithm>

#include "maploc/error.h"
#include "state.h"
#include "storage_source.h"
#include "url_source.h"

namespace maploc::torch {
namespace {

class ZipSource final : public StorageSource {
 public:
  ZipSource(const zip::Archive& archive, const MappedFile& file, const std::vector<Storage>& storages,
            const std::vector<std::uint64_t>& present)
      : archive_(archive), file_(file), storages_(storages), present_(present) {}

  Bytes bytes(std::size_t i) const override {
    const Storage& s = storages_[i];
    if (s.view_of) {
      const Bytes root = bytes(*s.view_of);
      const std::uint64_t off = std::min<std::uint64_t>(s.view_offset * element_size(s.dtype), root.size());
      return root.slice(off, std::min<std::uint64_t>(s.nbytes, root.size() - off));
    }
    if (!s.compressed && i < present_.size()) {
      // A stored record: its bytes were located on open (file_offset, present bytes).
      return ensure_present(file_, archive_.file_bytes().slice(static_cast<std::size_t>(s.file_offset),
                                                               static_cast<std::size_t>(present_[i])));
    }
    const zip::Record* rec = archive_.find(s.record);
    if (!rec) fail(ErrorCode::kTorchStorageMissing, "storage '" + s.key + "' has no record", s.record);
    return archive_.read(*rec);  // ensures the record's bytes first (a URL source fetches them)
  }

  std::optional<FileRange> file_range(std::size_t i) const override { return range_at(file_, own_file_offset(i)); }

  std::optional<std::uint64_t> own_file_offset(std::size_t i) const override {
    if (storages_[i].compressed || !plain_file()) return std::nullopt;
    return plain_offset_in(file_, bytes(i));
  }

  std::optional<RemoteRange> remote_range(std::size_t i) const override {
    const Storage& s = storages_[i];
    if (s.view_of || s.compressed || i >= present_.size() || present_[i] != s.nbytes) return std::nullopt;
    return remote_range_of(file_, s.file_offset, s.nbytes);
  }

  void prefetch(std::span<const std::size_t> indexes) const override {
    if (!file_.source) return;
    std::vector<ByteRange> ranges;
    for (std::size_t i : indexes) {
      if (i >= storages_.size() || storages_[i].view_of) continue;
      if (const zip::Record* rec = archive_.find(storages_[i].record)) {
        ranges.push_back({rec->data_offset, rec->compressed_size});
      }
    }
    file_.source->ensure(ranges);
  }

 private:
  bool plain_file() const { return file_.residency == Residency::kMapped || file_.residency == Residency::kRead; }

  const zip::Archive& archive_;
  const MappedFile& file_;
  const std::vector<Storage>& storages_;
  const std::vector<std::uint64_t>& present_;
};

}  // namespace

std::unique_ptr<StorageSource> zip_source(const zip::Archive& archive, const MappedFile& file,
                                          const std::vector<Storage>& storages,
                                          const std::vector<std::uint64_t>& present) {
  return std::make_unique<ZipSource>(archive, file, storages, present);
}

}  // namespace maploc::torch
