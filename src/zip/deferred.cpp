// deferred.cpp - DeferredLocate: the central directory now, most local headers later.
#include "zip/deferred.h"

#include "directory.h"

namespace maploc::zip {

DeferredLocate::DeferredLocate(MappedFile file, const Limits& limits, std::span<const std::string_view> early,
                               std::optional<Archive>& archive)
    : end_(std::make_unique<DirectoryEnd>()) {
  archive.emplace(Archive::parse(std::move(file), limits, false, end_.get()));
  archive_ = &*archive;
  std::vector<Record>& records = archive_->records_;
  for (const std::string_view name : early) {
    const Record* r = archive_->find_in_prefix(name);
    if (r == nullptr) continue;
    const auto i = static_cast<std::uint32_t>(r - records.data());
    locate_record(archive_->file_.bytes, archive_->path(), *end_, records[i]);
    early_.push_back(i);
  }
}

DeferredLocate::~DeferredLocate() = default;
DeferredLocate::DeferredLocate(DeferredLocate&&) noexcept = default;
DeferredLocate& DeferredLocate::operator=(DeferredLocate&&) noexcept = default;

void DeferredLocate::run() { locate_records(archive_->file_.bytes, archive_->path(), *end_, archive_->records_, early_); }

}  // namespace maploc::zip
