// deferred.cpp - DeferredLocate: the central directory now, most local headers later.
#include "deferred.h"

namespace maploc::zip {

DeferredLocate::DeferredLocate(MappedFile file, const Limits& limits, std::span<const std::string_view> early,
                               std::optional<Archive>& archive) {
  archive.emplace(DirectoryParser::build(std::move(file), limits, false, &end_));
  archive_ = &*archive;
  std::vector<Record>& records = DirectoryParser::records(*archive_);
  for (const std::string_view name : early) {
    const Record* r = archive_->find_in_prefix(name);
    if (r == nullptr) continue;
    const auto i = static_cast<std::uint32_t>(r - records.data());
    locate_record(DirectoryParser::bytes(*archive_), archive_->path(), end_, records[i]);
    early_.push_back(i);
  }
}

void DeferredLocate::run() {
  locate_records(DirectoryParser::bytes(*archive_), archive_->path(), end_, DirectoryParser::records(*archive_),
                 early_);
}

}  // namespace maploc::zip
